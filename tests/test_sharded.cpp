// sharded_block_cache (kvtk/cache/sharded_block_cache.hpp): with 1 shard it is block_cache; with
// N shards it is N independent block_caches fed the keys the documented shard function routes to
// them; the batched access equals single accesses; pins hold across shards; and a shared cache
// hammered by 4 threads stays consistent (this file is also the ThreadSanitizer target).
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <kvtk/cache/block_cache.hpp>
#include <kvtk/cache/sharded_block_cache.hpp>
#include <kvtk/offline.hpp>
#include <kvtk/policy/policy_list.hpp>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

namespace {

using eviction_log = std::vector<std::pair<kvtk::block_key, std::uint32_t>>;

// 70% from a hot set, 30% from a wide range: hits, misses and evictions in every shard.
std::vector<kvtk::block_key> mixed_keys(std::size_t n, std::uint64_t seed, std::uint64_t hot,
                                        std::uint64_t wide) {
  std::mt19937_64 rng(seed);
  std::vector<kvtk::block_key> keys(n);
  for (auto& k : keys) k = rng() % 10 < 7 ? rng() % hot : rng() % wide;
  return keys;
}

struct recorder {
  eviction_log* log;
  void operator()(kvtk::block_key k, std::uint32_t s) const noexcept { log->push_back({k, s}); }
};

bool same_stats(const kvtk::cache_stats& a, const kvtk::cache_stats& b) {
  return a.hits == b.hits && a.misses == b.misses && a.insertions == b.insertions &&
         a.evictions == b.evictions && a.rejections == b.rejections;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("sharded_block_cache with 1 shard equals block_cache", "[sharded]",
                        kvtk::all_policies::tuple) {
  using P = TestType;
  if constexpr (!kvtk::is_offline_policy<P>) {
    eviction_log sharded_log, plain_log;
    kvtk::sharded_block_cache<P, recorder> sharded({.capacity = 64, .shards = 1},
                                                   recorder{&sharded_log});
    kvtk::block_cache<P, recorder> plain({.capacity = 64}, recorder{&plain_log});
    REQUIRE(sharded.slot_count() == 64);
    const auto keys = mixed_keys(20000, 7, 48, 400);
    std::mt19937_64 rng(3);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      kvtk::access_hint h;
      h.depth = static_cast<std::uint32_t>(i % 13);
      h.priority = static_cast<std::uint32_t>(rng() % 4);
      const auto a = sharded.access(keys[i], h);
      const auto b = plain.access(keys[i], h);
      REQUIRE(a.result == b.result);
      REQUIRE(a.slot == b.slot);
      switch (rng() % 64) {
        case 0:
          REQUIRE(sharded.pin(keys[i]) == plain.pin(keys[i]));
          break;
        case 1:
          REQUIRE(sharded.unpin(keys[i]) == plain.unpin(keys[i]));
          break;
        case 2:
          REQUIRE(sharded.erase(keys[i]) == plain.erase(keys[i]));
          break;
        case 3: {
          const auto x = sharded.insert(keys[i] + 1000);
          const auto y = plain.insert(keys[i] + 1000);
          REQUIRE(x.result == y.result);
          REQUIRE(x.slot == y.slot);
          break;
        }
        default:
          break;
      }
      REQUIRE(sharded.pins(keys[i]) == plain.pins(keys[i]));
    }
    CHECK(sharded_log == plain_log);
    CHECK(same_stats(sharded.stats(), plain.stats()));
    CHECK(sharded.size() == plain.size());
    CHECK(sharded.used() == plain.used());
    CHECK(sharded.pinned_entries() == plain.pinned_entries());
    for (kvtk::block_key k = 0; k < 1400; ++k) REQUIRE(sharded.find(k) == plain.find(k));
  }
}

TEMPLATE_LIST_TEST_CASE("sharded_block_cache equals N block_caches fed by shard_of", "[sharded]",
                        kvtk::all_policies::tuple) {
  using P = TestType;
  if constexpr (!kvtk::is_offline_policy<P>) {
    // 7 shards over 1000 blocks: shards 0..5 get 143, shard 6 gets 142 (1000 = 7 * 142 + 6).
    constexpr std::uint32_t n = 7;
    eviction_log sharded_log, ref_log;
    kvtk::sharded_block_cache<P, recorder> sharded({.capacity = 1000, .shards = n},
                                                   recorder{&sharded_log});
    REQUIRE(sharded.shards() == n);
    REQUIRE(sharded.slots_per_shard() == 143);
    REQUIRE(sharded.slot_count() == 7 * 143);
    std::uint64_t total = 0;
    for (std::uint32_t s = 0; s < n; ++s) {
      CHECK(sharded.shard_capacity(s) == (s < 6 ? 143u : 142u));
      total += sharded.shard_capacity(s);
    }
    CHECK(total == 1000);
    // The reference: N plain caches, each logging (key, global slot).
    struct ref_shard {
      eviction_log* log;
      std::uint32_t base;
      void operator()(kvtk::block_key k, std::uint32_t s) const noexcept {
        log->push_back({k, base + s});
      }
    };
    std::vector<std::unique_ptr<kvtk::block_cache<P, ref_shard>>> ref;
    for (std::uint32_t s = 0; s < n; ++s) {
      ref.push_back(std::make_unique<kvtk::block_cache<P, ref_shard>>(
          typename kvtk::block_cache<P, ref_shard>::config{.capacity = sharded.shard_capacity(s)},
          ref_shard{&ref_log, s * 143}));
    }
    const auto keys = mixed_keys(40000, 11, 900, 1u << 20);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const kvtk::block_key k = keys[i];
      const std::uint32_t s = kvtk::sharded_block_cache<P>::shard_of(k, n);
      REQUIRE(sharded.shard_of(k) == s);
      kvtk::access_hint h;
      h.depth = static_cast<std::uint32_t>(i % 17);
      const auto a = sharded.access(k, h);
      const auto b = ref[s]->access(k, h);
      REQUIRE(a.result == b.result);
      if (b.result == kvtk::access_result::rejected) {
        REQUIRE(a.slot == sharded.npos);
      } else {
        REQUIRE(a.slot == s * 143 + b.slot);
        REQUIRE(sharded.locate(a.slot).shard == s);
        REQUIRE(sharded.locate(a.slot).slot == b.slot);
        REQUIRE(sharded.global_slot(s, b.slot) == a.slot);
      }
      if (i % 101 == 0) REQUIRE(sharded.pin(k) == ref[s]->pin(k));
      if (i % 101 == 50) {
        const kvtk::block_key u = keys[i - 50];
        REQUIRE(sharded.unpin(u) == ref[sharded.shard_of(u)]->unpin(u));
      }
    }
    CHECK(sharded_log == ref_log);  // one thread: the same victims in the same order
    kvtk::cache_stats sum;
    std::size_t size = 0;
    for (std::uint32_t s = 0; s < n; ++s) {
      const auto& st = ref[s]->stats();
      sum.hits += st.hits;
      sum.misses += st.misses;
      sum.insertions += st.insertions;
      sum.evictions += st.evictions;
      sum.rejections += st.rejections;
      size += ref[s]->size();
      CHECK(same_stats(sharded.shard_stats(s), st));
      // Every resident key of a shard is routed to it.
      sharded.with_shard(s, [&](const auto& c) {
        CHECK(c.size() == ref[s]->size());
        c.for_each_slot([&](kvtk::block_key k, std::uint32_t) { CHECK(sharded.shard_of(k) == s); });
      });
    }
    CHECK(same_stats(sharded.stats(), sum));
    CHECK(sharded.size() == size);
  }
}

TEST_CASE("shard_of: the documented mix, spread over shards", "[sharded]") {
  using cache = kvtk::sharded_block_cache<kvtk::lru>;
  // fmix64 computed by hand for key 1, then fastrange of its top 32 bits.
  std::uint64_t h = 1;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  CHECK(cache::shard_of(1, 16) == static_cast<std::uint32_t>(((h >> 32) * 16) >> 32));
  static_assert(cache::shard_of(12345, 1) == 0);
  // Sequential ids, multiples of 64 and random 64-bit hashes all spread within 10% of even.
  std::mt19937_64 rng(5);
  for (const int kind : {0, 1, 2}) {
    std::vector<std::size_t> count(16, 0);
    for (std::uint64_t i = 0; i < 160000; ++i) {
      const std::uint64_t k = kind == 0 ? i : kind == 1 ? i * 64 : rng();
      ++count[cache::shard_of(k, 16)];
    }
    for (const std::size_t c : count) {
      CHECK(c > 9000);
      CHECK(c < 11000);
    }
  }
}

TEST_CASE("sharded_block_cache: configuration errors", "[sharded]") {
  using cache = kvtk::sharded_block_cache<kvtk::lru>;
  CHECK_THROWS_AS(cache({.capacity = 100, .shards = 0}), std::invalid_argument);
  CHECK_THROWS_AS(cache({.capacity = 100, .shards = 65}), std::invalid_argument);
  CHECK_THROWS_AS(cache({.capacity = 15, .shards = 16}), std::invalid_argument);
  CHECK_THROWS_AS(cache({.capacity = 100, .shards = 2, .max_entries = 1u << 31}),
                  std::invalid_argument);
  CHECK_THROWS_AS(cache({.capacity = 64, .shards = 64, .max_entries = 1u << 27}),
                  std::invalid_argument);  // 64 * 2^27 slots = 2^33
  const cache c({.capacity = 16, .shards = 16});
  CHECK(c.slot_count() == 16);
  CHECK(c.shard_capacity(15) == 1);
  // Byte capacity: max_entries is per shard and becomes the slot stride.
  const cache bytes({.capacity = 1u << 20, .shards = 4, .max_entries = 100});
  CHECK(bytes.slots_per_shard() == 100);
  CHECK(bytes.slot_count() == 400);
  CHECK(bytes.shard_capacity(3) == (1u << 18));
}

TEST_CASE("sharded_block_cache: sized entries fit their shard, not the whole cache", "[sharded]") {
  // 4 shards of 2^18 units each; max_entries bounds every shard's node pool.
  kvtk::sharded_block_cache<kvtk::lru> c({.capacity = 1u << 20, .shards = 4, .max_entries = 64});
  const kvtk::block_key k = 1;
  const std::uint32_t s = c.shard_of(k);
  CHECK(c.access(k, std::uint32_t{1} << 19).result == kvtk::access_result::rejected);  // > shard
  CHECK(c.insert(k, std::uint32_t{1} << 18).result == kvtk::access_result::inserted);
  CHECK(c.used() == (1u << 18));
  const auto again = c.access(k, std::uint32_t{4096});  // size-first order; a hit keeps its size
  CHECK(again.result == kvtk::access_result::hit);
  CHECK(c.locate(again.slot).shard == s);
  // A second key of the same shard evicts the first (the shard is full), whatever the others hold.
  kvtk::block_key k2 = 2;
  while (c.shard_of(k2) != s) ++k2;
  CHECK(c.access(k2, std::uint32_t{1000}).result == kvtk::access_result::inserted);
  CHECK_FALSE(c.contains(k));
  CHECK(c.used() == 1000);
  CHECK(c.stats().evictions == 1);
  CHECK(c.stats().rejections == 1);
}

TEMPLATE_TEST_CASE("sharded_block_cache: batched access equals single accesses", "[sharded]",
                   kvtk::lru, kvtk::s3fifo, kvtk::cost_aware, kvtk::arc) {
  using P = TestType;
  // Per shard, the eviction sequence must match; across shards the batch orders differently.
  std::map<std::uint32_t, eviction_log> batched_log, single_log;
  struct by_shard {
    std::map<std::uint32_t, eviction_log>* logs;
    std::uint32_t stride;
    void operator()(kvtk::block_key k, std::uint32_t s) const noexcept {
      (*logs)[s / stride].push_back({k, s});
    }
  };
  using cache = kvtk::sharded_block_cache<P, by_shard>;
  const typename cache::config cfg{.capacity = 600, .shards = 12};
  cache batched(cfg, by_shard{&batched_log, 50});
  cache single(cfg, by_shard{&single_log, 50});
  REQUIRE(batched.slots_per_shard() == 50);
  const auto keys = mixed_keys(30000, 13, 400, 5000);
  std::mt19937_64 rng(17);
  std::size_t at = 0;
  std::vector<kvtk::access_result> results(3000);
  std::vector<kvtk::access_outcome> outcomes(3000);
  while (at < keys.size()) {
    // Sizes around and across batch_chunk (1024), with the key stream's repeats inside batches.
    const std::size_t n = std::min<std::size_t>(keys.size() - at, 1 + rng() % 2500);
    const std::span<const kvtk::block_key> batch(keys.data() + at, n);
    kvtk::access_hint base;
    base.priority = static_cast<std::uint32_t>(rng() % 8);
    const bool with_slots = rng() % 2 == 0;
    if (with_slots) {
      batched.access(batch, std::span<kvtk::access_outcome>(outcomes.data(), n), base);
    } else {
      batched.access(batch, std::span<kvtk::access_result>(results.data(), n), base);
    }
    for (std::size_t i = 0; i < n; ++i) {
      kvtk::access_hint h = base;
      h.depth = static_cast<std::uint32_t>(i);
      const auto r = single.access(batch[i], h);
      if (with_slots) {
        REQUIRE(outcomes[i].result == r.result);
        REQUIRE(outcomes[i].slot == r.slot);
      } else {
        REQUIRE(results[i] == r.result);
      }
    }
    at += n;
  }
  CHECK(batched_log == single_log);
  CHECK(same_stats(batched.stats(), single.stats()));
  for (kvtk::block_key k = 0; k < 5000; ++k) REQUIRE(batched.find(k) == single.find(k));
  // An empty batch does nothing.
  batched.access(std::span<const kvtk::block_key>{}, std::span<kvtk::access_result>{});
  CHECK(same_stats(batched.stats(), single.stats()));
}

TEST_CASE("sharded_block_cache: pins keep entries in every shard", "[sharded]") {
  std::vector<kvtk::block_key> evicted;
  auto on_evict = [&](kvtk::block_key k, std::uint32_t) { evicted.push_back(k); };
  kvtk::sharded_block_cache<kvtk::lru, decltype(on_evict)> c({.capacity = 64, .shards = 4},
                                                             on_evict);
  CHECK_FALSE(c.pin(1));  // absent
  CHECK_FALSE(c.unpin(1));
  CHECK(c.pins(1) == 0);
  // Fill, pin every even key twice (access_and_pin + pin), then stream new keys through.
  std::vector<kvtk::block_key> pinned;
  for (kvtk::block_key k = 0; k < 200 && pinned.size() < 24; k += 2) {
    const auto r = c.access_and_pin(k);
    REQUIRE(r.result == kvtk::access_result::inserted);
    REQUIRE(c.pin(k));
    pinned.push_back(k);
  }
  for (const kvtk::block_key k : pinned) CHECK(c.pins(k) == 2);
  CHECK(c.pinned_entries() == pinned.size());
  for (kvtk::block_key k = 1000; k < 5000; ++k) c.access(k);
  for (const kvtk::block_key k : pinned) {
    CHECK(c.contains(k));
    CHECK(std::find(evicted.begin(), evicted.end(), k) == evicted.end());
    CHECK(c.erase(k) == kvtk::erase_result::pinned);
  }
  CHECK(c.used() <= c.capacity());
  // Pin fresh keys of one shard until it refuses: it then holds only pinned entries, rejects
  // every miss, and the other shards still admit.
  const std::uint32_t target = c.shard_of(pinned[0]);
  std::vector<kvtk::block_key> filler;
  kvtk::block_key k = 100000;
  for (;; ++k) {
    if (c.shard_of(k) != target) continue;
    if (c.access_and_pin(k).result == kvtk::access_result::rejected) break;
    filler.push_back(k);
  }
  c.with_shard(target, [&](const auto& s) {
    CHECK(s.pinned_entries() == s.size());
    CHECK(s.size() == c.shard_capacity(target));
  });
  CHECK_FALSE(c.contains(k));
  const auto r = c.access(k);
  CHECK(r.result == kvtk::access_result::rejected);
  CHECK(r.slot == c.npos);
  kvtk::block_key other = 400000;
  while (c.shard_of(other) == target) ++other;
  CHECK(c.access(other).result == kvtk::access_result::inserted);
  // Unpinned, they can go.
  for (const kvtk::block_key k : pinned) {
    CHECK(c.unpin(k));
    CHECK(c.unpin(k));
    CHECK_FALSE(c.unpin(k));
    CHECK(c.erase(k) == kvtk::erase_result::erased);
  }
  for (const kvtk::block_key k : filler) CHECK(c.unpin(k));
  CHECK(c.pinned_entries() == 0);
}

TEST_CASE("sharded_block_cache: 4 threads on one cache stay consistent", "[sharded][threads]") {
  struct counting {
    std::atomic<std::uint64_t>* evictions;
    std::vector<std::uint64_t>* payload;  // by global slot; a shard's slots are its own
    void operator()(kvtk::block_key, std::uint32_t slot) const noexcept {
      evictions->fetch_add(1, std::memory_order_relaxed);
      (*payload)[slot] = 0;  // under the evicting shard's lock
    }
  };
  using cache = kvtk::sharded_block_cache<kvtk::lru, counting>;
  for (const std::uint32_t shards : {3u, 16u}) {
    std::atomic<std::uint64_t> evictions{0};
    std::vector<std::uint64_t> payload;
    cache c({.capacity = 512, .shards = shards}, counting{&evictions, &payload});
    payload.assign(c.slot_count(), 0);
    constexpr int threads = 4;
    constexpr int ops = 20000;
    std::atomic<bool> stop_readers{false};
    std::vector<std::uint64_t> accesses(threads, 0);
    std::vector<std::vector<kvtk::block_key>> held(threads);  // pins still held at the end
    std::vector<int> payload_errors(threads, 0);
    auto worker = [&](int t) {
      std::mt19937_64 rng(100 + t);
      std::vector<std::pair<kvtk::block_key, std::uint32_t>> mine;  // pinned by me, with slot
      std::vector<kvtk::block_key> batch(64);
      std::vector<kvtk::access_result> out(64);
      for (int i = 0; i < ops; ++i) {
        const kvtk::block_key k = rng() % 10 < 7 ? rng() % 300 : rng() % 4000;
        switch (rng() % 16) {
          case 0:
          case 1: {  // access and pin one of my keys; its slot's payload is mine while pinned
            if (mine.size() >= 6) break;
            const kvtk::block_key pk = k / threads * threads + static_cast<kvtk::block_key>(t);
            const auto r = c.access_and_pin(pk);
            ++accesses[t];
            if (r.result != kvtk::access_result::rejected) {
              payload[r.slot] = pk + 1;
              mine.push_back({pk, r.slot});
            }
            break;
          }
          case 2:
          case 3: {  // check a pinned slot's payload, then unpin
            if (mine.empty()) break;
            const std::size_t j = rng() % mine.size();
            if (payload[mine[j].second] != mine[j].first + 1) ++payload_errors[t];
            if (c.find(mine[j].first) != mine[j].second) ++payload_errors[t];
            if (!c.unpin(mine[j].first)) ++payload_errors[t];
            mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(j));
            break;
          }
          case 4: {  // a batch
            for (auto& b : batch) b = rng() % 10 < 7 ? rng() % 300 : rng() % 4000;
            c.access(batch, out);
            accesses[t] += batch.size();
            break;
          }
          case 5:
            if (c.pin(k) && !c.unpin(k)) ++payload_errors[t];  // a transient pin, balanced
            break;
          case 6:
            c.erase(k);
            break;
          case 7:
            c.insert(k);
            break;
          default:
            c.access(k);
            ++accesses[t];
            break;
        }
      }
      for (const auto& [k, s] : mine) {
        if (payload[s] != k + 1) ++payload_errors[t];
        held[t].push_back(k);
      }
    };
    // Whole-cache figures read while the workers run (Catch's assertions are not thread-safe:
    // the reader records violations, one bit per check, and the main thread checks them).
    std::atomic<int> reader_errors{0};
    auto reader = [&] {
      std::uint64_t seen = 0;
      while (!stop_readers.load()) {
        // Summed shard by shard, stats are no snapshot, but each shard's counters only grow and
        // a shard never evicts more than it inserted: both survive the summing.
        const auto st = c.stats();
        if (st.hits + st.misses < seen) reader_errors |= 1;
        if (st.evictions > st.insertions) reader_errors |= 2;
        seen = st.hits + st.misses;
        if (c.used() > c.capacity()) reader_errors |= 4;
        // Per-key reads: answers of the moment, checked for range only.
        // (One find(): two calls could see two states, the key evicted in between.)
        if (const std::uint32_t f = c.find(7); f != c.npos && f >= c.slot_count()) {
          reader_errors |= 8;
        }
        static_cast<void>(c.contains(7));  // read concurrently with the writers (for TSan)
        if (c.pins(7) > 4 * 6) reader_errors |= 16;  // pins are held by the workers, 6 each at most
        c.with_shard(0, [&](const auto& s) {
          if (s.used() > s.capacity()) reader_errors |= 32;
        });
      }
    };
    std::thread r(reader);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(worker, t);
    for (auto& th : pool) th.join();
    stop_readers = true;
    r.join();

    // Audit (no thread runs now: every figure is exact).
    CHECK(reader_errors.load() == 0);  // the bit of each failed check
    std::uint64_t total_accesses = 0;
    for (int t = 0; t < threads; ++t) {
      total_accesses += accesses[t];
      CHECK(payload_errors[t] == 0);
    }
    const auto st = c.stats();
    CHECK(st.hits + st.misses == total_accesses);
    CHECK(st.evictions == evictions.load());
    CHECK(st.insertions - st.evictions >= c.size());  // erases remove without evicting
    CHECK(c.used() <= c.capacity());
    std::map<kvtk::block_key, std::uint32_t> expected_pins;
    for (int t = 0; t < threads; ++t) {
      for (const kvtk::block_key k : held[t]) ++expected_pins[k];
    }
    for (const auto& [k, n] : expected_pins) {
      CHECK(c.contains(k));
      CHECK(c.pins(k) == n);
    }
    CHECK(c.pinned_entries() == expected_pins.size());
    std::size_t resident = 0;
    for (std::uint32_t s = 0; s < c.shards(); ++s) {
      c.with_shard(s, [&](const auto& sh) {
        CHECK(sh.used() <= sh.capacity());
        CHECK(sh.capacity() == c.shard_capacity(s));
        sh.for_each_slot([&](kvtk::block_key k, std::uint32_t) {
          ++resident;
          CHECK(c.shard_of(k) == s);
        });
      });
    }
    CHECK(resident == c.size());
  }
}
