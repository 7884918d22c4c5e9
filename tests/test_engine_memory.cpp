// KV capacity as the engines compute it, and the engine's own pages (docs/simulate.md "Engine
// memory and pages"): blocks from gpu_memory_utilization, the reserves, mem_fraction_static and
// num_gpu_blocks_override, each recorded in the summary; a smaller gpu_memory_utilization that
// causes the preemption a hand schedule predicts; prefix caching off; 16-token pages inside
// 32-token trace blocks, hit by hand.
#include <catch2/catch.hpp>
#include <kvtk/kvtk.hpp>
#include <string>
#include <vector>

#include "des/engine_sched.hpp"
#include "des/simulator.hpp"
#include "engine_sched_fixture.hpp"

using namespace kvtk;
using namespace engine_sched_fixture;
using Catch::Contains;
using sim::des::cluster_config;

namespace {

// Tiny round numbers: a 16-token page is 16,000 bytes; the weights 2,000 bytes; HBM 120,000.
cluster_config tiny_gpu(const std::string& scheduler) {
  cluster_config c = engine(scheduler, 0, 1000);
  c.model.kv_bytes_per_token = 1000;
  c.model.total_params = 1000;
  c.gpu.hbm_bytes = 120000;
  return c;
}

// Exactly `bytes` as GiB (bytes a multiple of a power of two: exact in binary).
double gib(double bytes) { return bytes / 1073741824.0; }

}  // namespace

TEST_CASE("engine memory: blocks from gpu_memory_utilization, the weights and the reserves",
          "[engine_sched][engine_memory]") {
  // The schedule of test_engine_sched's preemption case: A (32 tokens, 20 outputs) ends with 4
  // blocks, B (16 tokens, 20 outputs) with 3; A takes its 4th block at 100 ms, B its 3rd one
  // step later. 7 blocks hold both: no preemption. 5 blocks: at 100 ms B is preempted (A done at
  // 115 ms, B readmitted then, done at 140 ms), as the hand schedule there says.
  const auto t = make({{0, {1, 2}, 20}, {0.001, {7}, 20}});
  auto c = tiny_gpu("vllm-v1");
  c.sched.gpu_memory_utilization = 0.95;  // 114,000 - 2,000 = 112,000 bytes = 7 pages
  auto r = sim::des::simulate(t, c);
  CHECK(r.summary["kv_blocks_per_instance"] == 7);
  CHECK(r.summary["preemptions"] == 0);
  const auto& k = r.summary["kv_capacity"];
  CHECK(k["source"] == "gpu_memory_utilization");
  CHECK(k["blocks"] == 7);
  CHECK(k["block_tokens"] == 16);
  CHECK(k["tokens"] == 112);
  CHECK(k["bytes"] == 112000);
  CHECK(k["weights_bytes"] == 2000);
  CHECK(k["kv_bytes"].get<double>() == Approx(112000));
  c.sched.gpu_memory_utilization = 0.7;  // 84,000 - 2,000 = 82,000 bytes = 5 pages
  r = sim::des::simulate(t, c);
  CHECK(r.summary["kv_blocks_per_instance"] == 5);
  CHECK(r.summary["preemptions"] == 1);
  check(r.requests[0], 0.010, 0.115);
  check(r.requests[1], 0.025, 0.140);
  // A non-torch reserve of 16,000 bytes (per GPU) takes one page at 0.95: 6 pages.
  c.sched.gpu_memory_utilization = 0.95;
  c.sched.non_torch_reserve_gib = gib(16000);
  r = sim::des::simulate(t, c);
  CHECK(r.summary["kv_blocks_per_instance"] == 6);
  CHECK(r.summary["kv_capacity"]["non_torch_reserve_bytes"].get<double>() == Approx(16000));
  // Activation and CUDA-graph reserves add up with it (per GPU, x gpus_per_instance).
  c.sched.activation_reserve_gib = gib(16000);
  c.sched.cuda_graph_reserve_gib = gib(16000);
  CHECK(sim::des::simulate(t, c).summary["kv_blocks_per_instance"] == 4);
  c.gpus_per_instance = 2;  // 228,000 - 2,000 - 2 x 48,000 = 130,000 bytes = 8 pages
  CHECK(sim::des::simulate(t, c).summary["kv_blocks_per_instance"] == 8);
  // Nothing left: a clear error naming the fraction.
  c.gpus_per_instance = 1;
  c.sched.activation_reserve_gib = gib(1 << 20);
  CHECK_THROWS_WITH(sim::des::simulate(t, c),
                    Contains("has no KV blocks") && Contains("gpu_memory_utilization 0.95"));
}

TEST_CASE("engine memory: SGLang's mem_fraction_static leaves activations and graphs outside",
          "[engine_sched][engine_memory]") {
  const auto t = make({{0, {1, 2}, 2}, {0.001, {7}, 2}});
  auto c = tiny_gpu("sglang");
  c.sched.mem_fraction_static = 0.95;
  c.sched.activation_reserve_gib = gib(16000);  // outside the static fraction: no effect
  c.sched.cuda_graph_reserve_gib = gib(16000);
  auto r = sim::des::simulate(t, c);
  CHECK(r.summary["kv_capacity"]["source"] == "mem_fraction_static");
  CHECK(r.summary["kv_blocks_per_instance"] == 7);
  c.sched.non_torch_reserve_gib = gib(32000);  // the CUDA context is inside it
  CHECK(sim::des::simulate(t, c).summary["kv_blocks_per_instance"] == 5);
  auto v = tiny_gpu("vllm-v1");
  v.sched.mem_fraction_static = 0.9;
  CHECK_THROWS_WITH(sim::des::simulate(t, v), Contains("mem_fraction_static is SGLang's"));
}

TEST_CASE("engine memory: num_gpu_blocks_override is the engine's logged block count",
          "[engine_sched][engine_memory]") {
  const auto t = make({{0, {1, 2}, 20}, {0.001, {7}, 20}});
  auto c = tiny_gpu("vllm-v1");
  c.sched.num_gpu_blocks_override = 5;  // the count test_engine_sched gives as local_cache
  auto r = sim::des::simulate(t, c);
  CHECK(r.summary["kv_capacity"]["source"] == "num_gpu_blocks_override");
  CHECK(r.summary["preemptions"] == 1);
  check(r.requests[1], 0.025, 0.140);
  c.local_cache_blocks = 5;
  CHECK_THROWS_WITH(sim::des::simulate(t, c), Contains("give one"));
  c.local_cache_blocks = 0;
  c.sched.non_torch_reserve_gib = 1;
  CHECK_THROWS_WITH(sim::des::simulate(t, c), Contains("do not combine with a block count"));
}

TEST_CASE("engine memory: prefix caching off finds nothing, with the same capacity",
          "[engine_sched][engine_memory]") {
  const auto t = shared_prefix_trace(7, 60);
  for (const char* scheduler : {"vllm-v1", "sglang", "kvtk"}) {
    auto c = engine(scheduler, 40, 256);
    const auto on = sim::des::simulate(t, c);
    c.prefix_caching = false;
    const auto off = sim::des::simulate(t, c);
    INFO(scheduler);
    CHECK(on.summary["token_hits"].get<double>() > 0);
    CHECK(off.summary["token_hits"] == 0);
    CHECK(off.summary["engine_pages"]["prefix_caching"] == false);
    CHECK(off.summary["kv_capacity"]["blocks"] == 40);
    CHECK(off.summary["token_refs"] == on.summary["token_refs"]);
  }
}

TEST_CASE("engine pages: 16-token pages inside 32-token trace blocks, by hand",
          "[engine_sched][engine_memory]") {
  // The same 56-token prompt twice, the second after the first is done. In 32-token blocks its
  // cacheable part is one block (the second holds 24 tokens, partial): a hit of 32 tokens. In
  // 16-token pages it is 3 full pages (48 tokens) and a partial one: a hit of 48 tokens.
  prefix::prefix_trace t;
  t.block_tokens = 32;
  for (const double at : {0.0, 1.0}) {
    t.add(std::vector<block_key>{11, 12}, 56);
    t.arrival_s.push_back(at);
    t.output_length.push_back(1);
  }
  for (const char* scheduler : {"vllm-v1", "sglang", "kvtk"}) {
    INFO(scheduler);
    auto c = engine(scheduler, 10, 256);  // 10 trace blocks (kvtk: its local_cache)
    CHECK(sim::des::simulate(t, c).requests[1].hit_tokens == 32);
    c.page_tokens = 16;
    const auto r = sim::des::simulate(t, c);
    CHECK(r.requests[1].hit_tokens == 48);
    CHECK(r.requests[1].hit_blocks == 3);  // pages
    CHECK(r.summary["engine_pages"]["page_tokens"] == 16);
    CHECK(r.summary["engine_pages"]["pages_per_trace_block"] == 2);
    CHECK(r.summary["kv_capacity"]["blocks"] == 20);  // 10 trace blocks = 20 pages
    CHECK(r.summary["kv_capacity"]["block_tokens"] == 16);
  }
  auto c = engine("vllm-v1", 10, 256);
  c.page_tokens = 12;
  CHECK_THROWS_WITH(sim::des::simulate(t, c), Contains("must divide the trace's block size (32"));
  c.page_tokens = 64;
  CHECK_THROWS_WITH(sim::des::simulate(t, c), Contains("must divide"));
  c.page_tokens = 16;
  c.offload = "cpu:100";
  c.offload_medium = "cpu";
  CHECK_THROWS_WITH(sim::des::simulate(t, c), Contains("not modelled yet"));
}
