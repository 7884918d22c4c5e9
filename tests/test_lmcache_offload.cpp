// LMCache 0.5.6's local CPU backend behind vLLM's pool (kvtk/tier/lmcache_offload.hpp): a lookup
// from chunk 0 whatever the GPU hit, the "- 1 token" of a whole-prompt hit, stores from the lookup
// hit (even of chunks the GPU held), the four cache policies on LMCache's own example, a store
// cut short, and the invariants on random traces. The equality with vLLM + LMCache's own code is
// tools/engine-check/lmcache_connector.py's (docs/tiers.md).
#include <catch2/catch.hpp>
#include <kvtk/tier/lmcache_offload.hpp>
#include <random>
#include <vector>

namespace {

using namespace kvtk;
using tier::lmcache_offload;
using tier::lmcache_policy;

lmcache_offload make(std::uint32_t gpu, std::uint32_t cpu, std::uint32_t k = 1,
                     lmcache_policy p = lmcache_policy::lru) {
  tier::lmcache_offload_config c;
  c.gpu_blocks = gpu;
  c.cpu_chunks = cpu;
  c.blocks_per_chunk = k;
  c.policy = p;
  return lmcache_offload(c);
}

tier::lmcache_offload_request run(lmcache_offload& o, std::vector<block_key> keys, std::uint64_t L) {
  return o.run_request(keys, L, 16);
}

}  // namespace

TEST_CASE("lmcache: loads past the GPU hit, whole-prompt hits load one token less", "[lmcache]") {
  auto o = make(8, 8);
  auto r = run(o, {1, 2, 3}, 48);
  CHECK(r.stored_chunks == 3);
  // The GPU may hit 2 blocks (never the last token); LMCache finds all 3 chunks = the whole
  // prompt, so it returns 48 - 32 - 1 tokens and reads chunk 2.
  r = run(o, {1, 2, 3}, 48);
  CHECK(r.gpu_hit_blocks == 2);
  CHECK(r.lookup_chunks == 3);
  CHECK(r.loaded_tokens == 15);
  CHECK(r.loaded_chunks == 1);
  CHECK(r.stored_chunks == 0);
  // 50 tokens: 3 chunks; the lookup stops at 9, the GPU covers what LMCache found: nothing loads,
  // and the store starts at the lookup's end.
  r = run(o, {1, 2, 9}, 50);
  CHECK(r.gpu_hit_blocks == 2);
  CHECK(r.loaded_tokens == 0);
  CHECK(r.stored_chunks == 1);
  CHECK(o.counters().chunks_stored == 4);
  CHECK(std::string(o.audit()).empty());
}

TEST_CASE("lmcache: stores from the lookup hit, even chunks the GPU holds", "[lmcache]") {
  auto o = make(4, 3);
  run(o, {1, 2, 3}, 48);  // 3 chunks put
  run(o, {4, 5, 6}, 48);  // the CPU tier evicts 1, 2, 3 (LRU) to put 4, 5, 6
  CHECK(o.counters().chunks_evicted == 3);
  CHECK_FALSE(o.cpu_holds(1));
  // vLLM's pool still holds block 1 (it took the unused block and the blocks of 3 and 2 first):
  // a GPU hit of 1 block, no LMCache hit, and all 3 chunks stored again.
  const auto r = run(o, {1, 2, 3}, 48);
  CHECK(r.gpu_hit_blocks == 1);
  CHECK(r.lookup_chunks == 0);
  CHECK(r.stored_chunks == 3);
  CHECK(o.counters().chunks_evicted == 6);
}

TEST_CASE("lmcache: the four policies on LMCache's own example", "[lmcache]") {
  // put 1, 2, 3; hit 1, hit 1, hit 2; put 4: LRU evicts 3, MRU 2, FIFO 1, LFU 3. One-block
  // requests of 16 tokens: the lookup of chunk 0 is the hit.
  const std::pair<lmcache_policy, block_key> cases[] = {{lmcache_policy::lru, 3},
                                                        {lmcache_policy::mru, 2},
                                                        {lmcache_policy::fifo, 1},
                                                        {lmcache_policy::lfu, 3}};
  for (const auto& [policy, victim] : cases) {
    auto o = make(8, 3, 1, policy);
    for (const block_key k : {1, 2, 3, 1, 1, 2, 4}) run(o, {k}, 16);
    INFO(tier::name_of(policy));
    CHECK_FALSE(o.cpu_holds(victim));
    CHECK(o.cpu_holds(4));
    CHECK(o.counters().chunks_evicted == 1);
    CHECK(std::string(o.audit()).empty());
  }
}

TEST_CASE("lmcache: chunks of several blocks, and a store longer than the tier", "[lmcache]") {
  auto o = make(16, 2, 2);  // chunks of 32 tokens, 2 of them
  auto r = run(o, {1, 2, 3, 4, 5, 6}, 100);  // 3 chunks (6 full blocks): only 2 fit
  CHECK(r.stored_chunks == 2);
  CHECK(o.counters().cut_stores == 1);
  CHECK(o.cpu_holds(2));
  CHECK(o.cpu_holds(4));
  CHECK_FALSE(o.cpu_holds(6));
  r = run(o, {1, 2, 3, 4, 7}, 80);  // GPU 4 blocks (capped at 79 tokens: 4), LMCache 2 chunks
  CHECK(r.gpu_hit_blocks == 4);
  CHECK(r.lookup_chunks == 2);
  CHECK(r.loaded_tokens == 0);
}

TEST_CASE("lmcache: a lookup touches in reverse order", "[lmcache]") {
  // Three chunks put in order 1, 2, 3, then looked up again (touched 3, 2, 1: chunk 1 ends most
  // recent). A one-chunk request then needs a slot: LRU evicts 3, MRU evicts 1.
  for (const auto& [policy, victim] : {std::pair{lmcache_policy::lru, block_key{3}},
                                       std::pair{lmcache_policy::mru, block_key{1}}}) {
    auto o = make(16, 3, 1, policy);
    run(o, {1, 2, 3}, 48);
    run(o, {1, 2, 3}, 48);
    run(o, {9}, 16);
    INFO(tier::name_of(policy));
    CHECK_FALSE(o.cpu_holds(victim));
    CHECK(o.cpu_holds(9));
  }
}

TEST_CASE("lmcache: invariants on random prefix traces, every policy", "[lmcache]") {
  for (const auto policy : {lmcache_policy::lru, lmcache_policy::mru, lmcache_policy::fifo,
                            lmcache_policy::lfu}) {
    for (const std::uint32_t k : {1u, 4u}) {
      auto o = make(40, 12, k, policy);
      std::mt19937_64 rng(k * 10 + static_cast<unsigned>(policy));
      for (int i = 0; i < 500; ++i) {
        std::vector<block_key> keys;
        std::uint64_t key = 1;
        const std::uint64_t len = 1 + rng() % 24;
        for (std::uint64_t d = 0; d < len; ++d) {
          key = (key * 31 + rng() % 3 + 1) * 0x9e3779b97f4a7c15ull;
          keys.push_back(key);
        }
        const auto r = o.run_request(keys, len * 16 - rng() % 8, 16);
        REQUIRE(std::string(o.audit()).empty());
        const auto& c = o.counters();
        CHECK(c.chunks_stored - c.chunks_evicted == o.cpu_resident());
        CHECK(r.loaded_chunks <= r.lookup_chunks);
      }
    }
  }
}

TEST_CASE("lmcache: refused configurations", "[lmcache]") {
  CHECK_THROWS_AS(make(0, 4), std::invalid_argument);
  CHECK_THROWS_AS(make(4, 0), std::invalid_argument);
  CHECK_THROWS_AS(make(4, 4, 0), std::invalid_argument);
}
