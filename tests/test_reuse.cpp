// The reuse-ranked policies: the learner by hand, the radix order against a naive radix model, the
// pinned results on the bundled traces, and the promises docs/policy-quality.md makes (never more
// than 0.01 of the optimum below radix LRU, deterministic, bounded memory).
#include <catch2/catch.hpp>
#include <cmath>
#include <kvtk/kvtk.hpp>
#include <map>
#include <random>

#include "bundled_traces.hpp"

using namespace kvtk::prefix;
using kvtk::access_hint;
using kvtk::block_key;
using model = kvtk::detail::reuse_model;

namespace {

template <class Index>
prefix_counts run(const prefix_trace& t, std::uint32_t capacity, partial_block p,
                  std::span<const std::uint64_t> next = {}) {
  Index idx(capacity);
  return replay(t, idx, p, next);
}

// Sessions that continue turn by turn (each turn re-sends the previous prompt whole, plus new
// blocks), one-off requests under a shared prompt, and partial last blocks.
prefix_trace session_trace(std::size_t requests, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  prefix_trace t;
  t.block_tokens = 16;
  std::vector<std::vector<std::uint64_t>> sessions(10);
  std::uint64_t fresh = 100;
  std::vector<block_key> keys;
  for (std::size_t r = 0; r < requests; ++r) {
    std::vector<std::uint64_t>& s = sessions[rng() % sessions.size()];
    if (s.empty() || rng() % 4 == 0) s.assign(1, rng() % 2);
    const std::size_t grow = 1 + rng() % 3;
    for (std::size_t i = 0; i < grow; ++i) s.push_back(fresh++);
    keys.resize(s.size());
    chain_keys(s, keys);
    const std::uint64_t L = keys.size() * 16 - (rng() % 2 ? 0 : 1 + rng() % 15);
    t.add(keys, L);
  }
  return t;
}

// A naive radix cache ranking by the rule leaf_reuse documents: maps and scans, with the learner
// (model) shared, and the request depth, classes and ranks recomputed from the description.
struct naive_reuse_radix {
  struct n {
    block_key parent;
    std::uint64_t rank, stamp;
    unsigned refs, cls, turn;
    bool last_full;
    int locks;
  };
  std::size_t capacity;
  bool use_depth;
  model m;
  std::map<block_key, n> nodes;
  std::uint64_t clock = 0, evictions = 0;
  naive_reuse_radix(std::size_t c, bool depth)
      : capacity(c), use_depth(depth), m(static_cast<std::uint32_t>(c)) {}

  bool has_child(block_key k) const {
    for (auto& [key, x] : nodes) {
      if (x.parent == k) return true;
    }
    return false;
  }
  std::uint64_t rank_of(n& x, unsigned refs, unsigned depth, std::uint32_t d, std::uint32_t full,
                        std::uint64_t stamp) {
    x.refs = refs;
    x.cls = model::class_of(refs, depth, d >= full);
    x.turn = depth;
    x.last_full = full != 0 && d == full - 1;
    x.stamp = stamp;
    m.on_event(x.cls);
    return (std::uint64_t{1} << 62) + stamp + static_cast<std::uint64_t>(m.offset(x.cls));
  }
  std::uint32_t process(std::span<const block_key> blocks, std::uint32_t full) {
    std::uint32_t h = 0;
    block_key parent = 0;
    while (h < blocks.size()) {
      auto it = nodes.find(blocks[h]);
      if (it == nodes.end() || it->second.parent != parent) break;
      parent = blocks[h++];
    }
    unsigned depth = 0;
    if (use_depth && h > 0 && nodes[blocks[h - 1]].last_full) {
      depth = std::min(nodes[blocks[h - 1]].turn + 1, 255u);
    }
    std::vector<block_key> locked;
    parent = 0;
    for (std::uint32_t i = 0; i < blocks.size(); ++i) {
      if (i < h) {
        n& x = nodes[blocks[i]];
        const std::uint64_t stamp = ++clock;
        m.on_reuse(x.cls, stamp - x.stamp);
        x.rank = rank_of(x, std::min(x.refs + 1, 255u), depth, i, full, stamp);
        ++x.locks;
      } else {
        if (nodes.count(blocks[i])) break;
        if (nodes.size() == capacity) {
          const block_key* best = nullptr;
          for (auto& [key, x] : nodes) {
            if (x.locks > 0 || has_child(key)) continue;
            if (!best || x.rank < nodes[*best].rank || (x.rank == nodes[*best].rank && key < *best))
              best = &key;
          }
          if (!best) break;
          const block_key v = *best;
          m.remember(v, nodes[v].cls, nodes[v].stamp);
          nodes.erase(v);
          ++evictions;
        }
        const std::uint64_t stamp = ++clock;
        unsigned refs = 1, rc = 0;
        std::uint64_t gap = 0;
        if (m.recall(blocks[i], stamp, rc, gap)) {
          m.on_reuse(rc, gap);
          refs = model::bucket_refs(model::refs_bucket_of_class(rc)) + 1;
        }
        n x{parent, 0, 0, 0, 0, 0, false, 1};
        x.rank = rank_of(x, refs, depth, i, full, stamp);
        nodes[blocks[i]] = x;
      }
      locked.push_back(blocks[i]);
      parent = blocks[i];
    }
    for (block_key k : locked) --nodes[k].locks;
    return h;
  }
};

}  // namespace

TEST_CASE("reuse_model: classes, probabilities, tau and offsets by hand", "[reuse]") {
  CHECK(model::class_of(1, 0, false) == 1);
  CHECK(model::class_of(2, 0, false) == 5);
  CHECK(model::class_of(4, 2, false) == 11);
  CHECK(model::class_of(9, 7, false) == 20);  // refs 9+ and depth 3+ share the last class
  CHECK(model::class_of(9, 7, true) == model::partial_class);
  CHECK(model::bucket_refs(model::refs_bucket(7)) == 5);

  model m(16);  // window max(16 * 64, 1024) = 1024 events
  for (int i = 0; i < 50; ++i) m.on_reuse(1, 100);
  for (int i = 0; i < 200; ++i) m.on_event(1);
  for (int i = 0; i < 55; ++i) m.on_event(5);
  // Not refreshed yet (255 events): tau is still the capacity, and no data means p = 1/2.
  CHECK(m.offset(1) == static_cast<std::int64_t>(16.0 * std::log(0.5)));
  m.on_event(5);            // the 256th event refreshes
  const double tau = 3.0 * 100.0;
  CHECK(m.tau() == Approx(tau));
  CHECK(m.reuse_probability(1) == Approx(51.0 / 202.0));
  CHECK(m.offset(1) == static_cast<std::int64_t>(tau * std::log(51.0 / 202.0)));
  CHECK(m.offset(5) == static_cast<std::int64_t>(tau * std::log(1.0 / 58.0)));
  CHECK(m.offset(0) == static_cast<std::int64_t>(tau * std::log(0.5)));  // no data: p = 1/2
  for (int i = 0; i < 1024 - 256; ++i) m.on_event(3);  // reaches the window: everything halves
  CHECK(m.reuse_probability(1) == Approx((25.0 + 1.0) / (100.0 + 2.0)));
  CHECK(m.offset(1) == static_cast<std::int64_t>(tau * std::log(26.0 / 102.0)));

  m.remember(42, 7, 1000);
  unsigned c = 0;
  std::uint64_t gap = 0;
  REQUIRE(m.recall(42, 1500, c, gap));
  CHECK(c == 7);
  CHECK(gap == 500);
  CHECK_FALSE(m.recall(42, 1600, c, gap));  // consumed
  CHECK_FALSE(m.recall(43, 1600, c, gap));
}

template <class Leaf>
void compare_with_naive(bool depth) {
  for (std::uint32_t cap : {4u, 20u, 64u}) {
    const prefix_trace t = session_trace(3000, cap);
    radix_index<Leaf> idx(cap);
    naive_reuse_radix naive(cap, depth);
    std::uint64_t hits = 0;
    for (std::size_t r = 0; r < t.requests(); ++r) {
      const auto blocks = t.cacheable(r, partial_block::cache);
      access_hint base;
      base.full_blocks = static_cast<std::uint32_t>(t.input_tokens(r) / 16);
      const std::uint32_t got = idx.process(blocks, {}, base);
      INFO("capacity " << cap << " request " << r << " depth " << depth);
      REQUIRE(got == naive.process(blocks, base.full_blocks));
      hits += got;
      // Same resident set, same ranks, and the tree's own invariants (heap order, child counts).
      REQUIRE(idx.tree().size() == naive.nodes.size());
      for (const auto& [k, x] : naive.nodes) {
        const auto s = idx.tree().find(k);
        REQUIRE(s != prefix_tree<Leaf>::root);
        REQUIRE(idx.tree().at(s).rank == x.rank);
        REQUIRE(idx.tree().at(s).locks == 0);
      }
      REQUIRE(idx.tree().audit().empty());
    }
    REQUIRE(idx.evictions() == naive.evictions);
    REQUIRE(idx.evictions() > t.requests() / 2);  // the cache works hard
    REQUIRE(hits > t.requests() / 4);
    // Through replay (which sets full_blocks and depths itself) the same counts come out.
    radix_index<Leaf> again(cap);
    REQUIRE(replay(t, again, partial_block::cache).block_hits == hits);
  }
}

TEST_CASE("leaf_reuse equals the naive radix model", "[reuse][prefix]") {
  compare_with_naive<leaf_reuse>(false);
  constexpr reuse_features with_depth{true, true, true, true, false, 3.0};
  compare_with_naive<basic_leaf_reuse<with_depth>>(true);
}

TEST_CASE("reuse on the bundled traces: pinned results, never below LRU, deterministic",
          "[reuse][golden]") {
  const prefix_trace& conv = kvtk::test::conversation();
  const auto next = next_use_positions(conv, partial_block::cache);
  // Pinned (partial blocks cached, as Mooncake counts): block hits of radix reuse.
  const std::map<std::uint32_t, std::uint64_t> pinned = {
      {1000, 23041}, {5859, 51889}, {10000, 63836}, {30000, 95977}};
  for (const auto& [cap, want] : pinned) {
    const auto radix = run<radix_index<leaf_reuse>>(conv, cap, partial_block::cache);
    INFO("capacity " << cap << " radix " << radix.block_hits);
    CHECK(radix.block_hits == want);
    CHECK(run<radix_index<leaf_reuse>>(conv, cap, partial_block::cache).block_hits ==
          radix.block_hits);  // deterministic
  }
  for (const prefix_trace* t : {&conv, &kvtk::test::synthetic()}) {
    for (const partial_block p : {partial_block::cache, partial_block::skip}) {
      const auto nx = next_use_positions(*t, p);
      for (const std::uint32_t cap : {1000u, 3000u, 5859u, 10000u, 30000u, 100000u}) {
        const auto opt = replay_optimum(*t, cap, p, nx);
        const double lru = run<radix_index<leaf_lru>>(*t, cap, p).fraction_of(opt);
        const double mine = run<radix_index<leaf_reuse>>(*t, cap, p).fraction_of(opt);
        INFO("capacity " << cap << " lru " << lru << " reuse " << mine);
        CHECK(mine >= lru - 0.01);
      }
    }
  }
  (void)next;
}

TEST_CASE("leaf_reuse memory stays within 128 bytes per block", "[reuse]") {
  for (const std::uint32_t cap : {1000u, 100000u}) {
    prefix_tree<leaf_reuse> tree(cap);
    const double per_block =
        tree.bytes_per_block() + double(tree.leaf_state().memory_bytes()) / double(cap);
    INFO("capacity " << cap << ": " << per_block << " bytes per block");
    CHECK(per_block <= 128.0);
  }
}
