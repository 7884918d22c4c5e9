// The radix top tier: one tier equals radix replay exactly, a hand-computed tree + flat LRU
// hierarchy, a naive map-and-scan model on random workloads (audits after every request), and
// the configurations it refuses.
#include <algorithm>
#include <catch2/catch.hpp>
#include <kvtk/kvtk.hpp>
#include <kvtk/tier/radix_tier_hierarchy.hpp>
#include <list>
#include <map>
#include <random>

#include "api/trace_gen.hpp"
#include "bundled_traces.hpp"
#include "formats/requests.hpp"

namespace {

using namespace kvtk;
using prefix::leaf_lru;
using prefix::leaf_reuse;
using prefix::partial_block;
using prefix::prefix_trace;
using tier::hierarchy_config;
using tier::inclusion;
using tier::write_policy;

hierarchy_config make(std::string_view leaf, std::vector<std::uint64_t> caps) {
  hierarchy_config cfg;
  for (std::size_t i = 0; i < caps.size(); ++i) {
    tier::tier_spec s;
    s.name = "t" + std::to_string(i);
    s.capacity_blocks = caps[i];
    s.policy = i == 0 ? std::string(leaf) : "lru";
    cfg.tiers.push_back(s);
  }
  return cfg;
}

// Sessions that grow turn by turn under shared system prompts, shorter re-asks, one-off
// requests; keys chained from content ids (as tests/test_prefix.cpp's random_trace).
prefix_trace session_trace(std::size_t requests, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  prefix_trace t;
  t.block_tokens = 16;
  std::vector<std::vector<std::uint64_t>> sessions(12);
  std::vector<block_key> keys;
  for (std::size_t r = 0; r < requests; ++r) {
    std::vector<std::uint64_t>& s = sessions[rng() % sessions.size()];
    if (s.empty() || rng() % 7 == 0) s.assign(1, rng() % 3);
    const std::size_t grow = rng() % 4;
    for (std::size_t i = 0; i < grow; ++i) s.push_back(rng() % 50);
    std::vector<std::uint64_t> content = s;
    if (rng() % 5 == 0) content.resize(1 + rng() % content.size());
    keys.resize(content.size());
    prefix::chain_keys(content, keys);
    t.add(keys, keys.size() * 16 - rng() % 16);
    t.priority.push_back(static_cast<std::uint32_t>(rng() % 3) * 40);
  }
  return t;
}

// Replays t request by request through a and b, requiring the same hits for each request.
template <class A, class B>
void same_per_request(const prefix::prefix_trace_view& t, A& a, B& b, partial_block p) {
  prefix::prefix_counts ca, cb;
  std::uint64_t pa = 0, pb = 0;
  for (std::size_t r = 0; r < t.requests(); ++r) {
    prefix::replay_requests(t, a, p, {}, r, r + 1, ca, pa);
    prefix::replay_requests(t, b, p, {}, r, r + 1, cb, pb);
    if (ca.block_hits != cb.block_hits) {
      INFO("request " << r);
      REQUIRE(ca.block_hits == cb.block_hits);
    }
  }
  REQUIRE(ca.token_hits == cb.token_hits);
  REQUIRE(a.evictions() == b.evictions());
}

template <class Leaf>
void one_tier_equals_radix(const prefix::prefix_trace_view& t, std::uint32_t cap, partial_block p) {
  INFO(Leaf::name << " @ " << cap);
  tier::radix_tier_index<Leaf> ti(make(Leaf::name, {cap}));
  prefix::radix_index<Leaf> ri(cap);
  same_per_request(t, ti, ri, p);
  const auto& h = ti.hierarchy();
  CHECK(h.audit().empty());
  CHECK(h.counters(0).evictions == ri.evictions());
  CHECK(h.counters(0).drops == ri.evictions());
  CHECK(h.resident(0) == ri.tree().size());
  CHECK(ti.load_time().requests_from_lower == 0);
}

}  // namespace

TEST_CASE("radix tier: one tier replays exactly as radix_index", "[tier][radix]") {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    const prefix_trace t = session_trace(3000, seed);
    for (std::uint32_t cap : {3u, 8u, 20u, 60u}) {
      one_tier_equals_radix<leaf_lru>(t, cap, partial_block::cache);
      one_tier_equals_radix<leaf_reuse>(t, cap, partial_block::cache);
    }
  }
  const prefix_trace& conv = kvtk::test::conversation();
  for (std::uint32_t cap : {1000u, 10000u}) {
    one_tier_equals_radix<leaf_lru>(conv, cap, partial_block::cache);
    one_tier_equals_radix<leaf_reuse>(conv, cap, partial_block::skip);
  }
}

TEST_CASE("radix tier: session-aware leaves hear the session signals as radix_index does",
          "[tier][radix]") {
  // Timed agents with tool calls (trace gen --session-fields): session-ttl pins, so it differs
  // from LRU; one radix tier must still equal radix replay request by request.
  sim::gen_options g;
  g.profile = "agent";
  g.requests = 3000;
  g.seed = 9;
  g.session_fields = true;
  sim::trace_builder b(g.block_tokens);
  sim::generate_trace(g, [&](const sim::request_record& r) { b.add(r); });
  const prefix_trace t = b.finish();
  const prefix::session_signals sig = prefix::session_signals_of(t.view(), t.kind_names);
  prefix::prefix_trace_view v = t.view();
  sig.attach(v);
  std::uint64_t differ = 0;
  for (std::uint32_t cap : {300u, 1500u, 6000u}) {
    one_tier_equals_radix<prefix::leaf_session_ttl>(v, cap, partial_block::skip);
    one_tier_equals_radix<prefix::leaf_session_reuse>(v, cap, partial_block::skip);
    prefix::radix_index<prefix::leaf_session_ttl> ttl(cap);
    prefix::radix_index<leaf_lru> lru(cap);
    const auto a = prefix::replay(v, ttl, partial_block::skip);
    const auto l = prefix::replay(v, lru, partial_block::skip);
    differ += a.block_hits != l.block_hits;
  }
  CHECK(differ > 0);  // the signals reached the order
}

TEST_CASE("radix tier: hand-computed tree(3) over flat LRU(2)", "[tier][radix]") {
  tier::radix_tier_index<leaf_lru> idx(make("lru", {3, 2}));
  // r1 fills the tree with 1>2>3. r2 touches 1 and adds 4 below it: leaf 3 goes down. r3's 5
  // sends leaf 2 down (the bottom holds 3, 2). r4 matches 1 in the tree and finds 2 and 3 below:
  // both are promoted (staged out of the bottom, then inserted as 1>2>3), pushing leaves 4 and 5
  // down. r5's 6>7 evicts 3 then 2 (the only leaves): the bottom drops 4 and 5. r6: 9 evicts
  // leaf 1 (the bottom drops 3); 2 is held below but past the hit run (h = 0): superseded, and
  // inserted below 9 after evicting leaf 7.
  std::vector<std::uint32_t> hits;
  for (const std::vector<block_key>& r :
       std::vector<std::vector<block_key>>{{1, 2, 3}, {1, 4}, {5}, {1, 2, 3}, {6, 7}, {9, 2}}) {
    idx.begin_request(r.size(), 1);
    hits.push_back(idx.process(r, {}, access_hint{}));
    REQUIRE(idx.hierarchy().audit().empty());
  }
  CHECK(hits == std::vector<std::uint32_t>{0, 1, 0, 3, 0, 0});
  const auto& h = idx.hierarchy();
  CHECK(h.counters(0).hits == 2);
  CHECK(h.counters(1).hits == 2);
  CHECK(h.counters(1).hit_tokens == 2);
  CHECK(h.counters(0).evictions == 8);  // 3, 2, 4, 5, 3, 2, 1, 7
  CHECK(h.counters(0).demotions == 8);
  CHECK(h.counters(0).drops == 0);
  CHECK(h.counters(1).writes == 8);
  CHECK(h.counters(1).promotions == 2);
  CHECK(h.counters(1).superseded == 1);
  CHECK(h.counters(1).evictions == 3);  // 4, 5, 3
  CHECK(h.counters(1).drops == 3);
  CHECK(h.link(1).blocks_up == 2);
  CHECK(h.link(1).blocks_down == 8);
  CHECK(h.counters(0).no_room_rejects == 0);
  CHECK(h.resident(0) == 3);
  CHECK((h.holds(0, 6) && h.holds(0, 9) && h.holds(0, 2)));
  CHECK((h.tier_of(1) == 1 && h.tier_of(7) == 1));
  CHECK((h.tier_of(3) == 2 && h.tier_of(4) == 2 && h.tier_of(5) == 2));
  CHECK(idx.evictions() == 3);
  CHECK(idx.load_time().requests_from_lower == 1);
}

TEST_CASE("radix tier: a failed insert sends the blocks back", "[tier][radix]") {
  // Keys need not be chained: 5 is first a child of the root, later asked for below 1>2.
  tier::radix_tier_index<leaf_lru> idx(make("lru", {2, 4}));
  // r1: 5. r2: 1>2 evicts 5 (down). r3: 3 evicts leaf 2; r4: 4 evicts leaf 1 (bottom: 5, 2, 1).
  // r5: 1, 2, 5 are all below (h = 3, staged). 1 evicts 3, 2 evicts 4 (down); 5 finds the tree
  // full of the request's locked path: it goes back to the bottom, not promoted.
  std::vector<std::uint32_t> hits;
  for (const std::vector<block_key>& r :
       std::vector<std::vector<block_key>>{{5}, {1, 2}, {3}, {4}, {1, 2, 5}}) {
    idx.begin_request(r.size(), 1);
    hits.push_back(idx.process(r, {}, access_hint{}));
    REQUIRE(idx.hierarchy().audit().empty());
  }
  CHECK(hits == std::vector<std::uint32_t>{0, 0, 0, 0, 3});
  const auto& h = idx.hierarchy();
  CHECK(h.counters(1).hits == 3);
  CHECK(h.counters(1).promotions == 2);
  CHECK(h.link(1).blocks_up == 2);
  CHECK(h.counters(0).no_room_rejects == 1);
  CHECK(h.counters(0).evictions == 5);  // 5, 2, 1, 3, 4
  CHECK(h.counters(1).writes == 5);     // the put-back is not a write
  CHECK(h.counters(1).drops == 0);
  CHECK((h.holds(0, 1) && h.holds(0, 2)));
  CHECK((h.holds(1, 3) && h.holds(1, 4) && h.holds(1, 5)));
  CHECK(h.resident(1) == 3);
}

namespace {

// A naive radix-over-flat-LRU model written from the semantics in radix_tier_hierarchy.hpp:
// the tree is a map scanned for leaves, the flat tiers are lists (front = least recent).
struct naive_radix_tiers {
  static constexpr block_key root = ~block_key{0};
  struct node {
    block_key parent;
    std::uint64_t stamp;
    bool locked;
  };
  std::size_t cap0;
  std::vector<std::size_t> cap;  // [tier]; flat tiers 1..
  std::map<block_key, node> tree;
  std::vector<std::list<block_key>> flat;  // [tier]; flat[0] unused
  std::vector<std::uint64_t> promotions, superseded, drops;
  std::uint64_t clock = 0, rejects = 0, put_back = 0;

  naive_radix_tiers(std::vector<std::size_t> caps)
      : cap0(caps[0]),
        cap(caps),
        flat(caps.size()),
        promotions(caps.size()),
        superseded(caps.size()),
        drops(caps.size()) {}

  std::size_t n() const { return cap.size(); }
  std::size_t lower_of(block_key k) const {
    for (std::size_t t = 1; t < n(); ++t) {
      if (std::find(flat[t].begin(), flat[t].end(), k) != flat[t].end()) return t;
    }
    return n();
  }
  void demote(std::size_t t, block_key v) {  // tier t evicted v
    if (t + 1 < n()) {
      insert_flat(t + 1, v);
    } else {
      ++drops[t];
    }
  }
  void insert_flat(std::size_t u, block_key k) {
    auto& l = flat[u];
    if (l.size() == cap[u]) {
      const block_key v = l.front();
      l.pop_front();
      demote(u, v);
    }
    l.push_back(k);
  }
  bool has_child(block_key k) const {
    return std::any_of(tree.begin(), tree.end(),
                       [&](const auto& e) { return e.second.parent == k; });
  }
  std::vector<std::uint8_t> process(const std::vector<block_key>& keys) {
    std::vector<std::uint8_t> served;
    std::size_t m = 0;
    block_key at = root;
    while (m < keys.size()) {
      auto it = tree.find(keys[m]);
      if (it == tree.end() || it->second.parent != at) break;
      at = keys[m++];
      served.push_back(0);
    }
    std::size_t h = m;
    while (h < keys.size() && lower_of(keys[h]) < n())
      served.push_back(static_cast<std::uint8_t>(lower_of(keys[h++])));
    std::vector<std::size_t> from(keys.size(), n());
    for (std::size_t i = m; i < h; ++i) {
      auto& l = flat[served[i]];
      if (auto it = std::find(l.begin(), l.end(), keys[i]); it != l.end()) {
        l.erase(it);
        from[i] = served[i];
      }
    }
    for (std::size_t i = 0; i < m; ++i) {
      tree[keys[i]].stamp = ++clock;
      tree[keys[i]].locked = true;
    }
    std::size_t i = m;
    for (; i < keys.size(); ++i) {
      const block_key k = keys[i];
      if (i >= h) {
        from[i] = lower_of(k);
        if (from[i] < n()) {
          flat[from[i]].remove(k);
          ++superseded[from[i]];
        }
      }
      if (tree.count(k)) break;
      if (tree.size() == cap0) {
        block_key victim = root;
        std::uint64_t best = ~std::uint64_t{0};
        for (const auto& [key, x] : tree) {
          if (!x.locked && !has_child(key) && x.stamp < best) {
            best = x.stamp;
            victim = key;
          }
        }
        if (victim == root) break;
        tree.erase(victim);
        demote(0, victim);
      }
      tree[k] = node{at, ++clock, true};
      at = k;
      if (i < h && from[i] < n()) ++promotions[from[i]];
    }
    if (i < keys.size()) {
      ++rejects;
      for (std::size_t j = i; j < std::max(h, i + 1); ++j) {
        if (from[j] < n()) {
          insert_flat(from[j], keys[j]);
          ++put_back;
        }
      }
    }
    for (auto& [key, x] : tree) x.locked = false;
    return served;
  }
};

// Random requests: chained session traces, prefix families (key = family, depth) and, to reach
// failed inserts, put-backs, repeated keys and keys under several parents, sequences over a
// small alphabet.
std::vector<std::vector<block_key>> random_requests(int kind, std::size_t count,
                                                    std::uint64_t seed) {
  std::vector<std::vector<block_key>> out;
  std::mt19937_64 rng(seed);
  if (kind == 0) {
    const prefix_trace t = session_trace(count, seed);
    for (std::size_t r = 0; r < t.requests(); ++r) {
      const auto b = t.blocks(r);
      out.emplace_back(b.begin(), b.end());
    }
    return out;
  }
  for (std::size_t r = 0; r < count; ++r) {
    std::vector<block_key> keys;
    if (kind == 1) {
      const std::uint64_t family = rng() % 7 == 0 ? 100 + rng() % 1000 : rng() % 12;
      const std::size_t len = 1 + rng() % 6;
      for (std::size_t d = 0; d < len; ++d) keys.push_back(family * 64 + d + 1);
    } else {
      const std::size_t len = 1 + rng() % 5;
      for (std::size_t d = 0; d < len; ++d) keys.push_back(1 + rng() % 20);
    }
    out.push_back(std::move(keys));
  }
  return out;
}

}  // namespace

TEST_CASE("radix tier: random workloads equal the naive model", "[tier][radix]") {
  std::uint64_t put_back = 0, rejects = 0;
  for (int kind : {0, 1, 2}) {
    for (const std::vector<std::size_t>& caps :
         {std::vector<std::size_t>{4, 6}, {3, 2, 5}, {8, 8}, {2, 3, 4}, {12, 5, 20}, {1, 3}}) {
      naive_radix_tiers model(caps);
      std::vector<std::uint64_t> c64(caps.begin(), caps.end());
      tier::radix_tier_hierarchy<leaf_lru> h(make("lru", c64));
      std::vector<std::uint8_t> served(64);
      const auto reqs = random_requests(kind, 2000, 17 + caps.size() + caps[0]);
      std::uint64_t hits = 0;
      for (std::size_t r = 0; r < reqs.size(); ++r) {
        const auto& keys = reqs[r];
        const std::uint32_t hit =
            h.process(keys, served, access_hint{}, [](std::size_t) { return 1; });
        const auto want = model.process(keys);
        hits += hit;
        INFO("kind " << kind << " tiers " << caps.size() << " cap0 " << caps[0] << " r " << r);
        REQUIRE(hit == want.size());
        REQUIRE(std::vector<std::uint8_t>(served.begin(), served.begin() + hit) == want);
        REQUIRE(h.audit() == "");
        REQUIRE(h.resident(0) == model.tree.size());
        for (const auto& e : model.tree) REQUIRE(h.holds(0, e.first));
        for (std::size_t t = 1; t < caps.size(); ++t) {
          REQUIRE(h.resident(t) == model.flat[t].size());
          for (block_key k : model.flat[t]) REQUIRE(h.holds(t, k));
        }
      }
      INFO("kind " << kind << " tiers " << caps.size() << " cap0 " << caps[0]);
      CHECK(hits > 0);
      CHECK(h.counters(0).no_room_rejects == model.rejects);
      for (std::size_t t = 0; t < caps.size(); ++t) {
        CHECK(h.counters(t).promotions == model.promotions[t]);
        CHECK(h.counters(t).superseded == model.superseded[t]);
        CHECK(h.counters(t).drops == model.drops[t]);
      }
      if (caps.size() > 1) CHECK(h.counters(1).hits > 0);
      put_back += model.put_back;
      rejects += model.rejects;
    }
  }
  CHECK(rejects > 100);  // failed inserts happened, some of them sending blocks back
  CHECK(put_back > 10);
}

TEST_CASE("radix tier: audits hold with mixed policies and admission filters", "[tier][radix]") {
  const prefix_trace& t = kvtk::test::conversation();
  for (const auto kind :
       {tier::admission::always, tier::admission::frequency, tier::admission::tinylfu}) {
    hierarchy_config cfg = make("reuse", {500, 2000, 4000});
    cfg.tiers[1].policy = "s3fifo";
    cfg.tiers[2].policy = "cost-aware";
    for (auto& s : cfg.tiers) s.admit.kind = kind;
    tier::radix_tier_index<leaf_reuse> ti(cfg);
    prefix::prefix_counts c;
    std::uint64_t pos = 0;
    const std::size_t n = std::min<std::size_t>(t.requests(), 4000);
    for (std::size_t r = 0; r < n; r += 250) {
      prefix::replay_requests(t.view(), ti, partial_block::cache, {}, r, std::min(n, r + 250), c,
                              pos);
      INFO("admission " << int(kind) << " at request " << r);
      REQUIRE(ti.hierarchy().audit().empty());
    }
    const auto& h = ti.hierarchy();
    CHECK(h.counters(1).hits > 0);
    CHECK(h.counters(1).promotions > 0);
    if (kind != tier::admission::always) CHECK(h.counters(1).admission_rejects > 0);
    std::uint64_t served = 0;
    for (std::size_t k = 0; k < 3; ++k) served += h.counters(k).hits;
    CHECK(served == c.block_hits);
  }
}

TEST_CASE("radix tier: refused configurations", "[tier][radix]") {
  using H = tier::radix_tier_hierarchy<leaf_lru>;
  hierarchy_config incl = make("lru", {10, 20});
  incl.mode = inclusion::inclusive;
  CHECK_THROWS_WITH(H(incl), Catch::Contains("only exclusive") && Catch::Contains("inclusive"));
  hierarchy_config wt = make("lru", {10, 20});
  wt.write.kind = write_policy::write_through;
  CHECK_THROWS_WITH(H(wt), Catch::Contains("write-through"));
  CHECK_THROWS_WITH(H(make("lru", {})), Catch::Contains("1 to 8 tiers"));
  CHECK_THROWS_WITH(H(make("lru", {0})), Catch::Contains("capacity"));
  CHECK_THROWS_WITH(H(make("fifo", {10})), Catch::Contains("not its leaf order 'lru'"));
  hierarchy_config bad = make("lru", {10, 20});
  bad.tiers[1].policy = "nope";
  CHECK_THROWS_WITH(H(bad), Catch::Contains("unknown policy 'nope'"));
  CHECK_THROWS_WITH(tier::radix_tier_hierarchy<prefix::leaf_belady>(make("belady", {10})),
                    Catch::Contains("offline"));
  CHECK_NOTHROW(H(make("", {10, 20})));  // an empty tier-0 policy means the template's leaf order
}

TEST_CASE("radix and flat tops share one lower-tier core", "[tier][radix]") {
  // The lower tiers' eviction callback names neither top: every top over the same policies uses
  // the same block_cache types, whatever its leaf order or observer.
  using flat = tier::tier_hierarchy<>;
  using lru_top = tier::radix_tier_hierarchy<leaf_lru>;
  using reuse_top = tier::radix_tier_hierarchy<leaf_reuse>;
  STATIC_REQUIRE(std::is_same_v<flat::lower_type, lru_top::lower_type>);
  STATIC_REQUIRE(std::is_same_v<lru_top::lower_type, reuse_top::lower_type>);
  STATIC_REQUIRE(
      std::is_same_v<flat::lower_type::cache_of<lru>, reuse_top::lower_type::cache_of<lru>>);
  STATIC_REQUIRE(
      std::is_same_v<lru_top::lower_type::cache_of<s3fifo>,
                     tier::tier_hierarchy<all_policies,
                                          tier::no_tier_observer>::lower_type::cache_of<s3fifo>>);
  STATIC_REQUIRE(std::is_same_v<tier::radix_tier_index<leaf_lru>, tier::hierarchy_index<lru_top>>);

  // Both tops answer the same calls; the radix one never keeps copies (exclusive).
  tier::radix_tier_index<leaf_lru> idx(make("lru", {2, 2}));
  for (const std::vector<block_key>& r : std::vector<std::vector<block_key>>{{1, 2}, {3, 4}, {1}}) {
    idx.begin_request(r.size(), 1);
    idx.process(r, {}, access_hint{});
  }
  const auto& h = idx.hierarchy();
  CHECK(h.tier_of(1) == 0);
  CHECK(h.counters(1).promotions == 1);
  for (std::size_t t = 0; t < h.tiers(); ++t) CHECK(h.kept_copies(t) == 0);
  CHECK(h.audit().empty());
}
