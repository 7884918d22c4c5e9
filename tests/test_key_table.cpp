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

// ghost_lists against a model of N std::deques with the documented pool-full rule (small
// max_entries, many takes from the middle, keys with equal low halves).
#include <deque>
#include <kvtk/detail/ghost_list.hpp>

namespace {
template <unsigned N>
void ghost_lists_match_model(std::uint32_t max_entries, std::uint64_t seed) {
  kvtk::detail::ghost_lists<N> g(max_entries);
  struct ghost {
    std::uint64_t key;
    std::uint32_t weight;
  };
  std::deque<ghost> model[N];
  std::size_t held = 0;
  std::mt19937_64 rng(seed);
  const std::uint64_t universe = max_entries * 3ull + 5;
  auto where = [&](std::uint64_t k) {
    for (unsigned l = 0; l < N; ++l) {
      for (const ghost& x : model[l]) {
        if (x.key == k) return static_cast<int>(l);
      }
    }
    return g.none;
  };
  auto drop_oldest = [&](unsigned l) {
    if (model[l].empty()) return;
    model[l].pop_front();
    --held;
  };
  for (int op = 0; op < 60000; ++op) {
    const std::uint64_t id = rng() % universe;
    const std::uint64_t k = rng() % 2 ? id << 40 : id;  // equal low halves too
    const unsigned l = static_cast<unsigned>(rng() % N);
    const unsigned what = static_cast<unsigned>(rng() % 10);
    const int in = where(k);
    REQUIRE(g.find(k) == in);
    if (what < 5 && in == g.none) {
      const auto w = static_cast<std::uint32_t>(rng() % 4);
      if (held == max_entries) {
        unsigned victim = l;
        while (model[victim].empty()) victim = (victim + 1) % N;
        drop_oldest(victim);
      }
      model[l].push_back({k, w});
      ++held;
      g.push(l, k, w);
    } else if (what < 8) {
      REQUIRE(g.take(k) == in);
      if (in != g.none) {
        auto& m = model[in];
        for (auto it = m.begin(); it != m.end(); ++it) {
          if (it->key == k) {
            m.erase(it);
            --held;
            break;
          }
        }
      }
    } else {
      drop_oldest(l);
      g.pop(l);
    }
    for (unsigned u = 0; u < N; ++u) {
      REQUIRE(g.size(u) == model[u].size());
      std::uint64_t w = 0;
      for (const ghost& x : model[u]) w += x.weight;
      REQUIRE(g.weight(u) == w);
    }
    if (op % 97 == 0) {
      for (unsigned u = 0; u < N; ++u) {
        std::vector<std::uint64_t> order;
        g.for_each(u, [&](std::uint64_t key, std::uint32_t) { order.push_back(key); });
        std::vector<std::uint64_t> want;
        for (const ghost& x : model[u]) want.push_back(x.key);
        REQUIRE(order == want);
      }
    }
  }
}
}  // namespace

TEST_CASE("ghost_lists match a model of FIFO deques (order, weights, the pool-full rule)",
          "[key_table][ghost]") {
  for (std::uint32_t cap : {1u, 2u, 4u, 17u, 64u}) {
    INFO("max_entries " << cap);
    ghost_lists_match_model<1>(cap, cap);
    ghost_lists_match_model<2>(cap, cap + 100);
    ghost_lists_match_model<3>(cap, cap + 200);
  }
  CHECK_THROWS_AS(kvtk::detail::ghost_lists<2>(0), std::invalid_argument);
}
