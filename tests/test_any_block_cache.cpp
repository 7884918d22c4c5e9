// any_block_cache (kvtk/cache/any_block_cache.hpp) against the template it erases: for every
// online policy of the compile-time list, the same key stream gives the same outcomes and the
// same evictions; the batched access equals single ones; moves keep the state; names and offline
// policies are refused.
#include <catch2/catch.hpp>
// The light declaration; the definitions come from kvtk::policies (the consumer test compiles
// the header-only form and mixes it with the library).
#include <kvtk/cache/any_block_cache_decl.hpp>
#include <kvtk/kvtk.hpp>
#include <random>
#include <utility>
#include <vector>

namespace {

std::vector<kvtk::block_key> zipf_keys(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<kvtk::block_key> keys(n);
  for (auto& k : keys) k = static_cast<kvtk::block_key>(1000.0 / (1.0 + rng() % 997)) + rng() % 3;
  return keys;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("any_block_cache equals block_cache<P>", "[any_block_cache]",
                        kvtk::all_policies::tuple) {
  using P = TestType;
  if constexpr (kvtk::is_offline_policy<P>) {
    CHECK_THROWS_AS(kvtk::any_block_cache(P::name, {.capacity = 8}), std::invalid_argument);
  } else {
    std::vector<std::pair<kvtk::block_key, std::uint32_t>> erased_evictions, template_evictions;
    kvtk::any_block_cache any(P::name, {.capacity = 64},
                              [&](kvtk::block_key k, std::uint32_t s) { erased_evictions.push_back({k, s}); });
    CHECK(any.policy() == P::name);
    auto on_evict = [&](kvtk::block_key k, std::uint32_t s) { template_evictions.push_back({k, s}); };
    kvtk::block_cache<P, decltype(on_evict)> ref({.capacity = 64}, on_evict);
    const auto keys = zipf_keys(20000, 7);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const auto a = any.access(keys[i]);
      const auto b = ref.access(keys[i]);
      REQUIRE(a.result == b.result);
      REQUIRE(a.slot == b.slot);
      if (i % 997 == 0) {
        CHECK(any.pin(keys[i]) == ref.pin(keys[i]));
        CHECK(any.unpin(keys[i]) == ref.unpin(keys[i]));
      }
    }
    CHECK(erased_evictions == template_evictions);
    CHECK(any.size() == ref.size());
    CHECK(any.stats().hits == ref.stats().hits);
    // A move keeps the cache; the batched access equals the same accesses one by one.
    kvtk::any_block_cache moved = std::move(any);
    kvtk::block_cache<P> twin({.capacity = 64});
    kvtk::any_block_cache single(P::name, {.capacity = 64});
    const auto batch = zipf_keys(512, 11);
    std::vector<kvtk::access_result> out(batch.size());
    kvtk::any_block_cache batched(P::name, {.capacity = 64});
    batched.access(batch, out);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      kvtk::access_hint h;
      h.depth = static_cast<std::uint32_t>(i);
      REQUIRE(out[i] == single.access(batch[i], h).result);
    }
    CHECK(moved.contains(keys.back()));
    CHECK(moved.erase(keys.back()) == kvtk::erase_result::erased);
    CHECK_FALSE(moved.contains(keys.back()));
  }
}

TEST_CASE("any_block_cache refuses unknown names, listing the valid ones", "[any_block_cache]") {
  try {
    kvtk::any_block_cache c("nope", {.capacity = 8});
    FAIL("no exception");
  } catch (const kvtk::unknown_policy& e) {
    CHECK(std::string(e.what()).find("s3fifo") != std::string::npos);
  }
  CHECK_THROWS_AS(kvtk::any_block_cache("lru", {.capacity = 0}), std::invalid_argument);
}

TEMPLATE_LIST_TEST_CASE("evict(n): n unpinned victims in policy order, or nothing",
                        "[any_block_cache][conformance]", kvtk::all_policies::tuple) {
  using P = TestType;
  if constexpr (!kvtk::is_offline_policy<P>) {
    std::vector<kvtk::block_key> victims;
    auto on_evict = [&](kvtk::block_key k, std::uint32_t) { victims.push_back(k); };
    kvtk::block_cache<P, decltype(on_evict)> c({.capacity = 32}, on_evict);
    for (kvtk::block_key k = 0; k < 32; ++k) c.access(k);
    for (kvtk::block_key k = 0; k < 32; k += 2) REQUIRE(c.pin(k));  // 16 pinned
    CHECK_FALSE(c.evict(17));  // all or nothing
    CHECK(c.size() == 32);
    CHECK(victims.empty());
    REQUIRE(c.evict(10));
    CHECK(c.size() == 22);
    CHECK(victims.size() == 10);
    for (kvtk::block_key v : victims) {
      CHECK(v % 2 == 1);  // never a pinned key
      CHECK_FALSE(c.contains(v));
    }
    CHECK(c.stats().evictions == 10);
    REQUIRE(c.evict(6));
    CHECK_FALSE(c.evict(1));  // only pinned entries remain
    CHECK(c.evict(0));
    // The freed room is usable.
    for (kvtk::block_key k = 100; k < 116; ++k) CHECK(c.access(k).result == kvtk::access_result::inserted);
  }
}

TEST_CASE("evict(n) takes LRU's victims in recency order", "[any_block_cache]") {
  std::vector<kvtk::block_key> victims;
  kvtk::any_block_cache c("lru", {.capacity = 8},
                          [&](kvtk::block_key k, std::uint32_t) { victims.push_back(k); });
  for (kvtk::block_key k : {1, 2, 3, 4, 5}) c.access(k);
  c.access(2);  // 2 is now the most recent
  REQUIRE(c.evict(3));
  CHECK(victims == std::vector<kvtk::block_key>{1, 3, 4});
}
