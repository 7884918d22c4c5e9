// Randomized reference-model tests: every policy against a simple model written from the paper,
// >= 10^5 accesses per policy and capacity, identical hit/miss and identical victims per access.
#include <catch2/catch.hpp>
#include <kvtk/kvtk.hpp>
#include <random>

#include "reference_models.hpp"

namespace {

using namespace kvtk::test;

struct recorder {
  std::vector<kvtk::block_key>* victims;
  void operator()(kvtk::block_key k, std::uint32_t) const { victims->push_back(k); }
};

// A workload with locality, frequency skew, loops and scans, so that recency, frequency and ghost
// logic are all exercised.
std::vector<model_key> make_workload(std::size_t n, std::size_t capacity, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<model_key> out;
  out.reserve(n);
  const std::uint64_t universe = capacity * 4;
  std::geometric_distribution<std::uint64_t> hot(1.0 / static_cast<double>(capacity / 2 + 1));
  while (out.size() < n) {
    const unsigned mode = rng() % 100;
    if (mode < 55) {
      out.push_back(hot(rng) % universe);
    } else if (mode < 85) {
      out.push_back(rng() % universe);
    } else if (mode < 95) {  // a short scan of fresh keys
      const std::uint64_t base = 1'000'000 + rng() % 1'000'000;
      for (std::uint64_t i = 0; i < capacity / 3 + 1 && out.size() < n; ++i)
        out.push_back(base + i);
    } else {  // a loop slightly larger than the cache
      const std::uint64_t base = rng() % universe;
      for (std::uint64_t i = 0; i < capacity + 2 && out.size() < n; ++i) {
        out.push_back((base + i) % universe);
      }
    }
  }
  return out;
}

template <class P, class Model>
void compare(Model model, std::size_t capacity, std::size_t n, std::uint64_t seed) {
  const std::vector<model_key> keys = make_workload(n, capacity, seed);
  const std::vector<std::uint64_t> next = kvtk::next_use_positions(keys);
  std::vector<kvtk::block_key> victims;
  using cache_t = kvtk::block_cache<P, recorder>;
  typename cache_t::config cfg{};
  cfg.capacity = capacity;
  kvtk::promise_next_use<P>(cfg.policy);
  cache_t cache(cfg, recorder{&victims});
  std::mt19937 prio_rng(static_cast<unsigned>(seed));
  for (std::size_t i = 0; i < keys.size(); ++i) {
    kvtk::access_hint h;
    h.next_use = next[i];
    h.priority = static_cast<std::uint32_t>(prio_rng() % 3) * 40 + 10;  // 10, 50, 90
    h.depth = static_cast<std::uint32_t>(prio_rng() % 200);  // request positions, for cost-aware
    victims.clear();
    const auto got = cache.access(keys[i], h);
    const model_step want = model.access(keys[i], h);
    INFO(P::name << " capacity " << capacity << " access " << i << " key " << keys[i]);
    REQUIRE((got.result == kvtk::access_result::hit) == want.hit);
    REQUIRE(victims == want.victims);
  }
  // The workload must make the policy work: plenty of evictions and plenty of hits.
  REQUIRE(cache.stats().evictions > n / 10);
  REQUIRE(cache.stats().hits > n / 50);
}

constexpr std::size_t kOps = 100'000;

}  // namespace

TEST_CASE("lru equals the std::list model", "[reference]") {
  for (std::size_t c : {1, 16, 200}) compare<kvtk::lru>(lru_model(c), c, kOps, c);
}
TEST_CASE("fifo equals the queue model", "[reference]") {
  for (std::size_t c : {1, 16, 200}) compare<kvtk::fifo>(fifo_model(c), c, kOps, c + 1);
}
TEST_CASE("clock equals the circular-buffer model", "[reference]") {
  for (std::size_t c : {1, 16, 200}) compare<kvtk::clock>(clock_model(c), c, kOps, c + 2);
}
TEST_CASE("sieve equals the array model", "[reference]") {
  for (std::size_t c : {1, 16, 200}) compare<kvtk::sieve>(sieve_model(c), c, kOps, c + 3);
}
TEST_CASE("lfu equals the linear-scan model", "[reference]") {
  for (std::size_t c : {1, 16, 200}) compare<kvtk::lfu>(lfu_model(c), c, kOps, c + 4);
}
TEST_CASE("2q equals the paper's pseudo-code", "[reference]") {
  for (std::size_t c : {4, 16, 200}) {
    compare<kvtk::two_q>(two_q_model(c), c, kOps, c + 5);
  }
}
TEST_CASE("arc equals the paper's pseudo-code", "[reference]") {
  for (std::size_t c : {1, 16, 200}) compare<kvtk::arc>(arc_model(c), c, kOps, c + 6);
}
TEST_CASE("s3fifo equals the queue model", "[reference]") {
  for (std::size_t c : {10, 16, 200}) {
    compare<kvtk::s3fifo>(s3fifo_model(c), c, kOps, c + 7);
  }
}
TEST_CASE("wtinylfu equals the list model", "[reference]") {
  for (std::size_t c : {16, 200, 1000})
    compare<kvtk::w_tinylfu>(w_tinylfu_model(c), c, kOps, c + 8);
}
TEST_CASE("priority-lru equals the linear-scan model", "[reference]") {
  for (std::size_t c : {1, 16, 200}) {
    compare<kvtk::priority_lru>(priority_lru_model(c), c, kOps, c + 9);
  }
}
TEST_CASE("belady equals the linear-scan model", "[reference]") {
  for (std::size_t c : {1, 16, 200}) compare<kvtk::belady>(belady_model(c), c, kOps, c + 10);
}

TEST_CASE("lfu keeps frequency counts", "[reference]") {
  kvtk::block_cache<kvtk::lfu> cache({.capacity = 3});
  for (int i = 0; i < 5; ++i) cache.access(7);
  cache.access(8);
  REQUIRE(decltype(cache)::container_type::frequency(cache.node(cache.find(7))) == 5);
  REQUIRE(decltype(cache)::container_type::frequency(cache.node(cache.find(8))) == 1);
}
TEST_CASE("cost-aware equals the linear-scan GDSF model", "[reference]") {
  for (std::size_t c : {1, 16, 200}) {
    compare<kvtk::cost_aware>(cost_aware_model(c), c, kOps, c + 11);
  }
}
