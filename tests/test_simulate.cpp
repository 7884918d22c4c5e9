// The discrete-event simulator: exact limits (zero time = order-only replay), in-flight misses,
// an M/D/1 queue against its formula, determinism, and the Mooncake Fig. 10 direction.
#include <catch2/catch.hpp>
#include <kvtk/kvtk.hpp>
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "cli/simulate.hpp"
#include "des/event_loop.hpp"
#include "des/outcomes.hpp"
#include "des/simulator.hpp"
#include "des/sparse_decode.hpp"
#include "formats/mooncake_flat.hpp"

namespace {

using namespace kvtk;
using sim::des::cluster_config;

const prefix::prefix_trace& trace(const char* name) {
  static std::map<std::string, prefix::prefix_trace> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    it = cache.emplace(name, sim::load_mooncake_requests(std::string(KVTK_TRACES_DIR "/") + name))
             .first;
  }
  return it->second;
}

cluster_config zero_time() {
  cluster_config c;
  c.cache_partial_block = true;  // the golden 60,921 counts partial blocks (Mooncake's rule)
  c.time_scale = 0;
  c.pool_bytes_per_s = 0;
  c.pool_latency_s = 0;
  c.pd_link_bytes_per_s = 0;
  return c;
}

}  // namespace

TEST_CASE("simulate with zero time and one instance equals kvtk replay", "[simulate]") {
  const auto& t = trace("mooncake_fast25_conversation_trace.jsonl");
  for (const char* policy : {"lru", "arc", "s3fifo"}) {
    cluster_config c = zero_time();
    c.local_cache_blocks = 10000;
    c.local_policy = policy;
    const auto res = sim::des::simulate(t, c);
    const auto want = visit_policy(policy, [&]<class P>() {
      prefix::flat_index<P> idx(10000);
      return prefix::replay(t, idx, prefix::partial_block::cache);
    });
    INFO(policy);
    CHECK(res.summary["block_hits"].get<std::uint64_t>() == want.block_hits);
    CHECK(res.summary["token_hits"].get<std::uint64_t>() == want.token_hits);
    CHECK(res.summary["inflight_miss_blocks"].get<std::uint64_t>() == 0);
  }
  // A global pool alone, seen by every instance, is one LRU cache of its size.
  cluster_config c = zero_time();
  c.prefill_instances = 4;
  c.pool_blocks = 10000;
  const auto res = sim::des::simulate(t, c);
  CHECK(res.summary["block_hits"].get<std::uint64_t>() == 60921);
  CHECK(res.summary["pool_block_hits"].get<std::uint64_t>() == 60921);
}

TEST_CASE("requests arriving while an identical prefix is prefilling miss in flight",
          "[simulate]") {
  // Pairs of identical 8-block requests arriving together, a new prefix per pair.
  prefix::prefix_trace t;
  t.block_tokens = 512;
  for (std::uint64_t pair = 0; pair < 50; ++pair) {
    std::vector<block_key> keys;
    for (std::uint64_t b = 0; b < 8; ++b) keys.push_back(pair * 100 + b);
    for (int copy = 0; copy < 2; ++copy) {
      t.add(keys, 8 * 512);
      t.arrival_s.push_back(static_cast<double>(pair) * 10.0);
      t.output_length.push_back(1);
    }
  }
  cluster_config c;
  c.local_cache_blocks = 100000;
  const auto slow = sim::des::simulate(t, c);
  CHECK(slow.summary["inflight_miss_blocks"].get<std::uint64_t>() == 50 * 8);
  CHECK(slow.summary["block_hits"].get<std::uint64_t>() == 0);
  c.time_scale = 0;
  const auto fast = sim::des::simulate(t, c);
  CHECK(fast.summary["inflight_miss_blocks"].get<std::uint64_t>() == 0);
  CHECK(fast.summary["block_hits"].get<std::uint64_t>() == 50 * 8);
}

TEST_CASE("an M/D/1 queue matches its mean waiting time", "[simulate]") {
  // No cache, equal requests (fixed service time D), Poisson arrivals at rho = 0.7:
  // W = rho * D / (2 (1 - rho)).
  cluster_config c;
  const std::uint64_t L = 4096;
  const double D =
      sim::des::prefill_flops(c.model, 0, L) / (c.gpu.tflops * 1e12 * c.gpu.compute_efficiency);
  const double rho = 0.7;
  std::mt19937_64 rng(5);
  std::exponential_distribution<double> gap(rho / D);
  prefix::prefix_trace t;
  t.block_tokens = 512;
  double now = 0;
  for (std::uint64_t r = 0; r < 200000; ++r) {
    std::vector<block_key> keys;
    for (std::uint64_t b = 0; b < L / 512; ++b) keys.push_back(r * 16 + b);
    t.add(keys, L);
    now += gap(rng);
    t.arrival_s.push_back(now);
    t.output_length.push_back(1);
  }
  const auto res = sim::des::simulate(t, c);
  const double want = rho * D / (2 * (1 - rho));
  const double got = res.summary["queueing_s"]["mean"].get<double>();
  INFO("D " << D << " want " << want << " got " << got);
  CHECK(std::abs(got - want) / want < 0.05);
  CHECK(res.summary["gpu_busy_fraction"].get<double>() == Approx(rho).epsilon(0.03));
}

TEST_CASE("same seed and config give byte-identical results", "[simulate]") {
  const auto& t = trace("mooncake_fast25_synthetic_trace.jsonl");
  for (const char* router : {"random", "cache-aware", "conductor", "least-loaded"}) {
    cluster_config c;
    c.prefill_instances = 4;
    c.decode_instances = 2;
    c.local_cache_blocks = 2000;
    c.pool_blocks = 20000;
    c.router = router;
    c.router_temperature = std::string(router) == "cache-aware" ? 2.0 : 0.0;
    c.seed = 9;
    const auto a = sim::des::simulate(t, c);
    const auto b = sim::des::simulate(t, c);
    INFO(router);
    CHECK(a.summary.dump() == b.summary.dump());
    CHECK(a.summary["tbt_s"]["mean"].get<double>() > 0);
  }
}

TEST_CASE("Mooncake Fig. 10: a global pool beats per-instance caches", "[simulate]") {
  // 10 prefill instances, 3M tokens of cache each (5,859 blocks) or one 30M-token pool, outputs
  // of one token. The paper: conversation 16.9% -> 37.5%, synthetic 26.4% -> 62.2%.
  for (const char* name :
       {"mooncake_fast25_conversation_trace.jsonl", "mooncake_fast25_synthetic_trace.jsonl"}) {
    const auto& t = trace(name);
    cluster_config local;
    local.model = sim::des::model_presets().at("llama-3-70b");
    local.gpu = sim::des::gpu_presets().at("a800");
    local.prefill_instances = 10;
    local.max_output_tokens = 1;
    local.local_cache_blocks = 3'000'000 / 512;
    cluster_config global = local;
    global.local_cache_blocks = 0;
    global.pool_blocks = 30'000'000 / 512;
    const double l = sim::des::simulate(t, local).summary["block_hit_ratio"].get<double>();
    const double g = sim::des::simulate(t, global).summary["block_hit_ratio"].get<double>();
    INFO(name << ": local " << l << ", global " << g);
    CHECK(g > 1.5 * l);
  }
}

TEST_CASE("cluster configs reject unknown keys and impossible values", "[simulate]") {
  auto from = [](nlohmann::json j, const std::vector<std::string>& sets) {
    return sim::cluster_config_from_json(j, 512, sets);
  };
  CHECK_THROWS_WITH(from({{"routr", "x"}}, {}), Catch::Contains("unknown key 'routr'"));
  CHECK_THROWS_WITH(from({{"gpu", "b300"}}, {}), Catch::Contains("unknown gpu 'b300'"));
  CHECK_THROWS_WITH(from({{"prefill_instances", -1}}, {}),
                    Catch::Contains("'prefill_instances' must be finite and >= 0"));
  CHECK_THROWS_WITH(from(nlohmann::json::object(), {"router"}),
                    Catch::Contains("is not key=value"));
  const auto c = from({{"local_cache", "3Mtok"}}, {"router=cache-aware", "prefill_instances=3"});
  CHECK(c.local_cache_blocks == 5859);
  CHECK(c.router == "cache-aware");
  CHECK(c.prefill_instances == 3);
  cluster_config bad;
  bad.router = "nearest";
  CHECK_THROWS_WITH(sim::des::simulate(trace("mooncake_fast25_synthetic_trace.jsonl"), bad),
                    Catch::Contains("unknown router 'nearest'"));
  // Found by the CI fuzz smoke (tests/fuzz/inputs/fuzz_simulate_config/crash-local-policy-
  // number.json): a number where a name belongs was an internal error (exit 70), not a usage one.
  CHECK_THROWS_WITH(from({{"local_policy", 128}}, {}), Catch::Contains("'local_policy' must be a string"));
  CHECK_THROWS_WITH(from({{"partial_block", 1}}, {}), Catch::Contains("'partial_block' must be"));
}

TEST_CASE("a per-node DRAM tier serves what HBM lost - SLO admission rejects", "[simulate]") {
  const auto& t = trace("mooncake_fast25_conversation_trace.jsonl");
  cluster_config c = zero_time();
  c.dram_blocks = 10000;  // DRAM alone = one LRU of its size
  c.gpu.host_link_bytes_per_s = 0;  // infinite bandwidth: the order-only limit
  auto res = sim::des::simulate(t, c);
  CHECK(res.summary["block_hits"].get<std::uint64_t>() == 60921);
  CHECK(res.summary["dram_block_hits"].get<std::uint64_t>() == 60921);
  c.local_cache_blocks = 1000;  // HBM in front: same hits (DRAM holds everything HBM does)
  res = sim::des::simulate(t, c);
  CHECK(res.summary["block_hits"].get<std::uint64_t>() == 60921);
  CHECK(res.summary["local_block_hits"].get<std::uint64_t>() > 0);

  cluster_config busy;
  busy.prefill_instances = 2;
  busy.local_cache_blocks = 5000;
  busy.ttft_slo_s = 2.0;
  const auto open = sim::des::simulate(t, busy);
  busy.reject_over_slo = true;
  const auto guarded = sim::des::simulate(t, busy);
  CHECK(guarded.summary["rejected"].get<std::uint64_t>() > 0);
  CHECK(guarded.summary["ttft_s"]["p99"].get<double>() <
        open.summary["ttft_s"]["p99"].get<double>());
}

TEST_CASE("chunked prefill lets colocated decoding run between chunks", "[simulate]") {
  // Long prompts and long answers on one colocated instance: whole-prompt prefills stall every
  // decoding request for the prompt's full prefill time; chunks bound the stall.
  prefix::prefix_trace t;
  t.block_tokens = 512;
  for (std::uint64_t r = 0; r < 200; ++r) {
    std::vector<block_key> keys;
    for (std::uint64_t b = 0; b < 64; ++b) keys.push_back(r * 1000 + b);
    t.add(keys, 64 * 512);
    t.arrival_s.push_back(static_cast<double>(r) * 1.0);  // prefills overlap decoding
    t.output_length.push_back(200);
  }
  cluster_config c;
  c.gpus_per_instance = 8;
  const auto whole = sim::des::simulate(t, c);
  c.chunk_tokens = 2048;
  const auto chunked = sim::des::simulate(t, c);
  const double gap_whole = whole.summary["token_gap_s"]["max"].get<double>();
  const double gap_chunked = chunked.summary["token_gap_s"]["max"].get<double>();
  INFO("longest gap between tokens: whole " << gap_whole << " s, chunked " << gap_chunked << " s");
  CHECK(gap_chunked < gap_whole / 4);
  CHECK(chunked.summary["block_hits"] == whole.summary["block_hits"]);
  CHECK(chunked.summary["ttft_s"]["p50"].get<double>() >= whole.summary["ttft_s"]["p50"].get<double>());
}

namespace {

// 64 requests of 16k-token prompts (256 pages of 64 tokens) and 300-token answers, arriving
// 0.2 s apart on one colocated instance.
prefix::prefix_trace sparse_trace() {
  prefix::prefix_trace t;
  t.block_tokens = 512;
  for (std::uint64_t r = 0; r < 64; ++r) {
    std::vector<block_key> keys;
    for (std::uint64_t b = 0; b < 32; ++b) keys.push_back(r * 1000 + b);
    t.add(keys, 32 * 512 - static_cast<std::uint32_t>(r));
    t.arrival_s.push_back(static_cast<double>(r) * 0.2);
    t.output_length.push_back(300);
  }
  return t;
}

cluster_config sparse_cluster() {
  cluster_config c;
  // The single efficiency these cases were written for (docs/simulate.md "Timing"): at the
  // memory efficiency 0.8 default, steps are short enough that the recalls of this trace no
  // longer hide behind them.
  c.gpu.compute_efficiency = c.gpu.memory_efficiency = 0.5;
  c.gpus_per_instance = 8;
  c.host_link_latency_s = 10e-6;
  c.host_link_per_block_s = 1e-6;
  c.sparse.enabled = true;  // dsa, 64-token pages, top 32 pages, 4096-token budget
  return c;
}

}  // namespace

TEST_CASE("sparse decode: recalls follow the pattern's drift and stall the step", "[simulate]") {
  const auto t = sparse_trace();
  auto sparse = [&](const cluster_config& c) {
    const auto res = sim::des::simulate(t, c);
    REQUIRE(res.summary.contains("sparse"));
    return res;
  };
  cluster_config c = sparse_cluster();
  c.sparse.drift = 0;
  c.sparse.persistence = 1;
  c.sparse.budget = kvtk::sparse::hbm_budget::in_blocks(c.sparse.top_k_pages);
  const auto stable = sparse(c);
  c.sparse.drift = 0.2;
  const auto drifting = sparse(c);
  const auto& s0 = stable.summary["sparse"];
  const auto& s1 = drifting.summary["sparse"];
  INFO("recalls: stable " << s0["recalls"] << ", drifting " << s1["recalls"]);
  // A fixed heavy set stays resident once the first step has evicted the rest of the prompt.
  CHECK(s0["recalls"].get<std::uint64_t>() == 0);
  CHECK(s1["recalls"].get<std::uint64_t>() > s0["recalls"].get<std::uint64_t>());
  CHECK(s1["stall_s"].get<double>() > 0);
  CHECK(s1["stalled_steps"].get<std::uint64_t>() > 0);
  CHECK(s1["steps"].get<std::uint64_t>() == 64 * 299);
  CHECK(s1["over_budget_steps"].get<std::uint64_t>() == 0);
  CHECK(s1["resident_pages"]["max"].get<std::uint32_t>() <= 32);
  CHECK(s1["recall_bytes"].get<double>() ==
        s1["recalls"].get<double>() * 64.0 * static_cast<double>(c.model.kv_bytes_per_token));

  // A budget larger than any context: nothing is ever offloaded, so nothing is recalled.
  c.sparse.budget = kvtk::sparse::hbm_budget::in_blocks(1'000'000);
  const auto roomy = sparse(c);
  CHECK(roomy.summary["sparse"]["recalls"].get<std::uint64_t>() == 0);
  CHECK(roomy.summary["sparse"]["stall_s"].get<double>() == 0);
  CHECK(roomy.summary["sparse"]["stalled_steps"].get<std::uint64_t>() == 0);

  // A slower host link: the same recalls (each request's pattern is its own) cost more stall.
  c.sparse.budget = kvtk::sparse::hbm_budget::in_tokens(4096);
  const auto fast = sparse(c);
  c.gpu.host_link_bytes_per_s /= 10;
  const auto slow = sparse(c);
  CHECK(slow.summary["sparse"]["recalls"] == fast.summary["sparse"]["recalls"]);
  CHECK(slow.summary["sparse"]["stall_s"].get<double>() >
        5 * fast.summary["sparse"]["stall_s"].get<double>());
  CHECK(slow.summary["tbt_s"]["mean"].get<double>() > fast.summary["tbt_s"]["mean"].get<double>());
  std::uint64_t per_request = 0;
  for (const auto& o : slow.requests) per_request += o.recalls;
  CHECK(per_request == slow.summary["sparse"]["recalls"].get<std::uint64_t>());

  // Sparse steps read the selected pages only: less KV than the dense decode reads.
  cluster_config dense = c;
  dense.sparse.enabled = false;
  const auto d = sim::des::simulate(t, dense);
  CHECK_FALSE(d.summary.contains("sparse"));
  CHECK(slow.summary["sparse"]["decode_kv_read_bytes"].get<double>() > 0);
  INFO("mean TBT: dense " << d.summary["tbt_s"]["mean"] << ", sparse "
                          << fast.summary["tbt_s"]["mean"]);
  CHECK(fast.summary["tbt_s"]["mean"].get<double>() < d.summary["tbt_s"]["mean"].get<double>());
}

TEST_CASE("sparse decode under the engine schedulers: selected pages only, recalls stall", "[simulate]") {
  // The same sparse model as kvtk's scheduler (one decoder, one clock per instance), inside the
  // engine schedulers' iterations: the decode part reads the selected pages, and recalls and
  // prefetches cross the instance's host link.
  const auto t = sparse_trace();
  for (const char* s : {"vllm-v0", "vllm-v1", "sglang"}) {
    INFO(s);
    cluster_config c = sparse_cluster();
    c.sched.scheduler = s;
    c.local_cache_blocks = 4096;  // deepseek-v3's weights fill 8 GPUs: the KV cache is given
    c.sparse.drift = 0;
    c.sparse.persistence = 1;
    c.sparse.budget = kvtk::sparse::hbm_budget::in_blocks(c.sparse.top_k_pages);
    const auto stable = sim::des::simulate(t, c);
    c.sparse.drift = 0.2;
    const auto drifting = sim::des::simulate(t, c);
    REQUIRE(stable.summary.contains("sparse"));
    REQUIRE(drifting.summary.contains("sparse"));
    REQUIRE(drifting.summary["preemptions"] == 0);
    const auto& s0 = stable.summary["sparse"];
    const auto& s1 = drifting.summary["sparse"];
    CHECK(s0["recalls"].get<std::uint64_t>() == 0);
    CHECK(s1["recalls"].get<std::uint64_t>() > 0);
    CHECK(s1["stall_s"].get<double>() > 0);
    // Every output token after the first is one decode step of one request.
    CHECK(s1["steps"].get<std::uint64_t>() == 64 * 299);
    CHECK(s1["over_budget_steps"].get<std::uint64_t>() == 0);
    std::uint64_t per_request = 0;
    double stalled = 0;
    for (const auto& o : drifting.requests) {
      per_request += o.recalls;
      stalled += o.stall_s;
    }
    CHECK(per_request == s1["recalls"].get<std::uint64_t>());
    CHECK(stalled >= s1["stall_s"].get<double>());  // each batch's stall, on each of its requests
    cluster_config dense = c;
    dense.sparse.enabled = false;
    const auto d = sim::des::simulate(t, dense);
    CHECK_FALSE(d.summary.contains("sparse"));
    INFO("mean TBT: dense " << d.summary["tbt_s"]["mean"] << ", sparse "
                            << drifting.summary["tbt_s"]["mean"]);
    CHECK(drifting.summary["tbt_s"]["mean"].get<double>() < d.summary["tbt_s"]["mean"].get<double>());
    // Identical inputs, identical runs.
    CHECK(sim::des::simulate(t, c).summary == drifting.summary);
    // Under memory pressure requests are preempted: their pages go with their blocks, they
    // decode again with fresh state, and every count still adds up. (SGLang's admission holds
    // back the running requests' remaining output, so it does not preempt here.)
    if (std::string(s) == "sglang") continue;
    c.local_cache_blocks = 97;  // three prompts of 32 blocks; their decodes need a block each
    const auto tight = sim::des::simulate(t, c);
    REQUIRE(tight.summary["preemptions"].get<std::uint64_t>() > 0);
    const auto& s2 = tight.summary["sparse"];
    std::uint64_t tight_recalls = 0;
    for (const auto& o : tight.requests) tight_recalls += o.recalls;
    CHECK(tight_recalls == s2["recalls"].get<std::uint64_t>());
    CHECK(s2["steps"].get<std::uint64_t>() > 0);
    CHECK(s2["steps"].get<std::uint64_t>() <= 64 * 299);
    CHECK(s2["over_budget_steps"].get<std::uint64_t>() == 0);
  }
}

TEST_CASE("sparse decode: next-step prefetch hides recalls - runs are deterministic", "[simulate]") {
  const auto t = sparse_trace();
  cluster_config c = sparse_cluster();
  c.sparse.drift = 0.2;
  c.sparse.prefetch_next_step = true;
  c.sparse.scorer = "h2o";
  const auto a = sim::des::simulate(t, c);
  const auto b = sim::des::simulate(t, c);
  CHECK(a.summary.dump() == b.summary.dump());
  const auto& s = a.summary["sparse"];
  // The selection prefetched is the one the next step uses (generated ahead), so every load is
  // a prefetch hit and no selected page has to be recalled.
  CHECK(s["recalls"].get<std::uint64_t>() == 0);
  CHECK(s["prefetches_issued"].get<std::uint64_t>() > 0);
  CHECK(s["prefetch_hits"] == s["prefetches_issued"]);
  CHECK(s["wasted_prefetches"].get<std::uint64_t>() == 0);
  CHECK(s["stall_s"].get<double>() == 0);  // a few pages per step fit in a step
  // A link too slow to hide them: the excess stalls the next step.
  c.gpu.host_link_bytes_per_s = 1e8;
  const auto slow = sim::des::simulate(t, c);
  CHECK(slow.summary["sparse"]["recalls"].get<std::uint64_t>() == 0);
  CHECK(slow.summary["sparse"]["stall_s"].get<double>() > 0);
  // Another seed, another pattern.
  c.sparse.seed = 2;
  CHECK(sim::des::simulate(t, c).summary["sparse"].dump() != slow.summary["sparse"].dump());
}

TEST_CASE("the sparse config object: defaults, units and errors", "[simulate]") {
  auto from = [](nlohmann::json j, const std::vector<std::string>& sets = {}) {
    return sim::cluster_config_from_json(j, 512, sets);
  };
  CHECK_FALSE(from(nlohmann::json::object()).sparse.enabled);
  auto c = from({{"sparse", nlohmann::json::object()}});
  CHECK(c.sparse.enabled);
  CHECK(c.sparse.pattern == "dsa");
  CHECK(c.sparse.page_tokens == 64);
  CHECK(c.sparse.top_k_pages == 32);
  CHECK(c.sparse.budget.kind == kvtk::sparse::hbm_budget::unit::tokens);
  CHECK(c.sparse.budget.amount == 4096);
  CHECK(c.sparse.scorer == "selection-lru");
  CHECK_FALSE(c.sparse.prefetch_next_step);
  c = from({{"sparse", {{"pattern", "quest"}, {"budget", "25%"}, {"prefetch", "next-step"}}}},
           {"sparse.budget=\"25%\"", "sparse.drift=0.1"});
  CHECK(c.sparse.page_tokens == 16);
  CHECK(c.sparse.budget.kind == kvtk::sparse::hbm_budget::unit::context_fraction);
  CHECK(c.sparse.budget.amount == 0.25);
  CHECK(c.sparse.prefetch_next_step);
  CHECK(c.sparse.drift == 0.1);
  c = from({{"sparse", {{"budget", 100}}}});
  CHECK(c.sparse.budget.kind == kvtk::sparse::hbm_budget::unit::blocks);
  CHECK_FALSE(from({{"sparse", nullptr}}).sparse.enabled);
  using Catch::Contains;
  CHECK_THROWS_WITH(from({{"sparse", {{"pattern", "nsa"}}}}), Contains("'sparse.pattern'"));
  CHECK_THROWS_WITH(from({{"sparse", {{"scorer", "lfu"}}}}), Contains("unknown scorer 'lfu'"));
  CHECK_THROWS_WITH(from({{"sparse", {{"prefetch", "always"}}}}), Contains("'sparse.prefetch'"));
  CHECK_THROWS_WITH(from({{"sparse", {{"budget", 0}}}}), Contains("'sparse.budget'"));
  CHECK_THROWS_WITH(from({{"sparse", {{"budget", "0tok"}}}}), Contains("'sparse.budget'"));
  CHECK_THROWS_WITH(from({{"sparse", {{"budget", "120%"}}}}), Contains("'sparse.budget'"));
  CHECK_THROWS_WITH(from({{"sparse", {{"drift", 1.5}}}}), Contains("'sparse.drift'"));
  CHECK_THROWS_WITH(from({{"sparse", {{"persistence", -0.5}}}}), Contains("'sparse.persistence'"));
  CHECK_THROWS_WITH(from({{"sparse", {{"page_tokens", 0}}}}), Contains("'sparse.page_tokens'"));
  CHECK_THROWS_WITH(from({{"sparse", {{"pages", 3}}}}), Contains("unknown key 'sparse.pages'"));
  CHECK_THROWS_WITH(from({{"sparse", 1}}), Contains("'sparse' must be an object"));
  cluster_config bad = sparse_cluster();
  bad.sparse.scorer = "nope";
  CHECK_THROWS_WITH(sim::des::simulate(sparse_trace(), bad), Contains("unknown scorer 'nope'"));
}

TEST_CASE("layer-ahead recall stall: the first layer's share is exposed, the rest hide", "[simulate]") {
  using kvtk::sparse::layer_ahead_stall;
  // 1 s transfer with 0.1 s fixed cost over 4 layers of a 0.5 s step: each share 0.325 s, each
  // layer computes 0.125 s, so 0.325 + 3 * 0.2 = 0.925 s.
  CHECK(layer_ahead_stall(1.0, 0.1, 0.5, 4) == Approx(0.925));
  // A small transfer hides entirely but for the first share.
  CHECK(layer_ahead_stall(0.2, 0.0, 1.0, 4) == Approx(0.05));
  // One layer: nothing to overlap with.
  CHECK(layer_ahead_stall(0.3, 0.01, 5.0, 1) == Approx(0.3));
  CHECK(layer_ahead_stall(0.0, 0.01, 5.0, 8) == 0.0);
}

TEST_CASE("one tier model: a zero-time simulation equals replay --tiers exactly", "[simulate][tier]") {
  // The instance's HBM cache and DRAM tier are a tier_hierarchy (inclusive, written through):
  // with no time for anything (compute, links), one instance sees the requests one after
  // another, as `kvtk replay --tiers hbm:H:P,dram:D:lru --inclusive --write-policy
  // write-through` does. Every hit and every DRAM hit must agree.
  const auto& t = trace("mooncake_fast25_conversation_trace.jsonl");
  struct shape {
    std::uint64_t hbm, dram;
    const char* policy;
  };
  for (const shape s : {shape{1000, 3000, "lru"}, shape{2500, 7500, "lru"}, shape{2000, 20000, "s3fifo"},
                        shape{3000, 3000, "arc"}, shape{5000, 0, "lfu"}, shape{0, 10000, "lru"},
                        shape{500, 600, "sieve"}}) {
    INFO(s.hbm << " HBM blocks (" << s.policy << ") over " << s.dram << " DRAM blocks");
    cluster_config c = zero_time();
    c.cache_partial_block = false;
    c.local_cache_blocks = s.hbm;
    c.local_policy = s.policy;
    c.dram_blocks = s.dram;
    c.gpu.host_link_bytes_per_s = 0;
    const auto sim_res = sim::des::simulate(t, c);

    tier::hierarchy_config h;
    if (s.hbm > 0) h.tiers.push_back({.name = "hbm", .capacity_blocks = s.hbm, .policy = s.policy});
    if (s.dram > 0) h.tiers.push_back({.name = "dram", .capacity_blocks = s.dram, .policy = "lru"});
    h.mode = tier::inclusion::inclusive;
    h.write.kind = tier::write_policy::write_through;
    tier::tier_index<> idx(h);
    const prefix::prefix_counts rep = prefix::replay(t, idx, prefix::partial_block::skip);
    CHECK(sim_res.summary["block_refs"].get<std::uint64_t>() == rep.block_refs);
    CHECK(sim_res.summary["block_hits"].get<std::uint64_t>() == rep.block_hits);
    const std::size_t dram_tier = s.hbm > 0 ? 1 : 0;
    const std::uint64_t rep_dram = s.dram > 0 ? idx.hierarchy().counters(dram_tier).hits : 0;
    CHECK(sim_res.summary["dram_block_hits"].get<std::uint64_t>() == rep_dram);
  }
}

TEST_CASE("the event loop: time, then kind, then push order - arrivals streamed or queued alike",
          "[simulate][event_loop]") {
  namespace d = sim::des::detail;
  enum class kind : std::uint8_t { early, arrival, late };
  prefix::prefix_trace t;
  t.block_tokens = 16;
  for (double at : {0.0, 1.0, 1.0, 2.0}) {
    t.add(std::vector<block_key>{1}, 16);
    t.arrival_s.push_back(at);
  }
  const prefix::prefix_trace_view v = t.view();
  auto order = [&](bool queue_all) {
    sim::des::simulation_hooks hooks;
    hooks.queue_all_arrivals = queue_all;
    d::event_queue<kind> q(v);
    q.start(hooks);
    q.push(1.0, kind::late, 7, 0);
    q.push(1.0, kind::early, 8, 0);
    q.push(2.0, kind::early, 9, 0);
    q.push(1.0, kind::early, 10, 0);  // same time and kind as instance 8: after it
    std::vector<std::string> seen;
    d::basic_event<kind> e;
    while (q.next(e)) {
      seen.push_back(std::to_string(e.t).substr(0, 3) +
                     (e.kind == kind::arrival ? " arrival " + std::to_string(e.request)
                      : e.kind == kind::early ? " early " + std::to_string(e.instance)
                                              : " late " + std::to_string(e.instance)));
    }
    return seen;
  };
  const std::vector<std::string> want = {"0.0 arrival 0", "1.0 early 8", "1.0 early 10",
                                         "1.0 arrival 1", "1.0 arrival 2", "1.0 late 7",
                                         "2.0 early 9",  "2.0 arrival 3"};
  CHECK(order(false) == want);
  CHECK(order(true) == want);
}

TEST_CASE("one latency distribution: rank min(n-1, floor(p n)), exact then bucketed",
          "[simulate]") {
  sim::des::detail::latency_stats s;
  for (double v : {4.0, 1.0, 3.0, 2.0}) s.add(v);
  CHECK(s.quantile(0.5) == 3.0);   // rank 2 of 1 2 3 4
  CHECK(s.quantile(0.25) == 2.0);  // rank 1
  CHECK(s.quantile(0.99) == 4.0);  // rank min(3, 3)
  const auto tail = s.tail_json();
  CHECK(tail["p999"] == 4.0);
  CHECK(tail["max"] == 4.0);
  CHECK(tail["count"] == 4);
  // Past exact_limit values, the bucket's upper edge: within 1 % above the exact value.
  sim::des::detail::latency_stats big;
  std::vector<double> all;
  for (std::size_t i = 0; i < sim::des::detail::latency_stats::exact_limit + 1000; ++i) {
    all.push_back(0.001 * static_cast<double>(1 + i % 977));
    big.add(all.back());
  }
  CHECK_FALSE(big.exact());
  std::sort(all.begin(), all.end());
  for (double p : {0.5, 0.9, 0.99, 0.999}) {
    const double exact = all[std::min(all.size() - 1, static_cast<std::size_t>(p * all.size()))];
    CHECK(big.quantile(p) >= exact);
    CHECK(big.quantile(p) <= exact * 1.01);
  }
}

TEST_CASE("progress reaches the total once, through the one ticker", "[simulate][event_loop]") {
  const auto& t = trace("mooncake_fast25_conversation_trace.jsonl");
  for (const char* s : {"kvtk", "vllm-v1"}) {
    INFO("scheduler " << s);
    cluster_config c;
    c.sched.scheduler = s;
    c.model = sim::des::model_presets().at("qwen2.5-7b");
    c.local_cache_blocks = 2000;
    std::vector<std::uint64_t> done;
    sim::des::simulation_hooks hooks;
    hooks.progress = [&](std::uint64_t n, std::uint64_t total) {
      CHECK(total == t.view().requests());
      done.push_back(n);
    };
    (void)sim::des::simulate(t.view(), c, hooks);
    REQUIRE(!done.empty());
    CHECK(std::is_sorted(done.begin(), done.end()));
    CHECK(std::adjacent_find(done.begin(), done.end()) == done.end());  // never twice the same
    CHECK(done.back() == t.view().requests());
    CHECK(done.size() <= 300);  // about 256 reports, not one per request
  }
}
