// Dynamo KVBM 1.6.1 under vLLM's block pool (kvtk/tier/dynamo_kvbm.hpp): hand-computed cases of
// each rule (16-token blocks; every GPU here holds 5 blocks, so a 72-token request evicts the
// previous one's blocks), and a naive model of the same rules (vectors in recency order, a map
// for the filter) on random traces.
#include <algorithm>
#include <catch2/catch.hpp>
#include <kvtk/tier/dynamo_kvbm.hpp>
#include <map>
#include <random>
#include <vector>

namespace {

using namespace kvtk;
using tier::dynamo_kvbm;
using tier::dynamo_kvbm_config;

dynamo_kvbm_config config(std::uint32_t gpu, std::uint32_t host, std::uint32_t disk,
                          bool filter = true) {
  dynamo_kvbm_config c;
  c.gpu_blocks = gpu;
  c.host_blocks = host;
  c.disk_blocks = disk;
  c.disk_filter = filter;
  return c;
}

std::uint32_t run(dynamo_kvbm& k, std::vector<block_key> keys, std::uint64_t L) {
  return k.run_request(keys, L, 16);
}

// The same rules, written plainly.
struct naive {
  dynamo_kvbm_config c;
  prefix::vllm_block_pool gpu;
  std::vector<block_key> host, disk;  // least recent first
  std::map<block_key, std::uint64_t> counts;
  double next_tick = 0;
  bool started = false;
  std::uint64_t host_hits = 0, disk_hits = 0, disk_stored = 0, dropped = 0;
  explicit naive(const dynamo_kvbm_config& cfg) : c(cfg), gpu(cfg.gpu_blocks) {}
  static bool has(const std::vector<block_key>& v, block_key k) {
    return std::find(v.begin(), v.end(), k) != v.end();
  }
  static void bump(std::vector<block_key>& v, block_key k) {
    v.erase(std::find(v.begin(), v.end(), k));
    v.push_back(k);
  }
  void decay() {
    for (auto it = counts.begin(); it != counts.end();) it = --it->second == 0 ? counts.erase(it) : std::next(it);
  }
  void at(double t) {
    if (!started) {
      started = true;
      next_tick = t;
    }
    for (; next_tick <= t; next_tick += c.flush_interval_s) decay();
  }
  // allocate + register, all or nothing; false when the batch is larger than the pool.
  static bool store(std::vector<block_key>& v, std::uint32_t cap, const std::vector<block_key>& batch) {
    if (batch.size() > cap) return false;
    const std::size_t free = cap - v.size();
    if (batch.size() > free) v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(batch.size() - free));
    for (const block_key k : batch) {
      if (has(v, k)) {
        bump(v, k);
      } else {
        v.push_back(k);
      }
    }
    return true;
  }
  std::uint32_t request(const std::vector<block_key>& keys, std::uint64_t L) {
    const std::uint64_t n = (L + 15) / 16;
    if (n > c.gpu_blocks) return 0;
    const std::uint64_t f = std::min<std::uint64_t>(L / 16, keys.size());
    std::vector<std::uint32_t> held(n);
    const std::uint64_t g = gpu.find_hit(keys, prefix::vllm_block_pool::hit_cap(L, 16, f), held);
    std::uint64_t h2 = 0, h3 = 0;
    while (c.host_blocks > 0 && g + h2 < f && has(host, keys[g + h2])) ++h2;
    while (c.disk_blocks > 0 && g + h2 + h3 < f && has(disk, keys[g + h2 + h3])) ++h3;
    for (std::uint64_t i = g; i < g + h2; ++i) bump(host, keys[i]);
    for (std::uint64_t i = g + h2; i < g + h2 + h3; ++i) bump(disk, keys[i]);
    if ((g + h2 + h3) * 16 == L && h2 + h3 > 0) (h3 > 0 ? h3 : h2) -= 1;
    (void)gpu.run_request(keys, L, 16, held);
    host_hits += h2;
    disk_hits += h3;
    const std::vector<block_key> batch(keys.begin() + static_cast<std::ptrdiff_t>(g + h2 + h3),
                                       keys.begin() + static_cast<std::ptrdiff_t>(f));
    if (!batch.empty()) {
      if (c.host_blocks == 0) {
        if (!store(disk, c.disk_blocks, batch)) ++dropped;
      } else if (!store(host, c.host_blocks, batch)) {
        ++dropped;
      } else if (c.disk_blocks > 0) {
        for (const block_key k : batch) {
          bump(host, k);
          if (has(disk, k)) {
            bump(disk, k);
            continue;
          }
          if (c.disk_filter) {
            auto& count = counts[k];
            count = count == 0 ? 1 : count * 2;
            if (count < c.min_offload_frequency) continue;
          }
          if (disk.size() == c.disk_blocks) disk.erase(disk.begin());
          disk.push_back(k);
          ++disk_stored;
        }
      }
    }
    return static_cast<std::uint32_t>(g + h2 + h3);
  }
};

}  // namespace

TEST_CASE("kvbm: prompts written through to the host, loaded past the GPU hit, LRU eviction",
          "[dynamo_kvbm]") {
  dynamo_kvbm k(config(5, 8, 0));
  CHECK(run(k, {1, 2, 3, 4}, 72) == 0);      // host: 1 2 3 4
  CHECK(run(k, {11, 12, 13, 14}, 72) == 0);  // host: 1 2 3 4 11 12 13 14 (full); GPU lost 1-4
  CHECK(run(k, {1, 2, 3, 4}, 72) == 4);      // loaded from the host, now its most recent
  CHECK(run(k, {21, 22, 23, 24}, 72) == 0);  // evicts 11-14, the least recently released
  CHECK_FALSE(k.host_holds(11));
  CHECK(k.host_holds(1));
  CHECK(run(k, {11, 12, 13, 14, 15}, 80) == 0);  // 5 more: evicts 1 2 3 4 21
  CHECK_FALSE(k.host_holds(21));
  CHECK(k.host_holds(22));
  const auto& c = k.counters();
  CHECK(c.host_hit_blocks == 4);
  CHECK(c.host_stored_blocks == 17);
  CHECK(c.host_evictions == 9);
  CHECK(c.offered_blocks == 17);
  CHECK(c.host_dropped_batches == 0);
}

TEST_CASE("kvbm: a batch larger than the host is dropped - a whole-prompt hit gives up a block",
          "[dynamo_kvbm]") {
  dynamo_kvbm small(config(5, 3, 0));
  CHECK(run(small, {1, 2, 3, 4}, 72) == 0);
  CHECK(small.counters().host_dropped_batches == 1);
  CHECK(small.counters().host_dropped_blocks == 4);
  CHECK(small.host_resident() == 0);

  dynamo_kvbm k(config(5, 8, 0));
  CHECK(run(k, {1, 2, 3, 4}, 64) == 0);
  CHECK(run(k, {11, 12, 13, 14}, 72) == 0);  // the GPU loses 1-4
  // 4 host blocks cover all 64 tokens: the last is given up, recomputed and offered again,
  // where the host already holds it.
  CHECK(run(k, {1, 2, 3, 4}, 64) == 3);
  CHECK(k.counters().host_hit_blocks == 3);
  CHECK(k.counters().host_duplicate_blocks == 1);
}

TEST_CASE("kvbm: G2 -> G3 at a block's second registration, the filter's decay, disk lookups",
          "[dynamo_kvbm]") {
  dynamo_kvbm k(config(5, 8, 10));
  k.set_time(0);
  CHECK(run(k, {1, 2}, 40) == 0);  // registered in the host once: filtered
  CHECK(k.counters().filter_skips == 2);
  CHECK(k.disk_resident() == 0);
  CHECK(run(k, {7, 2}, 40) == 0);  // 7 misses the host, so 2 is offered again: count 2, to disk
  CHECK(k.disk_holds(2));
  CHECK_FALSE(k.disk_holds(7));
  CHECK(k.counters().disk_stored_blocks == 1);
  // 600 s later every count drops by one: 7 (1) is forgotten, and so starts again.
  k.set_time(600);
  CHECK(run(k, {5, 7}, 40) == 0);
  CHECK_FALSE(k.disk_holds(7));
  CHECK(run(k, {6, 7}, 40) == 0);  // now its second sight within the window
  CHECK(k.disk_holds(7));
  // 2 is on disk: offered again it is only a presence check.
  CHECK(run(k, {8, 2}, 40) == 0);
  CHECK(k.counters().disk_present_skips == 1);

  dynamo_kvbm d(config(5, 4, 10, false));  // DYN_KVBM_DISABLE_DISK_OFFLOAD_FILTER
  CHECK(run(d, {1, 2, 3, 4}, 72) == 0);
  CHECK(run(d, {5, 6, 7, 8}, 72) == 0);  // the host keeps 5-8 only
  CHECK(run(d, {1, 2, 3, 4}, 72) == 4);  // all four from disk, straight to the GPU
  CHECK(d.counters().disk_hit_blocks == 4);
  CHECK(d.counters().host_hit_blocks == 0);
  CHECK_FALSE(d.host_holds(1));  // not staged through the host
}

TEST_CASE("kvbm: a long gap decays every count at once", "[dynamo_kvbm]") {
  dynamo_kvbm k(config(5, 8, 10));
  k.set_time(0);
  CHECK(run(k, {1, 2}, 40) == 0);  // counts 1
  CHECK(run(k, {7, 2}, 40) == 0);  // 2: count 2, to disk; 7: count 1
  k.set_time(1e15);                // ~1.7e12 ticks, applied at once
  CHECK(run(k, {6, 7}, 40) == 0);  // 7 was forgotten: count 1 again, not to disk
  CHECK_FALSE(k.disk_holds(7));
  CHECK(k.disk_holds(2));
}

TEST_CASE("kvbm: no host tier is KVBM's bypass, G1 straight to G3", "[dynamo_kvbm]") {
  dynamo_kvbm k(config(5, 0, 4));
  CHECK(run(k, {1, 2, 3}, 56) == 0);
  CHECK(k.counters().disk_stored_blocks == 3);  // unfiltered
  CHECK(run(k, {11, 12, 13}, 56) == 0);         // evicts 1 and 2 from the disk (4 blocks)
  // The GPU kept block 1 (vLLM evicts a request's tail first); 2 is gone from the disk: the
  // disk run after the GPU hit is empty.
  CHECK(run(k, {1, 2, 3}, 56) == 1);
  CHECK(k.counters().disk_hit_blocks == 0);
  CHECK(run(k, {21, 22, 23, 24, 25}, 80) == 0);
  CHECK(k.counters().disk_dropped_batches == 1);  // 5 > 4
}

TEST_CASE("kvbm: refused configurations", "[dynamo_kvbm]") {
  CHECK_THROWS_WITH(dynamo_kvbm(config(5, 0, 0)), Catch::Contains("host or a disk"));
  CHECK_THROWS_WITH(dynamo_kvbm(config(0, 4, 0)), Catch::Contains("GPU pool"));
  auto c = config(5, 4, 4);
  c.flush_interval_s = 0;
  CHECK_THROWS_WITH(dynamo_kvbm(c), Catch::Contains("interval"));
}

TEST_CASE("kvbm: equal to a naive model of its rules on random traces", "[dynamo_kvbm]") {
  for (std::uint32_t seed : {1u, 2u, 3u, 4u}) {
    std::mt19937_64 rng(seed);
    for (const auto& cfg : {config(6, 10, 0), config(6, 10, 25), config(6, 10, 25, false),
                            config(6, 0, 12), config(10, 4, 8)}) {
      INFO("seed " << seed << " host " << cfg.host_blocks << " disk " << cfg.disk_blocks
                   << " filter " << cfg.disk_filter);
      dynamo_kvbm k(cfg);
      naive m(cfg);
      double t = 0;
      for (int r = 0; r < 400; ++r) {
        std::vector<block_key> keys;
        const block_key root = 1 + rng() % 4;
        const int depth = 1 + static_cast<int>(rng() % 6);
        for (int d = 0; d < depth; ++d) keys.push_back(root * 1000 + (d < 2 ? d : rng() % 5 + 10 * d));
        const std::uint64_t L = 16 * keys.size() + (rng() % 2 ? rng() % 16 : 0);
        t += static_cast<double>(rng() % (r % 50 == 0 ? 5000 : 200));  // some gaps of several ticks
        k.set_time(t);
        m.at(t);
        REQUIRE(k.run_request(keys, L, 16) == m.request(keys, L));
      }
      CHECK(k.counters().host_hit_blocks == m.host_hits);
      CHECK(k.counters().disk_hit_blocks == m.disk_hits);
      if (cfg.host_blocks > 0) CHECK(k.counters().disk_stored_blocks == m.disk_stored);
      CHECK(k.counters().host_dropped_batches + k.counters().disk_dropped_batches == m.dropped);
      CHECK(k.host_resident() == m.host.size());
      CHECK(k.disk_resident() == m.disk.size());
      for (const block_key h : m.host) CHECK(k.host_holds(h));
      for (const block_key d : m.disk) CHECK(k.disk_holds(d));
      CHECK(k.counters().host_hit_blocks + k.counters().disk_hit_blocks > 0);
    }
  }
}
