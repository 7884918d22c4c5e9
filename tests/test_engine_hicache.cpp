// SGLang HiCache under kvtk simulate's sglang scheduler (sim/des/engine_kv_hicache.hpp): one
// request at a time it counts exactly as `kvtk replay --engine sglang --offload host:...`
// (kvtk::tier::sglang_hicache, checked against SGLang's own code); hand-computed cases pin the
// load's time on the host link and the hit counting across a request's checkpoints.
#include <catch2/catch.hpp>
#include <kvtk/kvtk.hpp>
#include <string>

#include "des/engine_sched.hpp"
#include "des/simulator.hpp"
#include "engine_sched_fixture.hpp"

using namespace kvtk;
using namespace engine_sched_fixture;
using sim::des::cluster_config;

namespace {

cluster_config hicache(std::uint64_t device_pages, std::uint32_t host_pages,
                       tier::hicache_write_policy p = tier::hicache_write_policy::write_through) {
  auto c = engine("sglang", device_pages, 4096);
  c.sched.schedule_policy = "fcfs";
  c.offload = "host:" + std::to_string(host_pages) + ",write_policy=" + tier::name_of(p);
  c.offload_medium = "host";
  c.hicache_cfg.host_pages = host_pages;
  c.hicache_cfg.policy = p;
  return c;
}

// vLLM's scheduler over LMCache's CPU backend of `chunks` chunks (one GPU block each, LRU).
cluster_config lmcache(std::uint64_t gpu_blocks, std::uint64_t budget, std::uint32_t chunks) {
  auto c = engine("vllm-v1", gpu_blocks, budget);
  c.offload = "lmcache-cpu:" + std::to_string(chunks);
  c.offload_medium = "lmcache-cpu";
  c.lmcache_cfg.cpu_chunks = chunks;
  c.lmcache_cfg.gpu_blocks = 1;  // unused: the scheduler's pool is the GPU's
  return c;
}

}  // namespace

TEST_CASE("HiCache under sglang with free compute and one output token equals replay --engine "
          "sglang --offload host", "[engine_sched][hicache]") {
  // One request at a time to completion: match, load back, insert and the backups happen in
  // the order sglang_hicache's run_request runs them, so every count must agree.
  for (std::uint64_t seed : {1, 2, 3}) {
    const auto t = shared_prefix_trace(seed, 300);
    for (const std::uint32_t device : {24u, 60u}) {
      for (const std::uint32_t host : {10u, 40u, 400u}) {
        for (const auto p : {tier::hicache_write_policy::write_through,
                             tier::hicache_write_policy::write_through_selective,
                             tier::hicache_write_policy::write_back}) {
          INFO("seed " << seed << ", " << device << " device pages, " << host << " host, " << tier::name_of(p));
          tier::sglang_hicache_config hc;
          hc.device_pages = device;
          hc.host_pages = host;
          hc.policy = p;
          tier::sglang_hicache_index idx(hc);
          const auto want = prefix::replay(t, idx, prefix::partial_block::skip);
          auto c = hicache(device, host, p);
          c.timing = nullptr;
          c.time_scale = 0;
          c.max_output_tokens = 1;
          c.gpu.host_link_bytes_per_s = 0;
          const auto r = sim::des::simulate(t, c);
          CHECK(r.summary["block_hits"] == want.block_hits);
          CHECK(r.summary["token_hits"] == want.token_hits);
          const auto& o = r.summary["offload"];
          const auto& w = idx.counters();
          REQUIRE(w.unscheduled == 0);
          CHECK(o["admissions"] == w.requests);
          CHECK(o["device_hit_blocks"] == w.device_hit_blocks);
          CHECK(o["host_hit_blocks"] == w.host_hit_blocks);
          CHECK(r.summary["dram_block_hits"] == w.host_hit_blocks);
          CHECK(o["host_stored_blocks"] == w.host_stored_blocks);
          CHECK(o["host_evicted_blocks"] == w.host_evicted_blocks);
          CHECK(o["device_evicted_blocks"] == w.device_evicted_blocks);
          CHECK(o["declined_loads"] == w.declined_loads);
          CHECK(o["failed_backups"] == w.failed_backups);
          if (host >= 40 && p != tier::hicache_write_policy::write_back) CHECK(w.host_hit_blocks > 0);
        }
      }
    }
  }
}

TEST_CASE("HiCache under sglang: a host hit is loaded back on the host link, overlapping the "
          "prefill", "[engine_sched][hicache]") {
  // Prompts of 4 full pages and a partial one (72 tokens: at most 4 pages hit); the device holds
  // 7 pages. write_through backs every prompt up to the host as it is inserted; each new prompt
  // evicts the one before from the device (demoted: it stays on the host). The fourth repeats
  // the first: its 4 pages are a host hit, loaded back (evicting the third prompt's).
  const auto t = make({{0, {1, 2, 3, 4}, 1, 72},
                       {1, {11, 12, 13, 14}, 1, 72},
                       {2, {21, 22, 23, 24}, 1, 72},
                       {3, {1, 2, 3, 4}, 1, 72}});
  auto c = hicache(7, 100);
  c.host_link_latency_s = 0.5;
  c.host_link_per_block_s = 0.1;
  const double block_bytes = 16.0 * static_cast<double>(c.model.kv_bytes_per_token);
  const double load = 0.5 + 0.4 + 4 * block_bytes / c.gpu.host_link_bytes_per_s;
  auto r = sim::des::simulate(t, c);
  const auto& o = r.requests[3];
  CHECK(o.hit_blocks == 4);
  CHECK(o.hit_tokens == 64);
  CHECK(o.dram_blocks == 4);
  check(o, 3 + load, 3 + load);  // the load (longer than the 10-ms prefill) hides it
  const auto& s = r.summary["offload"];
  CHECK(s["host_hit_blocks"] == 4);
  CHECK(s["device_hit_blocks"] == 0);
  CHECK(s["host_stored_blocks"] == 12);  // three distinct prompts, backed up once each
  CHECK(s["device_evicted_blocks"] == 12);  // prompts 0, 1 and 2, each demoted whole
  CHECK(s["bytes_loaded"].get<double>() == Approx(4 * block_bytes));
  CHECK(r.summary["local_block_hits"] == 0);
  c.overlap_load = false;  // the load, then the prefill
  r = sim::des::simulate(t, c);
  check(r.requests[3], 3 + load + 0.010, 3 + load + 0.010);
  // Without HiCache the fourth request recomputes everything.
  c.offload.clear();
  c.offload_medium.clear();
  CHECK(sim::des::simulate(t, c).requests[3].hit_blocks == 0);
}

TEST_CASE("HiCache under sglang: a request counts one hit per node across its checkpoints",
          "[engine_sched][hicache]") {
  // write_through_selective backs a node up at its second hit. Request 0 (3 outputs) inserts its
  // prompt after the prefill and again, with its generated page, at the end: SGLang counts the
  // prompt's node once (cache_inserted_len), so nothing is backed up; request 1, a repeat,
  // counts the second hit and backs the prompt up.
  const auto t = make({{0, {1, 2, 3, 4}, 20}, {10, {1, 2, 3, 4, 5}, 1}});
  auto c = hicache(100, 100, tier::hicache_write_policy::write_through_selective);
  auto r = sim::des::simulate(make({{0, {1, 2, 3, 4}, 20}}), c);
  CHECK(r.summary["offload"]["host_stored_blocks"] == 0);
  r = sim::des::simulate(t, c);
  CHECK(r.requests[1].hit_blocks == 4);
  CHECK(r.summary["offload"]["host_stored_blocks"] == 4);
  // write_through backs up every insert at its first hit: the prompt after its prefill, then
  // the page holding its last 16 generated tokens, then request 1's new page.
  c = hicache(100, 100, tier::hicache_write_policy::write_through);
  r = sim::des::simulate(t, c);
  CHECK(r.summary["offload"]["host_stored_blocks"] == 4 + 1 + 1);
}

TEST_CASE("HiCache under load: every request ends and the hits add up", "[engine_sched][hicache]") {
  // Arrivals 20 ms apart against 10-ms prefills and 5-ms decodes: requests overlap, chunked
  // prefills and retractions happen on a small device pool.
  for (const auto p : {tier::hicache_write_policy::write_through,
                       tier::hicache_write_policy::write_through_selective,
                       tier::hicache_write_policy::write_back}) {
    INFO(tier::name_of(p));
    auto t = shared_prefix_trace(7, 400);
    for (std::size_t r = 0; r < t.arrival_s.size(); ++r) t.arrival_s[r] = 0.02 * static_cast<double>(r);
    auto c = hicache(40, 60, p);
    c.sched.max_num_batched_tokens = 64;
    c.sched.schedule_policy = "lpm";
    const auto r = sim::des::simulate(t, c);
    const auto& s = r.summary;
    CHECK(s["requests"] == 400);
    CHECK(s["dram_block_hits"].get<std::uint64_t>() + s["local_block_hits"].get<std::uint64_t>() ==
          s["block_hits"].get<std::uint64_t>());
    if (p != tier::hicache_write_policy::write_back) CHECK(s["dram_block_hits"].get<std::uint64_t>() > 0);
  }
}

TEST_CASE("HiCache: configurations simulate cannot run are refused by name", "[engine_sched][hicache]") {
  const auto t = make({{0, {1, 2}, 3}});
  for (const char* s : {"vllm-v0", "vllm-v1", "kvtk"}) {
    auto c = hicache(100, 10);
    c.sched.scheduler = s;
    CHECK_THROWS_WITH(sim::des::simulate(t, c), Catch::Contains("sglang"));
  }
  auto c = hicache(100, 10);
  c.dram_blocks = 50;
  CHECK_THROWS_WITH(sim::des::simulate(t, c), Catch::Contains("SGLang's HiCache") && Catch::Contains("dram"));
  c.dram_blocks = 0;
  c.decode_instances = 1;
  CHECK_THROWS_WITH(sim::des::simulate(t, c), Catch::Contains("decode_instances"));
}

namespace {

// Three prompts of 4 full pages (and a partial one) pass through a 7-page device and a 10-page
// host, so that the first prompt survives only in L3 (unbounded): the third one's backup evicts
// it from the host. The fourth request repeats it; a fifth (2 pages), arriving with it, is
// admitted at once and backed up, filling the host, so that the prefetched pages land by
// evicting the second prompt's host-only leaf. Storage: 1 ms per operation, 4 pages read in
// 0.2 s. Requests 0-2 find nothing in L3: their prefetches are revoked when the query ends.
struct l3_case {
  prefix::prefix_trace t = make({{0, {1, 2, 3, 4}, 1, 72},
                                 {1, {11, 12, 13, 14}, 1, 72},
                                 {2, {21, 22, 23, 24}, 1, 72},
                                 {3, {1, 2, 3, 4}, 1, 72},
                                 {3, {31, 32}, 1, 32}});
  cluster_config c = hicache(7, 10);
  double page_bytes = 0, read_s = 0;
  explicit l3_case(tier::hicache_prefetch_policy p) {
    page_bytes = 16.0 * static_cast<double>(c.model.kv_bytes_per_token);
    c.hicache_l3.enabled = true;
    c.hicache_l3.policy = p;
    c.hicache_l3.prefetch_threshold_tokens = 32;
    c.hicache_l3.latency_s = 0.001;
    c.hicache_l3.bytes_per_s = 4 * page_bytes / 0.2;
    c.hicache_l3.timeout_base_s = 0.05;
    c.hicache_l3.timeout_per_ki_token_s = 0.001;
    c.gpu.host_link_bytes_per_s = 0;  // load-back free: the prefill's 10 ms shows
    read_s = 0.001 + 0.2;             // one 128-page batch, after the query (1 ms) is drained
  }
};

}  // namespace

TEST_CASE("HiCache L3 under sglang: wait_complete holds a request until its prefetch is read, "
          "and lets the next one go first", "[engine_sched][hicache][l3]") {
  l3_case k(tier::hicache_prefetch_policy::wait_complete);
  const auto r = sim::des::simulate(k.t, k.c);
  // Request 4 is admitted at 3 while request 3 waits; the query ends at 3.001, mid-iteration, and
  // is drained when the iteration ends (3.010); the read then takes read_s, the pages land in
  // the host, load back, and the prefill takes 10 ms.
  CHECK(r.requests[3].hit_blocks == 4);
  CHECK(r.requests[3].dram_blocks == 4);
  check(r.requests[3], 3.010 + k.read_s + 0.010, 3.010 + k.read_s + 0.010);
  check(r.requests[4], 3.010, 3.010);
  const auto& l3 = r.summary["offload"]["l3"];
  CHECK(l3["prefetches"] == 4);  // request 4's span (1 page) is below the 32-token threshold
  CHECK(l3["declined_below_threshold"] == 1);
  CHECK(l3["revoked_below_threshold"] == 3);
  CHECK(l3["completed"] == 1);
  CHECK(l3["read_pages"] == 4);
  CHECK(l3["inserted_host_pages"] == 4);
  // Requests 0-2 wait for their query (1 ms) to be revoked (idle: the wake at its end is a step
  // start), request 3 for its drain and read.
  CHECK(l3["held_prefetches"] == 4);
  CHECK(l3["hold_s_mean"].get<double>() == Approx((3 * 0.001 + 0.010 + k.read_s) / 4));
  check(r.requests[0], 0.011, 0.011);
  // Four distinct prompts backed up, each written once (request 3's came from L3: not again).
  CHECK(l3["pages_written"] == 4 + 4 + 4 + 2);
}

TEST_CASE("HiCache L3 under sglang: best_effort cuts at the first poll, timeout at its deadline",
          "[engine_sched][hicache][l3]") {
  {  // best_effort: polled at arrival, before the query is drained: nothing used, recomputed
    l3_case k(tier::hicache_prefetch_policy::best_effort);
    const auto r = sim::des::simulate(k.t, k.c);
    CHECK(r.requests[3].hit_blocks == 0);
    check(r.requests[3], 3.010, 3.010);
    CHECK(r.summary["offload"]["l3"]["cut_best_effort"] == 1);  // requests 0-2 had nothing to read
    check(r.requests[0], 0.010, 0.010);
    CHECK(r.summary["offload"]["l3"]["read_pages"] == 0);
  }
  {  // timeout: 0.05 + 0.001 x 64 / 1024 s after the first poll, before the read ends
    l3_case k(tier::hicache_prefetch_policy::timeout);
    const double deadline = 0.05 + 0.001 * 64 / 1024.0;
    const auto r = sim::des::simulate(k.t, k.c);
    CHECK(r.requests[3].hit_blocks == 0);
    check(r.requests[3], 3 + deadline + 0.010, 3 + deadline + 0.010);
    CHECK(r.summary["offload"]["l3"]["cut_timeout"] == 1);
    // A longer deadline lets the read finish: as wait_complete.
    k.c.hicache_l3.timeout_base_s = 1.0;
    const auto w = sim::des::simulate(k.t, k.c);
    CHECK(w.requests[3].hit_blocks == 4);
    check(w.requests[3], 3.010 + k.read_s + 0.010, 3.010 + k.read_s + 0.010);
  }
  {  // without L3 the first prompt is gone from both tiers
    l3_case k(tier::hicache_prefetch_policy::wait_complete);
    k.c.hicache_l3.enabled = false;
    CHECK(sim::des::simulate(k.t, k.c).requests[3].hit_blocks == 0);
  }
}

TEST_CASE("HiCache L3 under sglang: a cut read frees the reader for the reads queued behind it",
          "[engine_sched][hicache][l3]") {
  // Prompts P (130 pages) and Q (4 pages) end up in L3 only: fillers X, W, V (130 pages each)
  // push them off a 140-page device and a 300-page host (write_through). Then P' (a repeat of P)
  // arrives at 10 and Q' (of Q) at 10.5, under `timeout` with a 1-s deadline from each first poll.
  // A page reads in 10 ms, an operation takes 1 ms: P's read (batches of 128 and 2 pages) starts
  // when its query is drained at 10.001 and its first batch would end at 11.282; Q's read is
  // queued behind it. P' is cut at its deadline, 11.0, with nothing read: the reader finishes the
  // batch in progress (11.282) and Q's read moves up to start then, ending at 11.323, before Q's
  // deadline (11.5), instead of 11.344 behind P's whole read.
  auto keys = [](block_key first, std::size_t n) {
    std::vector<block_key> k(n);
    for (std::size_t j = 0; j < n; ++j) k[j] = first + j;
    return k;
  };
  const auto t = make({{0, keys(1000, 130), 1, 2085},
                       {1, keys(2000, 4), 1, 69},
                       {2, keys(3000, 130), 1, 2085},
                       {3, keys(4000, 130), 1, 2085},
                       {4, keys(5000, 130), 1, 2085},
                       {10, keys(1000, 130), 1, 2085},
                       {10.5, keys(2000, 4), 1, 69}});
  auto c = hicache(140, 300);
  const double page_bytes = 16.0 * static_cast<double>(c.model.kv_bytes_per_token);
  c.hicache_l3.enabled = true;
  c.hicache_l3.policy = tier::hicache_prefetch_policy::timeout;
  c.hicache_l3.prefetch_threshold_tokens = 32;
  c.hicache_l3.latency_s = 0.001;
  c.hicache_l3.bytes_per_s = page_bytes / 0.01;
  c.hicache_l3.timeout_base_s = 1.0;
  c.hicache_l3.timeout_per_ki_token_s = 1e-9;
  c.gpu.host_link_bytes_per_s = 0;
  const auto r = sim::des::simulate(t, c);
  const double batch1_end = 10.001 + 0.001 + 128 * 0.01;
  const double q_done = batch1_end + 0.001 + 4 * 0.01;
  CHECK(r.requests[5].hit_blocks == 0);  // P' recomputed after its cut
  CHECK(r.requests[5].first_token == Approx(11.0 + 1e-9 * 2080 / 1024 + 0.010).margin(1e-9));
  CHECK(r.requests[6].hit_blocks == 4);  // Q' from L3, through the host
  CHECK(r.requests[6].first_token == Approx(q_done + 0.010).margin(1e-9));
  const auto& l3 = r.summary["offload"]["l3"];
  CHECK(l3["cut_timeout"] == 1);
  CHECK(l3["completed"] == 1);
  CHECK(l3["inserted_host_pages"] == 4);
}

TEST_CASE("LMCache under vllm-v1 with free compute and one output token equals replay --engine "
          "vllm --offload lmcache-cpu", "[engine_sched][lmcache]") {
  // One request at a time: lookup at admission, load, the prompt's chunks stored after its
  // prefill, in the order lmcache_offload's run_request (checked against LMCache's own code)
  // runs them; every count must agree.
  for (std::uint64_t seed : {1, 2}) {
    const auto t = shared_prefix_trace(seed, 300);
    for (const std::uint32_t gpu : {24u, 60u}) {
      for (const std::uint32_t k : {1u, 2u}) {
        for (const auto p : {tier::lmcache_policy::lru, tier::lmcache_policy::fifo, tier::lmcache_policy::lfu})
        for (const std::uint32_t disk : {0u, 80u}) {
          INFO("seed " << seed << ", " << gpu << " GPU blocks, chunks of " << k << ", " << tier::name_of(p)
                       << ", disk " << disk);
          tier::lmcache_offload_config lc;
          lc.gpu_blocks = gpu;
          lc.cpu_chunks = (disk ? 20 : 60) / k;
          lc.disk_chunks = disk / k;
          lc.blocks_per_chunk = k;
          lc.policy = p;
          tier::lmcache_offload_index idx(lc);
          const auto want = prefix::replay(t, idx, prefix::partial_block::skip);
          auto c = lmcache(gpu, 4096, lc.cpu_chunks);
          c.lmcache_cfg.blocks_per_chunk = k;
          c.lmcache_cfg.policy = p;
          c.lmcache_cfg.disk_chunks = lc.disk_chunks;
          c.disk_latency_s = 0;
          c.disk_bytes_per_s = 1e300;
          c.timing = nullptr;
          c.time_scale = 0;
          c.max_output_tokens = 1;
          c.gpu.host_link_bytes_per_s = 0;
          const auto r = sim::des::simulate(t, c);
          const auto& w = idx.counters();
          REQUIRE(w.unscheduled == 0);
          CHECK(r.summary["block_hits"] == want.block_hits);
          CHECK(r.summary["token_hits"] == want.token_hits);
          const auto& o = r.summary["offload"];
          CHECK(o["lookups"] == w.requests);
          CHECK(o["cpu_hit_blocks"] == w.cpu_hit_blocks);
          CHECK(r.summary["dram_block_hits"] == w.cpu_hit_blocks + w.disk_hit_blocks);
          CHECK(o["loaded_tokens"] == w.loaded_tokens);
          if (disk > 0) {
            const auto& d = o["disk"];
            CHECK(d["hit_blocks"] == w.disk_hit_blocks);
            CHECK(d["lookup_chunks"] == w.disk_lookup_chunks);
            CHECK(d["chunks_loaded"] == w.disk_chunks_loaded);
            CHECK(d["chunks_promoted"] == w.chunks_promoted);
            CHECK(d["chunks_stored"] == w.disk_chunks_stored);
            CHECK(d["chunks_evicted"] == w.disk_chunks_evicted);
            CHECK(d["lfu_key_errors"] == w.disk_lfu_key_errors);
            CHECK(d["chunks_resident_at_end"] == idx.offload().disk_resident());
            if (gpu == 24) CHECK(w.disk_hit_blocks > 0);
          } else {
            CHECK_FALSE(o.contains("disk"));
          }
          CHECK(o["chunks_loaded"] == w.chunks_loaded);
          CHECK(o["chunks_stored"] == w.chunks_stored);
          CHECK(o["chunks_evicted"] == w.chunks_evicted);
          CHECK(o["cut_stores"] == w.cut_stores);
          CHECK(o["lookup_hit_tokens"] == w.lookup_hit_tokens);
          CHECK(o["chunks_resident_at_end"] == idx.offload().cpu_resident());
          if (gpu == 24) CHECK(w.cpu_hit_blocks > 0);  // 60 GPU blocks hold what 60 chunks do
        }
      }
    }
  }
}

TEST_CASE("LMCache under vllm-v1: the load and the store add to their iteration", "[engine_sched][lmcache]") {
  // The GPU holds 7 blocks; request 3 repeats request 0, whose 4 full blocks only LMCache still
  // holds (chunks of one block). Its lookup hits 4 chunks and, the prompt being 72 tokens, all
  // 64 tokens load, synchronously: the iteration takes the load (over the host link) and the
  // prefill (10 ms), and stores nothing new (its chunks are the lookup's hit). Each of the
  // first three requests stores its 4 chunks after its forward, in the same iteration.
  const auto t = make({{0, {1, 2, 3, 4}, 1, 72},
                       {1, {11, 12, 13, 14}, 1, 72},
                       {2, {21, 22, 23, 24}, 1, 72},
                       {3, {1, 2, 3, 4}, 1, 72}});
  auto c = lmcache(7, 4096, 100);
  c.host_link_latency_s = 0.5;
  c.host_link_per_block_s = 0.1;
  const double block_bytes = 16.0 * static_cast<double>(c.model.kv_bytes_per_token);
  const double load = 0.5 + 0.4 + 4 * block_bytes / c.gpu.host_link_bytes_per_s;
  const double store = 0.5 + 0.4 + 4 * block_bytes / c.gpu.host_link_bytes_per_s;
  const auto r = sim::des::simulate(t, c);
  // Request 0: nothing to load; its 4 chunks stored after the forward.
  check(r.requests[0], 0.010 + store, 0.010 + store);
  CHECK(r.requests[3].hit_blocks == 4);
  CHECK(r.requests[3].dram_blocks == 4);
  check(r.requests[3], 3 + load + 0.010, 3 + load + 0.010);
  const auto& o = r.summary["offload"];
  CHECK(o["chunks_stored"] == 12);
  CHECK(o["cpu_hit_blocks"] == 4);
  CHECK(o["bytes_loaded"].get<double>() == Approx(4 * block_bytes));
  CHECK(o["bytes_stored"].get<double>() == Approx(12 * block_bytes));
}

TEST_CASE("LMCache under vllm-v1: a load from the local disk reads it first, then crosses the host link",
          "[engine_sched][lmcache]") {
  // As the case above with a CPU tier of 4 chunks and a disk of 100: by request 3 the CPU holds
  // request 2's chunks only, so request 3's 4 chunks come from disk (local_disk's blocking read,
  // 0.25 s + 4 x 0.2 s), then cross the host link; the disk writes are not waited for.
  const auto t = make({{0, {1, 2, 3, 4}, 1, 72},
                       {1, {11, 12, 13, 14}, 1, 72},
                       {2, {21, 22, 23, 24}, 1, 72},
                       {3, {1, 2, 3, 4}, 1, 72}});
  auto c = lmcache(7, 4096, 4);
  c.offload += ",disk=100";
  c.lmcache_cfg.disk_chunks = 100;
  c.host_link_latency_s = 0.5;
  c.host_link_per_block_s = 0.1;
  const double block_bytes = 16.0 * static_cast<double>(c.model.kv_bytes_per_token);
  c.disk_latency_s = 0.25;
  c.disk_bytes_per_s = block_bytes / 0.2;
  const double link = 0.5 + 0.4 + 4 * block_bytes / c.gpu.host_link_bytes_per_s;
  const double disk = 0.25 + 4 * 0.2;
  const auto r = sim::des::simulate(t, c);
  CHECK(r.requests[3].hit_blocks == 4);
  CHECK(r.requests[3].dram_blocks == 4);
  check(r.requests[3], 3 + disk + link + 0.010, 3 + disk + link + 0.010);
  const auto& o = r.summary["offload"];
  CHECK(o["cpu_hit_blocks"] == 0);
  CHECK(o["disk"]["hit_blocks"] == 4);
  CHECK(o["disk"]["chunks_loaded"] == 4);
  CHECK(o["disk"]["chunks_stored"] == 12);
  CHECK(o["disk"]["bytes_read"].get<double>() == Approx(4 * block_bytes));
  CHECK(o["disk"]["bytes_written"].get<double>() == Approx(12 * block_bytes));
  CHECK(o["load_store_s"].get<double>() == Approx(3 * link + disk + link));
}

TEST_CASE("LMCache under vllm-v1: a chunked prefill stores each chunk's completed chunks",
          "[engine_sched][lmcache]") {
  // A 72-token prompt under a 32-token budget: iterations of 32, 32 and 8 tokens. The first two
  // each complete two 16-token chunks and store them after their forward (the iteration waits);
  // the third completes none.
  const auto t = make({{0, {1, 2, 3, 4}, 1, 72}});
  auto c = lmcache(100, 32, 100);
  c.host_link_latency_s = 0.5;
  c.host_link_per_block_s = 0.1;
  const double block_bytes = 16.0 * static_cast<double>(c.model.kv_bytes_per_token);
  const double store2 = 0.5 + 0.2 + 2 * block_bytes / c.gpu.host_link_bytes_per_s;
  const auto r = sim::des::simulate(t, c);
  check(r.requests[0], 3 * 0.010 + 2 * store2, 3 * 0.010 + 2 * store2);
  CHECK(r.summary["offload"]["chunks_stored"] == 4);
  CHECK(r.summary["offload"]["bytes_stored"].get<double>() == Approx(4 * block_bytes));
  CHECK(r.summary["offload"]["load_store_s"].get<double>() == Approx(2 * store2));
}

TEST_CASE("engine tiers under load on two instances: every request ends and the tiers audit clean",
          "[engine_sched][hicache][lmcache][l3]") {
  // 250 requests 5 ms apart against 10-ms prefills on small pools, then the same 250 again from
  // 5 s on (so that L3 has what the pools lost): chunked prefills, retractions and preemptions,
  // L3 prefetches read, held and cut. The summaries audit each tier's bookkeeping at the end (a
  // violation throws), so this checks that nothing leaks under concurrency.
  const auto once = shared_prefix_trace(11, 250);
  prefix::prefix_trace t;
  t.block_tokens = 16;
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t r = 0; r < once.requests(); ++r) {
      const auto k = once.cacheable(r, prefix::partial_block::skip);
      t.add(std::vector<block_key>(k.begin(), k.end()), once.input_tokens(r));
      t.arrival_s.push_back(5.0 * pass + 0.005 * static_cast<double>(r));
      t.output_length.push_back(once.output_length[r]);
    }
  }
  for (const auto policy : {tier::hicache_prefetch_policy::best_effort, tier::hicache_prefetch_policy::wait_complete,
                            tier::hicache_prefetch_policy::timeout}) {
    for (const auto wp : {tier::hicache_write_policy::write_through, tier::hicache_write_policy::write_back}) {
      INFO(tier::name_of(policy) << ", " << tier::name_of(wp));
      auto c = hicache(30, 40, wp);
      c.prefill_instances = 2;
      c.sched.max_num_batched_tokens = 48;
      c.sched.schedule_policy = "lpm";
      c.hicache_l3.enabled = true;
      c.hicache_l3.policy = policy;
      c.hicache_l3.prefetch_threshold_tokens = 32;
      c.hicache_l3.latency_s = 0.002;
      c.hicache_l3.bytes_per_s = 16.0 * c.model.kv_bytes_per_token / 0.004;
      c.hicache_l3.timeout_base_s = 0.02;
      const auto r = sim::des::simulate(t, c);
      CHECK(r.summary["requests"] == 500);
      const auto& l3 = r.summary["offload"]["l3"];
      CHECK(l3["completed"].get<std::uint64_t>() > 0);
      CHECK(l3["inserted_host_pages"].get<std::uint64_t>() > 0);
      if (policy == tier::hicache_prefetch_policy::best_effort) {
        CHECK(l3["cut_best_effort"].get<std::uint64_t>() > 0);
      } else {
        CHECK(l3["held_prefetches"].get<std::uint64_t>() > 0);
      }
    }
  }
  for (const std::uint32_t disk : {0u, 80u}) {
    auto c = lmcache(30, 48, disk ? 20 : 40);
    c.lmcache_cfg.disk_chunks = disk;
    c.prefill_instances = 2;
    c.disk_latency_s = 0.004;
    const auto r = sim::des::simulate(t, c);
    CHECK(r.summary["requests"] == 500);
    CHECK(r.summary["offload"]["cpu_hit_blocks"].get<std::uint64_t>() > 0);
    if (disk > 0) CHECK(r.summary["offload"]["disk"]["hit_blocks"].get<std::uint64_t>() > 0);
  }
}
