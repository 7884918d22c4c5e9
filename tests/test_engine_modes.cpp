// Engine accounting modes (include/kvtk/prefix/engine_index.hpp): vllm_block_pool and
// sglang_radix_cache against naive models written line by line from the engines' Python code
// (vLLM 0.33.0 v1/core/block_pool.py + kv_cache_manager.py; SGLang 0.5.23 mem_cache/radix_cache.py
// + allocation.py), hand-computed cases for each mechanism, and the counts on the bundled traces.
// The engines' own counts come from tools/engine-check/engine_accounting.py (docs/prefix.md).
#include <catch2/catch.hpp>
#include <algorithm>
#include <kvtk/kvtk.hpp>
#include <list>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bundled_traces.hpp"

using namespace kvtk::prefix;
using kvtk::block_key;

namespace {

// vLLM: a free list of block ids, hash -> block ids in insertion order.
struct naive_vllm {
  struct blk {
    int refs = 0;
    bool cached = false;
    block_key key = 0;
  };
  std::vector<blk> b;
  std::list<int> free;
  std::map<block_key, std::vector<int>> cached;
  explicit naive_vllm(int n) : b(static_cast<std::size_t>(n)) {
    for (int i = 0; i < n; ++i) free.push_back(i);
  }
  std::uint32_t run(const std::vector<block_key>& keys, std::uint64_t L, std::uint32_t B) {
    const std::size_t full = L / B, n = (L + B - 1) / B, cap = (L - 1) / B;
    if (L == 0 || n > b.size()) return 0;
    std::vector<int> held;
    for (std::size_t i = 0; i < std::min(cap, full); ++i) {  // find_longest_cache_hit
      auto it = cached.find(keys[i]);
      if (it == cached.end()) break;
      held.push_back(it->second.front());
    }
    const auto hit = static_cast<std::uint32_t>(held.size());
    for (int s : held) {  // touch
      if (b[s].refs++ == 0) free.remove(s);
    }
    while (held.size() < n) {  // get_new_blocks
      const int s = free.front();
      free.pop_front();
      if (b[s].cached) {
        auto& v = cached[b[s].key];
        v.erase(std::find(v.begin(), v.end(), s));
        if (v.empty()) cached.erase(b[s].key);
        b[s].cached = false;
      }
      b[s].refs = 1;
      held.push_back(s);
    }
    for (std::size_t i = hit; i < full; ++i) {  // cache_full_blocks
      b[held[i]].cached = true;
      b[held[i]].key = keys[i];
      cached[keys[i]].push_back(held[i]);
    }
    std::vector<int> first, last;  // free_blocks(reversed(blocks))
    for (std::size_t i = held.size(); i-- > 0;) {
      if (--b[held[i]].refs == 0) (b[held[i]].cached ? last : first).push_back(held[i]);
    }
    free.insert(free.begin(), first.begin(), first.end());
    free.insert(free.end(), last.begin(), last.end());
    return hit;
  }
  std::size_t cached_blocks() const {
    std::size_t n = 0;
    for (auto& [k, v] : cached) n += v.size();
    return n;
  }
};

// SGLang: node objects with children by first page key, the clock a counter.
struct naive_sglang {
  struct node {
    std::vector<block_key> key;
    node* parent = nullptr;
    std::map<block_key, std::unique_ptr<node>> children;
    int lock = 0;
    std::uint64_t time = 0;
  };
  std::uint64_t clock = 0, free_pages;
  node root;
  explicit naive_sglang(std::uint64_t pages) : free_pages(pages) {}

  node* split(node* child, std::size_t s) {
    auto head = std::make_unique<node>();
    head->time = ++clock;
    head->lock = child->lock;
    head->parent = child->parent;
    head->key.assign(child->key.begin(), child->key.begin() + static_cast<std::ptrdiff_t>(s));
    node* parent = child->parent;
    auto own = std::move(parent->children[child->key[0]]);
    child->key.erase(child->key.begin(), child->key.begin() + static_cast<std::ptrdiff_t>(s));
    child->parent = head.get();
    head->children[child->key[0]] = std::move(own);
    node* h = head.get();
    parent->children[h->key[0]] = std::move(head);
    return h;
  }
  std::pair<std::size_t, node*> walk(const std::vector<block_key>& key, bool insert) {
    const std::uint64_t t = ++clock;
    root.time = t;
    node* at = &root;
    std::size_t i = 0;
    while (i < key.size() && at->children.count(key[i])) {
      node* c = at->children[key[i]].get();
      c->time = t;
      std::size_t j = 0;
      while (j < c->key.size() && i + j < key.size() && c->key[j] == key[i + j]) ++j;
      i += j;
      if (j < c->key.size()) {
        at = split(c, j);
        if (!insert) break;
      } else {
        at = c;
      }
    }
    if (insert && i < key.size()) {
      auto leaf = std::make_unique<node>();
      leaf->time = ++clock;
      leaf->parent = at;
      leaf->key.assign(key.begin() + static_cast<std::ptrdiff_t>(i), key.end());
      at->children[key[i]] = std::move(leaf);
    }
    return {i, at};
  }
  void leaves(node* x, std::vector<node*>& out) {
    for (auto& [k, c] : x->children) leaves(c.get(), out);
    if (x != &root && x->children.empty() && x->lock == 0) out.push_back(x);
  }
  void evict(std::uint64_t pages) {
    std::uint64_t freed = 0;
    while (freed < pages) {
      std::vector<node*> cand;
      leaves(&root, cand);
      if (cand.empty()) return;
      node* x = *std::min_element(cand.begin(), cand.end(),
                                  [](node* a, node* b) { return a->time < b->time; });
      freed += x->key.size();
      free_pages += x->key.size();
      x->parent->children.erase(x->key[0]);
    }
  }
  static void lock(node* x, int d) {
    for (; x != nullptr && x->parent != nullptr; x = x->parent) x->lock += d;
  }
  std::uint32_t run(const std::vector<block_key>& keys, std::uint64_t L, std::uint32_t B) {
    const std::size_t f = std::min<std::size_t>(L / B, keys.size()), n = (L + B - 1) / B;
    if (L == 0 || n > free_pages + pages_in(&root)) return 0;
    const std::vector<block_key> capped(keys.begin(),
                                        keys.begin() + static_cast<std::ptrdiff_t>(std::min((L - 1) / B, f)));
    auto [m, last] = walk(capped, false);
    lock(last, 1);
    if (free_pages < n - m + 1) evict(n - m + 1 - free_pages);
    free_pages -= n - m;
    const std::vector<block_key> full(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(f));
    const std::size_t already = walk(full, true).first;
    free_pages += already - m;
    walk(full, false);
    free_pages += n - f;
    lock(last, -1);
    return static_cast<std::uint32_t>(m);
  }
  std::uint64_t pages_in(const node* x) const {
    std::uint64_t n = x->key.size();
    for (auto& [k, c] : x->children) n += pages_in(c.get());
    return n;
  }
};

// Random requests over a few prefix trees: keys are prefix ids (a key always has the same
// predecessor), lengths sometimes whole blocks, sometimes not.
struct request {
  std::vector<block_key> keys;
  std::uint64_t L;
};
std::vector<request> random_requests(std::uint32_t seed, int count, std::uint32_t B) {
  std::mt19937_64 rng(seed);
  std::vector<request> out;
  for (int r = 0; r < count; ++r) {
    request q;
    const int depth = 1 + static_cast<int>(rng() % 9);
    block_key k = 1000 + rng() % 3;  // a few system prompts
    for (int d = 0; d < depth; ++d) {
      q.keys.push_back(k);
      // A prefix id: a hash of the parent and the choice; shallow levels shared, deep mostly not.
      k = (k * 0x9E3779B97F4A7C15ULL) ^ (1 + rng() % (d < 3 ? 3 : 40));
    }
    const std::uint64_t whole = std::uint64_t{B} * q.keys.size();
    q.L = (rng() % 3 == 0) ? whole : whole - rng() % B;
    out.push_back(q);
  }
  return out;
}

}  // namespace

TEST_CASE("vllm_block_pool equals the naive model of vLLM's code", "[engine]") {
  for (std::uint32_t cap : {3u, 8u, 40u, 200u}) {
    for (std::uint32_t seed = 1; seed <= 3; ++seed) {
      vllm_block_pool pool(cap);
      naive_vllm ref(static_cast<int>(cap));
      std::vector<std::uint32_t> held(64);
      for (const auto& q : random_requests(seed, 600, 16)) {
        const auto full = std::span(q.keys).first(q.L / 16);
        const auto got = pool.run_request(full, q.L, 16, held);
        REQUIRE(got.hit_blocks == ref.run(q.keys, q.L, 16));
        REQUIRE(pool.cached_blocks() == ref.cached_blocks());
        REQUIRE(pool.distinct_keys() == ref.cached.size());
      }
      REQUIRE(std::string(pool.audit()).empty());
    }
  }
}

TEST_CASE("vllm_block_pool: the cap, duplicates and the partial block's place", "[engine]") {
  std::vector<std::uint32_t> held(8);
  const std::vector<block_key> a = {10, 11};
  SECTION("a fully cached prompt recomputes its last block and keeps a duplicate") {
    vllm_block_pool pool(4);
    CHECK(pool.run_request(a, 1024, 512, held).hit_blocks == 0);
    CHECK(pool.run_request(a, 1024, 512, held).hit_blocks == 1);  // capped at (1024-1)/512
    CHECK(pool.cached_blocks() == 3);                             // 11 twice
    CHECK(pool.distinct_keys() == 2);
    CHECK(pool.run_request(a, 1025, 512, held).hit_blocks == 2);  // 1024 < 1025 - 1: no cap
  }
  SECTION("a freed partial block is reused before any cached block") {
    vllm_block_pool pool(3);
    CHECK(pool.run_request(a, 1100, 512, held).hit_blocks == 0);  // 2 full + 1 partial
    const std::vector<block_key> b = {20};
    pool.run_request(b, 512, 512, held);  // takes the partial block from the front
    CHECK(pool.contains(10));
    CHECK(pool.contains(11));
    CHECK(pool.contains(20));
    CHECK(pool.evictions() == 0);
  }
  SECTION("a request is freed tail first: its last block goes before its first") {
    vllm_block_pool pool(3);
    pool.run_request(a, 1024, 512, held);  // free queue: [free block, 11, 10]
    const std::vector<block_key> b = {20, 21};
    pool.run_request(b, 1024, 512, held);  // takes the free block, then 11
    CHECK(pool.contains(10));
    CHECK_FALSE(pool.contains(11));
  }
  SECTION("a request longer than the pool is not scheduled") {
    vllm_block_pool pool(1);
    CHECK_FALSE(pool.run_request(a, 1024, 512, held).scheduled);
    CHECK(pool.cached_blocks() == 0);
  }
}

TEST_CASE("sglang_radix_cache equals the naive model of SGLang's code", "[engine]") {
  for (std::uint32_t cap : {9u, 20u, 60u, 300u}) {
    for (std::uint32_t seed = 1; seed <= 3; ++seed) {
      sglang_radix_cache cache(cap);
      naive_sglang ref(cap);
      int r = 0;
      for (const auto& q : random_requests(seed, 600, 16)) {
        const auto full = std::span(q.keys).first(q.L / 16);
        INFO("cap " << cap << " seed " << seed << " request " << r++ << " L " << q.L << " keys " << q.keys.size());
        REQUIRE(cache.run_request(full, q.L, 16).hit_blocks == ref.run(q.keys, q.L, 16));
        REQUIRE(cache.cached_blocks() == ref.pages_in(&ref.root));
        REQUIRE(cache.free_pages() == ref.free_pages);
      }
      REQUIRE(std::string(cache.audit()).empty());
    }
  }
}

TEST_CASE("sglang_radix_cache: whole leaves, the spare page, the split's fresh tail", "[engine]") {
  SECTION("one page short evicts a whole three-page leaf") {
    sglang_radix_cache cache(4);
    const std::vector<block_key> a = {1, 2, 3}, b = {9};
    cache.run_request(a, 1536, 512);
    CHECK(cache.cached_blocks() == 3);
    cache.run_request(b, 512, 512);  // needs 1 page + the spare: 2 > 1 free
    CHECK_FALSE(cache.contains(1));
    CHECK(cache.cached_blocks() == 1);
    CHECK(cache.evictions() == 3);
    CHECK(cache.evicted_nodes() == 1);
  }
  SECTION("the hit is capped at L - 1 tokens, page-aligned") {
    sglang_radix_cache cache(8);
    const std::vector<block_key> a = {1, 2};
    cache.run_request(a, 1024, 512);
    CHECK(cache.run_request(a, 1024, 512).hit_blocks == 1);
    CHECK(cache.run_request(a, 1030, 512).hit_blocks == 2);
  }
  SECTION("a match ending inside a node makes its unused tail most recently used") {
    // x = [1 2 3] inserted first, y = [7] next. A request matching [1] (L = 1024: capped to one
    // page) splits x into [1] -> [2 3]; the tail [2 3] gets the match's time, so it outlives y,
    // which plain LRU over blocks (y used after 2 and 3) would keep instead.
    sglang_radix_cache cache(7);
    const std::vector<block_key> x = {1, 2, 3}, y = {7}, probe = {1, 4}, z = {8, 9};
    cache.run_request(x, 1536, 512);
    cache.run_request(y, 512, 512);
    cache.run_request(probe, 1024, 512);  // hit 1; inserts [4] under [1]
    CHECK(cache.contains(2));
    cache.run_request(z, 1024, 512);  // 7 - 5 = 2 free < 3: evicts one leaf, the oldest: y
    CHECK_FALSE(cache.contains(7));
    CHECK(cache.contains(2));
    CHECK(std::string(cache.audit()).empty());
  }
}

TEST_CASE("engine modes on the bundled traces: pinned counts", "[engine]") {
  // Equal to the engines' own code at every capacity (tools/engine-check/engine_accounting.py and
  // compare_accounting.py; the table in docs/prefix.md "Engine accounting").
  struct pin {
    const prefix_trace* trace;
    std::uint32_t capacity;
    std::uint64_t vllm_hits, sglang_hits, sglang_cached;
  };
  const auto& conv = kvtk::test::conversation();
  const auto& syn = kvtk::test::synthetic();
  for (const pin& p : {pin{&conv, 1000, 12988, 12933, 938}, pin{&conv, 10000, 62001, 61568, 9977},
                       pin{&conv, 30000, 95336, 94866, 29986}, pin{&syn, 1000, 10366, 10210, 996},
                       pin{&syn, 10000, 52950, 52840, 9985}}) {
    vllm_engine_index v(p.capacity);
    const prefix_counts cv = replay(*p.trace, v);
    sglang_engine_index s(p.capacity);
    const prefix_counts cs = replay(*p.trace, s);
    CHECK(cv.block_hits == p.vllm_hits);
    CHECK(cs.block_hits == p.sglang_hits);
    CHECK(s.cache().cached_blocks() == p.sglang_cached);
    CHECK(v.pool().distinct_keys() == p.capacity - 1);  // full, less the freed partial block
    CHECK(cv.block_refs == cs.block_refs);
    CHECK(v.unscheduled() == 0);
    CHECK(std::string(v.pool().audit()).empty());
    CHECK(std::string(s.cache().audit()).empty());
  }
}
