// Closed-loop arrivals (sim/des/closed_loop.hpp): a session's request is sent when the request it
// follows has ended, plus the recorded gap less the parent's estimated latency.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <vector>

#include "api/trace_gen.hpp"
#include "des/closed_loop.hpp"
#include "formats/requests.hpp"
#include "des/simulator.hpp"

namespace {

using kvtk::sim::des::cluster_config;

// A generated trace with session ids (chat: every session a sequence of turns), in memory.
kvtk::prefix::prefix_trace sessions_trace(const char* profile, std::uint64_t requests, double rate) {
  kvtk::sim::gen_options g;
  g.profile = profile;
  g.requests = requests;
  g.seed = 11;
  g.rate_per_s = rate;
  kvtk::prefix::prefix_trace t;
  t.block_tokens = g.block_tokens;
  t.offsets.push_back(0);
  kvtk::sim::generate_trace(g, [&](const kvtk::sim::request_record& r) {
    t.keys.insert(t.keys.end(), r.keys.begin(), r.keys.end());
    t.offsets.push_back(t.keys.size());
    t.input_length.push_back(r.input_length);
    t.output_length.push_back(r.output_length.value_or(1));
    t.arrival_s.push_back(*r.arrival_s);
    t.session.push_back(*r.session);
  });
  return t;
}

}  // namespace

TEST_CASE("closed loop: with no service time and no latency estimate it equals the open loop",
          "[simulate][closed]") {
  const auto t = sessions_trace("chat", 2000, 5.0);
  cluster_config c;
  c.time_scale = 0;
  c.local_cache_blocks = 3000;
  c.pool_bytes_per_s = 0;
  c.pd_link_bytes_per_s = 0;
  const auto open = kvtk::sim::des::simulate(t, c);
  c.closed_loop = true;
  c.closed_latency_unloaded = false;
  const auto closed = kvtk::sim::des::simulate(t, c);
  REQUIRE(open.requests.size() == closed.requests.size());
  std::size_t same_arrival = 0;
  for (std::size_t r = 0; r < open.requests.size(); ++r) {
    same_arrival += std::abs(open.requests[r].arrival - closed.requests[r].arrival) < 1e-9;
  }
  CHECK(same_arrival == open.requests.size());
  CHECK(open.summary["block_hits"] == closed.summary["block_hits"]);
  CHECK(open.summary["token_hits"] == closed.summary["token_hits"]);
}

TEST_CASE("closed loop: a child arrives when its parent is done plus the gap less the estimate",
          "[simulate][closed]") {
  // Two sessions: A = requests 0, 2; B = requests 1, 3. Each child's gap in the trace is 1 s.
  kvtk::prefix::prefix_trace t;
  t.block_tokens = 64;
  t.offsets = {0};
  const std::vector<std::vector<kvtk::block_key>> keys = {{1, 2}, {10, 11}, {1, 2, 3}, {10, 11, 12}};
  const std::vector<double> arrival = {0.0, 0.1, 1.0, 1.1};
  for (std::size_t r = 0; r < keys.size(); ++r) {
    t.keys.insert(t.keys.end(), keys[r].begin(), keys[r].end());
    t.offsets.push_back(t.keys.size());
    t.input_length.push_back(keys[r].size() * 64);
    t.output_length.push_back(50);
    t.arrival_s.push_back(arrival[r]);
    t.session.push_back(r % 2);
  }
  cluster_config c;
  c.local_cache_blocks = 100;
  c.time_scale = 1000;  // slow enough that every request outlasts its 1 s gap
  c.closed_loop = true;
  const auto res = kvtk::sim::des::simulate(t, c);
  const auto plan = kvtk::sim::des::detail::closed_loop_plan::make(t, [&](std::uint32_t r) {
    const kvtk::sim::des::iteration_timing timing(c.model, c.gpu, c.gpus_per_instance, c.time_scale,
                                                  c.iteration_overhead_s, c.timing);
    return kvtk::sim::des::detail::unloaded_latency_s(timing, static_cast<double>(c.model.kv_bytes_per_token),
                                                      t.input_tokens(r), 50, c.chunk_tokens);
  });
  REQUIRE(plan.parent == std::vector<std::uint32_t>{plan.none, plan.none, 0, 1});
  // The estimate (prefill + 49 decode steps at 1000x) exceeds the 1 s gap: no think time left.
  CHECK(plan.delay_s[2] == 0.0);
  CHECK(plan.delay_s[3] == 0.0);
  CHECK(res.requests[2].arrival == res.requests[0].done);
  CHECK(res.requests[3].arrival == res.requests[1].done);
  CHECK(res.requests[0].arrival == 0.0);
  CHECK(res.requests[1].arrival == 0.1);
  // With the "zero" estimate the whole gap is think time: 1 s after the parent is done.
  c.closed_latency_unloaded = false;
  const auto zero = kvtk::sim::des::simulate(t, c);
  CHECK(zero.requests[2].arrival == Approx(zero.requests[0].done + 1.0));
  CHECK(zero.requests[3].arrival == Approx(zero.requests[1].done + 1.0));
  // A trace with neither parents nor sessions is refused, naming the way to get them; so is one
  // with parents but no request ids to find them by.
  t.session.clear();
  CHECK_THROWS_WITH(kvtk::sim::des::simulate(t, c), Catch::Contains("--infer-sessions"));
  t.parent = {kvtk::prefix::no_parent, kvtk::prefix::no_parent, 0, 1};
  CHECK_THROWS_WITH(kvtk::sim::des::simulate(t, c), Catch::Contains("a parent with request ids"));
}

TEST_CASE("closed loop: the engine schedulers too equal the open loop at zero service time",
          "[simulate][closed]") {
  const auto t = sessions_trace("chat", 1000, 5.0);
  for (const char* scheduler : {"vllm-v1", "sglang"}) {
    cluster_config c;
    c.time_scale = 0;
    c.local_cache_blocks = 3000;
    c.sched.scheduler = scheduler;
    const auto open = kvtk::sim::des::simulate(t, c);
    c.closed_loop = true;
    c.closed_latency_unloaded = false;
    const auto closed = kvtk::sim::des::simulate(t, c);
    REQUIRE(open.requests.size() == closed.requests.size());
    std::size_t same = 0;
    for (std::size_t r = 0; r < open.requests.size(); ++r) {
      same += std::abs(open.requests[r].arrival - closed.requests[r].arrival) < 1e-9;
    }
    INFO(scheduler);
    CHECK(same == open.requests.size());
    CHECK(open.summary["block_hits"] == closed.summary["block_hits"]);
  }
}

TEST_CASE("closed loop: under overload the queue stays bounded by the sessions, the open one grows",
          "[simulate][closed]") {
  // 40x the arrival rate the instance can serve: open-loop queueing grows with the trace, closed
  // loop sends a session's next turn only after its last one is done.
  const auto t = sessions_trace("chat", 1500, 200.0);
  cluster_config c;
  c.local_cache_blocks = 5000;
  const auto open = kvtk::sim::des::simulate(t, c);
  c.closed_loop = true;
  const auto closed = kvtk::sim::des::simulate(t, c);
  const auto mean_queue = [](const kvtk::sim::des::simulation_result& r) {
    double q = 0;
    for (const auto& o : r.requests) q += o.prefill_start - o.arrival;
    return q / static_cast<double>(r.requests.size());
  };
  INFO("open queue " << mean_queue(open) << " s, closed " << mean_queue(closed) << " s");
  CHECK(mean_queue(closed) < 0.1 * mean_queue(open));
  // Bounded: never more requests in the system than sessions with a request outstanding, and
  // a session has at most one at a time.
  std::vector<std::pair<double, int>> ev;
  for (const auto& o : closed.requests) ev.push_back({o.arrival, 1}), ev.push_back({o.done, -1});
  std::sort(ev.begin(), ev.end(), [](auto a, auto b) { return a.first != b.first ? a.first < b.first : a.second < b.second; });
  int live = 0, most = 0;
  for (const auto& [time, d] : ev) most = std::max(most, live += d);
  std::vector<std::uint64_t> sessions(t.session.begin(), t.session.end());
  std::sort(sessions.begin(), sessions.end());
  const auto distinct = static_cast<int>(std::unique(sessions.begin(), sessions.end()) - sessions.begin());
  CHECK(most <= distinct);
  // A session has one request at a time: each arrives after its session's previous one is done.
  std::unordered_map<std::uint64_t, double> done_of;
  std::size_t in_order = 0;
  for (std::size_t r = 0; r < closed.requests.size(); ++r) {
    const auto it = done_of.find(t.session[r]);
    in_order += it == done_of.end() || closed.requests[r].arrival >= it->second;
    done_of[t.session[r]] = closed.requests[r].done;
  }
  CHECK(in_order == closed.requests.size());
  // The interactive response-time law, X = N / (R + Z): the time-averaged number of active
  // sessions (swept over time, a session active from its first arrival to its last request's
  // end) over the mean response time plus the mean think time per request (each request's R, and
  // each child's Z = its arrival - its parent's end) gives the measured throughput. Per session
  // R + Z telescopes to its last end - its first arrival, so this is a consistency check: it
  // fails when a session's requests end out of order or a request is lost from the outcomes.
  std::unordered_map<std::uint64_t, std::pair<double, double>> span_of;  // first arrival, last end
  std::unordered_map<std::uint64_t, double> previous_done;
  double response = 0, think = 0, begin = 1e300, end = 0;
  for (std::size_t r = 0; r < closed.requests.size(); ++r) {
    const auto& o = closed.requests[r];
    response += o.done - o.arrival;
    if (const auto it = previous_done.find(t.session[r]); it != previous_done.end()) think += o.arrival - it->second;
    previous_done[t.session[r]] = o.done;
    auto [it, fresh] = span_of.try_emplace(t.session[r], o.arrival, o.done);
    if (!fresh) it->second.second = std::max(it->second.second, o.done);
    begin = std::min(begin, o.arrival);
    end = std::max(end, o.done);
  }
  std::vector<std::pair<double, int>> sweep;
  for (const auto& [id, se] : span_of) sweep.push_back({se.first, 1}), sweep.push_back({se.second, -1});
  std::sort(sweep.begin(), sweep.end());
  double area = 0, prev = begin;
  int active = 0;
  for (const auto& [time, d] : sweep) {
    area += active * (time - prev);
    prev = time;
    active += d;
  }
  const double n = static_cast<double>(closed.requests.size());
  const double sessions_active = area / (end - begin);
  const double throughput = n / (end - begin);
  CHECK(throughput == Approx(sessions_active / ((response + think) / n)).epsilon(1e-6));
}

TEST_CASE("closed loop: throughput and response time meet the asymptotic bounds of a closed queue",
          "[simulate][closed]") {
  // An independent check (not a telescoping identity): N sessions of K turns, each turn a prompt
  // of distinct blocks (no cache hits) with one output token, so an instance is one FCFS server
  // whose service time D is the timing model's prefill of the prompt; every reply ends in a
  // tool call of Z seconds (tool_s), so a session thinks exactly Z between turns. Operational
  // analysis of a closed queue with deterministic D and Z gives
  //   X = min(N / (D + Z), 1 / D),  and in saturation R = N D - Z,
  // over whole cycles (the run from the first arrival to the last end + Z, the last turn's tool
  // call) and up to the start: at light load the sessions start (D + Z) / N apart and never
  // queue (R = D); in saturation they start within 10 ms. Tolerance 2 %: the transient is at most
  // one cycle D + Z in a run of K = 100 cycles.
  constexpr std::uint32_t turns = 100;
  constexpr double think = 2.0;
  cluster_config c;
  c.time_scale = 0.1;
  c.closed_loop = true;
  const std::uint64_t prompt = 4096;
  const kvtk::sim::des::iteration_timing timing(c.model, c.gpu, c.gpus_per_instance, c.time_scale,
                                                c.iteration_overhead_s, c.timing);
  const double d = timing.prefill_s(0, prompt);
  REQUIRE(d > 0.01);
  REQUIRE(d < 1.0);
  const auto run = [&](std::uint32_t sessions, double spacing) {
    kvtk::prefix::prefix_trace t;
    t.block_tokens = 64;
    t.offsets = {0};
    kvtk::block_key next = 1;
    for (std::uint32_t k = 0; k < turns; ++k) {
      for (std::uint32_t s = 0; s < sessions; ++s) {
        for (std::uint64_t b = 0; b < prompt / 64; ++b) t.keys.push_back(next++);
        t.offsets.push_back(t.keys.size());
        t.input_length.push_back(prompt);
        t.output_length.push_back(1);
        t.arrival_s.push_back(k * 1000.0 + s * spacing);
        t.session.push_back(s);
        t.tool_s.push_back(think);
      }
    }
    return kvtk::sim::des::simulate(t, c);
  };
  const auto measure = [&](const kvtk::sim::des::simulation_result& r) {
    double begin = 1e300, end = 0, response = 0;
    for (const auto& o : r.requests) {
      begin = std::min(begin, o.arrival);
      end = std::max(end, o.done);
      response += o.done - o.arrival;
    }
    const double n = static_cast<double>(r.requests.size());
    return std::pair{n / (end + think - begin), response / n};
  };
  // Light load: N D well under D + Z, no queueing once staggered; X = N / (D + Z), R = D.
  const std::uint32_t light = std::max(1u, static_cast<std::uint32_t>(0.5 * (d + think) / d));
  const auto [x_light, r_light] = measure(run(light, (d + think) / light));
  INFO("D " << d << " s; light N " << light << ": X " << x_light << "/s, R " << r_light << " s");
  CHECK(x_light == Approx(light / (d + think)).epsilon(0.02));
  CHECK(x_light <= light / (d + think) * (1 + 1e-9));
  CHECK(r_light == Approx(d).epsilon(1e-9));
  // Saturation: N D = 4 (D + Z); X = 1 / D, R = N D - Z.
  const auto heavy = static_cast<std::uint32_t>(std::ceil(4 * (d + think) / d));
  const auto [x_heavy, r_heavy] = measure(run(heavy, 0.01 / heavy));
  INFO("heavy N " << heavy << ": X " << x_heavy << "/s, R " << r_heavy << " s");
  CHECK(x_heavy == Approx(1 / d).epsilon(0.02));
  CHECK(x_heavy <= 1 / d * (1 + 1e-9));
  CHECK(r_heavy == Approx(heavy * d - think).epsilon(0.02));
}

TEST_CASE("closed loop: fan-in waits for every parent (think time from the last answered)", "[simulate][closed]") {
  // A (request 0, t = 0) and B (request 1, t = 0.5) are roots; request 2 (t = 3) joins both:
  // "parent": [0, 1] in kvtk JSONL, i.e. parent 0 and fan-in id 1.
  kvtk::prefix::prefix_trace t;
  t.block_tokens = 64;
  t.offsets = {0};
  const std::vector<std::vector<kvtk::block_key>> keys = {{1, 2}, {10, 11}, {1, 2, 3}};
  const std::vector<double> arrival = {0.0, 0.5, 3.0};
  const std::vector<std::uint64_t> output = {10, 400, 10};
  for (std::size_t r = 0; r < keys.size(); ++r) {
    t.keys.insert(t.keys.end(), keys[r].begin(), keys[r].end());
    t.offsets.push_back(t.keys.size());
    t.input_length.push_back(keys[r].size() * 64);
    t.output_length.push_back(output[r]);
    t.arrival_s.push_back(arrival[r]);
  }
  t.request_id = {0, 1, 2};
  t.parent = {kvtk::prefix::no_parent, kvtk::prefix::no_parent, 0};
  t.join_offsets = {0, 0, 0, 1};
  t.join_ids = {1};
  const auto plan = kvtk::sim::des::detail::closed_loop_plan::make(t, [](std::uint32_t) { return 0.0; });
  CHECK(plan.waits == std::vector<std::uint32_t>{0, 0, 2});
  // Think time once, from the parent answered last in the trace (B, at 0.5): A's edge has none.
  CHECK(plan.edge_delay_s == std::vector<double>{0.0, 2.5});
  cluster_config c;
  c.local_cache_blocks = 100;
  c.time_scale = 1000;  // B's 400 output tokens take far longer than A's 10
  c.closed_loop = true;
  c.closed_latency_unloaded = false;
  const auto res = kvtk::sim::des::simulate(t, c);
  const double via_a = res.requests[0].done + 3.0, via_b = res.requests[1].done + 2.5;
  // When B ends first (A slow), the join comes at A's end: A's edge carries no think time.
  {
    auto slow_a = t;
    slow_a.output_length = {400, 10, 10};
    const auto r2 = kvtk::sim::des::simulate(slow_a, c);
    REQUIRE(r2.requests[0].done > r2.requests[1].done + 2.5);
    CHECK(r2.requests[2].arrival == Approx(r2.requests[0].done));
  }
  INFO("A done " << res.requests[0].done << ", B done " << res.requests[1].done);
  REQUIRE(via_b > via_a + 1);  // the join matters: B ends last
  CHECK(res.requests[2].arrival == Approx(via_b));
  // Without the fan-in id the request follows A alone.
  auto one = t;
  one.join_offsets.clear();
  one.join_ids.clear();
  CHECK(kvtk::sim::des::simulate(one, c).requests[2].arrival == Approx(via_a));
  // At zero service time every edge gives the request its own timestamp: closed equals open.
  c.time_scale = 0;
  CHECK(kvtk::sim::des::simulate(t, c).requests[2].arrival == Approx(3.0));
  // An id listed twice, or one that is not earlier in the trace, adds no wait.
  t.join_offsets = {0, 0, 0, 3};
  t.join_ids = {1, 0, 7};
  CHECK(kvtk::sim::des::detail::closed_loop_plan::make(t, [](std::uint32_t) { return 0.0; }).waits ==
        std::vector<std::uint32_t>{0, 0, 2});
}

TEST_CASE("closed loop: timed agents with sub-agents' fan-in equal the open loop at zero service",
          "[simulate][closed]") {
  // trace gen --session-fields: parents by id, tool calls, sub-agents joined by fan-in. At zero
  // service time with the "zero" estimate every edge releases its child at its own timestamp.
  kvtk::sim::gen_options g;
  g.profile = "agent";
  g.requests = 3000;
  g.seed = 5;
  g.session_fields = true;
  kvtk::sim::trace_builder b(g.block_tokens);
  kvtk::sim::generate_trace(g, [&](const kvtk::sim::request_record& r) { b.add(r); });
  auto t = b.finish();
  REQUIRE(!t.join_ids.empty());
  t.tool_s.clear();  // tool_s replaces the gap as the delay; without it the gap is the delay
  cluster_config c;
  c.time_scale = 0;
  c.local_cache_blocks = 3000;
  const auto open = kvtk::sim::des::simulate(t, c);
  c.closed_loop = true;
  c.closed_latency_unloaded = false;
  const auto closed = kvtk::sim::des::simulate(t, c);
  REQUIRE(open.requests.size() == closed.requests.size());
  std::size_t same = 0;
  for (std::size_t r = 0; r < open.requests.size(); ++r) {
    same += std::abs(open.requests[r].arrival - closed.requests[r].arrival) < 1e-9;
  }
  CHECK(same == open.requests.size());
}
