// LMCache 0.5.6's local CPU backend behind vLLM's pool (kvtk/tier/lmcache_offload.hpp): a lookup
// from chunk 0 whatever the GPU hit, the "- 1 token" of a whole-prompt hit, stores from the lookup
// hit (even of chunks the GPU held), the four cache policies on LMCache's own example, a store
// cut short, and the invariants on random traces; with the local disk: the lookup's CPU-then-disk
// run, staging with pins and promotion, write-through, a stalled retrieval, and equality with a
// naive model of LMCache's structures (ordered lists and LFU buckets, linear scans) on random
// traces. The equality with vLLM + LMCache's own code is tools/engine-check/lmcache_connector.py's
// (docs/tiers.md).
#include <algorithm>
#include <catch2/catch.hpp>
#include <kvtk/tier/lmcache_offload.hpp>
#include <map>
#include <random>
#include <set>
#include <vector>

namespace {

using namespace kvtk;
using tier::lmcache_offload;
using tier::lmcache_policy;

lmcache_offload make(std::uint32_t gpu, std::uint32_t cpu, std::uint32_t k = 1,
                     lmcache_policy p = lmcache_policy::lru, std::uint32_t disk = 0) {
  tier::lmcache_offload_config c;
  c.gpu_blocks = gpu;
  c.cpu_chunks = cpu;
  c.disk_chunks = disk;
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

TEST_CASE("lmcache disk: lookup runs CPU then disk - disk reads are promoted", "[lmcache][disk]") {
  // GPU 3 blocks: a 3-block request leaves nothing of the previous one on the GPU but what it
  // shares. CPU 2 chunks, disk 8; one-block chunks.
  auto o = make(3, 2, 1, lmcache_policy::lru, 8);
  run(o, {1, 2, 3}, 48);  // CPU keeps 2 of the 3 (the store is cut), disk gets those 2
  CHECK(o.counters().cut_stores == 1);
  CHECK(o.cpu_holds(1));
  CHECK(o.cpu_holds(2));
  CHECK(o.disk_holds(1));
  CHECK(o.disk_holds(2));
  CHECK_FALSE(o.disk_holds(3));
  run(o, {7, 8, 9}, 48);  // evicts 1 and 2 from the CPU, cut again; disk: 1, 2, 7, 8
  CHECK_FALSE(o.cpu_holds(1));
  CHECK(o.disk_holds(7));
  run(o, {4, 5, 6}, 48);  // the GPU now holds none of 1, 2
  // {1, 2, 3}: the GPU holds nothing of it; the CPU misses chunk 0, the disk has 1 and 2: h = 2.
  const auto r = run(o, {1, 2, 3}, 48);
  CHECK(r.gpu_hit_blocks == 0);
  CHECK(r.lookup_chunks == 2);
  CHECK(r.disk_lookup_chunks == 2);
  CHECK(r.loaded_chunks == 2);
  CHECK(r.disk_loaded_chunks == 2);
  CHECK(r.disk_loaded_blocks == 2);
  CHECK(r.loaded_tokens == 32);
  // Both read chunks were staged in the CPU (evicting 4 and 5) and promoted; the store then
  // starts at chunk 2 and evicts the LRU of the promoted pair... none is left to evict but them:
  // chunk 1 (older) goes, 3 is put.
  CHECK(o.counters().chunks_promoted == 2);
  CHECK(o.cpu_holds(3));
  CHECK(o.cpu_holds(2));
  CHECK(o.disk_holds(3));
  CHECK(o.counters().disk_hit_blocks == 2);
  CHECK(o.counters().cpu_hit_blocks == 0);
  CHECK(std::string(o.audit()).empty());
}

TEST_CASE("lmcache disk: a lookup that hits the CPU pins it while disk chunks are staged",
          "[lmcache][disk]") {
  // CPU 2 chunks. Chunk 0 in the CPU, chunks 1 and 2 on disk only: the CPU hit is pinned, so
  // staging two disk chunks finds one evictable slot... the second stalls (LMCache busy-loops).
  auto o = make(3, 2, 1, lmcache_policy::lru, 8);
  run(o, {1, 2, 3}, 48);  // CPU 1, 2; disk 1, 2
  run(o, {4, 5, 6}, 48);  // CPU 4, 5; disk 1, 2, 4, 5
  run(o, {1}, 16);        // GPU miss (evicted), CPU miss, disk hit: promoted, evicting 4
  CHECK(o.cpu_holds(1));
  CHECK(o.cpu_holds(5));
  run(o, {9, 8, 7}, 48);  // the GPU forgets 1; CPU: 1 and 5 -> evicts both for 9, 8; disk too
  CHECK_FALSE(o.cpu_holds(1));
  run(o, {1}, 16);        // promote 1 again (evicts 9)
  REQUIRE(o.cpu_holds(1));
  REQUIRE(o.disk_holds(2));
  const auto before = o.counters().stalled_retrievals;
  // {1, 2, 3}: the GPU holds 1; the CPU run is {1} (pinned), the disk has 2 but not 3 (the
  // first store was cut): h = 2. Staging 2 cannot evict the pinned 1: it evicts 8.
  const auto r = run(o, {1, 2, 3}, 48);
  CHECK(r.gpu_hit_blocks == 1);
  CHECK(r.lookup_chunks == 2);
  CHECK(r.disk_lookup_chunks == 1);
  CHECK(r.disk_loaded_chunks == 1);
  CHECK(o.counters().stalled_retrievals == before);
  CHECK_FALSE(o.cpu_holds(8));
  // The pin ends with the retrieve: the store of chunk 3 then evicts 1 (LRU: touched by the
  // lookup before 2 was promoted).
  CHECK(o.cpu_holds(2));
  CHECK(o.cpu_holds(3));
  CHECK_FALSE(o.cpu_holds(1));
  CHECK(std::string(o.audit()).empty());
  // A CPU of one chunk: the CPU hit is pinned and the disk chunk has nowhere to go.
  auto small = make(4, 1, 1, lmcache_policy::lru, 8);
  run(small, {1, 2}, 32);      // CPU 1 (cut); disk 1
  run(small, {5, 6, 7, 8}, 64);  // GPU forgets 1, 2; CPU 5; disk 1, 5
  run(small, {1}, 16);         // disk hit, promoted: CPU 1
  run(small, {1, 2}, 32);      // CPU 1, the store of 2 evicts 1: CPU 2, disk 1, 2, 5
  run(small, {9, 10, 11, 12}, 64);  // GPU forgets all; CPU 9
  run(small, {1}, 16);              // CPU 1 (promoted)
  const auto s2 = run(small, {1, 2}, 32);  // CPU run {1} pinned, disk {2}: no slot to stage
  CHECK(s2.lookup_chunks == 2);
  CHECK(small.counters().stalled_retrievals == 1);
  CHECK(std::string(small.audit()).empty());
}

namespace {

// LMCache's structures as LMCache keeps them: per tier an ordered list (LRU, MRU, FIFO) or
// frequency buckets (LFU), pins as a set, eviction by a linear scan for the first evictable key.
struct naive_tier {
  naive_tier(lmcache_policy p, std::size_t c) : policy(p), cap(c) {}
  lmcache_policy policy;
  std::size_t cap;
  std::vector<block_key> order;                     // LRU/MRU/FIFO: oldest first
  std::map<std::uint64_t, std::vector<block_key>> buckets;  // LFU: frequency -> first-in first
  std::map<block_key, std::uint64_t> freq;
  std::size_t reserved = 0;
  std::uint64_t evictions = 0;

  bool holds(block_key k) const { return freq.count(k) != 0; }
  std::size_t size() const { return freq.size(); }
  void hit(block_key k) {
    if (policy == lmcache_policy::fifo) return;
    if (policy == lmcache_policy::lfu) {
      auto& b = buckets[freq[k]];
      b.erase(std::find(b.begin(), b.end(), k));
      if (b.empty()) buckets.erase(freq[k]);
      buckets[++freq[k]].push_back(k);
      return;
    }
    order.erase(std::find(order.begin(), order.end(), k));
    order.push_back(k);
  }
  bool evict(const std::set<block_key>& pinned) {
    auto take = [&](block_key k) {
      freq.erase(k);
      ++evictions;
    };
    if (policy == lmcache_policy::lfu) {
      for (auto& [f, b] : buckets) {
        for (auto it = b.begin(); it != b.end(); ++it) {
          if (pinned.count(*it)) continue;
          take(*it);
          b.erase(it);
          if (b.empty()) buckets.erase(f);
          return true;
        }
      }
      return false;
    }
    if (policy == lmcache_policy::mru) {
      for (auto it = order.rbegin(); it != order.rend(); ++it) {
        if (pinned.count(*it)) continue;
        take(*it);
        order.erase(std::next(it).base());
        return true;
      }
      return false;
    }
    for (auto it = order.begin(); it != order.end(); ++it) {
      if (pinned.count(*it)) continue;
      take(*it);
      order.erase(it);
      return true;
    }
    return false;
  }
  bool reserve(const std::set<block_key>& pinned = {}) {
    if (size() + reserved >= cap && !evict(pinned)) return false;
    ++reserved;
    return true;
  }
  bool put(block_key k, bool in_flight = false) {
    --reserved;
    if (holds(k)) return false;
    freq[k] = 1;
    if (policy == lmcache_policy::lfu) {
      buckets[1].push_back(k);
    } else if (!in_flight) {
      order.push_back(k);  // else when the write lands (the dict takes it then)
    }
    return true;
  }
  void land(block_key k) {
    if (policy != lmcache_policy::lfu) order.push_back(k);
  }
  // LMCache's LFU scan meets a key still being written before any resident one.
  bool lfu_scan_meets(const std::set<block_key>& in_flight) const {
    for (const auto& [f, b] : buckets) {
      for (const block_key x : b) return in_flight.count(x) != 0;
    }
    return false;
  }
};

struct naive_lmcache {
  prefix::vllm_block_pool pool;
  naive_tier cpu, disk;
  std::uint32_t k;
  bool has_disk;
  tier::lmcache_offload_counters c;
  std::vector<std::uint32_t> held;

  bool policy_lfu() const { return disk.policy == lmcache_policy::lfu; }

  naive_lmcache(std::uint32_t gpu, std::uint32_t cpus, std::uint32_t disks, std::uint32_t bpc,
                lmcache_policy p)
      : pool(gpu), cpu(p, cpus), disk(p, disks), k(bpc), has_disk(disks > 0) {}

  void run(const std::vector<block_key>& keys, std::uint64_t L, std::uint32_t B) {
    ++c.requests;
    const std::uint64_t n = (L + B - 1) / B;
    if (n > pool.capacity()) {
      ++c.unscheduled;
      return;
    }
    const std::uint64_t f = std::min<std::uint64_t>(L / B, keys.size()), ch = k * B;
    std::vector<block_key> ck;
    for (std::uint64_t i = 0; i < std::min<std::uint64_t>(L / ch, f / k); ++i) ck.push_back(keys[(i + 1) * k - 1]);
    held.resize(std::max<std::size_t>(held.size(), n));
    const std::uint32_t gpu = pool.find_hit(keys, prefix::vllm_block_pool::hit_cap(L, B, f), held);
    const std::uint64_t G = std::uint64_t{gpu} * B;
    std::vector<block_key> cpu_hits, disk_hits;
    std::size_t i = 0;
    for (; i < ck.size() && cpu.holds(ck[i]); ++i) cpu_hits.push_back(ck[i]);
    for (; has_disk && i < ck.size() && disk.holds(ck[i]); ++i) disk_hits.push_back(ck[i]);
    for (auto it = disk_hits.rbegin(); it != disk_hits.rend(); ++it) disk.hit(*it);
    for (auto it = cpu_hits.rbegin(); it != cpu_hits.rend(); ++it) cpu.hit(*it);
    const std::uint64_t h = i, H = h * ch;
    std::uint64_t need = H > G ? H - G : 0;
    if (H == L && need > 0) --need;
    if (need > 0) {
      const std::uint64_t s = G / ch;
      std::vector<block_key> from_disk;
      std::set<block_key> pinned(cpu_hits.begin(), cpu_hits.end());
      std::uint64_t e = h;  // the first chunk read from disk
      if (disk_hits.empty()) {
      } else if (cpu_hits.empty()) {
        e = s;
      } else {
        for (e = s; e < h && cpu.holds(ck[e]); ++e) pinned.insert(ck[e]);
      }
      from_disk.assign(ck.begin() + static_cast<std::ptrdiff_t>(e), ck.begin() + static_cast<std::ptrdiff_t>(h));
      // The loaded tokens [G, G + need) split at the first disk chunk's start.
      const std::uint64_t first_disk = std::max(G, e * ch), end = G + need;
      const std::uint64_t disk_blocks = end / B > first_disk / B ? end / B - first_disk / B : 0;
      c.disk_loaded_tokens += end > first_disk ? end - first_disk : 0;
      c.disk_hit_blocks += disk_blocks;
      c.cpu_hit_blocks += need / B - disk_blocks;
      std::size_t staged = 0;
      while (staged < from_disk.size() && cpu.reserve(pinned)) ++staged;
      if (staged < from_disk.size()) {
        if (c.stalled_retrievals++ == 0) c.first_stall_request = c.requests - 1;
      }
      for (const block_key x : from_disk) disk.hit(x);
      for (std::size_t j = 0; j < staged; ++j) c.chunks_promoted += cpu.put(from_disk[j]);
      c.chunks_loaded += h - s;
      c.disk_chunks_loaded += from_disk.size();
      c.loaded_tokens += need;
    }
    pool.run_request(keys, L, B, held);
    std::size_t allocated = 0;
    while (h + allocated < ck.size() && cpu.reserve()) ++allocated;
    if (h + allocated < ck.size()) ++c.cut_stores;
    for (std::size_t j = h; j < h + allocated; ++j) c.chunks_stored += cpu.put(ck[j]);
    std::set<block_key> in_flight;  // this store's disk writes: no hits, no victims
    std::vector<block_key> landing;
    bool key_error = false;
    for (std::size_t j = h; has_disk && j < h + allocated; ++j) {
      if (disk.holds(ck[j])) {
        if (!in_flight.count(ck[j])) disk.hit(ck[j]);
        continue;
      }
      if (policy_lfu() && disk.size() + disk.reserved >= disk.cap && disk.size() > in_flight.size() &&
          disk.lfu_scan_meets(in_flight)) {
        key_error = true;
      }
      if (disk.reserve(in_flight) && disk.put(ck[j], true)) {
        ++c.disk_chunks_stored;
        in_flight.insert(ck[j]);
        landing.push_back(ck[j]);
      }
    }
    for (const block_key x : landing) disk.land(x);
    if (key_error && c.disk_lfu_key_errors++ == 0) c.first_key_error_request = c.requests - 1;
    c.gpu_hit_blocks += gpu;
    c.lookup_hit_tokens += H;
    c.disk_lookup_chunks += disk_hits.size();
  }
};

}  // namespace

TEST_CASE("lmcache disk: equals a naive model of LMCache's lists on random traces",
          "[lmcache][disk]") {
  std::uint64_t stalls = 0, promoted = 0, cut = 0, key_errors = 0;
  for (const auto policy : {lmcache_policy::lru, lmcache_policy::mru, lmcache_policy::fifo,
                            lmcache_policy::lfu}) {
    for (const auto& [k, cpu, disk] : {std::tuple{1u, 6u, 20u}, std::tuple{2u, 4u, 9u},
                                      std::tuple{1u, 12u, 0u}, std::tuple{4u, 3u, 5u}}) {
      INFO(tier::name_of(policy) << " k=" << k << " cpu=" << cpu << " disk=" << disk);
      auto o = make(12, cpu, k, policy, disk);
      naive_lmcache m(12, cpu, disk, k, policy);
      std::mt19937_64 rng(k * 100 + cpu + static_cast<unsigned>(policy));
      std::vector<std::vector<block_key>> seen;
      for (int r = 0; r < 800; ++r) {
        // A new request shares a prefix with an earlier one, then goes its own way.
        std::vector<block_key> keys;
        if (!seen.empty() && rng() % 4 != 0) {
          const auto& base = seen[rng() % seen.size()];
          keys.assign(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(rng() % (base.size() + 1)));
        }
        const std::size_t len = std::min<std::size_t>(keys.size() + rng() % 10, 11);
        while (keys.size() < len) keys.push_back((rng() % 50) * 1000 + keys.size() + 1 + (keys.empty() ? 0 : keys.back() * 7919));
        if (keys.empty()) keys.push_back(rng() % 40 + 1);
        seen.push_back(keys);
        const std::uint64_t L = keys.size() * 16 - rng() % 3;
        o.run_request(keys, L, 16);
        m.run(keys, L, 16);
        REQUIRE(std::string(o.audit()).empty());
        const auto& a = o.counters();
        REQUIRE(a.gpu_hit_blocks == m.c.gpu_hit_blocks);
        REQUIRE(a.lookup_hit_tokens == m.c.lookup_hit_tokens);
        REQUIRE(a.disk_lookup_chunks == m.c.disk_lookup_chunks);
        REQUIRE(a.loaded_tokens == m.c.loaded_tokens);
        REQUIRE(a.chunks_loaded == m.c.chunks_loaded);
        REQUIRE(a.disk_chunks_loaded == m.c.disk_chunks_loaded);
        REQUIRE(a.chunks_promoted == m.c.chunks_promoted);
        REQUIRE(a.chunks_stored == m.c.chunks_stored);
        REQUIRE(a.chunks_evicted == m.cpu.evictions);
        REQUIRE(a.disk_chunks_stored == m.c.disk_chunks_stored);
        REQUIRE(a.disk_chunks_evicted == m.disk.evictions);
        REQUIRE(a.cut_stores == m.c.cut_stores);
        REQUIRE(a.stalled_retrievals == m.c.stalled_retrievals);
        REQUIRE(a.disk_lfu_key_errors == m.c.disk_lfu_key_errors);
        REQUIRE(a.first_stall_request == m.c.first_stall_request);
        REQUIRE(a.first_key_error_request == m.c.first_key_error_request);
        REQUIRE(a.cpu_hit_blocks == m.c.cpu_hit_blocks);
        REQUIRE(a.disk_hit_blocks == m.c.disk_hit_blocks);
        REQUIRE(a.disk_loaded_tokens == m.c.disk_loaded_tokens);
        REQUIRE(o.cpu_resident() == m.cpu.size());
        REQUIRE(o.disk_resident() == m.disk.size());
      }
      CHECK(o.counters().chunks_loaded > 0);
      if (disk > 0) CHECK(o.counters().disk_chunks_loaded > 0);
      stalls += o.counters().stalled_retrievals;
      promoted += o.counters().chunks_promoted;
      cut += o.counters().cut_stores;
      key_errors += o.counters().disk_lfu_key_errors;
    }
  }
  // Every rule was exercised: stalled staging, promotion, stores cut short, LFU's KeyError.
  CHECK(key_errors > 0);
  CHECK(stalls > 0);
  CHECK(promoted > 0);
  CHECK(cut > 0);
}

TEST_CASE("lmcache: refused configurations", "[lmcache]") {
  CHECK_THROWS_AS(make(0, 4), std::invalid_argument);
  CHECK_THROWS_AS(make(4, 0), std::invalid_argument);
  CHECK_THROWS_AS(make(4, 4, 0), std::invalid_argument);
}
