// The prefix layer: chained keys, prefix_tree / hash_chain_pool against naive models, replay
// semantics, exact and sampled miss-ratio curves, the offline optimum, and the Mooncake numbers.
#include <catch2/catch.hpp>
#include <cmath>
#include <deque>
#include <kvtk/kvtk.hpp>
#include <list>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "bundled_traces.hpp"
#include "formats/mooncake_flat.hpp"

using namespace kvtk::prefix;
using kvtk::access_hint;
using kvtk::block_key;

namespace {

using kvtk::test::conversation;
using kvtk::test::synthetic;

double round4(double x) { return std::round(x * 10000) / 10000; }

template <class Index>
prefix_counts run(const prefix_trace& t, std::uint32_t capacity, partial_block p,
                  std::span<const std::uint64_t> next = {}) {
  Index idx(capacity);
  return replay(t, idx, p, next);
}

// A random trace of prefix-consistent requests: sessions that grow turn by turn, shared system
// prompts, one-off requests. Keys are chained from content ids, as a real trace would be.
prefix_trace random_trace(std::size_t requests, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  prefix_trace t;
  t.block_tokens = 16;
  std::vector<std::vector<std::uint64_t>> sessions(12);
  std::vector<block_key> keys;
  for (std::size_t r = 0; r < requests; ++r) {
    std::vector<std::uint64_t>& s = sessions[rng() % sessions.size()];
    if (s.empty() || rng() % 7 == 0) {
      s.assign(1, rng() % 3);  // one of three system prompts
    }
    const std::size_t grow = rng() % 4;
    for (std::size_t i = 0; i < grow; ++i) s.push_back(rng() % 50);
    std::vector<std::uint64_t> content = s;
    if (rng() % 5 == 0) content.resize(1 + rng() % content.size());  // a shorter re-ask
    keys.resize(content.size());
    chain_keys(content, keys);
    const std::uint64_t L = keys.size() * 16 - rng() % 16;
    t.add(keys, L);
    t.priority.push_back(static_cast<std::uint32_t>(rng() % 3) * 40);
  }
  return t;
}

// Naive radix model: a map of resident keys; victims by scanning every resident node. Admit is
// an admission rule (admission.hpp), written out here from its description.
template <class Leaf, class Admit = admit_all>
struct naive_radix {
  struct n {
    block_key parent;  // 0 = root (keys are chained hashes, never 0 in these tests)
    std::uint64_t rank;
    int locks;
    unsigned freq = 0;  // s3fifo
  };
  std::size_t capacity;
  std::map<block_key, n> nodes;
  std::uint64_t clock = 0, evictions = 0;
  std::deque<block_key> ghost = {};  // s3fifo
  std::deque<block_key> admit_ghost_keys = {};  // admit_ghost
  kvtk::detail::frequency_sketch sketch{static_cast<std::uint32_t>(std::max<std::size_t>(capacity, 64)),
                                        10 * std::max<std::size_t>(capacity, 64), true};
  void remember(block_key k) {
    if (std::find(admit_ghost_keys.begin(), admit_ghost_keys.end(), k) != admit_ghost_keys.end()) {
      return;
    }
    if (admit_ghost_keys.size() >= std::max<std::size_t>(capacity, 1)) admit_ghost_keys.pop_front();
    admit_ghost_keys.push_back(k);
  }
  // admit_adaptive: D (declined) and E (evicted) ghosts, the budget, this request's admissions.
  std::deque<block_key> declined_keys = {}, evicted_keys = {};
  std::uint64_t budget = 0, admitted = 0;
  static bool take(std::deque<block_key>& q, block_key k) {
    auto g = std::find(q.begin(), q.end(), k);
    if (g == q.end()) return false;
    q.erase(g);
    return true;
  }
  void remember_in(std::deque<block_key>& q, block_key k) {
    take(declined_keys, k);
    take(evicted_keys, k);
    if (q.size() >= std::max<std::size_t>(capacity, 1)) q.pop_front();
    q.push_back(k);
  }
  // Asked only while the tree is full.
  bool admits(block_key k, std::size_t depth, const access_hint& h) {
    if constexpr (std::is_same_v<Admit, admit_adaptive>) {
      if (take(declined_keys, k)) {
        budget = std::min<std::uint64_t>(capacity, budget + 1);
        return true;
      }
      if (take(evicted_keys, k)) {
        budget -= std::min<std::uint64_t>(budget, 4);
        return true;
      }
      if (admitted >= budget) return false;
      ++admitted;
      return true;
    } else if constexpr (std::is_same_v<Admit, admit_ghost>) {
      auto g = std::find(admit_ghost_keys.begin(), admit_ghost_keys.end(), k);
      if (g == admit_ghost_keys.end()) return false;
      admit_ghost_keys.erase(g);
      return true;
    } else if constexpr (std::is_same_v<Admit, admit_depth>) {
      return depth < std::max<std::size_t>(capacity / 2, 1);
    } else if constexpr (std::is_same_v<Admit, admit_belady>) {
      const block_key v = min_leaf([](const n&) { return true; });
      return v != 0 && h.next_use < ~nodes[v].rank;
    } else if constexpr (std::is_same_v<Admit, admit_tinylfu>) {
      const block_key v = min_leaf([](const n&) { return true; });
      return v == 0 || sketch.estimate(k) > sketch.estimate(v);
    } else {
      return true;
    }
  }
  // SLRU, written out: protected = rank's top bit; the protected node with the smallest stamp is
  // demoted (to probation, with the current stamp) when protected exceeds 80 % of capacity.
  std::uint64_t inserted(block_key k, std::uint64_t stamp, const access_hint& h) {
    if constexpr (stateless_leaf_policy<Leaf>) {
      return Leaf::on_insert(stamp, h);
    } else if constexpr (std::is_same_v<Leaf, leaf_s3fifo>) {
      auto g = std::find(ghost.begin(), ghost.end(), k);
      if (g == ghost.end()) return stamp;
      ghost.erase(g);
      return (std::uint64_t{1} << 63) | stamp;
    } else {
      return stamp;
    }
  }
  // The evictable leaf of smallest (rank, key) among those pred accepts.
  template <class Pred>
  block_key min_leaf(Pred pred) {
    const block_key* best = nullptr;
    const n* bn = nullptr;
    for (auto& [key, x] : nodes) {
      if (x.locks > 0 || has_child(key) || !pred(x)) continue;
      if (!bn || x.rank < bn->rank || (x.rank == bn->rank && key < *best)) {
        best = &key;
        bn = &x;
      }
    }
    return best ? *best : 0;
  }
  // S3-FIFO over leaves, written out from the policy's description.
  block_key s3fifo_victim() {
    constexpr std::uint64_t bit = std::uint64_t{1} << 63;
    auto in_small = [&](const n& x) { return !(x.rank & bit); };
    auto in_main = [&](const n& x) { return (x.rank & bit) != 0; };
    for (;;) {
      std::size_t small = 0;
      for (auto& [key, x] : nodes) small += in_small(x);
      const block_key s = min_leaf(in_small), m = min_leaf(in_main);
      if (s != 0 && (small >= std::max<std::size_t>(capacity / 10, 1) || m == 0)) {
        n& t = nodes[s];
        if (t.freq == 0) {
          if (ghost.size() >= std::max<std::size_t>(capacity * 90 / 100, 1)) ghost.pop_front();
          ghost.push_back(s);
          return s;
        }
        t.freq = 0;
        t.rank = bit | ++clock;
        continue;
      }
      if (m == 0) return 0;
      n& t = nodes[m];
      if (t.freq == 0) return m;
      --t.freq;
      t.rank = bit | ++clock;
    }
  }
  std::uint64_t touched(n& node, std::uint64_t rank, std::uint64_t stamp, const access_hint& h) {
    if constexpr (stateless_leaf_policy<Leaf>) {
      return Leaf::on_touch(rank, stamp, h);
    } else if constexpr (std::is_same_v<Leaf, leaf_s3fifo>) {
      node.freq = std::min(node.freq + 1, 3u);
      return rank;
    } else {
      constexpr std::uint64_t bit = std::uint64_t{1} << 63;
      if (rank & bit) return bit | stamp;
      std::size_t count = 1;  // the node being promoted
      n* lru = nullptr;
      for (auto& [key, x] : nodes) {
        if (!(x.rank & bit)) continue;
        ++count;
        if (!lru || x.rank < lru->rank) lru = &x;
      }
      if (count > std::max<std::size_t>(capacity * 80 / 100, 1)) lru->rank = stamp;
      return bit | stamp;
    }
  }
  bool has_child(block_key k) const {
    for (auto& [key, x] : nodes) {
      if (x.parent == k) return true;
    }
    return false;
  }
  std::uint32_t process(std::span<const block_key> blocks, std::span<const std::uint64_t> next,
                        const access_hint& base) {
    if constexpr (std::is_same_v<Admit, admit_tinylfu>) {
      for (block_key k : blocks) sketch.increment(k);
    }
    admitted = 0;
    std::uint32_t h = 0;
    block_key parent = 0;
    while (h < blocks.size()) {
      auto it = nodes.find(blocks[h]);
      if (it == nodes.end() || it->second.parent != parent) break;
      parent = blocks[h++];
    }
    std::vector<block_key> locked;
    parent = 0;
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      access_hint hint = base;
      if (!next.empty()) hint.next_use = next[i];
      if (i < h) {
        n& x = nodes[blocks[i]];
        x.rank = touched(x, x.rank, ++clock, hint);
        ++x.locks;
      } else {
        if (nodes.count(blocks[i])) break;
        if (nodes.size() == capacity && !admits(blocks[i], i, hint)) {
          // The declined tail, at most `capacity` keys of it, deepest first.
          const std::size_t last = std::min<std::size_t>(blocks.size(), i + capacity);
          for (std::size_t j = last; j-- > i;) {
            if constexpr (std::is_same_v<Admit, admit_ghost>) remember(blocks[j]);
            if constexpr (std::is_same_v<Admit, admit_adaptive>) remember_in(declined_keys, blocks[j]);
          }
          break;
        }
        if (nodes.size() == capacity) {
          block_key victim = 0;
          if constexpr (std::is_same_v<Leaf, leaf_s3fifo>) {
            victim = s3fifo_victim();
          } else {
            victim = min_leaf([](const n&) { return true; });
          }
          if (victim == 0) break;
          nodes.erase(victim);
          ++evictions;
          if constexpr (std::is_same_v<Admit, admit_ghost>) remember(victim);
          if constexpr (std::is_same_v<Admit, admit_adaptive>) remember_in(evicted_keys, victim);
        }
        const std::uint64_t stamp = ++clock;
        nodes[blocks[i]] = n{parent, inserted(blocks[i], stamp, hint), 1};
      }
      locked.push_back(blocks[i]);
      parent = blocks[i];
    }
    for (block_key k : locked) --nodes[k].locks;
    return h;
  }
};

// Naive vLLM pool model: blocks in a vector, free queue as a std::list of indices.
struct naive_hash_chain {
  struct blk {
    block_key key = 0;
    int refs = 0;
    bool cached = false;
  };
  std::vector<blk> blocks;
  std::list<std::size_t> free;
  std::uint64_t evictions = 0;
  explicit naive_hash_chain(std::size_t n) : blocks(n) {
    for (std::size_t i = 0; i < n; ++i) free.push_back(i);
  }
  long find(block_key k) const {
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      if (blocks[i].cached && blocks[i].key == k) return static_cast<long>(i);
    }
    return -1;
  }
  std::uint32_t process(std::span<const block_key> keys, std::span<const std::uint64_t>,
                        const access_hint&) {
    std::uint32_t h = 0;
    while (h < keys.size() && find(keys[h]) >= 0) ++h;
    std::vector<std::size_t> held;
    for (block_key k : keys) {
      long s = find(k);
      if (s >= 0) {
        if (blocks[s].refs++ == 0) free.remove(static_cast<std::size_t>(s));
      } else {
        if (free.empty()) break;
        s = static_cast<long>(free.front());
        free.pop_front();
        if (blocks[s].cached) ++evictions;
        blocks[s] = blk{k, 1, true};
      }
      held.push_back(static_cast<std::size_t>(s));
    }
    for (std::size_t i = held.size(); i-- > 0;) {
      if (--blocks[held[i]].refs == 0) free.push_back(held[i]);
    }
    return h;
  }
};

template <class Leaf, class Admit = admit_all>
void compare_radix(std::uint32_t capacity, std::uint64_t seed) {
  const prefix_trace t = random_trace(3000, seed);
  const auto next = next_use_positions(t, partial_block::cache);
  naive_radix<Leaf, Admit> model{capacity, {}};
  radix_index<Leaf, Admit> idx(capacity);
  std::uint64_t pos = 0;
  for (std::size_t r = 0; r < t.requests(); ++r) {
    const auto blocks = t.cacheable(r, partial_block::cache);
    access_hint base;
    base.priority = t.priority[r];
    const auto nx = std::span<const std::uint64_t>(next).subspan(pos, blocks.size());
    pos += blocks.size();
    INFO(Leaf::name << "+" << Admit::name << " capacity " << capacity << " request " << r);
    REQUIRE(idx.process(blocks, nx, base) == model.process(blocks, nx, base));
    REQUIRE(idx.tree().size() == model.nodes.size());
    for (auto& [k, x] : model.nodes) {
      const auto s = idx.tree().find(k);
      REQUIRE(s != prefix_tree<Leaf>::root);
      REQUIRE(idx.tree().at(s).rank == x.rank);
      REQUIRE(idx.tree().at(s).locks == 0);  // all locks released after the request
    }
    REQUIRE(idx.tree().audit().empty());
  }
  REQUIRE(idx.evictions() == model.evictions);
  REQUIRE(model.evictions > 100);
}

}  // namespace

TEST_CASE("chained keys: content ids under different prefixes get different keys", "[prefix]") {
  const std::uint64_t a[] = {7, 1, 2}, b[] = {8, 1, 2};
  block_key ka[3], kb[3];
  chain_keys(a, ka);
  chain_keys(b, kb);
  REQUIRE(ka[1] != kb[1]);
  REQUIRE(ka[2] != kb[2]);
  block_key again[3];
  chain_keys(a, again);
  REQUIRE(std::equal(ka, ka + 3, again));
  // A replaceable hash: identity-like chaining.
  chain_keys(
      a, ka, [](std::uint64_t p, std::uint64_t c) { return p + c; }, 0);
  REQUIRE(ka[2] == 10);
  REQUIRE(cacheable_blocks(1000, 512) == 1);
  REQUIRE(cacheable_blocks(1000, 512, partial_block::cache) == 2);
  REQUIRE(cacheable_blocks(1024, 512, partial_block::cache) == 2);
}

TEST_CASE("prefix_tree: every leaf policy equals the naive radix model", "[prefix]") {
  for (std::uint32_t c : {8u, 40u}) {
    compare_radix<leaf_lru>(c, 1 + c);
    compare_radix<leaf_fifo>(c, 2 + c);
    compare_radix<leaf_lfu>(c, 3 + c);
    compare_radix<leaf_priority_lru>(c, 4 + c);
    compare_radix<leaf_belady>(c, 5 + c);
    compare_radix<leaf_slru>(c, 6 + c);
    compare_radix<leaf_s3fifo>(c, 7 + c);
  }
}

TEST_CASE("radix admission rules equal their naive models", "[prefix][admission]") {
  for (std::uint32_t c : {8u, 40u}) {
    compare_radix<leaf_lru, admit_ghost>(c, 11 + c);
    compare_radix<leaf_lfu, admit_ghost>(c, 12 + c);
    compare_radix<leaf_s3fifo, admit_ghost>(c, 13 + c);
    compare_radix<leaf_lru, admit_adaptive>(c, 19 + c);
    compare_radix<leaf_slru, admit_adaptive>(c, 20 + c);
    compare_radix<leaf_lru, admit_tinylfu>(c, 14 + c);
    compare_radix<leaf_slru, admit_tinylfu>(c, 15 + c);
    compare_radix<leaf_fifo, admit_depth>(c, 16 + c);
    compare_radix<leaf_lru, admit_depth>(c, 17 + c);
    compare_radix<leaf_belady, admit_belady>(c, 18 + c);
  }
}

// A declined tail longer than the ghost: its head must survive, so that the next sight admits it.
template <class Admit>
void second_sight_admits_the_head() {
  radix_index<leaf_lru, Admit> idx(4);
  const std::vector<block_key> a{1, 2, 3, 4}, b{11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  const access_hint h;
  INFO(Admit::name);
  REQUIRE(idx.process(a, {}, h) == 0);  // fills the free nodes: no rule asked
  REQUIRE(idx.process(b, {}, h) == 0);  // first sight while full: declined, nothing of b kept
  REQUIRE(idx.tree().find(11) == prefix_tree<leaf_lru>::root);
  REQUIRE(idx.process(b, {}, h) == 0);  // second sight: its first four blocks come in
  for (block_key k : {11, 12, 13, 14}) REQUIRE(idx.tree().find(k) != prefix_tree<leaf_lru>::root);
  REQUIRE(idx.process(b, {}, h) == 4);
}

TEST_CASE("ghost rules: a long declined tail is admitted from its head on second sight",
          "[prefix][admission]") {
  second_sight_admits_the_head<admit_ghost>();
  second_sight_admits_the_head<admit_adaptive>();
}

TEST_CASE("radix policy names: leaf orders and leaf+admission, from the lists", "[prefix][admission]") {
  const auto& names = radix_policy_names();
  REQUIRE(names.size() == leaf_policy_names.size() + (leaf_policy_names.size() - 1) * 4 + 1);
  REQUIRE(std::find(names.begin(), names.end(), "lru+ghost") != names.end());
  REQUIRE(std::find(names.begin(), names.end(), "belady+belady") != names.end());
  REQUIRE(std::find(names.begin(), names.end(), "lru+belady") == names.end());
  REQUIRE(std::find(names.begin(), names.end(), "belady+ghost") == names.end());
  for (const auto& name : names) {
    const std::string back = visit_radix_policy(name, []<class L, class A>() {
      return std::is_same_v<A, admit_all> ? std::string(L::name)
                                          : std::string(L::name) + "+" + std::string(A::name);
    });
    REQUIRE(back == name);
  }
  for (const char* bad : {"lru+", "+ghost", "lru+all", "lru+belady", "belady+tinylfu", "lru+x", "arc"}) {
    INFO(bad);
    REQUIRE_THROWS_AS(visit_radix_policy(bad, []<class L, class A>() {}), kvtk::unknown_name);
  }
}

TEST_CASE("hash_chain_pool equals the naive vLLM pool model", "[prefix]") {
  for (std::uint32_t c : {8u, 40u}) {
    const prefix_trace t = random_trace(3000, 100 + c);
    hash_chain_index idx(c);
    naive_hash_chain model(c);
    for (std::size_t r = 0; r < t.requests(); ++r) {
      const auto b = t.cacheable(r, partial_block::cache);
      INFO("request " << r);
      REQUIRE(idx.process(b, {}, {}) == model.process(b, {}, {}));
    }
    REQUIRE(idx.evictions() == model.evictions);
    REQUIRE(model.evictions > 100);
  }
}

TEST_CASE("prefix_tree: locks, leaf-only eviction, bad input", "[prefix]") {
  REQUIRE_THROWS_AS(prefix_tree<leaf_lru>(0), std::invalid_argument);
  prefix_tree<leaf_lru> tree(3);
  std::vector<block_key> evicted;
  auto on_evict = [&](block_key k, std::uint32_t, const no_payload&) { evicted.push_back(k); };
  const block_key path[] = {10, 11, 12};
  auto ins = tree.insert(prefix_tree<leaf_lru>::root, path, on_evict);
  REQUIRE(ins.inserted == 3);
  REQUIRE(ins.complete);
  REQUIRE(tree.evictable() == 0);  // all locked by the insert
  // Full and everything locked: nothing can be inserted.
  const block_key other[] = {20};
  auto no = tree.insert(prefix_tree<leaf_lru>::root, other, on_evict);
  REQUIRE(no.inserted == 0);
  REQUIRE_FALSE(no.complete);
  REQUIRE(tree.unlock(ins.node));
  REQUIRE_FALSE(tree.unlock(ins.node));    // not locked any more: refused
  REQUIRE(tree.evictable() == 1);          // only the leaf 12
  REQUIRE(tree.evict(10, on_evict) == 3);  // 12, then 11, then 10 as each becomes a leaf
  REQUIRE(evicted == std::vector<block_key>{12, 11, 10});
  REQUIRE(tree.audit().empty());
  // A key already resident under another parent ends a match and an insert.
  const block_key a[] = {1, 2};
  tree.unlock(tree.insert(prefix_tree<leaf_lru>::root, a, on_evict).node);
  const block_key b[] = {3, 2};
  REQUIRE(tree.match(b).length == 0);
  auto c = tree.insert(prefix_tree<leaf_lru>::root, b, on_evict);
  REQUIRE(c.inserted == 1);
  REQUIRE_FALSE(c.complete);
  tree.unlock(c.node);
  REQUIRE(tree.audit().empty());
  REQUIRE(tree.bytes_per_block() <= 64.0);
}

TEST_CASE("prefix_tree stores payloads and hands them to the eviction callback", "[prefix]") {
  prefix_tree<leaf_lru, int> tree(2);
  std::vector<int> freed;
  auto on_evict = [&](block_key, std::uint32_t, const int& gpu_block) {
    freed.push_back(gpu_block);
  };
  const block_key p[] = {5, 6};
  auto r = tree.insert(
      prefix_tree<leaf_lru, int>::root, p, on_evict, [](std::uint32_t) { return access_hint{}; },
      [](std::uint32_t i) { return 100 + static_cast<int>(i); });
  REQUIRE(tree.payload(tree.find(6)) == 101);
  tree.unlock(r.node);
  tree.evict(2, on_evict);
  REQUIRE(freed == std::vector<int>{101, 100});
}

TEST_CASE("Mooncake conversation: flat LRU reproduces the published prefix hit ratios",
          "[prefix][golden]") {
  const prefix_trace& t = conversation();
  REQUIRE(t.requests() == 12031);
  REQUIRE(t.keys.size() == 288500);
  struct row {
    std::uint32_t capacity;
    double block, token;
  };
  const row rows[] = {{1000, 0.0445, 0.0454},
                      {10000, 0.2112, 0.2153},
                      {30000, 0.3257, 0.3321},
                      {100000, 0.3637, 0.3708},
                      {182790, 0.3664, 0.3736}};  // every distinct block fits: the ideal
  for (const row& w : rows) {
    const auto c = run<flat_index<kvtk::lru>>(t, w.capacity, partial_block::cache);
    INFO("capacity " << w.capacity);
    REQUIRE(c.block_refs == 288500);
    REQUIRE(round4(c.block_hit_ratio()) == Approx(w.block).margin(1e-9));
    REQUIRE(round4(c.token_hit_ratio()) == Approx(w.token).margin(1e-9));
  }
  // Radix LRU is slightly higher at 10000 blocks.
  const auto radix = run<radix_index<leaf_lru>>(t, 10000, partial_block::cache);
  REQUIRE(round4(radix.block_hit_ratio()) == Approx(0.2116).margin(1e-9));
  REQUIRE(round4(radix.token_hit_ratio()) == Approx(0.2157).margin(1e-9));
}

TEST_CASE("Mooncake conversation: full blocks only (the default) ", "[prefix][golden]") {
  // Values from an independent brute-force Python replay of the same semantics.
  const prefix_trace& t = conversation();
  const std::pair<std::uint32_t, double> rows[] = {
      {1000, 0.0468}, {10000, 0.2242}, {30000, 0.3447}, {100000, 0.3795}};
  for (auto [cap, ratio] : rows) {
    const auto c = run<flat_index<kvtk::lru>>(t, cap, partial_block::skip);
    REQUIRE(c.block_refs == 276491);
    REQUIRE(round4(c.block_hit_ratio()) == Approx(ratio).margin(1e-9));
  }
}

TEST_CASE("exact prefix-LRU MRC equals brute-force replays at 24 capacities", "[prefix][mrc]") {
  for (const prefix_trace* t : {&conversation(), &synthetic()}) {
    for (partial_block p : {partial_block::cache, partial_block::skip}) {
      const prefix_mrc mrc = exact_prefix_lru_mrc(*t, p);
      for (std::uint32_t cap :
           {1u,     2u,     3u,     10u,     50u,     100u,    500u,    1000u,
            2000u,  3000u,  5000u,  7500u,   10000u,  15000u,  20000u,  30000u,
            40000u, 50000u, 70000u, 100000u, 130000u, 160000u, 182790u, 250000u}) {
        const auto c = run<flat_index<kvtk::lru>>(*t, cap, p);
        INFO("capacity " << cap);
        REQUIRE(mrc.block_hits(cap) == c.block_hits);
        REQUIRE(mrc.token_hits(cap) == c.token_hits);
        REQUIRE(mrc.block_refs == c.block_refs);
      }
    }
  }
}

TEST_CASE("sampled MRC stays close to the exact curve", "[prefix][mrc]") {
  // Block-key sampling at 10 % (docs/prefix.md has the full table): the token hit ratio within
  // 0.05 of the exact curve at every capacity from 1 % to 100 % of saturation, and the curve's
  // own error estimate non-zero where the sample is thin.
  for (const prefix_trace* t : {&conversation(), &synthetic()}) {
    const prefix_mrc exact = exact_prefix_lru_mrc(*t, partial_block::cache);
    const auto sampled = sampled_prefix_lru_mrc(*t, 0.1, partial_block::cache, true);
    const double share =
        static_cast<double>(sampled.sample.block_refs) / static_cast<double>(exact.block_refs);
    REQUIRE(share > 0.05);
    REQUIRE(share < 0.2);
    double worst = 0, sum = 0;
    const double top = static_cast<double>(exact.saturation());
    for (int i = 1; i <= 100; ++i) {
      const auto cap = static_cast<std::uint64_t>(top * i / 100.0);
      const double e = std::abs(sampled.token_hit_ratio(cap) - exact.token_hit_ratio(cap));
      worst = std::max(worst, e);
      sum += e;
    }
    INFO("worst " << worst << " mean " << sum / 100);
    REQUIRE(worst < 0.05);
    REQUIRE(sum / 100 < 0.03);
  }
  // At rate 1 the sample is the trace: the exact curve, with no error.
  const auto whole = sampled_prefix_lru_mrc(synthetic(), 1.0, partial_block::cache, true);
  const prefix_mrc exact = exact_prefix_lru_mrc(synthetic(), partial_block::cache);
  for (std::uint64_t cap : {10u, 1000u, 50000u}) {
    REQUIRE(whole.block_hit_ratio(cap) == exact.block_hit_ratio(cap));
    REQUIRE(std::abs(whole.token_hit_ratio(cap) - exact.token_hit_ratio(cap)) < 1e-12);
  }
  REQUIRE_THROWS_AS(sampled_prefix_lru_mrc(synthetic(), 0.0), std::invalid_argument);
}

TEST_CASE("offline optimum: Belady bounds every policy - flat Belady hits the ideal at 10000",
          "[prefix][golden]") {
  const prefix_trace& t = conversation();
  const auto p = partial_block::cache;
  const auto next = next_use_positions(t, p);
  const auto ideal = run<flat_index<kvtk::lru>>(t, 182790, p);
  const auto flat_opt = run<flat_index<kvtk::belady>>(t, 10000, p, next);
  REQUIRE(flat_opt.block_hits == ideal.block_hits);
  for (std::uint32_t cap : {1000u, 10000u}) {
    const auto opt = run<radix_index<leaf_belady>>(t, cap, p, next);
    INFO("capacity " << cap);
    REQUIRE(opt.block_hits >= run<radix_index<leaf_lru>>(t, cap, p).block_hits);
    REQUIRE(opt.block_hits >= run<radix_index<leaf_fifo>>(t, cap, p).block_hits);
    REQUIRE(opt.block_hits >= run<radix_index<leaf_lfu>>(t, cap, p).block_hits);
    REQUIRE(opt.block_hits >= run<radix_index<leaf_slru>>(t, cap, p).block_hits);
    REQUIRE(opt.block_hits >= run<radix_index<leaf_s3fifo>>(t, cap, p).block_hits);
    REQUIRE(opt.block_hits >= run<flat_index<kvtk::lru>>(t, cap, p).block_hits);
    REQUIRE(opt.block_hits >= run<hash_chain_index>(t, cap, p).block_hits);
  }
  // Every policy as a fraction of the optimum: LRU gets about 58 % of the achievable hits at
  // 10000 blocks (0.2116 / 0.3664).
  const auto opt10k = replay_optimum(t, 10000, p);
  const double lru_share = run<radix_index<leaf_lru>>(t, 10000, p).fraction_of(opt10k);
  REQUIRE(lru_share == Approx(0.2116 / 0.3664).margin(0.002));
  REQUIRE(opt10k.fraction_of(opt10k) == 1.0);
  flat_index<kvtk::belady> missing_future(10);
  REQUIRE_THROWS_AS(replay(t, missing_future, p), std::invalid_argument);
}

// A Bailian-format trace built from the Mooncake synthetic trace: each block's content id is its
// index among its parent's children, so content ids collide across different prefixes (block 0
// under two different parents has content 0 twice). Chained, they must give exactly the prefix-id
// trace's results; taken as prefix ids they would not.
TEST_CASE("Bailian content ids are chained into prefix keys", "[prefix][formats]") {
  const prefix_trace& syn = synthetic();
  std::map<std::pair<block_key, block_key>, std::uint64_t> child_index;  // (parent, id) -> index
  std::map<block_key, std::uint64_t> children;
  std::ostringstream jsonl, as_mooncake;
  std::map<std::uint64_t, std::set<block_key>> parents_of_content;
  for (std::size_t r = 0; r < syn.requests(); ++r) {
    const auto b = syn.blocks(r);
    std::vector<std::uint64_t> content;
    block_key parent = ~block_key{0};
    for (block_key id : b) {
      auto [it, fresh] = child_index.try_emplace({parent, id}, children[parent]);
      if (fresh) ++children[parent];
      content.push_back(it->second);
      parents_of_content[it->second].insert(parent);
      parent = id;
    }
    auto list = [&](std::ostream& o) {
      o << "[";
      for (std::size_t i = 0; i < content.size(); ++i) o << (i ? ", " : "") << content[i];
      o << "]";
    };
    jsonl << "{\"chat_id\": " << r << ", \"parent_chat_id\": -1, \"timestamp\": " << r * 0.5
          << ", \"input_length\": " << syn.input_length[r]
          << ", \"output_length\": 10, \"type\": \"text\", \"turn\": 1, \"hash_ids\": ";
    list(jsonl);
    jsonl << "}\n";
    as_mooncake << "{\"timestamp\": " << r << ", \"input_length\": " << syn.input_length[r]
                << ", \"hash_ids\": ";
    list(as_mooncake);
    as_mooncake << "}\n";
  }
  REQUIRE(parents_of_content[0].size() > 100);  // content ids really collide across prefixes
  std::istringstream in(jsonl.str());
  const prefix_trace chained = kvtk::sim::parse_bailian_requests(in, "bailian", 512);
  std::istringstream in2(as_mooncake.str());
  const prefix_trace unchained = kvtk::sim::parse_mooncake_requests(in2, "unchained", 512);
  for (std::uint32_t cap : {500u, 5000u, 20000u}) {
    for (partial_block p : {partial_block::cache, partial_block::skip}) {
      const auto want = run<radix_index<leaf_lru>>(syn, cap, p);
      const auto got = run<radix_index<leaf_lru>>(chained, cap, p);
      REQUIRE(got.block_hits == want.block_hits);
      REQUIRE(got.token_hits == want.token_hits);
      REQUIRE(run<flat_index<kvtk::lru>>(chained, cap, p).block_hits ==
              run<flat_index<kvtk::lru>>(syn, cap, p).block_hits);
      REQUIRE(run<flat_index<kvtk::lru>>(unchained, cap, p).block_hits != want.block_hits);
    }
  }
}

TEST_CASE("request readers check block counts and arrival order", "[prefix][formats]") {
  auto err = [](const std::string& text, bool bailian) {
    std::istringstream in(text);
    try {
      if (bailian) {
        kvtk::sim::parse_bailian_requests(in, "b.jsonl");
      } else {
        kvtk::sim::parse_mooncake_requests(in, "m.jsonl");
      }
    } catch (const kvtk::sim::trace_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(err("{\"timestamp\": 0, \"input_length\": 600, \"hash_ids\": [1]}\n", false) ==
        "m.jsonl:1: 'hash_ids' has 1 ids but input_length 600 makes 2 blocks of 512 tokens");
  CHECK(err("{\"timestamp\": 5, \"input_length\": 1, \"hash_ids\": [1]}\n"
            "{\"timestamp\": 4, \"input_length\": 1, \"hash_ids\": [1]}\n",
            false) == "m.jsonl:2: timestamp goes backwards (the format is in arrival order)");
  CHECK(err("{\"timestamp\": \"now\", \"input_length\": 1, \"hash_ids\": [1]}\n", false) ==
        "m.jsonl:1: 'timestamp' must be a number, got string");
  CHECK(err("{\"chat_id\": 1, \"timestamp\": 1.5, \"input_length\": 33, \"hash_ids\": [7, 7, 7]}\n",
            true) == "no error");
  CHECK(err("{\"chat_id\": 1, \"timestamp\": 1.5, \"input_length\": 33, \"hash_ids\": [7, 7]}\n",
            true) ==
        "b.jsonl:1: 'hash_ids' has 2 ids but input_length 33 makes 3 blocks of 16 tokens");
}
