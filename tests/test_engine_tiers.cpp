// Engine caches on top of the shared lower tiers (kvtk/tier/engine_tier_hierarchy.hpp): a
// hand-computed vLLM case, the engine's own hits unchanged by any lower tiers (its state evolves
// as if every load were a prefill), an unbounded lower tier equal to a brute-force "seen before"
// model, audits after every request, and refused configurations.
#include <catch2/catch.hpp>
#include <kvtk/kvtk.hpp>
#include <random>
#include <set>
#include <type_traits>
#include <vector>

namespace {

using namespace kvtk;
using tier::hierarchy_config;

hierarchy_config make(std::initializer_list<std::pair<std::uint64_t, const char*>> tiers) {
  hierarchy_config cfg;
  int i = 0;
  for (const auto& [cap, pol] : tiers) {
    tier::tier_spec s;
    s.name = "t" + std::to_string(i++);
    s.capacity_blocks = cap;
    s.policy = pol;
    cfg.tiers.push_back(s);
  }
  return cfg;
}

struct request {
  std::vector<block_key> keys;  // full blocks
  std::uint64_t L;
};

// Random prompts over a few shared prefixes (keys are prefix ids), some with a partial block.
std::vector<request> random_requests(std::uint32_t seed, int count, std::uint32_t B) {
  std::mt19937_64 rng(seed);
  std::vector<request> out;
  for (int r = 0; r < count; ++r) {
    request q;
    const int depth = 1 + static_cast<int>(rng() % 8);
    block_key k = 1000 + rng() % 3;
    for (int d = 0; d < depth; ++d) {
      q.keys.push_back(k);
      k = (k * 0x9E3779B97F4A7C15ULL) ^ (1 + rng() % (d < 3 ? 3 : 30));
    }
    q.L = std::uint64_t{B} * q.keys.size() + (rng() % 2 ? rng() % B : 0);
    out.push_back(q);
  }
  return out;
}

template <class Index>
std::uint32_t run(Index& idx, const request& q, std::uint32_t B) {
  idx.begin_request(q.L, B);
  return idx.process(q.keys, {}, {});
}

template <class Cache>
using hierarchy = tier::engine_tier_hierarchy<Cache>;
template <class Cache>
using index_of = tier::hierarchy_index<hierarchy<Cache>>;

}  // namespace

TEST_CASE("engine tiers: hand-computed vLLM pool(4) over LRU(10)", "[tier][engine]") {
  // B = 16. Free queue order and eviction order as vllm_block_pool documents them.
  index_of<prefix::vllm_block_pool> idx(make({{4, "vllm"}, {10, "lru"}}));
  const auto& h = idx.hierarchy();
  // R1 {1,2,3}: nothing cached; the pool caches 1,2,3 on blocks b0..b2 (free: b3, 3, 2, 1).
  CHECK(run(idx, {{1, 2, 3}, 48}, 16) == 0);
  // R2 {4,5,6}: takes b3 and evicts 3 then 2, demoted below (depths 2, 1).
  CHECK(run(idx, {{4, 5, 6}, 48}, 16) == 0);
  CHECK(h.tier_of(3) == 1);
  CHECK(h.tier_of(2) == 1);
  CHECK(h.tier_of(1) == 0);
  // R3 {1,2,3,7}, cap 3: the GPU hits 1, the lower tier continues with 2 and 3 (staged up);
  // the pool evicts 6, 5, 4 (free order after R2) for 2, 3, 7, all demoted.
  CHECK(run(idx, {{1, 2, 3, 7}, 64}, 16) == 3);
  CHECK(h.counters(0).hits == 1);
  CHECK(h.counters(1).hits == 2);
  CHECK(h.counters(1).promotions == 2);
  CHECK(h.link(1).blocks_up == 2);
  CHECK(h.counters(0).evictions == 5);
  CHECK(h.counters(0).demotions == 5);
  CHECK(h.counters(1).writes == 5);
  CHECK(h.resident(1) == 3);  // 4, 5, 6
  CHECK(h.resident(0) == 4);  // 1, 2, 3, 7
  // R4 {9,4,10}: a miss; the pool evicts 7, 3, 2 (demoted) and recomputes 4, whose copy below
  // is superseded.
  CHECK(run(idx, {{9, 4, 10}, 48}, 16) == 0);
  CHECK(h.counters(1).superseded == 1);
  CHECK(h.tier_of(4) == 0);
  CHECK(h.resident(1) == 5);  // 5, 6, 7, 3, 2
  CHECK(h.audit().empty());
  // A prompt of more blocks than the GPU has is not scheduled: nothing changes.
  CHECK(run(idx, {{5, 6, 7, 3, 2}, 80}, 16) == 0);
  CHECK(h.unscheduled() == 1);
  CHECK(h.resident(1) == 5);
}

TEMPLATE_TEST_CASE("engine tiers: the engine's own hits are unchanged by lower tiers",
                   "[tier][engine]", prefix::vllm_block_pool, prefix::sglang_radix_cache) {
  // Loads take GPU blocks as prefills do, so the GPU cache evolves exactly as under --engine:
  // tier 0's hit per request is the engine index's, whatever lies below.
  using engine_index = std::conditional_t<std::is_same_v<TestType, prefix::vllm_block_pool>,
                                          prefix::vllm_engine_index, prefix::sglang_engine_index>;
  for (std::uint32_t gpu : {6u, 20u, 80u}) {
    for (const char* below : {"lru", "s3fifo", "arc"}) {
      engine_index alone(gpu);
      index_of<TestType> one_tier(make({{gpu, ""}}));
      index_of<TestType> two(make({{gpu, ""}, {3 * gpu, below}}));
      index_of<TestType> three(make({{gpu, ""}, {gpu, below}, {4 * gpu, "lru"}}));
      for (const auto& q : random_requests(gpu, 500, 16)) {
        const auto served0 = two.hierarchy().counters(0).hits;
        const auto served0_3 = three.hierarchy().counters(0).hits;
        const std::uint32_t want = run(alone, q, 16);
        REQUIRE(run(one_tier, q, 16) == want);
        const std::uint32_t h2 = run(two, q, 16);
        const std::uint32_t h3 = run(three, q, 16);
        REQUIRE(two.hierarchy().counters(0).hits - served0 == want);
        REQUIRE(three.hierarchy().counters(0).hits - served0_3 == want);
        REQUIRE(h2 >= two.hierarchy().counters(0).hits - served0);
        REQUIRE(h3 >= three.hierarchy().counters(0).hits - served0_3);
        REQUIRE(two.hierarchy().audit().empty());
        REQUIRE(three.hierarchy().audit().empty());
      }
      INFO(gpu << " " << below);
      CHECK(one_tier.hierarchy().counters(0).evictions == alone.evictions());
      CHECK(two.hierarchy().counters(1).hits > 0);
    }
  }
}

TEMPLATE_TEST_CASE("engine tiers: an unbounded lower tier serves every block seen before",
                   "[tier][engine]", prefix::vllm_block_pool, prefix::sglang_radix_cache) {
  // Brute force: with room below for every block, a block ever cached is in the GPU or below, so
  // the hit is the leading run of keys seen in an earlier request's full blocks, capped at
  // floor((L - 1) / B). Exactly so for SGLang, whose tree holds a key only with its prefix; at
  // most so for vLLM, whose pool may keep a block whose prefix it evicted: such a block, past
  // the GPU hit, ends the run (vLLM recomputes every block after its own hit).
  constexpr bool exact = std::is_same_v<TestType, prefix::sglang_radix_cache>;
  for (std::uint32_t gpu : {5u, 30u}) {
    index_of<TestType> idx(make({{gpu, ""}, {100000, "lru"}}));
    std::set<block_key> seen;
    for (const auto& q : random_requests(7 + gpu, 600, 16)) {
      const std::uint64_t n = (q.L + 15) / 16;
      std::uint32_t want = 0;
      const auto cap = static_cast<std::uint32_t>(
          std::min<std::uint64_t>((q.L - 1) / 16, q.keys.size()));
      while (n <= gpu && want < cap && seen.count(q.keys[want])) ++want;
      const std::uint32_t got = run(idx, q, 16);
      if (exact) {
        REQUIRE(got == want);
      } else {
        REQUIRE(got <= want);
      }
      if (n <= gpu) seen.insert(q.keys.begin(), q.keys.begin() + q.L / 16);
    }
    CHECK(idx.hierarchy().counters(1).drops == 0);
    CHECK(idx.hierarchy().audit().empty());
  }
}

TEST_CASE("engine tiers: two copies of a key evicted in one request leave one copy below",
          "[tier][engine]") {
  // vLLM keeps a second block under key 3 (the third request recomputes it: its prefix was
  // evicted); the fourth request evicts 3, 9 and the other 3. The first 3 is demoted, 9 pushes it
  // down to t2, and the second copy is dropped rather than written into t1 again.
  index_of<prefix::vllm_block_pool> idx(make({{5, "vllm"}, {1, "lru"}, {10, "lru"}}));
  const auto& h = idx.hierarchy();
  for (const request& q : std::vector<request>{{{1, 2, 3}, 48}, {{9}, 16}, {{1, 2, 3}, 48},
                                               {{20, 21, 22}, 48}}) {
    run(idx, q, 16);
    REQUIRE(h.audit().empty());
  }
  CHECK(h.engine_cache().cached_blocks() == 5);
  CHECK(h.tier_of(3) == 2);
  CHECK(h.tier_of(9) == 1);
  CHECK(h.counters(0).evictions == h.counters(0).demotions + h.counters(0).drops);
  CHECK(h.counters(0).drops >= 1);
}

TEST_CASE("engine tiers: refused configurations", "[tier][engine]") {
  using vllm_h = hierarchy<prefix::vllm_block_pool>;
  using sglang_h = hierarchy<prefix::sglang_radix_cache>;
  CHECK_THROWS_WITH(vllm_h(make({{10, "lru"}, {20, "lru"}})),
                    Catch::Contains("the engine tier's policy 'lru' is not its engine 'vllm'"));
  CHECK_THROWS_WITH(sglang_h(make({{10, "vllm"}})), Catch::Contains("is not its engine 'sglang'"));
  CHECK_THROWS_WITH(vllm_h(make({{10, ""}, {20, "nosuch"}})), Catch::Contains("unknown policy 'nosuch'"));
  auto inclusive = make({{10, ""}, {20, "lru"}});
  inclusive.mode = tier::inclusion::inclusive;
  CHECK_THROWS_WITH(vllm_h(inclusive), Catch::Contains("only exclusive write-back"));
}
