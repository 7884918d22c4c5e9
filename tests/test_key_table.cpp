#include <catch2/catch.hpp>
#include <kvtk/detail/key_table.hpp>
#include <random>
#include <unordered_map>

namespace {
struct pool_key {
  const std::vector<std::uint64_t>* keys;
  std::uint64_t operator()(std::uint32_t i) const noexcept { return (*keys)[i]; }
};
using table = kvtk::detail::key_table<pool_key>;
}  // namespace

TEST_CASE("key_table matches std::unordered_map under random insert/erase", "[key_table]") {
  for (std::uint32_t cap : {1u, 2u, 7u, 64u, 1000u})
    for (unsigned spe : {2u, 3u, 4u}) {
      std::vector<std::uint64_t> pool(cap);
      std::vector<std::uint32_t> free;
      for (std::uint32_t i = 0; i < cap; ++i) free.push_back(i);
      table t(cap, pool_key{&pool}, spe);
      std::unordered_map<std::uint64_t, std::uint32_t> ref;
      std::mt19937_64 rng(cap * 10 + spe);
      // Small universes force long clusters and wrap-around; special keys 0 and ~0 included, and
      // keys differing only in high bits (equal low halves) to exercise tag collisions.
      const std::uint64_t universe = cap * 3 + 2;
      for (int op = 0; op < 200000; ++op) {
        std::uint64_t k = rng() % universe;
        if (k == 1) k = ~std::uint64_t{0};
        if (k == 2) k = std::uint64_t{1} << 63;
        if (k % 5 == 3) k <<= 40;
        const auto it = ref.find(k);
        REQUIRE(t.find(k) == (it == ref.end() ? table::npos : it->second));
        if (rng() % 2 == 0) {
          if (it == ref.end() && !free.empty()) {
            const std::uint32_t i = free.back();
            free.pop_back();
            pool[i] = k;
            t.insert(k, i);
            ref.emplace(k, i);
          }
        } else {
          const std::uint32_t got = t.take(k);
          REQUIRE(got == (it == ref.end() ? table::npos : it->second));
          if (it != ref.end()) {
            free.push_back(it->second);
            ref.erase(it);
          }
        }
        REQUIRE(t.size() == ref.size());
      }
      for (const auto& [k, v] : ref) REQUIRE(t.find(k) == v);
    }
}

TEST_CASE("key_table rejects impossible sizes", "[key_table]") {
  std::vector<std::uint64_t> pool(4);
  REQUIRE_THROWS_AS(table(0, pool_key{&pool}), std::invalid_argument);
  REQUIRE_THROWS_AS(table(1u << 31, pool_key{&pool}), std::invalid_argument);
  REQUIRE_THROWS_AS(table(4, pool_key{&pool}, 1), std::invalid_argument);
  REQUIRE(table(5, pool_key{&pool}, 2).slot_count() == 10);
  table t(4, pool_key{&pool});
  REQUIRE(t.slot_count() == 16);  // 4 slots per entry by default
  REQUIRE(t.memory_bytes() == 128);
  REQUIRE_FALSE(t.erase(42));  // erase of a missing key is a no-op
}
