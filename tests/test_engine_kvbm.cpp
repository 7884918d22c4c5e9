// Dynamo KVBM 1.6.1 under simulate's vllm-v1 scheduler (engine_sched.cpp, `offload`
// "kvbm:..."): equal to replay's dynamo_kvbm one request at a time, a hand-computed load from
// host and disk, and a busy two-instance run whose every request ends.
#include <catch2/catch.hpp>

#include "engine_sched_fixture.hpp"

using namespace engine_sched_fixture;

namespace {

// vLLM's scheduler over KVBM's G2 (host) and G3 (disk) of the given sizes (blocks).
cluster_config kvbm(std::uint64_t gpu_blocks, std::uint64_t budget, std::uint32_t host,
                    std::uint32_t disk, bool filter = true) {
  auto c = engine("vllm-v1", gpu_blocks, budget);
  c.offload = "kvbm:" + std::to_string(host) + ",disk=" + std::to_string(disk);
  c.offload_medium = "kvbm";
  c.kvbm_cfg.host_blocks = host;
  c.kvbm_cfg.disk_blocks = disk;
  c.kvbm_cfg.disk_filter = filter;
  c.kvbm_cfg.gpu_blocks = 1;  // unused: the scheduler's pool is the GPU's
  return c;
}

}  // namespace

TEST_CASE("KVBM under vllm-v1 with free compute and one output token equals replay --engine "
          "vllm --offload kvbm", "[engine_sched][kvbm]") {
  // One request at a time to completion: lookup, onboarding, the prompt's write-through and the
  // host -> disk worker run in the order dynamo_kvbm's run_request runs them, and the filter's
  // clock reads the same instants (each request ends at its arrival), so every count must agree.
  struct tiers {
    std::uint32_t host, disk;
    bool filter;
    double flush_s;
  };
  for (std::uint64_t seed : {1, 2}) {
    const auto t = shared_prefix_trace(seed, 300);
    for (const std::uint32_t gpu : {24u, 60u}) {
      for (const tiers k : {tiers{40, 0, true, 600}, tiers{20, 60, true, 600}, tiers{20, 60, true, 7},
                            tiers{20, 60, false, 600}, tiers{0, 50, true, 600}}) {
        INFO("seed " << seed << ", " << gpu << " GPU blocks, host " << k.host << ", disk " << k.disk
                     << ", filter " << k.filter << ", flush " << k.flush_s << " s");
        tier::dynamo_kvbm_config kc;
        kc.gpu_blocks = gpu;
        kc.host_blocks = k.host;
        kc.disk_blocks = k.disk;
        kc.disk_filter = k.filter;
        kc.flush_interval_s = k.flush_s;
        tier::dynamo_kvbm_index idx(kc);
        const auto want = prefix::replay(t, idx, prefix::partial_block::skip);
        auto c = kvbm(gpu, 4096, k.host, k.disk, k.filter);
        c.kvbm_cfg.flush_interval_s = k.flush_s;
        c.timing = nullptr;
        c.time_scale = 0;
        c.max_output_tokens = 1;
        c.gpu.host_link_bytes_per_s = 0;
        c.disk_latency_s = 0;
        c.disk_bytes_per_s = 1e300;
        const auto r = sim::des::simulate(t, c);
        const auto& w = idx.counters();
        REQUIRE(w.unscheduled == 0);
        CHECK(r.summary["block_hits"] == want.block_hits);
        CHECK(r.summary["token_hits"] == want.token_hits);
        CHECK(r.summary["dram_block_hits"] == w.host_hit_blocks + w.disk_hit_blocks);
        const auto& o = r.summary["offload"];
        CHECK(o["gpu_hit_blocks"] == w.gpu_hit_blocks);
        CHECK(o["offered_blocks"] == w.offered_blocks);
        if (k.host > 0) {
          const auto& h = o["host"];
          CHECK(h["hit_blocks"] == w.host_hit_blocks);
          CHECK(h["stored_blocks"] == w.host_stored_blocks);
          CHECK(h["duplicate_blocks"] == w.host_duplicate_blocks);
          CHECK(h["dropped_blocks"] == w.host_dropped_blocks);
          CHECK(h["evictions"] == w.host_evictions);
          CHECK(h["blocks_resident_at_end"] == idx.kvbm().host_resident());
          if (gpu == 24) CHECK(w.host_hit_blocks > 0);
        }
        if (k.disk > 0) {
          const auto& d = o["disk"];
          CHECK(d["hit_blocks"] == w.disk_hit_blocks);
          CHECK(d["stored_blocks"] == w.disk_stored_blocks);
          CHECK(d["present_skips"] == w.disk_present_skips);
          CHECK(d["filter_skips"] == w.filter_skips);
          CHECK(d["dropped_blocks"] == w.disk_dropped_blocks);
          CHECK(d["evictions"] == w.disk_evictions);
          CHECK(d["blocks_resident_at_end"] == idx.kvbm().disk_resident());
          if (gpu == 24 && k.flush_s > 100) CHECK(w.disk_hit_blocks > 0);
        }
      }
    }
  }
}

TEST_CASE("KVBM under vllm-v1: a load from host and disk waits for the slower link",
          "[engine_sched][kvbm]") {
  // The GPU holds 7 blocks (a 72-token prompt takes 5). Each prompt's 4 full blocks are written
  // through to the host (8 blocks) and, with the filter off, to disk. Requests 1 and 2 push
  // request 0's blocks out of the GPU, and request 2's out of the host ({1..4, 11..14} becomes
  // {11..14, 21..24}); so request 3, a repeat of request 0, loads all 4 from disk, which kept
  // everything: 0.25 s + 4 x 0.2 s, while request 4, arriving with it, is prefilled at once.
  const auto t = make({{0, {1, 2, 3, 4}, 1, 72},
                       {1, {11, 12, 13, 14}, 1, 72},
                       {2, {21, 22, 23, 24}, 1, 72},
                       {3, {1, 2, 3, 4}, 1, 72},
                       {3, {31, 32}, 1, 32}});
  auto c = kvbm(7, 4096, 8, 100, false);
  c.host_link_latency_s = 0.5;
  c.host_link_per_block_s = 0.1;
  c.disk_latency_s = 0.25;
  c.disk_bytes_per_s = 16.0 * static_cast<double>(c.model.kv_bytes_per_token) / 0.2;  // 0.2 s a block
  const auto r = sim::des::simulate(t, c);
  const auto& o = r.requests[3];
  CHECK(o.hit_blocks == 4);
  CHECK(o.dram_blocks == 4);
  const double disk = 0.25 + 4 * 0.2;
  check(o, 3 + disk + 0.010, 3 + disk + 0.010);
  check(r.requests[4], 3.010, 3.010);  // admitted behind the loading request, at once
  const auto& s = r.summary["offload"];
  CHECK(s["loads"] == 1);
  CHECK(s["disk"]["hit_blocks"] == 4);
  CHECK(s["host"]["hit_blocks"] == 0);
  CHECK(s["load_wait_s_mean"].get<double>() == Approx(disk));
  // Every prompt's full blocks offered once (4 + 4 + 4 + 2; request 3's were loaded, not
  // offered), each new to the host and to disk.
  CHECK(s["offered_blocks"] == 14);
  CHECK(s["host"]["stored_blocks"] == 14);
  CHECK(s["disk"]["stored_blocks"] == 14);

  // A host of 16 blocks keeps request 0's blocks: the same load crosses the host link instead.
  auto h = kvbm(7, 4096, 16, 100, false);
  h.host_link_latency_s = 0.5;
  h.host_link_per_block_s = 0.1;
  const double block_bytes = 16.0 * static_cast<double>(c.model.kv_bytes_per_token);
  const double host = 0.5 + 0.4 + 4 * block_bytes / h.gpu.host_link_bytes_per_s;
  const auto rh = sim::des::simulate(t, h);
  CHECK(rh.summary["offload"]["host"]["hit_blocks"] == 4);
  CHECK(rh.summary["offload"]["disk"]["hit_blocks"] == 0);
  check(rh.requests[3], 3 + host + 0.010, 3 + host + 0.010);
}

TEST_CASE("KVBM under vllm-v1: host and disk loads queue on their own links", "[engine_sched][kvbm]") {
  // GPU 10 blocks, host 12, disk unbounded (filter off). Four prompts of 4 full blocks fill the
  // host so that request 0's blocks leave it (but not the disk) and requests 0's and 1's leave the
  // GPU. At t = 3 request 4 (a repeat of 0) loads 4 blocks from disk (0.25 s + 4 x 0.2 s) while
  // request 5 (a repeat of 1) loads 4 from the host (0.5 s + 4 x 0.1 s + bytes): neither waits
  // for the other's link.
  const auto t = make({{0, {1, 2, 3, 4}, 1, 72},
                       {1, {11, 12, 13, 14}, 1, 72},
                       {2, {21, 22, 23, 24}, 1, 72},
                       {2.5, {31, 32, 33, 34}, 1, 72},
                       {3, {1, 2, 3, 4}, 1, 72},
                       {3, {11, 12, 13, 14}, 1, 72}});
  auto c = kvbm(10, 4096, 12, 100, false);
  c.host_link_latency_s = 0.5;
  c.host_link_per_block_s = 0.1;
  const double block_bytes = 16.0 * static_cast<double>(c.model.kv_bytes_per_token);
  c.disk_latency_s = 0.25;
  c.disk_bytes_per_s = block_bytes / 0.2;
  const double disk = 0.25 + 4 * 0.2;
  const double host = 0.5 + 0.4 + 4 * block_bytes / c.gpu.host_link_bytes_per_s;
  const auto r = sim::des::simulate(t, c);
  CHECK(r.requests[4].dram_blocks == 4);
  CHECK(r.requests[5].dram_blocks == 4);
  check(r.requests[4], 3 + disk + 0.010, 3 + disk + 0.010);
  check(r.requests[5], 3 + host + 0.010, 3 + host + 0.010);
  const auto& s = r.summary["offload"];
  CHECK(s["disk"]["hit_blocks"] == 4);
  CHECK(s["host"]["hit_blocks"] == 4);
  CHECK(s["disk"]["bytes_read"].get<double>() == Approx(4 * block_bytes));
  CHECK(s["load_wait_s_mean"].get<double>() == Approx((disk + host) / 2));
}

TEST_CASE("KVBM under vllm-v1: a chunked prefill offers each step's completed blocks",
          "[engine_sched][kvbm]") {
  // A 72-token prompt under a 32-token budget: steps of 32, 32 and 8 tokens offer 2, 2 and 0
  // blocks, each batch fitting the 3-block host (one batch of 4 would be dropped whole); a
  // second identical request 1 s later finds all 4 in the GPU (7 blocks hold them).
  const auto t = make({{0, {1, 2, 3, 4}, 1, 72}, {1, {1, 2, 3, 4}, 1, 72}});
  auto c = kvbm(7, 32, 3, 0);
  c.offload = "kvbm:3";
  const auto r = sim::des::simulate(t, c);
  const auto& s = r.summary["offload"];
  CHECK(s["offered_blocks"] == 4);
  CHECK(s["host"]["stored_blocks"] == 4);
  CHECK(s["host"]["dropped_blocks"] == 0);
  CHECK(s["host"]["evictions"] == 1);
  CHECK(s["gpu_hit_blocks"] == 4);
  CHECK(r.requests[1].hit_blocks == 4);
  CHECK(s["loads"] == 0);
}

TEST_CASE("KVBM under vllm-v1: a preempted request's recomputed blocks are offered again",
          "[engine_sched][kvbm]") {
  // 5 GPU blocks of 16 tokens. A: prompt {1, 2}, 40 outputs (5 blocks at its end); B: prompt
  // {7, 8}, 20 outputs, arriving while A prefills. When both decode past their second block, B
  // (the newest) is preempted, and A's growth takes every block, B's cached ones too; B comes
  // back after A and recomputes both. KVBM resets B's slot at the preemption, so both are
  // offered again. The host holds one block, so every 2-block batch is dropped and B finds
  // nothing to load: the offers are A's 2 and B's 2 twice.
  const auto t = make({{0, {1, 2}, 40}, {0.001, {7, 8}, 20}});
  auto c = kvbm(5, 1000, 1, 0);
  c.offload = "kvbm:1";
  const auto r = sim::des::simulate(t, c);
  CHECK(r.summary["preemptions"] == 1);
  const auto& s = r.summary["offload"];
  CHECK(s["offered_blocks"] == 6);
  CHECK(s["host"]["dropped_batches"] == 3);
  CHECK(s["loads"] == 0);
}

TEST_CASE("KVBM under vllm-v1 on two busy instances: every request ends", "[engine_sched][kvbm]") {
  // 500 requests 5 ms apart against 10-ms prefills on small pools: loads overlap other
  // requests' steps, preemptions recompute, the filter sees blocks twice.
  const auto t = shared_prefix_trace(11, 500);
  prefix::prefix_trace busy;
  busy.block_tokens = 16;
  for (std::size_t r = 0; r < t.requests(); ++r) {
    const auto k = t.cacheable(r, prefix::partial_block::skip);
    busy.add(std::vector<block_key>(k.begin(), k.end()), t.input_tokens(r));
    busy.arrival_s.push_back(0.005 * static_cast<double>(r));
    busy.output_length.push_back(t.output_length[r]);
  }
  for (const bool filter : {true, false}) {
    auto c = kvbm(30, 48, 20, 60, filter);
    c.prefill_instances = 2;
    c.host_link_latency_s = 0.003;
    c.disk_latency_s = 0.006;
    const auto r = sim::des::simulate(busy, c);
    CHECK(r.summary["requests"] == 500);
    CHECK(r.summary["rejected"] == 0);
    const auto& s = r.summary["offload"];
    CHECK(s["host"]["hit_blocks"].get<std::uint64_t>() > 0);
    CHECK(s["disk"]["hit_blocks"].get<std::uint64_t>() > 0);
    CHECK(r.summary["preemptions"].get<std::uint64_t>() > 0);
  }
}

TEST_CASE("KVBM under simulate: configurations it cannot run are refused by name", "[engine_sched][kvbm]") {
  const auto t = make({{0, {1, 2}, 3}});
  for (const char* s : {"vllm-v0", "sglang", "kvtk"}) {
    auto c = kvbm(100, 40, 10, 0);
    c.sched.scheduler = s;
    CHECK_THROWS_WITH(sim::des::simulate(t, c), Catch::Contains("kvbm") && Catch::Contains("vllm-v1"));
  }
  auto c = kvbm(100, 40, 0, 0);
  CHECK_THROWS_WITH(sim::des::simulate(t, c), Catch::Contains("give a host or a disk tier"));
  c = kvbm(100, 40, 10, 10);
  c.dram_blocks = 5;
  CHECK_THROWS_WITH(sim::des::simulate(t, c), Catch::Contains("does not combine with dram"));
  c.dram_blocks = 0;
  c.disk_bytes_per_s = 0;
  CHECK_THROWS_WITH(sim::des::simulate(t, c), Catch::Contains("disk rate"));
}
