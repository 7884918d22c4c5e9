// vLLM 0.33's CPU offloading under its block pool (kvtk/tier/vllm_offload.hpp): hand-computed
// lookups, loads and stores from the connector's rules (offloaded blocks of one and two GPU
// blocks), the store threshold, an all-or-nothing store that is refused, vLLM's LRU against kvtk's
// LRU through the adapter, and refused configurations. The equality with vLLM's own code is
// tools/engine-check/vllm_offload_connector.py's (docs/tiers.md).
#include <catch2/catch.hpp>
#include <kvtk/kvtk.hpp>
#include <kvtk/tier/vllm_offload.hpp>
#include <random>
#include <span>
#include <vector>

namespace {

using namespace kvtk;
using tier::vllm_offload_config;

vllm_offload_config config(std::uint32_t gpu, std::uint32_t cpu, std::uint32_t k = 1,
                           const char* policy = "lru") {
  vllm_offload_config c;
  c.gpu_blocks = gpu;
  c.cpu_chunks = cpu;
  c.blocks_per_chunk = k;
  c.policy = policy;
  return c;
}

using offload = tier::vllm_offload<>;

tier::vllm_offload_request run(offload& o, std::vector<block_key> keys, std::uint64_t L) {
  return o.run_request(keys, L, 16);
}

}  // namespace

TEST_CASE("vllm offload: hand-computed loads and stores, one GPU block per chunk", "[vllm_offload]") {
  offload o(config(4, 10));
  auto r = run(o, {1, 2, 3}, 48);  // nothing anywhere: all three chunks stored
  CHECK(r.gpu_hit_blocks == 0);
  CHECK(r.loaded_tokens == 0);
  CHECK(r.stored_chunks == 3);
  r = run(o, {4, 5, 6}, 48);  // the GPU pool evicts 3 and 2; the CPU keeps them
  CHECK(r.stored_chunks == 3);
  CHECK(o.cpu_resident() == 6);
  // {1,2,3,7}: the GPU hits 1; the lookup from chunk 1 finds 2 and 3 (7 missing): 32 tokens
  // load, chunks 1..2; the store offers chunk 3 only (CHUNK_LEVEL: from the loaded end).
  r = run(o, {1, 2, 3, 7}, 64);
  CHECK(r.gpu_hit_blocks == 1);
  CHECK(r.loaded_tokens == 32);
  CHECK(r.loaded_chunks == 2);
  CHECK(r.stored_chunks == 1);
  // {1,2,3}, 48 tokens: the GPU may hit 2 blocks (the last token is never a hit), but the lookup
  // from chunk 2 finds 3 in the CPU tier: its 16 tokens load even though the GPU holds block 3.
  r = run(o, {1, 2, 3}, 48);
  CHECK(r.gpu_hit_blocks == 2);
  CHECK(r.loaded_tokens == 16);
  CHECK(r.loaded_chunks == 1);
  CHECK(r.stored_chunks == 0);
  const auto& c = o.counters();
  CHECK(c.requests == 4);
  CHECK(c.gpu_hit_blocks == 3);
  CHECK(c.cpu_hit_blocks == 3);
  CHECK(c.chunks_loaded == 3);
  CHECK(c.chunks_stored == 7);
  CHECK(c.chunks_evicted == 0);
}

TEST_CASE("vllm offload: chunks of two GPU blocks", "[vllm_offload]") {
  offload o(config(8, 4, 2));
  // 5 blocks: 2 chunks, keyed by blocks 1 and 3 (keys 2 and 4); the fifth block is no chunk.
  auto r = run(o, {1, 2, 3, 4, 5}, 80);
  CHECK(r.stored_chunks == 2);
  CHECK(o.cpu_holds(2));
  CHECK(o.cpu_holds(4));
  CHECK_FALSE(o.cpu_holds(1));
  // {1,2,3,9}: the GPU hits 3 blocks (48 tokens); less than a chunk is left to load: nothing.
  // No load, so the store offers every chunk from 0: 2 is reused, 9 stored.
  r = run(o, {1, 2, 3, 9}, 64);
  CHECK(r.gpu_hit_blocks == 3);
  CHECK(r.loaded_tokens == 0);
  CHECK(r.stored_chunks == 1);
  CHECK(o.counters().reused_chunks == 1);
  CHECK(o.cpu_holds(9));
}

TEST_CASE("vllm offload: a chunk loads only from a chunk boundary after the GPU hit",
          "[vllm_offload]") {
  // GPU of 3 blocks: {1,2,3,4} cannot run (4 blocks > 3): unscheduled. With 4 GPU blocks, a
  // second request {1,2,3,4,5,6} (96 tokens) after the pool lost 3.. keeps 1,2: the lookup
  // starts at chunk floor(32 / 32) = 1 (keys 4, 6).
  offload small(config(3, 8, 2));
  CHECK_FALSE(run(small, {1, 2, 3, 4}, 64).scheduled);
  CHECK(small.counters().unscheduled == 1);
  offload o(config(6, 8, 2));
  CHECK(run(o, {1, 2, 3, 4, 5, 6}, 96).stored_chunks == 3);  // keys 2, 4, 6
  CHECK(run(o, {1, 2, 7, 8, 9, 10}, 96).stored_chunks == 2);  // 2 reused; 8, 10 stored
  // The pool now holds 1, 2 (shared) and 7..10; 3..6 were evicted. {1,2,3,4,5,6}: the GPU
  // hits 1, 2 (32 tokens); chunks from 1: keys 4 and 6 resident: 64 tokens load (chunks 1, 2).
  const auto r = run(o, {1, 2, 3, 4, 5, 6}, 96);
  CHECK(r.gpu_hit_blocks == 2);
  CHECK(r.loaded_tokens == 64);
  CHECK(r.loaded_chunks == 2);
}

TEST_CASE("vllm offload: store_threshold stores a chunk on its second offer", "[vllm_offload]") {
  auto c = config(2, 10);
  c.store_threshold = 2;
  offload o(c);
  CHECK(run(o, {1}, 16).stored_chunks == 0);
  CHECK(o.counters().threshold_skips == 1);
  CHECK(run(o, {2}, 16).stored_chunks == 0);
  CHECK(run(o, {1}, 16).stored_chunks == 1);  // the GPU hit is capped at 0 blocks: offered again
  CHECK(o.cpu_holds(1));
  CHECK_FALSE(o.cpu_holds(2));
}

TEST_CASE("vllm offload: a request offering more chunks than the tracker holds", "[vllm_offload]") {
  // The tracker is full of this call's keys: the third key is not tracked, so it counts 0 offers
  // (vLLM's counts.get(key, 0)) and is not stored.
  auto c = config(8, 10);
  c.store_threshold = 2;
  c.max_tracker_size = 2;
  offload o(c);
  CHECK(run(o, {1, 2, 3}, 48).stored_chunks == 0);
  // Nothing loads (chunk 3 is not resident), so all three are offered again: 1 and 2 reach two
  // offers and are stored; 3 is still untracked.
  CHECK(run(o, {1, 2, 3}, 48).stored_chunks == 2);
  CHECK(o.counters().threshold_skips == 4);
  CHECK_FALSE(o.cpu_holds(3));
}

TEST_CASE("vllm offload: a store that cannot evict enough stores nothing", "[vllm_offload]") {
  offload o(config(4, 2));
  const auto r = run(o, {1, 2, 3}, 48);  // 3 new chunks, 2 free, nothing evictable
  CHECK(r.store_refused);
  CHECK(r.stored_chunks == 0);
  CHECK(o.cpu_resident() == 0);
  CHECK(o.counters().store_refusals == 1);
}

TEST_CASE("vllm offload: vLLM's LRU keeps a request's head, kvtk's LRU its tail", "[vllm_offload]") {
  // vLLM's LRU touches the chunks a request stored when it finishes, tail first (its head ends
  // most recent); through kvtk.integrations.vllm a kvtk policy is not touched again after insert.
  offload vllm_lru(config(8, 3, 1, "lru"));
  offload kvtk_lru(config(8, 3, 1, "kvtk-lru"));
  for (offload* o : {&vllm_lru, &kvtk_lru}) {
    run(*o, {1, 2, 3}, 48);
    run(*o, {4}, 16);
  }
  CHECK(vllm_lru.cpu_holds(1));
  CHECK_FALSE(vllm_lru.cpu_holds(3));
  CHECK(kvtk_lru.cpu_holds(3));
  CHECK_FALSE(kvtk_lru.cpu_holds(1));
}

TEST_CASE("vllm offload: refused configurations", "[vllm_offload]") {
  CHECK_THROWS_WITH(offload(config(4, 0)), Catch::Contains("below one offloaded block"));
  CHECK_NOTHROW(offload(config(4, 4, 1, "arc")));  // vLLM's own ARC (tier/vllm_arc.hpp)
  CHECK_THROWS_WITH(offload(config(4, 4, 1, "kvtk-nosuch")), Catch::Contains("unknown policy 'nosuch'"));
  CHECK_THROWS_WITH(offload(config(4, 4, 0)), Catch::Contains("block_size"));
}

TEST_CASE("vllm offload: the fs secondary tier, hand-computed", "[vllm_offload][fs]") {
  // GPU 4 blocks, CPU 3 chunks, an fs tier below. Each request's first lookup waits a step for
  // the fs tier's existence checks (RETRY) of its CPU misses.
  auto c = config(4, 3);
  c.secondary_fs = true;
  offload o(c);
  auto r = run(o, {1, 2, 3}, 48);  // stored in the CPU, written through to fs
  CHECK(r.stored_chunks == 3);
  r = run(o, {4, 5, 6}, 48);  // stores evict 1, 2, 3 from the CPU; fs keeps them
  CHECK(r.stored_chunks == 3);
  CHECK(o.counters().chunks_evicted == 3);
  // {1,2,3}: the GPU still holds block 1 (hit 1); chunks 2 and 3 are only in fs: the first step
  // asks fs, the second promotes both (evicting 6 and 5, vLLM's LRU victims after request 1's
  // end touched 6, 5, 4), the third finds them in the CPU and loads 32 tokens.
  r = run(o, {1, 2, 3}, 48);
  CHECK(r.gpu_hit_blocks == 1);
  CHECK(r.loaded_tokens == 32);
  CHECK(r.loaded_chunks == 2);
  CHECK(r.stored_chunks == 0);
  const auto& t = o.counters();
  CHECK(t.fs_promoted_chunks == 2);
  CHECK(t.fs_promotion_evictions == 2);
  CHECK(t.chunks_evicted == 3);  // stores' evictions only
  CHECK(t.fs_written_chunks == 6);
  CHECK(t.lookup_retries == 1 + 1 + 2);
  CHECK(t.lookup_stalls == 0);
  CHECK(o.cpu_resident() == 3);
  // Without the fs tier the third request loads nothing.
  offload plain(config(4, 3));
  (void)run(plain, {1, 2, 3}, 48);
  (void)run(plain, {4, 5, 6}, 48);
  CHECK(run(plain, {1, 2, 3}, 48).loaded_tokens == 0);
}

TEST_CASE("vllm offload: an unbounded fs tier serves what an unbounded CPU tier would",
          "[vllm_offload][fs]") {
  // Every full chunk a request computes is stored, so the CPU tier plus an fs tier that never
  // evicts hold every chunk seen: with a CPU large enough for one request's promotions (no
  // refusal, no stall), each request's GPU hit and loaded tokens equal those of a CPU tier that
  // never evicts (the GPU pool is the same either way).
  for (const std::uint32_t k : {1u, 2u}) {
    for (std::uint64_t seed : {1, 2, 3}) {
      std::mt19937_64 rng(seed);
      auto small = config(24, 24 / k, k);
      small.secondary_fs = true;
      offload fs(small);
      offload big(config(24, 100000, k));
      std::vector<std::vector<block_key>> convs(4);
      block_key next = 1;
      for (int q = 0; q < 300; ++q) {
        auto& cv = convs[rng() % convs.size()];
        if (cv.size() > 12 || rng() % 4 == 0) cv.clear();
        for (std::uint64_t n = 1 + rng() % 5; n > 0; --n) cv.push_back(next++);
        std::vector<block_key> keys(cv.size());
        prefix::chain_keys(std::span<const block_key>(cv), std::span<block_key>(keys));
        const std::uint64_t L = 16 * keys.size() - (rng() % 2 ? 5 : 0);
        INFO("k " << k << ", seed " << seed << ", request " << q);
        const auto a = fs.run_request(keys, L, 16);
        const auto b = big.run_request(keys, L, 16);
        REQUIRE(a.gpu_hit_blocks == b.gpu_hit_blocks);
        REQUIRE(a.loaded_tokens == b.loaded_tokens);
      }
      CHECK(fs.counters().fs_promotion_refusals == 0);
      CHECK(fs.counters().lookup_stalls == 0);
      CHECK(fs.counters().fs_promoted_chunks > 0);
      CHECK(fs.counters().cpu_hit_blocks == big.counters().cpu_hit_blocks);
    }
  }
}

TEST_CASE("vllm offload: the fs secondary tier's refused configurations", "[vllm_offload][fs]") {
  auto c = config(4, 4, 1, "arc");
  c.secondary_fs = true;
  CHECK_THROWS_WITH(offload(c), Catch::Contains("lru only"));
  c.policy = "lru";
  c.store_threshold = 2;
  CHECK_THROWS_WITH(offload(c), Catch::Contains("refuses store_threshold"));
}
