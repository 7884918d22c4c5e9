// SGLang 0.5.23's HiCache (kvtk/tier/sglang_hicache.hpp): hand-computed requests under each write
// policy (backups, demotion, load back, the selective threshold, write_back's copy at eviction),
// the invariants on random traces, and a brute-force model where one exists: with a host pool
// that never fills, write_through keeps every page it ever inserted, so a request's hit is the
// longest prefix seen before. The equality with SGLang's own code is
// tools/engine-check/sglang_hicache.py's (docs/tiers.md).
#include <catch2/catch.hpp>
#include <kvtk/tier/sglang_hicache.hpp>
#include <random>
#include <set>
#include <vector>

namespace {

using namespace kvtk;
using tier::hicache_write_policy;
using tier::sglang_hicache;

sglang_hicache make(std::uint32_t device, std::uint32_t host, hicache_write_policy p) {
  tier::sglang_hicache_config c;
  c.device_pages = device;
  c.host_pages = host;
  c.policy = p;
  return sglang_hicache(c);
}

// Pages of 16 tokens; one token past the full pages, so the match may cover all of them.
tier::sglang_hicache_request run(sglang_hicache& h, std::vector<block_key> keys) {
  return h.run_request(keys, keys.size() * 16 + 1, 16);
}
// A random path in a trie of prefix ids: a page's key names its whole prefix (as hash_ids do),
// with `fanout` children per node, so paths share prefixes and branch at every depth.
std::vector<block_key> trie_path(std::mt19937_64& rng, std::uint64_t len, std::uint64_t fanout) {
  std::vector<block_key> keys;
  std::uint64_t k = 0x9e3779b97f4a7c15ull;
  for (std::uint64_t d = 0; d < len; ++d) {
    k = (k ^ (rng() % fanout + 1)) * 0xbf58476d1ce4e5b9ull;
    k ^= k >> 31;
    keys.push_back(k);
  }
  return keys;
}


}  // namespace

TEST_CASE("sglang hicache: write_through backs up, demotes and loads back", "[sglang_hicache]") {
  auto h = make(4, 7, hicache_write_policy::write_through);
  auto r = run(h, {1, 2, 3});  // a miss; the new leaf (count 1) is backed up at once
  CHECK(r.device_hit_blocks == 0);
  CHECK(h.counters().host_stored_blocks == 3);
  CHECK(h.free_device_pages() == 1);  // 4 taken, the partial page given back
  r = run(h, {4, 5, 6});  // the device demotes {1,2,3} (backed up: it stays, host-only)
  CHECK(r.device_hit_blocks == 0);
  CHECK(h.counters().device_evicted_blocks == 3);
  CHECK(h.counters().host_stored_blocks == 6);
  CHECK(h.free_host_pages() == 1);
  r = run(h, {1, 2, 3});  // a host hit of 48 tokens: {4,5,6} is demoted to make room, then loaded
  CHECK(r.device_hit_blocks == 0);
  CHECK(r.loaded_blocks == 3);
  CHECK(h.counters().device_evicted_blocks == 6);
  CHECK(h.counters().host_stored_blocks == 6);  // loaded nodes keep their host copy
  // 58 tokens, the most a 64-token device takes (SGLang refuses device tokens - 6 or more).
  r = h.run_request(std::vector<block_key>{4, 5, 6}, 58, 16);  // loads back; {1,2,3} demoted again
  CHECK(r.loaded_blocks == 3);
  CHECK(h.counters().host_stored_blocks == 6);
  CHECK(h.free_host_pages() == 1);
  // {8,9} demotes {4,5,6}; the host is full but for one page, so the backup of {8,9} evicts the
  // least recently used host-only leaf, {1,2,3}, as a whole.
  r = run(h, {8, 9});
  CHECK(h.counters().host_evicted_blocks == 3);
  CHECK(h.counters().host_stored_blocks == 8);
  CHECK(std::string(h.audit()).empty());
  r = run(h, {1, 2, 3});
  CHECK(r.device_hit_blocks + r.loaded_blocks == 0);
}

TEST_CASE("sglang hicache: write_through_selective backs up on the second insert", "[sglang_hicache]") {
  auto h = make(4, 8, hicache_write_policy::write_through_selective);
  run(h, {1, 2, 3});
  CHECK(h.counters().host_stored_blocks == 0);  // count 1 < 2
  run(h, {1, 2, 3});  // a device hit of 3 pages; the insert counts 2: backed up now
  CHECK(h.counters().host_stored_blocks == 3);
  CHECK(h.counters().device_hit_blocks == 3);
  run(h, {4, 5, 6});  // {1,2,3} demoted; {4,5,6} (count 1) stays device-only
  CHECK(h.counters().device_evicted_blocks == 3);
  auto r = run(h, {1, 2, 3});  // loads back, evicting {4,5,6}: unbacked, so deleted
  CHECK(r.loaded_blocks == 3);
  r = run(h, {4, 5, 6});
  CHECK(r.device_hit_blocks + r.loaded_blocks == 0);
  CHECK(std::string(h.audit()).empty());
}

TEST_CASE("sglang hicache: write_back copies at eviction, and drops what the host cannot take",
          "[sglang_hicache]") {
  auto h = make(8, 3, hicache_write_policy::write_back);
  run(h, {1, 2, 3});
  run(h, {4, 5, 6});
  CHECK(h.counters().host_stored_blocks == 0);  // nothing at insert
  run(h, {7, 8});  // {1,2,3} evicted: copied to the host (3 pages: it fits), then demoted
  CHECK(h.counters().host_stored_blocks == 3);
  CHECK(h.free_host_pages() == 0);
  // {1,2,3} loads back (it keeps its host copy); the allocation then evicts {4,5,6}, whose copy
  // finds no host room ({1,2,3} is locked by the request): it is dropped.
  auto r = run(h, {1, 2, 3});
  CHECK(r.loaded_blocks == 3);
  CHECK(h.counters().failed_backups == 1);
  // {4,5,6} (a miss) evicts {7,8}, whose copy needs 2 host pages: {1,2,3}'s host copy (a
  // duplicate, and a device leaf: spared in the first pass, taken in the second) is reclaimed.
  CHECK(run(h, {4, 5, 6}).device_hit_blocks == 0);
  CHECK(h.counters().host_evicted_blocks == 3);
  CHECK(h.counters().host_stored_blocks == 5);
  // {9,10} evicts {1,2,3}, device-only again: its copy evicts the host-only leaf {7,8}.
  run(h, {9, 10});
  CHECK(h.counters().host_evicted_blocks == 5);
  CHECK(h.counters().host_stored_blocks == 8);
  CHECK(std::string(h.audit()).empty());
  auto w = make(4, 2, hicache_write_policy::write_back);
  run(w, {1, 2, 3});
  run(w, {4, 5, 6});  // {1,2,3} cannot be copied to a 2-page host: dropped
  CHECK(w.counters().failed_backups == 1);
  CHECK(w.counters().host_stored_blocks == 0);
  CHECK(run(w, {1, 2, 3}).loaded_blocks == 0);
  CHECK(std::string(w.audit()).empty());
}

TEST_CASE("sglang hicache: a host hit below 10 tokens is recomputed and re-adopted",
          "[sglang_hicache]") {
  tier::sglang_hicache_config c;
  c.device_pages = 5;
  c.host_pages = 8;
  sglang_hicache h(c);
  // Pages of 4 tokens: a one-page host hit is 4 tokens, below SGLang's 10.
  std::vector<block_key> a = {1}, b = {2, 3, 4};
  h.run_request(a, 5, 4);
  h.run_request(b, 13, 4);  // demotes {1}
  const auto r = h.run_request(a, 5, 4);
  CHECK(r.loaded_blocks == 0);
  CHECK(h.counters().declined_loads == 1);
  CHECK(std::string(h.audit()).empty());
  const auto again = h.run_request(a, 5, 4);  // the insert put {1} back on the device
  CHECK(again.device_hit_blocks == 1);
}

TEST_CASE("sglang hicache: invariants on random prefix traces, every policy", "[sglang_hicache]") {
  for (const auto policy : {hicache_write_policy::write_through,
                            hicache_write_policy::write_through_selective,
                            hicache_write_policy::write_back}) {
    for (const std::uint32_t host : {3u, 20u, 200u}) {
      auto h = make(12, host, policy);
      std::mt19937_64 rng(host * 7 + static_cast<unsigned>(policy));
      for (int i = 0; i < 600; ++i) {
        const std::uint64_t len = 1 + rng() % 6;
        const std::vector<block_key> keys = trie_path(rng, len, 3);
        const std::uint64_t L = len * 16 + (rng() % 2 == 0 ? 0 : 5);
        h.run_request(keys, L, 16);
        const std::string bad = h.audit();
        INFO("policy " << tier::name_of(policy) << " host " << host << " request " << i);
        REQUIRE(bad.empty());
      }
      const auto& c = h.counters();
      CHECK(c.host_stored_blocks - c.host_freed_blocks <= host);
    }
  }
}

TEST_CASE("sglang hicache: write_through over a host that never fills keeps every prefix",
          "[sglang_hicache]") {
  auto h = make(8, 100000, hicache_write_policy::write_through);
  std::set<std::vector<block_key>> seen;  // every inserted prefix
  std::mt19937_64 rng(42);
  std::uint64_t expected = 0, got = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::uint64_t len = 1 + rng() % 7;
    const std::vector<block_key> keys = trie_path(rng, len, 4);
    const std::uint64_t L = len * 16 + (rng() % 2);  // sometimes the last page is capped off
    const std::uint64_t capped = (L - 1) / 16;
    std::uint64_t hit = 0;
    for (std::uint64_t m = 1; m <= capped; ++m) {
      if (seen.count(std::vector<block_key>(keys.begin(), keys.begin() + static_cast<long>(m)))) hit = m;
    }
    const auto r = h.run_request(keys, L, 16);
    REQUIRE(r.scheduled);
    CHECK(r.device_hit_blocks + r.loaded_blocks == hit);
    expected += hit;
    got += r.device_hit_blocks + r.loaded_blocks;
    for (std::uint64_t m = 1; m <= L / 16; ++m) {
      seen.insert(std::vector<block_key>(keys.begin(), keys.begin() + static_cast<long>(m)));
    }
  }
  CHECK(got == expected);
  CHECK(h.counters().host_hit_blocks > 0);
  CHECK(h.counters().host_evicted_blocks == 0);
  CHECK(std::string(h.audit()).empty());
}

TEST_CASE("sglang hicache: malformed keys keep the tree consistent", "[sglang_hicache]") {
  for (const auto policy : {hicache_write_policy::write_through, hicache_write_policy::write_back}) {
    auto h = make(6, 6, policy);
    run(h, {1, 2, 2, 3});  // a key repeated in one request: the leaf stops before the repeat
    CHECK(std::string(h.audit()).empty());
    run(h, {4, 1, 5});  // key 1 again under another prefix: the leaf stops before it
    CHECK(std::string(h.audit()).empty());
    std::vector<block_key> few = {7};
    h.run_request(few, 64, 16);  // fewer keys than full pages
    CHECK(std::string(h.audit()).empty());
    CHECK(run(h, {1, 2}).device_hit_blocks + h.counters().host_hit_blocks >= 1);
  }
}

TEST_CASE("sglang hicache: few slots for a large host (max_tree_pages)", "[sglang_hicache]") {
  tier::sglang_hicache_config c;
  c.device_pages = 4;
  c.host_pages = 1u << 30;  // a host this large allocates only what the keys can fill
  c.max_tree_pages = 84;  // the distinct keys of paths up to 3 deep with fanout 4
  sglang_hicache h(c);
  std::mt19937_64 rng(5);
  for (int i = 0; i < 200; ++i) {
    const std::vector<block_key> keys = trie_path(rng, 1 + rng() % 3, 4);
    h.run_request(keys, keys.size() * 16, 16);
  }
  CHECK(std::string(h.audit()).empty());
  CHECK(h.counters().host_hit_blocks > 0);
}

TEST_CASE("sglang hicache: refused configurations", "[sglang_hicache]") {
  CHECK_THROWS_AS(make(0, 4, hicache_write_policy::write_through), std::invalid_argument);
  CHECK_THROWS_AS(make(4, 0, hicache_write_policy::write_through), std::invalid_argument);
  auto h = make(4, 4, hicache_write_policy::write_through);
  std::vector<block_key> big = {1, 2, 3, 4, 5};
  CHECK_FALSE(h.run_request(big, 80, 16).scheduled);  // 5 pages on a 4-page device
  std::vector<block_key> edge = {1, 2, 3, 4};
  CHECK_FALSE(h.run_request(edge, 59, 16).scheduled);  // 59 + 6 > 64: SGLang refuses it
  CHECK(h.run_request(edge, 58, 16).scheduled);
  CHECK(h.counters().unscheduled == 2);
}

TEST_CASE("sglang hicache: a prefetch lands host-only under a backed-up anchor", "[sglang_hicache][l3]") {
  auto h = make(8, 16, hicache_write_policy::write_through);
  run(h, {1, 2});  // {1,2} on both tiers (write_through)
  // The prefetched prefix {1,2,3,4,5}: {1,2} overlap, {3,4,5} become one host-only leaf.
  const std::vector<block_key> keys{1, 2, 3, 4, 5};
  CHECK(h.insert_host(keys, 2, 1) == 3);
  CHECK(h.free_host_pages() == 16 - 2 - 3);
  CHECK(std::string(h.audit()).empty());
  auto r = run(h, {1, 2, 3, 4, 5});  // device {1,2}, host {3,4,5} loaded back
  CHECK(r.device_hit_blocks == 2);
  CHECK(r.loaded_blocks == 3);
  CHECK(h.insert_host(keys, 2, 1) == 0);  // all there now
  // The anchor is gone (not in the tree): nothing lands.
  const std::vector<block_key> other{7, 8, 9};
  CHECK(h.insert_host(other, 1, 1) == 0);
  CHECK(std::string(h.audit()).empty());
}

TEST_CASE("sglang hicache: a prefetch under an unbacked device node is dropped, except under "
          "write_back", "[sglang_hicache][l3]") {
  for (const auto p : {hicache_write_policy::write_through_selective, hicache_write_policy::write_back}) {
    INFO(tier::name_of(p));
    auto h = make(8, 16, p);
    run(h, {1, 2});  // one insert: not backed up under either policy
    const std::vector<block_key> keys{1, 2, 3, 4};
    CHECK(h.insert_host(keys, 2, 1) == (p == hicache_write_policy::write_back ? 2u : 0u));
    CHECK(std::string(h.audit()).empty());
  }
}

TEST_CASE("sglang hicache: a prefetch evicts host leaves for room, or takes what is free",
          "[sglang_hicache][l3]") {
  auto h = make(4, 6, hicache_write_policy::write_through);
  run(h, {1, 2, 3});  // backed up: host 3 of 6
  run(h, {4, 5});     // {1,2,3} demoted (host-only leaf); host 5 of 6
  // 4 pages to land at the root: short by 3, so the host evicts 4 pages' worth (the whole
  // {1,2,3} leaf) and then has room.
  const std::vector<block_key> keys{11, 12, 13, 14};
  CHECK(h.insert_host(keys, 0, 1) == 4);
  CHECK(h.counters().host_evicted_blocks == 3);
  CHECK(std::string(h.audit()).empty());
  // Nothing evictable (every host-only leaf but the new one is gone; {4,5} is on the device):
  // 2 pages free of 3 wanted -> 2 land when min_pages <= 2, none when 3.
  auto g = make(4, 4, hicache_write_policy::write_through);
  run(g, {4, 5});
  const std::vector<block_key> three{21, 22, 23};
  CHECK(g.insert_host(three, 0, 3) == 0);
  CHECK(g.insert_host(three, 0, 2) == 2);
  CHECK(std::string(g.audit()).empty());
}

TEST_CASE("sglang hicache: backed-up pages are logged for L3 in order", "[sglang_hicache][l3]") {
  auto h = make(4, 8, hicache_write_policy::write_through);
  h.log_backups();
  run(h, {1, 2});
  run(h, {1, 2, 3});
  std::vector<block_key> logged;
  h.drain_backups([&](block_key k) { logged.push_back(k); });
  CHECK(logged == std::vector<block_key>{1, 2, 3});
  h.drain_backups([&](block_key k) { logged.push_back(k); });
  CHECK(logged.size() == 3);
}

TEST_CASE("sglang hicache: a prefetch refills walked nodes without a host copy", "[sglang_hicache][l3]") {
  // write_through_selective: {1,2} inserted once is on the device only. A prefetch anchored at
  // the root (nothing matched when it was issued) lands {1,2,3,4}: {1,2} takes the fetched pages
  // as its host copy (backed up now), {3,4} becomes a host-only leaf under it.
  auto h = make(8, 16, hicache_write_policy::write_through_selective);
  run(h, {1, 2});
  const std::vector<block_key> keys{1, 2, 3, 4};
  CHECK(h.insert_host(keys, 0, 1) == 4);
  CHECK(h.free_host_pages() == 12);
  CHECK(h.counters().host_stored_blocks == 0);  // no D2H backup: the pages came from L3
  CHECK(std::string(h.audit()).empty());
  auto r = run(h, {1, 2, 3, 4});
  CHECK(r.device_hit_blocks == 2);
  CHECK(r.loaded_blocks == 2);
  // The keys ending inside a node split it where the fetched pages end.
  auto g = make(8, 16, hicache_write_policy::write_through_selective);
  run(g, {1, 2, 3});
  const std::vector<block_key> two{1, 2};
  CHECK(g.insert_host(two, 0, 1) == 2);  // {1,2} refilled, {3} stays device-only
  CHECK(std::string(g.audit()).empty());
  // Under write_back the walked pages are overlap: no refill.
  auto b = make(8, 16, hicache_write_policy::write_back);
  run(b, {1, 2});
  CHECK(b.insert_host(keys, 0, 1) == 2);  // {3,4} only, under the unbacked {1,2}
  CHECK(std::string(b.audit()).empty());
}
