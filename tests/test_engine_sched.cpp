// The engine schedulers of kvtk simulate (sim/des/engine_sched.cpp): hand-computed schedules of
// 2-4 requests, every iteration written down, under a timing table where a prefill iteration
// takes 10 ms, a decode iteration 5 ms and a mixed one 15 ms; and queueing under saturation
// showing as time to first token, not as gaps between tokens.
#include <catch2/catch.hpp>
#include <kvtk/kvtk.hpp>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "des/engine_sched.hpp"
#include "des/simulator.hpp"
#include "des/timing.hpp"
#include "engine_sched_fixture.hpp"

using namespace kvtk;
using namespace engine_sched_fixture;
using sim::des::cluster_config;

TEST_CASE("vllm-v1: decodes first, then chunks of waiting prompts within the budget", "[engine_sched]") {
  // Budget 40 tokens. A (32 tokens, 3 outputs) and B (48 tokens, 2 outputs) arrive at 0, both
  // before the first schedule.
  //   it1  0-10   A prefill 32 + B chunk 8          -> A token 1
  //   it2 10-25   A decode + B chunk 39 (mixed)     -> A token 2
  //   it3 25-40   A decode + B last 1 (mixed)       -> A token 3 (done), B token 1
  //   it4 40-45   B decode                          -> B token 2 (done)
  const auto t = make({{0, {1, 2}, 3}, {0, {7, 8, 9}, 2}});
  const auto r = sim::des::simulate(t, engine("vllm-v1", 100, 40));
  check(r.requests[0], 0.010, 0.040);
  check(r.requests[1], 0.040, 0.045);
  CHECK(r.summary["iterations"] == 4);
  CHECK(r.summary["preemptions"] == 0);
  CHECK(r.summary["scheduler"]["scheduler"] == "vllm-v1");
  CHECK(r.summary["scheduler"]["engine"] == "vllm");
}

TEST_CASE("vllm-v1: a short block preempts the newest running request (recompute)", "[engine_sched]") {
  // 5 blocks of 16 tokens. A: 32 tokens, 20 outputs (4 blocks at the end); B: 16 tokens, 20
  // outputs, arriving while A prefills.
  //   0-10 A prefill (2 blocks) | 10-25 A decode + B prefill (A 3 blocks, B 1) | then both decode
  //   every 5 ms; B's second block is taken at 25. At 100 A (token 17 out, 49 tokens) needs a 4th
  //   block: none free, so B, the newest, is preempted (its 2 blocks freed; B has 16 tokens out).
  //   B cannot come back (its cached block + 1 new > 1 free) until A finishes: A decodes alone,
  //   tokens 18-20 at 105, 110, 115. At 115 B is readmitted: hit 1 block (its prompt, still
  //   cached), recomputes 16 tokens (10 ms), token 17 at 125, then 130, 135, 140 (done).
  const auto t = make({{0, {1, 2}, 20}, {0.001, {7}, 20}});
  const auto r = sim::des::simulate(t, engine("vllm-v1", 5, 1000));
  check(r.requests[0], 0.010, 0.115);
  check(r.requests[1], 0.025, 0.140);
  CHECK(r.summary["preemptions"] == 1);
  CHECK(r.requests[1].hit_blocks == 0);  // the hit of its first admission
}

TEST_CASE("vllm-v1: async scheduling keeps a finished request's slot one schedule longer", "[engine_sched]") {
  // max_num_seqs 2. A (1 output) and C (10 outputs) prefill 0-10; A finishes there. B arrives
  // at 0.001. Synchronous: 10-25 C decode + B prefill -> B done at 25. Async (vLLM's default on
  // GPUs): the 10 ms schedule still sees A running, so 10-15 C decodes alone and B waits until
  // 15-30.
  const auto t = make({{0, {1}, 1}, {0, {2}, 10}, {0.001, {3}, 1}});
  auto c = engine("vllm-v1", 100, 1000);
  c.sched.max_num_seqs = 2;
  c.sched.async_scheduling = false;
  check(sim::des::simulate(t, c).requests[2], 0.025, 0.025);
  c.sched.async_scheduling = true;
  const auto r = sim::des::simulate(t, c);
  check(r.requests[2], 0.030, 0.030);
  CHECK(r.summary["scheduler"]["async_scheduling"] == true);
}

TEST_CASE("vllm-v0: whole prompts first, decodes wait", "[engine_sched]") {
  //   it1  0-10  A prefill 32                    -> A token 1
  //   it2 10-20  B prefill 48 (alone over the budget of 40) -> B token 1 (A waits: prefill first)
  //   it3 20-25  A + B decode                    -> A token 2, B token 2 (done)
  //   it4 25-30  A decode                        -> A token 3 (done)
  const auto t = make({{0, {1, 2}, 3}, {0.001, {7, 8, 9}, 2}});
  const auto r = sim::des::simulate(t, engine("vllm-v0", 100, 40));
  check(r.requests[0], 0.010, 0.030);
  check(r.requests[1], 0.020, 0.025);
  CHECK(r.summary["iterations"] == 4);
}

TEST_CASE("vllm-v0: the padded prefill budget and the block watermark (Vidur's vLLM rules)",
          "[engine_sched]") {
  // A (16 tokens) and B (48) arrive together, one output token each. Summed, 16 + 48 fit a
  // budget of 64: one prefill 0-10. Padded, 2 x 48 = 96 does not: A 0-10, then B 10-20.
  const auto t = make({{0, {1}, 1}, {0, {2, 3, 4}, 1}});
  auto c = engine("vllm-v0", 100, 64);
  check(sim::des::simulate(t, c).requests[1], 0.010, 0.010);
  c.sched.padded_prefill_budget = true;
  check(sim::des::simulate(t, c).requests[1], 0.020, 0.020);
  // Watermark: 10 blocks, A takes 4 and B 5 (9 fit), but a 0.2 watermark keeps 2 free: after
  // A only 6 are, 6 - 5 < 2, so B waits for A to finish.
  const auto w = make({{0, {1, 2, 3, 4}, 1}, {0, {5, 6, 7, 8, 9}, 1}});
  auto d = engine("vllm-v0", 10, 1000);
  check(sim::des::simulate(w, d).requests[1], 0.010, 0.010);
  d.sched.watermark_blocks_fraction = 0.2;
  check(sim::des::simulate(w, d).requests[1], 0.020, 0.020);
  // Both are vLLM V0's: other schedulers refuse them by name.
  d.sched.scheduler = "vllm-v1";
  CHECK_THROWS_WITH(sim::des::simulate(w, d), Catch::Contains("need scheduler vllm-v0"));
}

TEST_CASE("sglang: longest prefix first, the last admitted chunked", "[engine_sched]") {
  // X (keys 1 2, 1 output) prefills 0-10 and finishes, leaving [1 2] in the tree. Y (keys 5 6)
  // then Z (keys 1 2 3) wait. lpm: Z first (2 pages cached, 16 new tokens), then Y's first 24
  // tokens (budget 40 - 16), chunked: 10-20 -> Z token 1 (done); 20-30 Y's last 8 -> Y done.
  // fcfs: Y whole (32), then Z's first 8 tokens: Y done at 20, Z at 30.
  const auto t = make({{0, {1, 2}, 1}, {0.001, {5, 6}, 1}, {0.002, {1, 2, 3}, 1}});
  auto c = engine("sglang", 100, 40);
  auto lpm = sim::des::simulate(t, c);
  check(lpm.requests[2], 0.020, 0.020);
  check(lpm.requests[1], 0.030, 0.030);
  CHECK(lpm.requests[2].hit_blocks == 2);
  c.sched.schedule_policy = "fcfs";
  auto fcfs = sim::des::simulate(t, c);
  check(fcfs.requests[1], 0.020, 0.020);
  check(fcfs.requests[2], 0.030, 0.030);
  CHECK(fcfs.summary["scheduler"]["schedule_policy"] == "fcfs");
}

TEST_CASE("engine schedulers: saturation queues before the first token", "[engine_sched]") {
  // 20 requests at once, 2 may run: the later ones wait for a slot, and that wait is time to
  // first token; once running, a request's tokens come every decode or mixed iteration.
  std::vector<req> rs;
  for (int i = 0; i < 20; ++i) rs.push_back({0, {static_cast<block_key>(100 + i), 7}, 5});
  const auto t = make(rs);
  for (const char* s : {"vllm-v0", "vllm-v1", "sglang"}) {
    auto c = engine(s, 1000, 8192);
    c.sched.max_num_seqs = 2;
    const auto r = sim::des::simulate(t, c);
    INFO(s);
    CHECK(r.summary["token_gap_s"]["max"].get<double>() <= 0.0151);
    CHECK(r.summary["ttft_s"]["p90"].get<double>() > 10 * 0.015);
    CHECK(r.summary["preemptions"] == 0);
  }
}

TEST_CASE("engine schedulers: a request larger than the cache is refused, not waited for", "[engine_sched]") {
  // 3 blocks of KV; B needs 4 (64 tokens): it could never run. A and C are served.
  const auto t = make({{0, {1}, 2}, {0.001, {2, 3, 4, 5}, 2}, {0.002, {6}, 2}});
  for (const char* s : {"vllm-v0", "vllm-v1", "sglang"}) {
    const auto r = sim::des::simulate(t, engine(s, 3, 1000));
    INFO(s);
    CHECK(r.requests[1].rejected);
    CHECK_FALSE(r.requests[2].rejected);
    CHECK(r.requests[2].done > 0);
    CHECK(r.summary["rejected"] == 1);
  }
}

TEST_CASE("engine schedulers: bad configs are refused by name", "[engine_sched]") {
  const auto t = make({{0, {1, 2}, 3}});
  auto c = engine("vllm-v1", 100, 40);
  c.sparse.enabled = true;
  c.sparse.scorer = "oracle-lru";
  CHECK_THROWS_WITH(sim::des::simulate(t, c), Catch::Contains("unknown scorer 'oracle-lru'"));
  c = engine("vllm-v1", 100, 40);
  c.reject_over_slo = true;
  CHECK_THROWS_WITH(sim::des::simulate(t, c), Catch::Contains("does not combine with reject_over_slo"));
  c = engine("vllm-v1", 100, 40);
  c.router = "nearest";
  CHECK_THROWS_WITH(sim::des::simulate(t, c), Catch::Contains("unknown router 'nearest'"));
  c = engine("vllm-v3", 100, 40);
  CHECK_THROWS_WITH(sim::des::simulate(t, c), Catch::Contains("unknown scheduler 'vllm-v3'"));
  c = engine("sglang", 100, 8);  // chunks end on whole 16-token pages
  CHECK_THROWS_WITH(sim::des::simulate(t, c), Catch::Contains("must be at least a page"));
  c = engine("sglang", 100, 40);
  c.sched.engine = "vllm";
  CHECK_THROWS_WITH(sim::des::simulate(t, c), Catch::Contains("does not go with scheduler"));
}


TEST_CASE("engine schedulers with free compute and one output token equal replay --engine",
          "[engine_sched]") {
  // One request at a time to completion, prompt only: what `kvtk replay --engine` counts.
  for (std::uint64_t seed : {1, 2, 3}) {
    const auto t = shared_prefix_trace(seed, 300);
    for (std::uint64_t blocks : {24, 60, 400}) {
      prefix::vllm_engine_index vllm(static_cast<std::uint32_t>(blocks));
      prefix::sglang_engine_index sglang(static_cast<std::uint32_t>(blocks));
      const auto want_vllm = prefix::replay(t, vllm, prefix::partial_block::skip);
      const auto want_sglang = prefix::replay(t, sglang, prefix::partial_block::skip);
      // Budgets: whole prompts (4096 tokens), and 64-token chunks. SGLang's chunks go into its
      // tree as they are computed (checkpoint_kv_cache), which reorders its LRU against a replay
      // that caches a prompt at once: only vLLM's schedulers (which cache blocks as they are
      // allocated either way) equal the replay when chunked.
      for (const auto& [s, budget] : std::vector<std::pair<std::string, std::uint64_t>>{
               {"vllm-v0", 4096}, {"vllm-v1", 4096}, {"sglang", 4096},
               {"vllm-v0", 64}, {"vllm-v1", 64}}) {
        INFO("seed " << seed << ", " << blocks << " blocks, scheduler " << s << ", budget "
                     << budget);
        auto c = engine(s, blocks, budget);
        c.timing = nullptr;
        c.time_scale = 0;
        c.max_output_tokens = 1;
        const auto r = sim::des::simulate(t, c);
        const auto& want = s == "sglang" ? want_sglang : want_vllm;
        CHECK(r.summary["block_refs"] == want.block_refs);
        CHECK(r.summary["block_hits"] == want.block_hits);
        CHECK(r.summary["token_hits"] == want.token_hits);
        CHECK(r.summary["rejected"] == 0);
      }
    }
  }
}

TEST_CASE("engine schedulers: a DRAM tier below the engine's KV cache", "[engine_sched]") {
  // Four prompts of 4 full blocks and a partial one (72 tokens: at most 4 blocks hit). HBM holds
  // 7 blocks, so the second and third prompt evict the first; the fourth repeats the first.
  const auto t = make({{0, {1, 2, 3, 4}, 1, 72},
                       {1, {11, 12, 13, 14}, 1, 72},
                       {2, {21, 22, 23, 24}, 1, 72},
                       {3, {1, 2, 3, 4}, 1, 72}});
  for (const char* s : {"vllm-v0", "vllm-v1", "sglang"}) {
    INFO("scheduler " << s);
    auto c = engine(s, 7, 4096);
    const auto without = sim::des::simulate(t, c);
    CHECK(without.requests[3].hit_blocks == 0);
    c.dram_blocks = 100;
    c.overlap_load = false;
    c.host_link_latency_s = 0.5;
    c.host_link_per_block_s = 0.1;
    const auto with = sim::des::simulate(t, c);
    const auto& o = with.requests[3];
    CHECK(o.hit_blocks == 4);
    CHECK(o.hit_tokens == 64);
    CHECK(o.dram_blocks == 4);
    CHECK(with.summary["dram_block_hits"] == 4);
    CHECK(with.summary["local_block_hits"] == 0);
    const double block_bytes = 16.0 * static_cast<double>(c.model.kv_bytes_per_token);
    CHECK(with.summary["bytes"]["dram_read"].get<double>() == Approx(4 * block_bytes));
    // The prefill (10 ms) and then the load: 0.5 s + 4 x 0.1 s + 4 blocks over the host link.
    const double load = 0.5 + 0.4 + 4 * block_bytes / c.gpu.host_link_bytes_per_s;
    check(o, 3 + 0.010 + load, 3 + 0.010 + load);
    // Overlapped, the load hides the prefill.
    c.overlap_load = true;
    check(sim::des::simulate(t, c).requests[3], 3 + load, 3 + load);
    // The first three found nothing anywhere.
    for (int r = 0; r < 3; ++r) CHECK(with.requests[r].hit_blocks == 0);
  }
}

TEST_CASE("engine schedulers: disaggregated prefill and decode", "[engine_sched]") {
  // One request of 64 tokens and 3 output tokens. Prefill instance: one 10 ms iteration, first
  // token at 10 ms; the prompt's KV (64 tokens) crosses the P->D link in 100 ms; the decode
  // instance admits it with that KV loaded and decodes tokens 2 and 3, 5 ms each.
  const auto t = make({{0, {1, 2, 3, 4}, 3}});
  for (const char* s : {"vllm-v0", "vllm-v1", "sglang"}) {
    INFO("scheduler " << s);
    auto c = engine(s, 100, 4096);
    c.decode_instances = 1;
    const double bytes = 64.0 * static_cast<double>(c.model.kv_bytes_per_token);
    c.pd_link_bytes_per_s = bytes / 0.1;
    const auto r = sim::des::simulate(t, c);
    check(r.requests[0], 0.010, 0.120);
    CHECK(r.requests[0].mean_tbt == Approx((0.105 + 0.005) / 2));
    CHECK(r.requests[0].instance == 0);
    CHECK(r.summary["bytes"]["prefill_to_decode"].get<double>() == Approx(bytes));
    CHECK(r.summary["iterations"] == 3);
    // Busy: 10 ms on the prefill instance, 10 ms on the decode instance, over 120 ms and 2.
    CHECK(r.summary["gpu_busy_fraction"].get<double>() == Approx(0.020 / (0.120 * 2)));
  }
}

TEST_CASE("engine schedulers: DRAM tiers and disaggregation on a busy trace", "[engine_sched]") {
  const auto t = shared_prefix_trace(7, 400);
  for (const char* s : {"vllm-v0", "vllm-v1", "sglang"}) {
    INFO("scheduler " << s);
    auto c = engine(s, 60, 64);
    c.timing = nullptr;
    c.model = sim::des::model_presets().at("qwen2.5-7b");
    c.prefill_instances = 2;
    c.decode_instances = 2;
    c.dram_blocks = 500;
    const auto r = sim::des::simulate(t, c);
    std::uint64_t dram = 0;
    for (const auto& o : r.requests) {
      if (o.rejected) continue;
      CHECK(o.first_token >= o.arrival);
      CHECK(o.done >= o.first_token);
      CHECK(o.hit_blocks <= o.blocks);
      CHECK(o.dram_blocks <= o.hit_blocks);
      CHECK(o.instance < 2);
      dram += o.dram_blocks;
    }
    CHECK(dram > 0);
    CHECK(r.summary["dram_block_hits"] == dram);
    CHECK(r.summary["requests"] == 400);
  }
}

TEST_CASE("engine schedulers: a pool shared by the instances, and the cache-aware router",
          "[engine_sched]") {
  // The same 4-block prompt (72 tokens: 4 blocks can hit) four times, one second apart, on two
  // instances.
  const auto t = make({{0, {1, 2, 3, 4}, 1, 72},
                       {1, {1, 2, 3, 4}, 1, 72},
                       {2, {1, 2, 3, 4}, 1, 72},
                       {3, {1, 2, 3, 4}, 1, 72}});
  for (const char* s : {"vllm-v0", "vllm-v1", "sglang"}) {
    INFO("scheduler " << s);
    auto c = engine(s, 100, 4096);
    c.prefill_instances = 2;
    // Round-robin: requests 0 and 2 on instance 0, 1 and 3 on instance 1; each instance's first
    // computes the prompt, its second hits it.
    const auto rr = sim::des::simulate(t, c);
    CHECK(rr.summary["block_hits"] == 8);
    CHECK(rr.requests[1].hit_blocks == 0);
    // A pool: request 1 loads the prompt instance 0 wrote there.
    c.pool_blocks = 100;
    c.pool_latency_s = 0.25;
    c.pool_bytes_per_s = 0;  // latency only
    c.overlap_load = false;
    const auto pooled = sim::des::simulate(t, c);
    CHECK(pooled.requests[1].hit_blocks == 4);
    CHECK(pooled.requests[1].pool_blocks == 4);
    CHECK(pooled.summary["pool_block_hits"] == 4);
    CHECK(pooled.summary["local_block_hits"] == 8);
    const double block_bytes = 16.0 * static_cast<double>(c.model.kv_bytes_per_token);
    CHECK(pooled.summary["bytes"]["pool_read"].get<double>() == Approx(4 * block_bytes));
    CHECK(pooled.summary["bytes"]["pool_write"].get<double>() == Approx(4 * block_bytes));
    check(pooled.requests[1], 1 + 0.010 + 0.25, 1 + 0.010 + 0.25);
    // Cache-aware: every request goes where the prompt is cached (instance 0), so only the
    // first computes it.
    c.pool_blocks = 0;
    c.router = "cache-aware";
    const auto aware = sim::des::simulate(t, c);
    CHECK(aware.summary["block_hits"] == 12);
    for (const auto& o : aware.requests) CHECK(o.instance == 0);
    // Conductor, idle instances: the predicted first token is soonest where the prompt is cached
    // (with the formula: the table's prefill rows are all 10 ms, hit or not).
    c.router = "conductor";
    c.timing = nullptr;
    const auto conducted = sim::des::simulate(t, c);
    CHECK(conducted.summary["block_hits"] == 12);
    for (const auto& o : conducted.requests) CHECK(o.instance == 0);
  }
}

TEST_CASE("engine schedulers: the conductor router weighs the iteration in progress",
          "[engine_sched]") {
  // Request 1 arrives 1 ms after request 0, whose prefill (10 ms) runs on instance 0 until
  // 10 ms. Instance 0: 9 ms left + its own prefill (10 ms, every prefill row is 10 ms) = 19 ms;
  // instance 1, idle: 10 ms. Conductor sends it to instance 1; least-loaded would too, but
  // cache-aware, seeing instance 0's hit, keeps it there.
  const auto t = make({{0, {1, 2, 3, 4}, 1, 72}, {0.001, {1, 2, 3, 4}, 1, 72}});
  for (const char* s : {"vllm-v0", "vllm-v1", "sglang"}) {
    INFO("scheduler " << s);
    auto c = engine(s, 100, 4096);
    c.prefill_instances = 2;
    c.router = "conductor";
    const auto r = sim::des::simulate(t, c);
    CHECK(r.requests[1].instance == 1);
    check(r.requests[1], 0.011, 0.011);
  }
}

TEST_CASE("vLLM offload under vllm-v1 with free compute and one output token equals replay "
          "--engine vllm --offload", "[engine_sched][offload]") {
  // One request at a time to completion: the connector's lookups, loads, stores, evictions and
  // request ends happen in the order vllm_offload (checked against vLLM's own connector) runs
  // them, so every count must agree. Zero link time: each load is done at the instant it starts.
  for (std::uint64_t seed : {1, 2}) {
    const auto t = shared_prefix_trace(seed, 300);
    for (const std::uint32_t gpu : {24u, 60u}) {
      for (const std::uint32_t k : {1u, 2u}) {
        for (const char* policy : {"lru", "arc", "s3fifo"}) {
          tier::vllm_offload_config oc;
          oc.gpu_blocks = gpu;
          oc.cpu_chunks = 100 / k;
          oc.blocks_per_chunk = k;
          oc.policy = policy;
          INFO("seed " << seed << ", " << gpu << " GPU blocks, chunks of " << k << ", " << policy);
          tier::vllm_offload_index<> idx(oc);
          const auto want = prefix::replay(t, idx, prefix::partial_block::skip);
          auto c = engine("vllm-v1", gpu, 4096);
          c.timing = nullptr;
          c.time_scale = 0;
          c.max_output_tokens = 1;
          c.gpu.host_link_bytes_per_s = 0;
          c.offload = std::string("cpu:100:") + policy;
          c.offload_cfg = oc;
          const auto r = sim::des::simulate(t, c);
          CHECK(r.summary["block_hits"] == want.block_hits);
          CHECK(r.summary["token_hits"] == want.token_hits);
          const auto& o = r.summary["offload"];
          const auto& w = idx.counters();
          CHECK(o["cpu_hit_blocks"] == w.cpu_hit_blocks);
          CHECK(r.summary["dram_block_hits"] == w.cpu_hit_blocks);
          CHECK(o["chunks_loaded"] == w.chunks_loaded);
          CHECK(o["chunks_stored"] == w.chunks_stored);
          CHECK(o["chunks_evicted"] == w.chunks_evicted);
          CHECK(o["chunks_reused"] == w.reused_chunks);
          CHECK(o["store_refusals"] == w.store_refusals);
          CHECK(w.cpu_hit_blocks > 0);
        }
      }
    }
  }
}

TEST_CASE("vLLM offload under vllm-v1: a load delays its request's prefill, not the others'",
          "[engine_sched][offload]") {
  // Four prompts of 4 full blocks and a partial one (72 tokens: at most 4 blocks hit); the GPU
  // holds 7 blocks, so the fourth (a repeat of the first) finds its blocks only in the CPU tier.
  // Its load (4 blocks) runs on the host link while request 4, arriving with it, is prefilled.
  const auto t = make({{0, {1, 2, 3, 4}, 1, 72},
                       {1, {11, 12, 13, 14}, 1, 72},
                       {2, {21, 22, 23, 24}, 1, 72},
                       {3, {1, 2, 3, 4}, 1, 72},
                       {3, {31, 32}, 1, 32}});
  auto c = engine("vllm-v1", 7, 4096);
  c.offload = "cpu:100:lru";
  c.offload_cfg.cpu_chunks = 100;
  c.host_link_latency_s = 0.5;
  c.host_link_per_block_s = 0.1;
  const auto r = sim::des::simulate(t, c);
  const auto& o = r.requests[3];
  CHECK(o.hit_blocks == 4);
  CHECK(o.hit_tokens == 64);
  CHECK(o.dram_blocks == 4);
  const double block_bytes = 16.0 * static_cast<double>(c.model.kv_bytes_per_token);
  const double load = 0.5 + 0.4 + 4 * block_bytes / c.gpu.host_link_bytes_per_s;
  // The load, then the iteration that prefills its last 8 tokens (10 ms).
  check(o, 3 + load + 0.010, 3 + load + 0.010);
  check(r.requests[4], 3.010, 3.010);  // admitted behind the loading request, at once
  const auto& s = r.summary["offload"];
  CHECK(s["loads"] == 1);
  CHECK(s["cpu_hit_blocks"] == 4);
  CHECK(s["bytes_loaded"].get<double>() == Approx(4 * block_bytes));
  // Every request's 4 full blocks (request 5: 2) stored once; request 3's were resident.
  CHECK(s["chunks_stored"] == 14);
  CHECK(s["bytes_stored"].get<double>() == Approx(14 * block_bytes));
  CHECK(s["load_wait_s_mean"].get<double>() == Approx(load));
  CHECK(r.summary["dram_block_hits"] == 4);
  CHECK(r.summary["local_block_hits"] == 0);
  // Without the offload tier the fourth request recomputes everything.
  c.offload.clear();
  CHECK(sim::des::simulate(t, c).requests[3].hit_blocks == 0);
}

TEST_CASE("vLLM offload under vllm-v1: a load of the whole prompt counts every block as a hit",
          "[engine_sched][offload]") {
  // Block-aligned prompts (64 tokens): the fourth finds all 4 blocks in the CPU tier and loads
  // them; vLLM recomputes its last token, but the hit is 4 blocks and 64 tokens, as replay counts.
  const auto t = make({{0, {1, 2, 3, 4}, 1},
                       {1, {11, 12, 13, 14}, 1},
                       {2, {21, 22, 23, 24}, 1},
                       {3, {1, 2, 3, 4}, 1}});
  auto c = engine("vllm-v1", 5, 4096);
  c.offload = "cpu:100:lru";
  c.offload_cfg.cpu_chunks = 100;
  const auto r = sim::des::simulate(t, c);
  CHECK(r.requests[3].hit_blocks == 4);
  CHECK(r.requests[3].hit_tokens == 64);
  CHECK(r.requests[3].dram_blocks == 4);
  CHECK(r.summary["local_block_hits"] == 0);
  tier::vllm_offload_config oc;
  oc.gpu_blocks = 5;
  oc.cpu_chunks = 100;
  tier::vllm_offload_index<> idx(oc);
  const auto want = prefix::replay(t, idx, prefix::partial_block::skip);
  CHECK(r.summary["block_hits"] == want.block_hits);
  CHECK(r.summary["token_hits"] == want.token_hits);
}

TEST_CASE("vLLM offload: configurations simulate cannot run are refused by name",
          "[engine_sched][offload]") {
  const auto t = make({{0, {1, 2}, 3}});
  for (const char* s : {"vllm-v0", "sglang", "kvtk"}) {
    auto c = engine(s, 100, 40);
    c.offload = "cpu:10:lru";
    c.offload_cfg.cpu_chunks = 10;
    CHECK_THROWS_WITH(sim::des::simulate(t, c), Catch::Contains("vllm-v1"));
  }
  auto c = engine("vllm-v1", 100, 40);
  c.offload = "cpu:10:lru";
  c.offload_cfg.cpu_chunks = 10;
  c.dram_blocks = 50;
  CHECK_THROWS_WITH(sim::des::simulate(t, c), Catch::Contains("does not combine with dram"));
  c.dram_blocks = 0;
  c.decode_instances = 1;
  CHECK_THROWS_WITH(sim::des::simulate(t, c), Catch::Contains("decode_instances"));
  c.decode_instances = 0;
  c.sparse.enabled = true;
  CHECK_THROWS_WITH(sim::des::simulate(t, c), Catch::Contains("does not combine with sparse"));
  c.sparse.enabled = false;
  c.offload_cfg.cpu_chunks = 0;
  CHECK_THROWS_WITH(sim::des::simulate(t, c), Catch::Contains("offloaded blocks"));
}
