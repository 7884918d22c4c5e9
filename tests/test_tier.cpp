// The tier layer: equivalences users can read (one tier = the flat index; exclusive LRU over LRU =
// one LRU of the summed capacity), hand-computed hierarchies, a naive multi-tier model, audits
// after every request, pins and the write-back no-loss property.
#include <algorithm>
#include <catch2/catch.hpp>
#include <kvtk/kvtk.hpp>
#include <list>
#include <map>
#include <random>

#include "formats/mooncake_flat.hpp"

namespace {

using namespace kvtk;
using tier::hierarchy_config;
using tier::inclusion;
using tier::write_policy;

const prefix::prefix_trace& conversation() {
  static const prefix::prefix_trace t =
      sim::load_mooncake_requests(KVTK_TRACES_DIR "/mooncake_fast25_conversation_trace.jsonl");
  return t;
}

hierarchy_config make(std::initializer_list<std::pair<std::uint64_t, const char*>> tiers,
                      inclusion mode = inclusion::exclusive,
                      write_policy::kind_t wp = write_policy::write_back) {
  hierarchy_config cfg;
  cfg.mode = mode;
  cfg.write.kind = wp;
  int i = 0;
  for (const auto& [cap, pol] : tiers) {
    tier::tier_spec s;
    s.name = "t" + std::to_string(i++);
    s.capacity_blocks = cap;
    s.policy = pol;
    cfg.tiers.push_back(s);
  }
  return cfg;
}

// Runs requests of single-token blocks (block_tokens 1, input = block count) and returns the
// hit length of each.
std::vector<std::uint32_t> run(tier::tier_index<>& idx,
                               const std::vector<std::vector<block_key>>& reqs) {
  std::vector<std::uint32_t> hits;
  for (const auto& r : reqs) {
    idx.begin_request(r.size(), 1);
    hits.push_back(idx.process(r, {}, access_hint{}));
    REQUIRE(idx.hierarchy().audit().empty());
  }
  return hits;
}

}  // namespace

TEST_CASE("one tier gives exactly the flat index's results, for every policy", "[tier]") {
  const auto& t = conversation();
  for (std::string_view name : policy_names) {
    if (name == "belady") continue;  // offline: the hierarchy has no next-use oracle
    for (std::uint32_t cap : {1000u, 10000u}) {
      INFO(name << " @ " << cap);
      tier::tier_index<> ti(make({{cap, std::string(name).c_str()}}));
      const auto a = prefix::replay(t, ti, prefix::partial_block::cache);
      const auto b = visit_policy(name, [&]<class P>() {
        prefix::flat_index<P> f(cap);
        return prefix::replay(t, f, prefix::partial_block::cache);
      });
      CHECK(a.block_hits == b.block_hits);
      CHECK(a.token_hits == b.token_hits);
      CHECK(ti.hierarchy().counters(0).hits == a.block_hits);
      CHECK(ti.hierarchy().counters(0).hit_tokens == a.token_hits);
    }
  }
}

TEST_CASE("exclusive LRU over LRU equals one LRU of the summed capacity", "[tier]") {
  // A block demoted from the top is the top tier's least recent; the lower tier receives blocks
  // in that order, so the two lists concatenated are exactly one LRU list of C0 + C1 (a lower-
  // tier hit moves the block to the front, as an LRU hit does).
  const auto& t = conversation();
  for (auto [c0, c1] : {std::pair{1000u, 9000u}, {5000u, 5000u}, {9999u, 1u}, {300u, 2700u}}) {
    tier::tier_index<> ti(make({{c0, "lru"}, {c1, "lru"}}));
    const auto a = prefix::replay(t, ti, prefix::partial_block::cache);
    prefix::flat_index<lru> f(c0 + c1);
    const auto b = prefix::replay(t, f, prefix::partial_block::cache);
    INFO(c0 << " + " << c1);
    CHECK(a.block_hits == b.block_hits);
    CHECK(a.token_hits == b.token_hits);
    CHECK(ti.hierarchy().audit().empty());
    if (c1 > 100) CHECK(ti.hierarchy().counters(1).hits > 0);
  }
  // The conversation trace at 10,000 blocks: 60,921 hits whatever the split.
  tier::tier_index<> ti(make({{2500, "lru"}, {7500, "lru"}}));
  CHECK(prefix::replay(conversation(), ti, prefix::partial_block::cache).block_hits == 60921);
}

TEST_CASE("hand-computed: exclusive LRU over LRU, 2 + 2 blocks", "[tier]") {
  tier::tier_index<> idx(make({{2, "lru"}, {2, "lru"}}));
  // r1 fills the top; r2 and r3 demote 1 then 2; r4 finds both below (promotions push 3 and 4
  // down); r5's three misses push 1, 2 and 5 down, dropping 3, 4 and 1 from the bottom.
  const auto hits = run(idx, {{1, 2}, {3}, {4}, {1, 2}, {5, 6, 7}});
  CHECK(hits == std::vector<std::uint32_t>{0, 0, 0, 2, 0});
  const auto& h = idx.hierarchy();
  CHECK(h.counters(0).hits == 0);
  CHECK(h.counters(1).hits == 2);
  CHECK(h.counters(1).promotions == 2);
  CHECK(h.counters(0).evictions == 7);
  CHECK(h.counters(0).demotions == 7);
  CHECK(h.counters(1).writes == 7);
  CHECK(h.counters(1).evictions == 3);
  CHECK(h.counters(1).drops == 3);
  CHECK(h.link(1).blocks_up == 2);
  CHECK(h.link(1).blocks_down == 7);
  CHECK((h.holds(0, 6) && h.holds(0, 7) && h.holds(1, 2) && h.holds(1, 5)));
  CHECK(h.tier_of(1) == 2);  // gone
}

TEST_CASE("hand-computed: inclusive write-through, 2 + 3 blocks", "[tier]") {
  tier::tier_index<> idx(
      make({{2, "lru"}, {3, "lru"}}, inclusion::inclusive, write_policy::write_through));
  // r1: 1 and 2 enter the top and are copied below (protected). r2: 3 evicts 1 from the top (its
  // copy stays, now unprotected) and is copied. r3: 4 evicts 2 (copy kept); copying 4 evicts the
  // oldest unprotected copy below, 1 (dropped). r4: 2 is served from below and copied up, its
  // copy staying (protected again); 3 leaves the top (copy kept). r5: 5 evicts 4 (kept); copying 5
  // passes over 2 (protected) and drops 3.
  const auto hits = run(idx, {{1, 2}, {3}, {4}, {2}, {5}});
  CHECK(hits == std::vector<std::uint32_t>{0, 0, 0, 1, 0});
  const auto& h = idx.hierarchy();
  CHECK(h.counters(1).hits == 1);
  CHECK(h.counters(1).promotions == 1);
  CHECK(h.counters(1).writes == 5);  // 1, 2, 3, 4, 5
  CHECK(h.counters(0).evictions == 4);
  CHECK(h.kept_copies(0) == 4);
  CHECK(h.counters(0).drops == 0);
  CHECK(h.counters(1).evictions == 2);
  CHECK(h.counters(1).drops == 2);
  CHECK((h.holds(0, 2) && h.holds(0, 5) && h.holds(1, 2) && h.holds(1, 4) && h.holds(1, 5)));
  CHECK(h.tier_of(3) == 2);
}

TEST_CASE("hand-computed: inclusive write-back and write-through-selective", "[tier]") {
  {
    tier::tier_index<> idx(make({{2, "lru"}, {2, "lru"}}, inclusion::inclusive));
    // Write-back copies only what the top evicts: 1 (r2), then r3 hits 1 below and copies it up
    // (copy kept, protected), evicting 2 (written below: the bottom holds 1p, 2). r4's 4 evicts 3,
    // whose write-back needs room below: 2 is the only unprotected copy and is dropped.
    const auto hits = run(idx, {{1, 2}, {3}, {1}, {4}});
    CHECK(hits == std::vector<std::uint32_t>{0, 0, 1, 0});
    const auto& h = idx.hierarchy();
    CHECK(h.counters(1).writes == 3);  // 1, 2, 3
    CHECK(h.counters(0).demotions == 3);
    CHECK(h.counters(1).drops == 1);
    CHECK((h.holds(0, 1) && h.holds(0, 4) && h.holds(1, 1) && h.holds(1, 3)));
  }
  {
    hierarchy_config cfg =
        make({{2, "lru"}, {4, "lru"}}, inclusion::inclusive, write_policy::write_through_selective);
    cfg.write.selective_hits = 2;
    tier::tier_index<> idx(cfg);
    // 1 is hit twice in the top (r2, r3) and copied then; 2 is hit once and dropped on eviction.
    const auto hits = run(idx, {{1, 2}, {1, 2}, {1}, {3}, {4}, {1}, {2}});
    CHECK(hits == std::vector<std::uint32_t>{0, 2, 1, 0, 0, 1, 0});
    const auto& h = idx.hierarchy();
    CHECK(h.counters(1).writes == 1);
    CHECK(h.counters(0).drops == 3);       // 2, 3 and 4 had no copy below
    CHECK(h.counters(1).hits == 1);        // r6: 1 from below
    CHECK(h.counters(0).hits == 3);
  }
}

namespace {

// A naive multi-tier model with LRU in every tier, written from the semantics in
// tier_hierarchy.hpp: lists front = least recent, "protected" = held in a tier above.
struct naive_tiers {
  std::vector<std::list<block_key>> tiers;
  std::vector<std::size_t> cap;
  bool inclusive;
  write_policy write;
  std::map<block_key, std::uint32_t> top_hits;

  bool holds(std::size_t t, block_key k) const {
    return std::find(tiers[t].begin(), tiers[t].end(), k) != tiers[t].end();
  }
  std::size_t tier_of(block_key k, std::size_t from = 0) const {
    for (std::size_t t = from; t < tiers.size(); ++t) {
      if (holds(t, k)) return t;
    }
    return tiers.size();
  }
  bool protected_in(std::size_t u, block_key k) const {
    if (!inclusive) return false;
    for (std::size_t t = 0; t < u; ++t) {
      if (holds(t, k)) return true;
    }
    return false;
  }
  void evicted(std::size_t t, block_key v) {
    if (inclusive) {
      if (const std::size_t u = tier_of(v, t + 1); u < tiers.size()) {
        // The copy stays and re-enters its tier's order as a fresh insertion.
        tiers[u].remove(v);
        tiers[u].push_back(v);
        return;
      }
      if (write.kind != write_policy::write_back) return;
    }
    if (t + 1 < tiers.size()) write_into(t + 1, v);
  }
  bool write_into(std::size_t u, block_key v) {
    auto& l = tiers[u];
    if (l.size() == cap[u]) {
      auto it = std::find_if(l.begin(), l.end(), [&](block_key k) { return !protected_in(u, k); });
      if (it == l.end()) return false;
      const block_key victim = *it;
      l.erase(it);
      evicted(u, victim);
    }
    l.push_back(v);
    return true;
  }
  void copy_down(block_key k) {
    for (std::size_t u = 1; u < tiers.size(); ++u) {
      if (holds(u, k)) continue;
      if (!write_into(u, k)) return;
    }
  }
  std::vector<std::uint8_t> process(const std::vector<block_key>& keys) {
    std::vector<std::uint8_t> served;
    for (block_key k : keys) {
      const std::size_t t = tier_of(k);
      if (t == tiers.size()) break;
      served.push_back(static_cast<std::uint8_t>(t));
    }
    for (block_key k : keys) {
      auto& top = tiers[0];
      if (auto it = std::find(top.begin(), top.end(), k); it != top.end()) {
        top.erase(it);
        top.push_back(k);
        if (inclusive && write.kind == write_policy::write_through_selective &&
            ++top_hits[k] == write.selective_hits) {
          copy_down(k);
        }
        continue;
      }
      const std::size_t s = tier_of(k, 1);
      if (s < tiers.size() && !inclusive) tiers[s].remove(k);
      if (top.size() == cap[0]) {
        const block_key victim = top.front();
        top.pop_front();
        evicted(0, victim);
      }
      top.push_back(k);
      top_hits[k] = 0;
      if (inclusive && write.kind == write_policy::write_through) copy_down(k);
    }
    return served;
  }
};

}  // namespace

TEST_CASE("random workloads: the hierarchy equals the naive multi-tier model", "[tier]") {
  std::mt19937_64 rng(11);
  struct mode {
    bool inclusive;
    write_policy::kind_t write;
  };
  for (const mode m : {mode{false, write_policy::write_back}, mode{true, write_policy::write_back},
                       mode{true, write_policy::write_through},
                       mode{true, write_policy::write_through_selective}}) {
    for (const std::vector<std::size_t>& caps :
         {std::vector<std::size_t>{4, 8}, {3, 5, 9}, {2, 2, 3, 6}, {8, 16, 40}}) {
      hierarchy_config cfg;
      cfg.mode = m.inclusive ? inclusion::inclusive : inclusion::exclusive;
      cfg.write.kind = m.write;
      cfg.write.selective_hits = 2;
      naive_tiers model{{}, caps, m.inclusive, cfg.write, {}};
      model.tiers.resize(caps.size());
      for (std::size_t c : caps) {
        tier::tier_spec s;
        s.capacity_blocks = c;
        cfg.tiers.push_back(s);
      }
      tier::tier_hierarchy<> h(cfg);
      std::vector<std::uint8_t> served(64);
      // Requests share prefixes: a key is (prefix family, depth), families Zipf-like.
      for (int r = 0; r < 3000; ++r) {
        const std::uint64_t family = rng() % 7 == 0 ? 100 + rng() % 1000 : rng() % 12;
        const std::size_t len = 1 + rng() % 6;
        std::vector<block_key> keys;
        for (std::size_t d = 0; d < len; ++d) keys.push_back(family * 64 + d);
        const std::uint32_t hit = h.process(keys, served, access_hint{}, [](std::size_t) { return 1; });
        const auto want = model.process(keys);
        INFO("mode " << m.inclusive << "/" << int(m.write) << " tiers " << caps.size() << " r " << r);
        REQUIRE(hit == want.size());
        REQUIRE(std::vector<std::uint8_t>(served.begin(), served.begin() + hit) == want);
        REQUIRE(h.audit().empty());
        for (std::size_t t = 0; t < caps.size(); ++t) {
          REQUIRE(h.resident(t) == model.tiers[t].size());
          for (block_key k : model.tiers[t]) REQUIRE(h.holds(t, k));
        }
      }
    }
  }
}

TEST_CASE("audits hold with mixed policies and admission filters", "[tier]") {
  const auto& t = conversation();
  for (const auto kind : {tier::admission::always, tier::admission::frequency,
                          tier::admission::tinylfu, tier::admission::decaying}) {
    for (const bool inclusive : {false, true}) {
      // The first 6,000 requests (the audit walks every tier after each slice).
      hierarchy_config cfg = make({{500, "arc"}, {2000, "s3fifo"}, {4000, "cost-aware"}},
                                  inclusive ? inclusion::inclusive : inclusion::exclusive,
                                  inclusive ? write_policy::write_through : write_policy::write_back);
      for (auto& s : cfg.tiers) s.admit.kind = kind;
      tier::tier_index<> ti(cfg);
      std::uint64_t pos = 0;
      prefix::prefix_counts c;
      const std::size_t n = std::min<std::size_t>(t.requests(), 6000);
      for (std::size_t r = 0; r < n; r += 250) {
        prefix::replay_requests(t.view(), ti, prefix::partial_block::cache, {}, r,
                                std::min(n, r + 250), c, pos);
        INFO("admission " << int(kind) << " inclusive " << inclusive << " at request " << r);
        REQUIRE(ti.hierarchy().audit().empty());
      }
      const auto& h = ti.hierarchy();
      if (kind != tier::admission::always) CHECK(h.counters(1).admission_rejects > 0);
      for (std::size_t k = 0; k < 3; ++k) CHECK(h.resident(k) <= cfg.tiers[k].capacity_blocks);
    }
  }
}

TEST_CASE("pinned top-tier blocks are never demoted", "[tier]") {
  tier::tier_hierarchy<> h(make({{4, "lru"}, {8, "lru"}}));
  std::vector<std::uint8_t> served(8);
  auto one = [](std::size_t) { return 1; };
  const std::vector<block_key> first = {1, 2};
  h.process(first, served, {}, one);
  REQUIRE(h.pin(1));
  for (block_key k = 10; k < 200; ++k) {
    const std::vector<block_key> r = {k};
    h.process(r, served, {}, one);
    REQUIRE(h.holds(0, 1));
    REQUIRE_FALSE(h.holds(1, 1));
  }
  CHECK(h.tier_of(2) == 2);  // the unpinned one went down and out
  REQUIRE(h.unpin(1));
}

TEST_CASE("write-back never drops a block while the tier below has room", "[tier]") {
  // The bottom tier holds every distinct block of the trace: nothing may leave the hierarchy.
  const auto& t = conversation();
  for (const bool inclusive : {false, true}) {
    tier::tier_index<> ti(make({{1000, "lru"}, {190000, "s3fifo"}},
                               inclusive ? inclusion::inclusive : inclusion::exclusive));
    const auto c = prefix::replay(t, ti, prefix::partial_block::cache);
    const auto& h = ti.hierarchy();
    CHECK(h.counters(0).drops == 0);
    CHECK(h.counters(1).drops == 0);
    CHECK(h.counters(0).demotions > 100000);
    // Everything seen once is still somewhere: the hit ratio is the ideal one (105,710 blocks).
    CHECK(c.block_hits == 105710);
  }
}

TEST_CASE("impossible hierarchies are rejected with the reason", "[tier]") {
  CHECK_THROWS_WITH(tier::tier_hierarchy<>(make({})), Catch::Contains("1 to 8 tiers"));
  CHECK_THROWS_WITH(tier::tier_hierarchy<>(make({{0, "lru"}})), Catch::Contains("capacity"));
  CHECK_THROWS_WITH(tier::tier_hierarchy<>(make({{10, "nope"}})),
                    Catch::Contains("unknown policy 'nope'"));
  CHECK_THROWS_WITH(tier::tier_hierarchy<>(make({{10, "lru"}, {20, "lru"}}, inclusion::exclusive,
                                                 write_policy::write_through)),
                    Catch::Contains("needs --inclusive"));
  CHECK_THROWS_WITH(
      tier::tier_hierarchy<>(make({{10, "lru"}, {5, "lru"}}, inclusion::inclusive)),
      Catch::Contains("at least as large"));
}

namespace {

// Logs every call an observer gets, in order: "c from:slot>to:slot key", "p tier:slot key",
// "s tier:slot key".
struct call_log {
  std::vector<std::string>* out;
  void staged(std::size_t t, std::uint32_t s, block_key k) noexcept {
    out->push_back("s " + std::to_string(t) + ":" + std::to_string(s) + " " + std::to_string(k));
  }
  void placed(std::size_t t, std::uint32_t s, block_key k, bool) noexcept {
    out->push_back("p " + std::to_string(t) + ":" + std::to_string(s) + " " + std::to_string(k));
  }
  void copied(std::size_t a, std::uint32_t as, std::size_t b, std::uint32_t bs,
              block_key k) noexcept {
    out->push_back("c " + std::to_string(a) + ":" + std::to_string(as) + ">" + std::to_string(b) +
                   ":" + std::to_string(bs) + " " + std::to_string(k));
  }
};

}  // namespace

TEST_CASE("an observer hears a demotion cascade deepest copy first, before the placement",
          "[tier]") {
  // The core records copies inside the cascade and the top hands them over afterwards: the order
  // must be the one the cascade made them in (tier 1's victim leaves before tier 0's lands).
  std::vector<std::string> log;
  tier::tier_hierarchy<all_policies, call_log> h(make({{1, "lru"}, {1, "lru"}, {1, "lru"}}),
                                                 call_log{&log});
  std::vector<std::uint8_t> served(4);
  auto one = [](std::size_t) { return 1; };
  for (const block_key k : {1, 2, 3}) {
    const std::vector<block_key> r = {k};
    h.process(r, served, {}, one);
  }
  CHECK(log == std::vector<std::string>{"p 0:0 1", "c 0:0>1:0 1", "p 0:0 2", "c 1:0>2:0 1",
                                        "c 0:0>1:0 2", "p 0:0 3"});
  // A promotion from tier 2: staged before the cascade it causes.
  log.clear();
  const std::vector<block_key> r = {1};
  CHECK(h.process(r, served, {}, one) == 1);
  CHECK(served[0] == 2);
  CHECK(log == std::vector<std::string>{"s 2:0 1", "c 1:0>2:0 2", "c 0:0>1:0 3", "p 0:0 1"});
  CHECK(h.audit().empty());
}

TEST_CASE("lower_tiers: a core below a non-flat top demotes what the top evicts", "[tier]") {
  using core_type = tier::lower_tiers<type_list<lru, fifo>>;
  hierarchy_config cfg = make({{4, ""}, {1, "lru"}, {2, "fifo"}});
  cfg.tiers[2].admit.kind = tier::admission::frequency;  // >= 2 references
  core_type core(cfg, 1, false);
  CHECK(core.first() == 1);
  CHECK(core.tiers() == 3);
  // Tier 0 is the caller's: it evicts 7, then 8; 8 pushes 7 down to tier 2, whose filter has
  // seen 7 once (refused: dropped), then twice.
  const std::vector<block_key> keys = {7};
  core.begin_request(keys);
  core.evicted(0, 7, 3, 0);
  CHECK((core.holds(1, 7) && core.lower_tier_of(7) == 1));
  core.evicted(0, 8, 4, 1);
  CHECK(core.lower_tier_of(7) == 3);
  CHECK(core.counters(1).drops == 1);
  CHECK(core.counters(2).admission_rejects == 1);
  core.begin_request(keys);
  core.evicted(0, 7, 5, 2);  // 8 goes down: 8 was never recorded, refused
  core.begin_request(keys);
  CHECK(core.take(1, 7) == erase_result::erased);
  CHECK(core.insert_into(2, 7, 5, true) != core_type::npos);  // recorded twice: admitted
  CHECK(core.counters(0).evictions == 3);
  CHECK(core.counters(0).demotions == 3);
  CHECK(core.counters(2).writes == 1);
  CHECK(core.link(2).blocks_down == 1);
  // A put-back is neither filtered nor a write.
  CHECK(core.put_back(2, 9, 0));
  CHECK(core.counters(2).writes == 1);
  CHECK(core.resident(2) == 2);
  CHECK(core.kept_copies(0) == 0);
  CHECK(core.audit().empty());
  for (std::size_t t = 0; t < 3; ++t) CHECK(core.balanced(t));
  // The eviction callback names the core only.
  STATIC_REQUIRE(std::is_same_v<core_type::cache_of<lru>, block_cache<lru, core_type::on_evict>>);
  CHECK_THROWS_WITH(core_type(make({{4, ""}, {2, "arc"}}), 1, false),
                    Catch::Equals("tier t1: unknown policy 'arc' (known: lru fifo)"));
}

TEST_CASE("tier_index is hierarchy_index over the flat top - block tokens", "[tier]") {
  STATIC_REQUIRE(std::is_same_v<tier::tier_index<>, tier::hierarchy_index<tier::tier_hierarchy<>>>);
  // 10 tokens in blocks of 4: 4, 4, 2, then nothing.
  CHECK(kvtk::prefix::tokens_in_block(10, 4, 0) == 4);
  CHECK(kvtk::prefix::tokens_in_block(10, 4, 2) == 2);
  CHECK(kvtk::prefix::tokens_in_block(10, 4, 3) == 0);
}
