#include <catch2/catch.hpp>
#include <kvtk/detail/key_table.hpp>
#include <random>
#include <unordered_map>

using kvtk::detail::key_table;

TEST_CASE("key_table matches std::unordered_map under random insert/erase", "[key_table]") {
  for (std::uint32_t cap : {1u, 2u, 7u, 64u, 1000u}) {
    key_table t(cap);
    std::unordered_map<std::uint64_t, std::uint32_t> ref;
    std::mt19937_64 rng(cap);
    // Small universes force long clusters and wrap-around; special keys 0 and ~0 included.
    const std::uint64_t universe = cap * 3 + 2;
    for (int op = 0; op < 200000; ++op) {
      std::uint64_t k = rng() % universe;
      if (k == 1) k = ~std::uint64_t{0};
      if (k == 2) k = std::uint64_t{1} << 63;
      if (k % 5 == 3) k <<= 20;  // keys that share low bits
      const auto it = ref.find(k);
      REQUIRE(t.find(k) == (it == ref.end() ? key_table::npos : it->second));
      if (rng() % 2 == 0) {
        if (it == ref.end() && ref.size() < cap) {
          const auto v = static_cast<std::uint32_t>(rng() % 1000);
          t.insert(k, v);
          ref.emplace(k, v);
        }
      } else {
        REQUIRE(t.erase(k) == (it != ref.end()));
        if (it != ref.end()) ref.erase(it);
      }
      REQUIRE(t.size() == ref.size());
    }
    for (const auto& [k, v] : ref) REQUIRE(t.find(k) == v);
  }
}

TEST_CASE("key_table rejects impossible sizes", "[key_table]") {
  REQUIRE_THROWS_AS(key_table(0), std::invalid_argument);
  REQUIRE_THROWS_AS(key_table(1u << 31), std::invalid_argument);
  key_table t(4);
  REQUIRE(t.slot_count() == 8);
  REQUIRE_FALSE(t.erase(42));  // erase of a missing key is a no-op
  REQUIRE_FALSE(t.assign(42, 1));
}
