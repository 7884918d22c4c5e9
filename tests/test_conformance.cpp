// Conformance suite over the whole policy list: random operations (access, insert, pin, unpin,
// erase) with mixed entry sizes, and a full audit after every one.
#include <algorithm>
#include <catch2/catch.hpp>
#include <kvtk/kvtk.hpp>
#include <map>
#include <random>
#include <set>
#include <unordered_map>

#include "audit.hpp"

namespace {

struct recorder {
  std::vector<kvtk::block_key>* victims;
  void operator()(kvtk::block_key k, std::uint32_t) const { victims->push_back(k); }
};

template <class P, class OnEvict = recorder>
typename kvtk::block_cache<P, OnEvict>::config config_of(std::uint64_t capacity) {
  typename kvtk::block_cache<P, OnEvict>::config cfg{};
  cfg.capacity = capacity;
  kvtk::promise_next_use<P>(cfg.policy);
  return cfg;
}

template <class P>
void run_conformance(std::uint64_t capacity, std::uint32_t max_entries, std::uint32_t max_size,
                     std::uint64_t seed) {
  std::vector<kvtk::block_key> victims;
  using cache_t = kvtk::block_cache<P, recorder>;
  typename cache_t::config cfg{};
  cfg.capacity = capacity;
  cfg.max_entries = max_entries;
  // Mechanics only: belady gets next_use = never (a valid hint) on every access.
  kvtk::promise_next_use<P>(cfg.policy);
  cache_t cache(cfg, recorder{&victims});

  std::mt19937_64 rng(seed);
  std::map<kvtk::block_key, std::uint32_t> pins;      // shadow pin counts
  std::map<kvtk::block_key, std::uint32_t> resident;  // shadow: key -> size
  const std::uint64_t universe = max_entries * 3ull;
  for (int op = 0; op < 20000; ++op) {
    const kvtk::block_key k = rng() % universe;
    const unsigned what = rng() % 100;
    victims.clear();
    const std::size_t size_before = cache.size();
    kvtk::access_hint hint;
    hint.priority = static_cast<std::uint32_t>(rng() % 4) * 30;
    hint.next_use = rng() % 1000;
    const std::uint32_t size = max_size == 1 ? 1 : 1 + static_cast<std::uint32_t>(rng() % max_size);
    if (what < 60 || what >= 90) {
      const bool was = resident.count(k) != 0;
      const kvtk::access_outcome r =
          what < 60 ? cache.access(k, hint, size) : cache.insert(k, hint, size);
      for (kvtk::block_key v : victims) {
        INFO("victim " << v);
        REQUIRE(resident.count(v) == 1);
        REQUIRE(pins[v] == 0);  // pinned is never evicted
        resident.erase(v);
      }
      if (was) {
        REQUIRE(r.result == kvtk::access_result::hit);
        REQUIRE(victims.empty());
      } else if (r.result == kvtk::access_result::inserted) {
        resident[k] = size;
      } else {
        REQUIRE(r.result == kvtk::access_result::rejected);
        REQUIRE(victims.empty());  // a rejected insert changes nothing
        REQUIRE(cache.size() == size_before);
        // Rejection only when the unpinned entries really cannot make room.
        std::uint64_t pinned_units = 0, used = 0;
        for (auto& [key, sz] : resident) {
          used += sz;
          if (pins[key] > 0) pinned_units += sz;
        }
        const bool no_slot =
            resident.size() == max_entries && cache.pinned_entries() == resident.size();
        REQUIRE((pinned_units + size > capacity || no_slot));
        (void)used;
      }
    } else if (what < 75) {
      const bool ok = cache.pin(k);
      REQUIRE(ok == (resident.count(k) == 1));
      if (ok) ++pins[k];
    } else if (what < 85) {
      const bool ok = cache.unpin(k);
      REQUIRE(ok == (resident.count(k) == 1 && pins[k] > 0));
      if (ok) --pins[k];
    } else {
      const kvtk::erase_result e = cache.erase(k);
      if (resident.count(k) == 0) {
        REQUIRE(e == kvtk::erase_result::not_found);
      } else if (pins[k] > 0) {
        REQUIRE(e == kvtk::erase_result::pinned);
      } else {
        REQUIRE(e == kvtk::erase_result::erased);
        resident.erase(k);
      }
    }
    // Unpin everything now and then so the cache keeps churning.
    if (op % 997 == 0) {
      for (auto& [key, n] : pins) {
        while (n > 0 && cache.unpin(key)) --n;
      }
    }
    const std::string err = kvtk::test::audit(cache);
    INFO("op " << op << " policy " << P::name);
    REQUIRE(err.empty());
    REQUIRE(cache.size() == resident.size());
    for (auto& [key, sz] : resident) REQUIRE(cache.contains(key));
  }
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("conformance: unit sizes, pins and erases", "[conformance]",
                        kvtk::all_policies::tuple) {
  run_conformance<TestType>(64, 64, 1, 1);
  run_conformance<TestType>(7, 7, 1, 2);
  run_conformance<TestType>(1, 1, 1, 3);
}

TEMPLATE_LIST_TEST_CASE("conformance: byte sizes with a node bound", "[conformance]",
                        kvtk::all_policies::tuple) {
  run_conformance<TestType>(200, 60, 8, 4);
  run_conformance<TestType>(50, 100, 5, 5);
}

TEMPLATE_LIST_TEST_CASE("bad configurations are rejected with an exception", "[conformance]",
                        kvtk::all_policies::tuple) {
  using cache_t = kvtk::block_cache<TestType>;
  typename cache_t::config cfg{};
  kvtk::promise_next_use<TestType>(cfg.policy);
  cfg.capacity = 0;
  REQUIRE_THROWS_AS(cache_t(cfg), std::invalid_argument);
  cfg.capacity = std::uint64_t{1} << 40;  // bytes, but no node bound given
  REQUIRE_THROWS_AS(cache_t(cfg), std::invalid_argument);
  cfg.capacity = 10;
  cache_t ok(cfg);
  REQUIRE(ok.erase(5) == kvtk::erase_result::not_found);  // documented no-op
  REQUIRE_FALSE(ok.unpin(5));
  REQUIRE_FALSE(ok.pin(5));
  REQUIRE(ok.access(1, {}, 0).result == kvtk::access_result::rejected);   // size 0
  REQUIRE(ok.access(1, {}, 11).result == kvtk::access_result::rejected);  // larger than capacity
  REQUIRE(ok.size() == 0);
}

TEMPLATE_LIST_TEST_CASE("all pinned: insert reports failure instead of evicting", "[conformance]",
                        kvtk::all_policies::tuple) {
  std::vector<kvtk::block_key> victims;
  kvtk::block_cache<TestType, recorder> cache(config_of<TestType>(4), recorder{&victims});
  for (kvtk::block_key k = 0; k < 4; ++k) {
    REQUIRE(cache.access(k).result == kvtk::access_result::inserted);
    REQUIRE(cache.pin(k));
  }
  REQUIRE(cache.access(99).result == kvtk::access_result::rejected);
  REQUIRE(victims.empty());
  REQUIRE(cache.unpin(2));
  REQUIRE(cache.access(99).result == kvtk::access_result::inserted);
  REQUIRE(victims == std::vector<kvtk::block_key>{2});
}

TEMPLATE_LIST_TEST_CASE("hidden entries: not pinned by the caller, never victims, restored by unhide",
                        "[conformance]", kvtk::all_policies::tuple) {
  std::vector<kvtk::block_key> victims;
  kvtk::block_cache<TestType, recorder> cache(config_of<TestType>(3), recorder{&victims});
  for (kvtk::block_key k = 0; k < 3; ++k) REQUIRE(cache.access(k).result == kvtk::access_result::inserted);
  REQUIRE(cache.hide(1));
  REQUIRE(cache.hidden(1));
  REQUIRE(cache.pins(1) == 0);       // held by a hierarchy, not pinned by a caller
  REQUIRE_FALSE(cache.pin(1));       // a hidden entry cannot be pinned
  REQUIRE_FALSE(cache.unpin(1));
  REQUIRE_FALSE(cache.hide(1));
  REQUIRE(cache.hidden_entries() == 1);
  for (kvtk::block_key k = 10; k < 14; ++k) (void)cache.access(k);
  REQUIRE(std::find(victims.begin(), victims.end(), 1) == victims.end());
  REQUIRE(cache.contains(1));
  REQUIRE(cache.unhide(1));
  REQUIRE_FALSE(cache.hidden(1));
  REQUIRE(cache.pins(1) == 0);
  REQUIRE(cache.pin(1));
  REQUIRE(cache.pins(1) == 1);
}

TEMPLATE_LIST_TEST_CASE("moves hand over the whole state: the moved-to cache continues exactly",
                        "[conformance]", kvtk::all_policies::tuple) {
  using cache_t = kvtk::block_cache<TestType, recorder>;
  static_assert(std::is_nothrow_move_constructible_v<cache_t>);
  static_assert(std::is_nothrow_move_assignable_v<cache_t>);
  std::vector<kvtk::block_key> moved_victims, ref_victims, other_victims;
  cache_t ref(config_of<TestType>(48), recorder{&ref_victims});
  cache_t first(config_of<TestType>(48), recorder{&moved_victims});
  cache_t other(config_of<TestType>(16), recorder{&other_victims});
  std::mt19937_64 rng(3);
  std::vector<kvtk::block_key> keys(6000);
  for (auto& k : keys) k = rng() % 3 == 0 ? rng() % 16 : rng() % 200;
  auto same = [&](cache_t& c, std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to; ++i) {
      const auto a = c.access(keys[i]);
      const auto b = ref.access(keys[i]);
      REQUIRE(a.result == b.result);
      REQUIRE(a.slot == b.slot);
      if (i % 101 == 0) REQUIRE(c.pin(keys[i]) == ref.pin(keys[i]));
      if (i % 101 == 50) REQUIRE(c.unpin(keys[(i / 101) * 101]) == ref.unpin(keys[(i / 101) * 101]));
    }
  };
  for (std::size_t i = 0; i < 200; ++i) other.access(rng() % 40);
  same(first, 0, 2000);
  cache_t second(std::move(first));  // move construction
  same(second, 2000, 4000);
  const std::size_t other_evictions = other_victims.size();
  other = std::move(second);  // move assignment over a cache with its own entries
  CHECK(other_victims.size() == other_evictions);  // the old entries leave without callbacks
  same(other, 4000, keys.size());
  CHECK(moved_victims == ref_victims);
  CHECK(other.size() == ref.size());
  CHECK(other.stats().hits == ref.stats().hits);
  CHECK(kvtk::test::audit(other).empty());
}

TEST_CASE("belady refuses a cache whose caller does not promise next uses", "[conformance]") {
  CHECK_THROWS_WITH(kvtk::block_cache<kvtk::belady>({.capacity = 8}),
                    Catch::Contains("belady is offline") && Catch::Contains("next_use_hints"));
  kvtk::block_cache<kvtk::belady>::config cfg{.capacity = 8};
  cfg.policy.next_use_hints = true;
  CHECK_NOTHROW(kvtk::block_cache<kvtk::belady>(cfg));
  // The run-time registry refuses it the same way.
  CHECK_THROWS_AS(kvtk::visit_policy("belady",
                                     []<class P>() {
                                       kvtk::block_cache<P> c({.capacity = 8});
                                       return c.size();
                                     }),
                  std::invalid_argument);
}
