// Bounded-memory simulation (sim/des/outcomes.hpp): the streaming latency distribution against
// exact sorted ranks, and a simulation whose outcomes stream out (no outcome kept, arrivals
// taken from the trace one at a time) against one that keeps everything and queues every
// arrival, for kvtk's scheduler and an engine's.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <kvtk/kvtk.hpp>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <vector>

#include "api/replay.hpp"
#include "api/simulate.hpp"
#include "api/trace_stats.hpp"
#include "des/outcomes.hpp"
#include "des/simulator.hpp"
#include "api/trace_options.hpp"
#include "formats/mooncake_flat.hpp"
#include "formats/requests.hpp"

namespace {

using namespace kvtk;
using sim::des::cluster_config;
using sim::des::detail::latency_stats;

// The old end-of-run percentile: the sorted value at rank min(n-1, floor(p n)).
double exact_quantile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

const prefix::prefix_trace& conversation() {
  static const prefix::prefix_trace t = sim::load_mooncake_requests(
      std::string(KVTK_TRACES_DIR "/") + "mooncake_fast25_conversation_trace.jsonl");
  return t;
}

// A synthetic trace long enough for several page releases: 3 blocks from a pool of 500 prefixes.
prefix::prefix_trace long_trace(std::size_t n, bool sorted) {
  prefix::prefix_trace t;
  t.block_tokens = 16;
  std::mt19937_64 rng(7);
  for (std::size_t r = 0; r < n; ++r) {
    const block_key p = rng() % 500;
    const std::vector<block_key> keys{p, 1000 + p * 7 + rng() % 3, 1'000'000 + r};
    t.add(keys, 48);
    t.arrival_s.push_back(sorted ? static_cast<double>(r) * 0.002
                                 : static_cast<double>(r) * 0.002 + (r % 7 == 3 ? 0.01 : 0.0));
    t.output_length.push_back(1 + rng() % 6);
  }
  return t;
}

void same_outcome(const sim::des::request_outcome& a, const sim::des::request_outcome& b) {
  CHECK(a.arrival == b.arrival);
  CHECK(a.first_token == b.first_token);
  CHECK(a.done == b.done);
  CHECK(a.instance == b.instance);
  CHECK(a.hit_blocks == b.hit_blocks);
  CHECK(a.output_tokens == b.output_tokens);
  CHECK(a.mean_tbt == b.mean_tbt);
  CHECK(a.rejected == b.rejected);
}

// Runs c on t twice: everything kept and queued, then streamed; both must agree exactly.
void streamed_equals_kept(const prefix::prefix_trace& t, const cluster_config& c) {
  sim::des::simulation_hooks kept;
  kept.queue_all_arrivals = true;
  const auto all = sim::des::simulate(t, c, kept);

  std::vector<sim::des::request_outcome> streamed;
  std::vector<std::pair<std::size_t, std::size_t>> released;
  std::uint64_t expected = 0;
  sim::des::simulation_hooks hooks;
  hooks.keep_requests = false;
  hooks.on_request = [&](std::uint64_t r, const sim::des::request_outcome& o) {
    REQUIRE(r == expected++);  // trace order, each once
    streamed.push_back(o);
  };
  hooks.release = [&](std::size_t a, std::size_t b) { released.emplace_back(a, b); };
  const auto res = sim::des::simulate(t, c, hooks);

  CHECK(res.requests.empty());
  REQUIRE(streamed.size() == t.requests());
  REQUIRE(all.requests.size() == t.requests());
  for (std::size_t r = 0; r < streamed.size(); ++r) same_outcome(streamed[r], all.requests[r]);
  nlohmann::json a = all.summary, b = res.summary;
  CHECK(a.dump() == b.dump());  // every figure, bit for bit
  // Releases: consecutive stretches covering the whole trace (the arrival check's pass), then
  // consecutive stretches from 0 again behind the simulation.
  REQUIRE(!released.empty());
  std::size_t k = 0, next = 0;
  for (; k < released.size() && next < t.requests(); ++k) {
    CHECK(released[k].first == next);
    CHECK(released[k].second > next);
    next = released[k].second;
  }
  CHECK(next == t.requests());
  for (next = 0; k < released.size(); ++k) {
    CHECK(released[k].first == next);
    CHECK(released[k].second > next);
    CHECK(released[k].second <= t.requests());
    next = released[k].second;
  }
  CHECK(res.summary["max_live_requests"].get<std::uint64_t>() <= t.requests());
}

}  // namespace

TEST_CASE("latency_stats: exact up to its limit, then within 1 % above the exact rank", "[simulate][stream]") {
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> d(-3.0, 2.0);
  latency_stats s;
  std::vector<double> v;
  double sum = 0;
  for (int i = 0; i < 1000; ++i) {
    v.push_back(d(rng));
    s.add(v.back());
    sum += v.back();
  }
  REQUIRE(s.exact());
  for (double p : {0.0, 0.5, 0.9, 0.99, 1.0}) CHECK(s.quantile(p) == exact_quantile(v, p));
  while (v.size() <= latency_stats::exact_limit + 5000) {
    v.push_back(v.size() % 11 == 0 ? 1e-8 : d(rng));  // some below the first bucket edge
    s.add(v.back());
    sum += v.back();
  }
  REQUIRE_FALSE(s.exact());
  CHECK(s.count() == v.size());
  CHECK(s.mean() == sum / static_cast<double>(v.size()));
  CHECK(s.min() == *std::min_element(v.begin(), v.end()));
  CHECK(s.max() == *std::max_element(v.begin(), v.end()));
  for (double p : {0.0, 0.05, 0.09, 0.5, 0.9, 0.99, 0.999, 1.0}) {
    const double want = exact_quantile(v, p), got = s.quantile(p);
    INFO("p " << p << " exact " << want << " got " << got);
    if (want >= latency_stats::lo) {
      CHECK(got >= want);
      CHECK(got <= want * 1.01);
    } else {
      CHECK(got >= want);
      CHECK(got <= want + latency_stats::lo);
    }
  }
  CHECK(s.quantile(1.0) == s.max());
}

TEST_CASE("latency_stats buckets: edge(b-1) < s <= edge(b)", "[simulate][stream]") {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> e(-7, 9);
  for (int i = 0; i < 100000; ++i) {
    const double s = std::pow(10.0, e(rng));
    const std::size_t b = latency_stats::bucket(s);
    if (s <= latency_stats::lo) {
      CHECK(b == 0);
      continue;
    }
    REQUIRE(b >= 1);
    CHECK(latency_stats::edge(b - 1) < s);
    CHECK(s <= latency_stats::edge(b));
  }
  // Bucket edges themselves belong to the bucket they close.
  // Every edge, and its neighbours on either side (the first guess comes from the bits).
  for (std::size_t b = 1; b < latency_stats::buckets; ++b) {
    const double e = latency_stats::edge(b);
    REQUIRE(latency_stats::bucket(e) == b);
    if (b + 1 < latency_stats::buckets) REQUIRE(latency_stats::bucket(std::nextafter(e, 1e300)) == b + 1);
    if (b > 1) REQUIRE(latency_stats::bucket(std::nextafter(latency_stats::edge(b - 1), 1e300)) == b);
  }
  const double huge = std::numeric_limits<double>::max();
  CHECK(latency_stats::bucket(huge) == latency_stats::buckets - 1);
  CHECK(latency_stats::bucket(std::numeric_limits<double>::infinity()) == latency_stats::buckets - 1);
  CHECK(latency_stats::bucket(std::nextafter(latency_stats::lo, 1.0)) == 1);
  for (double s : {std::numeric_limits<double>::quiet_NaN(), -1.0, 0.0,
                   -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::denorm_min(),
                   latency_stats::lo}) {
    CHECK(latency_stats::bucket(s) == 0);
  }
}

TEST_CASE("a streamed simulation equals one that keeps every outcome", "[simulate][stream]") {
  const auto& t = conversation();
  cluster_config c;
  c.prefill_instances = 4;
  c.local_cache_blocks = 3000;
  c.router = "cache-aware";
  c.max_output_tokens = 40;
  SECTION("kvtk's scheduler, colocated") { streamed_equals_kept(t, c); }
  SECTION("disaggregated, with a pool") {
    c.decode_instances = 2;
    c.pool_blocks = 20000;
    streamed_equals_kept(t, c);
  }
  SECTION("an engine's scheduler (vLLM v1)") {
    c.sched.scheduler = "vllm-v1";
    c.router = "round-robin";
    streamed_equals_kept(t, c);
  }
  SECTION("SGLang's scheduler") {
    c.sched.scheduler = "sglang";
    c.router = "least-loaded";
    streamed_equals_kept(t, c);
  }
}

TEST_CASE("a long streamed simulation releases its trace in stretches and holds few requests", "[simulate][stream]") {
  for (bool sorted : {true, false}) {
    INFO("sorted arrivals " << sorted);
    const auto t = long_trace(150000, sorted);
    cluster_config c;
    c.prefill_instances = 2;
    c.local_cache_blocks = 2000;
    c.model.kv_bytes_per_token = 1000;
    streamed_equals_kept(t, c);
    const auto res = sim::des::simulate(t, c);
    // The latency distributions went past the exact limit: the percentiles are the histogram's.
    CHECK(res.summary["requests"].get<std::uint64_t>() == 150000);
    CHECK(res.summary["max_live_requests"].get<std::uint64_t>() < 10000);
  }
}

TEST_CASE("kvtk simulate --csv streams the same rows as to_csv", "[simulate][stream]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kvtk-stream-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  sim::simulate_options o;
  o.trace = std::string(KVTK_TRACES_DIR "/") + "mooncake_fast25_conversation_trace.jsonl";
  o.config = {{"prefill_instances", 2}, {"local_cache", 2000}, {"max_output_tokens", 20}};
  const auto kept = sim::run(o);
  REQUIRE(kept.requests.size() == 12031);
  o.csv = (dir / "rows.csv").string();
  o.requests = false;
  const auto streamed = sim::run(o);
  CHECK(streamed.requests.empty());
  std::ifstream in(o.csv);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == sim::to_csv(kept));
  CHECK(streamed.result.dump() == kept.result.dump());
  // An existing file is not replaced without force.
  CHECK_THROWS(sim::run(o));
  o.force = true;
  CHECK_NOTHROW(sim::run(o));
  fs::remove_all(dir);
}

TEST_CASE("a JSONL trace streamed through a temporary kvtb simulates as the trace in memory",
          "[simulate][stream]") {
  // sim::run streams JSONL (loaded_trace::spill); des::simulate over the parsed trace is the
  // reference. kvtk's scheduler and an engine scheduler, every bundled JSONL trace; the
  // temporary file is gone once the trace is mapped.
  namespace fs = std::filesystem;
  const fs::path tmp = fs::temp_directory_path();
  // This process's temporaries only (their names carry the pid): other tests run beside it.
  const std::string mine = ".kvtk-" + std::to_string(::getpid()) + "-";
  auto spills = [&] {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator(tmp)) {
      const std::string f = e.path().filename().string();
      n += f.find("kvtk-trace.kvtb") != std::string::npos && f.find(mine) != std::string::npos;
    }
    return n;
  };
  const std::size_t before = spills();
  for (const char* name : {"mooncake_fast25_conversation_trace.jsonl",
                           "mooncake_fast25_synthetic_trace.jsonl", "kvtk_gen_mixed_1k.jsonl"}) {
    for (const nlohmann::json& config :
         {nlohmann::json{{"prefill_instances", 2}, {"local_cache", 2000}, {"max_output_tokens", 20}},
          nlohmann::json{{"engine", "vllm"}, {"model", "qwen2.5-7b"}, {"gpu", "h100"},
                         {"max_output_tokens", 20}}}) {
      INFO(name << " " << config.dump());
      sim::simulate_options o;
      o.trace = std::string(KVTK_TRACES_DIR "/") + name;
      o.config = config;
      const auto streamed = sim::run(o);
      std::string format = "auto";
      std::uint32_t bt = 0;
      sim::resolve_trace(o.trace, format, bt);
      sim::read_report report;
      const auto loaded = sim::loaded_trace::load(o.trace, *sim::parse_format_name(format), bt,
                                                  sim::read_options{}, &report);
      CHECK(loaded.memory_bytes() > 0);  // the reference is in memory
      nlohmann::json j = config;
      const auto cfg = sim::cluster_config_from_json(j, bt, {});
      const auto reference = sim::des::simulate(loaded.view(), cfg);
      CHECK(streamed.result.dump() == reference.summary.dump());
      REQUIRE(streamed.requests.size() == reference.requests.size());
      for (std::size_t i = 0; i < reference.requests.size(); ++i) {
        if (streamed.requests[i].done != reference.requests[i].done ||
            streamed.requests[i].hit_blocks != reference.requests[i].hit_blocks) {
          FAIL("request " << i << " differs");
        }
      }
    }
  }
  CHECK(spills() == before);
}

namespace {
// Sets an environment variable for one scope (tests run one per process under ctest).
struct scoped_env {
  std::string name;
  std::optional<std::string> old;
  scoped_env(std::string n, const std::string& value) : name(std::move(n)) {
    if (const char* v = std::getenv(name.c_str())) old = v;
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~scoped_env() {
    if (old) {
      ::setenv(name.c_str(), old->c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
};
bool mentions_streaming(const std::vector<std::string>& warnings) {
  for (const auto& w : warnings) {
    if (w.find("could not stream the trace") != std::string::npos) return true;
  }
  return false;
}
}  // namespace

TEST_CASE("replay and trace stats stream a JSONL trace over KVTK_STREAM_BYTES, with equal results",
          "[simulate][stream][replay]") {
  const std::string trace = KVTK_TRACES_DIR "/mooncake_fast25_conversation_trace.jsonl";
  sim::replay_options r;
  r.trace = trace;
  r.index = {"radix", "flat"};
  r.policy = {"lru", "s3fifo"};
  r.capacity = {"1000", "20000"};
  r.opt = false;
  sim::trace_stats_options s;
  s.trace = trace;
  // The reference in memory, whatever the environment says (the bundled trace is under 256 MiB).
  scoped_env default_threshold("KVTK_STREAM_BYTES", "");
  const auto replay_mem = sim::run(r);
  const auto stats_mem = sim::run(s);
  scoped_env always("KVTK_STREAM_BYTES", "0");
  const auto replay_streamed = sim::run(r);
  const auto stats_streamed = sim::run(s);
  CHECK(replay_streamed.trace == replay_mem.trace);
  REQUIRE(replay_streamed.results.size() == replay_mem.results.size());
  for (std::size_t i = 0; i < replay_mem.results.size(); ++i) {
    CHECK(replay_streamed.results[i]["block_hits"] == replay_mem.results[i]["block_hits"]);
    CHECK(replay_streamed.results[i]["token_hits"] == replay_mem.results[i]["token_hits"]);
  }
  CHECK(sim::to_json(stats_streamed).dump() == sim::to_json(stats_mem).dump());
  {
    // The spill really runs: with no usable temporary directory it falls back, and says so.
    scoped_env nowhere("TMPDIR", "/nonexistent-kvtk-tmpdir");
    CHECK(mentions_streaming(sim::run(r).warnings));
    CHECK(mentions_streaming(sim::run(s).warnings));
    // Next uses (the optimum) need the whole trace first: no spill, so no warning.
    sim::replay_options with_opt = r;
    with_opt.opt = true;
    CHECK_FALSE(mentions_streaming(sim::run(with_opt).warnings));
  }
  scoped_env bad("KVTK_STREAM_BYTES", "12x");
  CHECK_THROWS_WITH(sim::run(r), Catch::Contains("KVTK_STREAM_BYTES: '12x'"));
}
