// The session-aware radix orders (kvtk/prefix/leaf_session.hpp, leaf_reuse.hpp's session-reuse):
// a hand schedule, session-ttl against a naive model with a fixed TTL on random session traces,
// the TTL rule by hand, and "without session signals they are radix LRU / reuse exactly".
#include <catch2/catch.hpp>
#include <cmath>
#include <kvtk/kvtk.hpp>
#include <kvtk/prefix/sessions.hpp>
#include <deque>
#include <map>
#include <random>
#include <tuple>

#include "api/trace_gen.hpp"
#include "bundled_traces.hpp"
#include "formats/requests.hpp"

using namespace kvtk::prefix;
using kvtk::access_hint;
using kvtk::block_key;

namespace {

// A trace of `requests` session turns over `sessions` sessions: each turn re-sends its session's
// prompt and adds 1-2 blocks; a turn awaits a tool with probability 1/2; arrival times advance
// 0.5-2 s per request (so no two requests share a time). Unit blocks (16 tokens, all full).
struct session_trace {
  prefix_trace t;
  std::vector<std::uint64_t> session;
  std::vector<std::uint32_t> turn;
  std::vector<std::uint8_t> awaits;
};

session_trace make_trace(std::size_t requests, std::size_t sessions, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  session_trace s;
  s.t.block_tokens = 16;
  std::vector<std::vector<std::uint64_t>> content(sessions);
  std::vector<std::uint32_t> turns(sessions, 0);
  std::uint64_t fresh = 1000;
  double now = 0;
  std::vector<block_key> keys;
  for (std::size_t r = 0; r < requests; ++r) {
    const std::size_t i = rng() % sessions;
    if (content[i].empty() || content[i].size() > 6) {  // a new session in this slot
      content[i].assign(1, rng() % 2);                  // behind one of two shared prompts
      turns[i] = 0;
    }
    const std::size_t grow = 1 + rng() % 2;
    for (std::size_t k = 0; k < grow; ++k) content[i].push_back(fresh++);
    keys.resize(content[i].size());
    chain_keys(content[i], keys);
    s.t.add(keys, keys.size() * 16);
    now += 0.5 + static_cast<double>(rng() % 1500) / 1000.0;
    s.t.arrival_s.push_back(now);
    s.session.push_back(i + 1 + 1000 * (fresh % 7));  // nonzero keys
    s.turn.push_back(turns[i]++);
    s.awaits.push_back(static_cast<std::uint8_t>(rng() % 2));
  }
  return s;
}

prefix_trace_view view_of(const session_trace& s) {
  prefix_trace_view v = s.t.view();
  v.session = s.session;
  v.turn = s.turn;
  v.awaits_tool = s.awaits;
  return v;
}

// session-ttl with a fixed TTL as the header states it, with maps and scans: a resident block
// knows its parent, last stamp and its deadline when pinned; pins queue in pin order (a queue of
// the policy's size: a full queue releases its oldest pin early). Victims among evictable leaves
// (no resident child, not on the request's own path): expired pins are released in queue order;
// the least recently stamped ordinary leaf; else the pinned leaf with the latest deadline.
struct naive_session_ttl {
  struct block {
    block_key parent = 0;
    bool root_child = false;
    std::uint64_t stamp = 0;
    bool pinned = false;
    double deadline = 0;
    std::uint64_t pin = 0;  // which pin (a queue entry releases only its own)
  };
  std::uint32_t capacity;
  double ttl;
  std::map<block_key, block> resident;
  std::uint64_t clock = 0;
  std::deque<std::pair<block_key, std::uint64_t>> queue;
  double last_deadline = 0;
  std::uint64_t pins = 0;

  std::size_t queue_size() const {
    std::size_t n = 64;
    while (n < 2 * std::size_t{capacity}) n *= 2;
    return n;
  }
  // The deadline of a queue entry's pin: its block's while that pin holds, else any (the entry is
  // stale; the policy reads the deadline it queued, so keep those too).
  std::map<std::uint64_t, double> deadline_of_pin;
  double queue_deadline(const std::pair<block_key, std::uint64_t>& e) { return deadline_of_pin[e.second]; }
  void release_front() {
    const auto [k, pin] = queue.front();
    queue.pop_front();
    auto it = resident.find(k);
    if (it != resident.end() && it->second.pinned && it->second.pin == pin) it->second.pinned = false;
  }

  std::uint64_t process(std::span<const block_key> keys, double now, bool awaits) {
    std::size_t hit = 0;
    while (hit < keys.size() && resident.count(keys[hit])) ++hit;
    for (std::size_t i = 0; i < hit; ++i) access(keys[i], now, awaits);
    for (std::size_t i = hit; i < keys.size(); ++i) {
      if (resident.size() >= capacity && !evict(keys.first(i), now)) break;
      block b;
      b.root_child = i == 0;
      if (i > 0) b.parent = keys[i - 1];
      resident[keys[i]] = b;
      access(keys[i], now, awaits);
    }
    return hit;
  }
  void access(block_key k, double now, bool awaits) {
    block& b = resident[k];
    b.stamp = ++clock;
    if (!(awaits && ttl > 0)) {
      b.pinned = false;
      return;
    }
    if (queue.size() == queue_size()) release_front();
    b.pinned = true;
    b.deadline = std::max(now + ttl, last_deadline);
    last_deadline = b.deadline;
    b.pin = ++pins;
    deadline_of_pin[b.pin] = b.deadline;
    queue.emplace_back(k, b.pin);
  }
  bool evict(std::span<const block_key> path, double now) {
    std::map<block_key, int> children;
    for (const auto& [k, b] : resident) {
      if (!b.root_child) ++children[b.parent];
    }
    while (!queue.empty() && queue_deadline(queue.front()) <= now) release_front();
    const block_key none = ~block_key{0};
    block_key lru = none, pin = none;
    for (const auto& [k, b] : resident) {
      if (children.count(k) || std::find(path.begin(), path.end(), k) != path.end()) continue;
      if (!b.pinned) {
        if (lru == none || b.stamp < resident[lru].stamp) lru = k;
      } else if (pin == none || b.deadline > resident[pin].deadline) {
        pin = k;
      }
    }
    const block_key victim = lru != none ? lru : pin;
    if (victim == none) return false;
    resident.erase(victim);
    return true;
  }
};

template <reuse_features F>
double horizon_of() {
  return F.horizon;
}

}  // namespace

TEST_CASE("reuse_features as template arguments keep every member (clang 14 once read 0)",
          "[session][reuse]") {
  CHECK(horizon_of<leaf_reuse::features>() == 3.0);
  CHECK(horizon_of<leaf_session_reuse::features>() == 3.0);
  CHECK(leaf_session_reuse::features.session);
  CHECK_FALSE(leaf_reuse::features.session);
}

TEST_CASE("session-ttl by hand: a waiting session's tail outlives LRU until its TTL",
          "[session][prefix]") {
  // Capacity 3. A (session 1, awaits a tool, t=0): blocks a1 a2. B (session 2, t=1): b1.
  // C (session 3, t=2): c1 must evict: LRU takes A's leaf a2; session-ttl (TTL 10 s) keeps A
  // and takes b1. D (session 4, t=20): A's pin has expired, so its leaf a2 (the oldest) goes.
  const std::vector<block_key> a{11, 12}, b{21}, c{31}, d{41};
  auto hint_at = [](double t, std::uint64_t session, bool awaits) {
    access_hint h;
    h.time_s = t;
    h.session = session;
    h.awaits_tool = awaits;
    return h;
  };
  radix_index<leaf_session_ttl> ttl(3);
  ttl.leaf_state().fix_ttl(10);
  radix_index<leaf_lru> lru(3);
  for (auto* keys : {&a, &b, &c}) {
    const double t = keys == &a ? 0 : keys == &b ? 1 : 2;
    const access_hint h = hint_at(t, keys == &a ? 1 : keys == &b ? 2 : 3, keys == &a);
    ttl.process(*keys, {}, h);
    lru.process(*keys, {}, h);
  }
  CHECK(lru.tree().find(12) == lru.tree().root);  // LRU evicted A's leaf
  CHECK(lru.tree().find(21) != lru.tree().root);
  CHECK(ttl.tree().find(12) != ttl.tree().root);  // session-ttl kept it
  CHECK(ttl.tree().find(21) == ttl.tree().root);  // and evicted B
  ttl.process(d, {}, hint_at(20, 4, false));
  CHECK(ttl.tree().find(12) == ttl.tree().root);  // expired: A's leaf is the oldest block
  CHECK(ttl.tree().find(31) != ttl.tree().root);
}

TEST_CASE("session-ttl equals the naive model with a fixed TTL", "[session][prefix]") {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    const session_trace s = make_trace(400, 12, seed);
    const prefix_trace_view v = view_of(s);
    for (const std::uint32_t cap : {12u, 25u, 60u}) {
      for (const double ttl : {0.0, 3.0, 15.0}) {
        radix_index<leaf_session_ttl> idx(cap);
        idx.leaf_state().fix_ttl(ttl);
        const prefix_counts got = replay(v, idx, partial_block::skip);
        naive_session_ttl ref{cap, ttl, {}, 0, {}, 0, 0, {}};
        std::uint64_t hits = 0;
        for (std::size_t r = 0; r < v.requests(); ++r) {
          hits += ref.process(v.blocks(r), v.arrival_s[r], s.awaits[r] != 0);
        }
        INFO("seed " << seed << " capacity " << cap << " ttl " << ttl);
        CHECK(got.block_hits == hits);
      }
    }
  }
}

TEST_CASE("session-ttl equals the naive model when the TTL shrinks and the queue overflows",
          "[session][prefix]") {
  // A TTL of 200 s, then 3 s: deadlines of the second phase are raised to the first's latest
  // (ties, broken by the smaller key in both), and 200 s of pins overflow the release queue.
  for (std::uint64_t seed = 11; seed <= 14; ++seed) {
    const session_trace s = make_trace(400, 12, seed);
    const prefix_trace_view v = view_of(s);
    for (const std::uint32_t cap : {10u, 30u}) {
      radix_index<leaf_session_ttl> idx(cap);
      naive_session_ttl ref{cap, 200.0, {}, 0, {}, 0, 0, {}};
      prefix_counts got;
      std::uint64_t pos = 0, hits = 0;
      for (const auto& [first, last, ttl] : {std::tuple{0ul, 200ul, 200.0}, std::tuple{200ul, 400ul, 3.0}}) {
        idx.leaf_state().fix_ttl(ttl);
        ref.ttl = ttl;
        replay_requests(v, idx, partial_block::skip, {}, first, last, got, pos);
        for (std::size_t r = first; r < last; ++r) {
          hits += ref.process(v.blocks(r), v.arrival_s[r], s.awaits[r] != 0);
        }
      }
      INFO("seed " << seed << " capacity " << cap);
      CHECK(got.block_hits == hits);
    }
  }
}

TEST_CASE("session-ttl's TTL rule by hand", "[session]") {
  using L = leaf_session_ttl;
  std::array<double, L::gap_buckets> count{}, sum{};
  // 100 waits, 90 return after 5 s (bucket of edge 5.12 s: 0.01 * 2^9).
  unsigned five = 0;
  while (L::edge_s(five) < 5.0) ++five;
  REQUIRE(L::edge_s(five) == Approx(5.12));
  count[five] = 90;
  sum[five] = 90 * 5.0;
  // H = 4 s, a block-second worth 1/4 hit: pinning to 5.12 s gains 0.9 hit per wait for
  // (0.9 * 1 + 0.1 * 1.12) / 4 = 0.253 hit's worth of block-seconds: worth it, and no later
  // edge gains more.
  CHECK(L::best_ttl(count, sum, 100, 4.0, 0.25) == Approx(5.12));
  // A block-second worth 1 hit: holding ~1 s more for a 0.9 hit costs more than it gains.
  CHECK(L::best_ttl(count, sum, 100, 4.0, 1.0) == 0.0);
  // H = 1 s, block-seconds nearly free (the cache's tail is never reused): pin to 5.12 s.
  CHECK(L::best_ttl(count, sum, 100, 1.0, 0.001) == Approx(5.12));
  // H = 10 s: every return comes within H; pinning gains nothing.
  CHECK(L::best_ttl(count, sum, 100, 10.0, 0.0) == 0.0);
}

TEST_CASE("session orders without session signals are radix LRU and reuse exactly",
          "[session][prefix]") {
  const prefix_trace& conv = kvtk::test::conversation();
  for (const std::uint32_t cap : {1000u, 5859u}) {
    radix_index<leaf_session_ttl> ttl(cap);
    radix_index<leaf_lru> lru(cap);
    CHECK(replay(conv, ttl, partial_block::cache).block_hits ==
          replay(conv, lru, partial_block::cache).block_hits);
    radix_index<leaf_session_reuse> sr(cap);
    radix_index<leaf_reuse> reuse(cap);
    CHECK(replay(conv, sr, partial_block::cache).block_hits ==
          replay(conv, reuse, partial_block::cache).block_hits);
  }
  // Sessions without tool calls: session-ttl still never pins.
  session_trace s = make_trace(2000, 30, 9);
  std::fill(s.awaits.begin(), s.awaits.end(), 0);
  const prefix_trace_view v = view_of(s);
  radix_index<leaf_session_ttl> ttl(40);
  radix_index<leaf_lru> lru(40);
  CHECK(replay(v, ttl, partial_block::skip).block_hits == replay(v, lru, partial_block::skip).block_hits);
}

TEST_CASE("session signals: tool_s, or a tool-kind child, marks a reply that awaits a tool",
          "[session]") {
  prefix_trace t;
  t.block_tokens = 16;
  const std::vector<block_key> k1{1}, k2{1, 2}, k3{1, 2, 3}, k4{9};
  for (auto* k : {&k1, &k2, &k3, &k4}) t.add(*k, k->size() * 16);
  t.session = {5, 5, 5, 6};
  t.kind_names = {"", "agent", "tool"};
  t.kind = {1, 2, 2, 1};
  session_signals s = session_signals_of(t.view(), t.kind_names);
  CHECK(s.source == "trace");
  CHECK(s.session == std::vector<std::uint64_t>{6, 6, 6, 7});
  CHECK(s.turn == std::vector<std::uint32_t>{0, 1, 2, 0});
  CHECK(s.awaits_tool == std::vector<std::uint8_t>{1, 1, 0, 0});
  // An explicit tool_s wins: the last agent step called a tool that never came back.
  t.tool_s = {1.5, NAN, 0.2, NAN};
  s = session_signals_of(t.view(), t.kind_names);
  CHECK(s.awaits_tool == std::vector<std::uint8_t>{1, 0, 1, 0});
  // No session fields: inferred from prefixes.
  t.session.clear();
  t.kind.clear();
  t.tool_s.clear();
  s = session_signals_of(t.view(), {});
  CHECK(s.source == "inferred");
  CHECK(s.turn == std::vector<std::uint32_t>{0, 1, 2, 0});
  CHECK(s.awaits_tool == std::vector<std::uint8_t>{0, 0, 0, 0});
}

TEST_CASE("session-ttl never pins a partial last block", "[session][prefix]") {
  // A (awaits a tool, t=0): a full block 11 and a partial 12. B (t=1): 21. C (t=2): 31 must evict:
  // A's partial block is an ordinary LRU leaf (the oldest), so it goes, not B.
  radix_index<leaf_session_ttl> ttl(3);
  ttl.leaf_state().fix_ttl(10);
  access_hint h;
  h.session = 1;
  h.awaits_tool = true;
  h.full_blocks = 1;
  ttl.process(std::vector<block_key>{11, 12}, {}, h);
  h = access_hint{};
  h.time_s = 1;
  h.session = 2;
  ttl.process(std::vector<block_key>{21}, {}, h);
  h.time_s = 2;
  h.session = 3;
  ttl.process(std::vector<block_key>{31}, {}, h);
  CHECK(ttl.tree().find(12) == ttl.tree().root);
  CHECK(ttl.tree().find(11) != ttl.tree().root);
  CHECK(ttl.tree().find(21) != ttl.tree().root);
}

TEST_CASE("session-ttl learns a TTL on trace-gen's timed agents and beats LRU there",
          "[session][prefix]") {
  kvtk::sim::gen_options g;
  g.profile = "agent";
  g.requests = 6000;
  g.seed = 5;
  g.session_fields = true;
  kvtk::sim::trace_builder b(g.block_tokens);
  kvtk::sim::generate_trace(g, [&](const kvtk::sim::request_record& r) { b.add(r); });
  const prefix_trace t = b.finish();
  const session_signals sig = session_signals_of(t.view(), t.kind_names);
  prefix_trace_view v = t.view();
  sig.attach(v);
  const std::uint32_t cap = 20000;
  radix_index<leaf_session_ttl> ttl(cap);
  radix_index<leaf_lru> lru(cap);
  const auto with_ttl = replay(v, ttl, partial_block::cache);
  const auto with_lru = replay(v, lru, partial_block::cache);
  INFO("ttl " << ttl.leaf_state().ttl_s() << " s, value " << ttl.leaf_state().value()
              << ", hits " << with_ttl.block_hits << " vs LRU " << with_lru.block_hits);
  CHECK(ttl.leaf_state().ttl_s() > 0);
  CHECK(with_ttl.block_hits > with_lru.block_hits);
}
