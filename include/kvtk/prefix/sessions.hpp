// kvtk/prefix/sessions.hpp — sessions inferred from prefixes, for traces that record none
// (Mooncake's): which earlier request each request continues.
//
// The rule. Request r continues request p when
//   1. p came before r (trace order),
//   2. p has at least one full block (its cacheable blocks under the replay's partial-block rule),
//   3. r's keys begin with all of p's full-block keys, and
//   4. r's prompt is longer than p's (a request the same length is a retry or a sibling, not a
//      continuation), and
//   5. p has not been continued yet: a conversation turn has one next turn, so a second request
//      behind p is another conversation behind the same template (or a branch).
// Candidates are searched from the deepest cover down (the most full blocks: the latest turn of
// the conversation); at each depth only the latest request with that last full block is a
// candidate (a later request hides an earlier one with the same full blocks, continued or not),
// and the first candidate that passes 4 and 5 is the parent. r's parent is p, its turn p's + 1, its
// session p's; a request that continues none is a root: a session of its own, turn 0.
//
// Why it works: a multi-turn conversation re-sends its whole history every turn, so turn k+1's
// prompt begins with turn k's. Measured on trace-gen's sessions, whose truth is known (a
// request's true parent is its session's previous request; tests/test_sessions.cpp): chat
// precision 0.992 / recall 0.994, agent 1 / 1, mixed 0.960 / 0.980; without rule 5 chat's
// precision falls to 0.77 and mixed's to 0.32 (shared system prompts). Why it is ambiguous, and where it errs (docs/formats.md "Session
// fields"):
//  * a request whose full blocks are only a shared template (a system prompt, its own text
//    shorter than a block) is everyone's prefix: the first later request behind the same
//    template is taken for its continuation (rule 5 stops the rest), and the true next turn, if
//    it comes later, falls back to a shallower parent or starts a session;
//  * a conversation that edits or truncates its history (an agent summarising its context)
//    breaks the chain: the next turn starts a new session;
//  * two conversations with an identical history are told apart only by order (the latest);
//  * the partial last block is never compared, so a continuation that only adds tokens within
//    p's last partial block is still found (p's full blocks are all that is required).
//
// Layout: one hash table from a request's last full-block key to (that request, its full-block
// count, prompt length, turn, session), the latest request with that key; a key of a prefix trace
// names its whole prefix, so finding p's last full key at position full(p) - 1 of r is finding
// all of p's full keys at the head of r. Memory: about 48 bytes per request with a full block;
// time: one probe per block of r, from r's deepest block down, stopping at the first valid p.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kvtk/concepts.hpp"
#include "kvtk/prefix/replay.hpp"

namespace kvtk::prefix {

/// What session_inferrer says of one request.
struct inferred_session {
  std::uint64_t request_id = 0;     ///< the request's index in the stream (0, 1, ...)
  std::uint64_t parent = no_parent;  ///< the index of the request it continues, or no_parent
  std::uint64_t session = 0;         ///< the index of its session's root request
  std::uint32_t turn = 0;            ///< 0 for a root, parent's + 1 otherwise
};

/// Streams requests in trace order and infers each one's parent (the rule above).
/// Thread safety: one inferrer per thread.
class session_inferrer {
 public:
  /// Effects: infers the next request's session from its keys `keys` (all of them, the partial
  /// last block's included), its prompt length `input_tokens` and its `full_blocks` (how many of
  /// `keys` are full blocks), and remembers it as a possible parent.
  /// Requires: full_blocks <= keys.size().
  /// Complexity: O(keys.size()) expected.  Throws: std::bad_alloc (the request is then not
  /// remembered, and its parent, if it found one, counts as continued).
  inferred_session next(std::span<const block_key> keys, std::uint64_t input_tokens,
                        std::uint64_t full_blocks) {
    inferred_session out;
    out.request_id = count_;
    out.session = count_;
    for (std::size_t i = keys.size(); i-- > 0;) {
      const auto it = last_full_.find(keys[i]);
      if (it == last_full_.end()) continue;
      const entry& p = it->second;
      if (p.full_blocks != i + 1 || p.input_tokens >= input_tokens || p.continued) continue;
      it->second.continued = true;
      out.parent = p.request;
      out.session = p.session;
      out.turn = p.turn + 1;
      break;
    }
    if (full_blocks > 0) {
      last_full_[keys[full_blocks - 1]] = {count_, full_blocks, input_tokens, out.session, out.turn, false};
    }
    ++count_;
    if (out.parent != no_parent) ++continuations_;
    return out;
  }

  /// Requests seen, and how many continued an earlier one.
  [[nodiscard]] std::uint64_t requests() const noexcept { return count_; }
  [[nodiscard]] std::uint64_t continuations() const noexcept { return continuations_; }

 private:
  struct entry {
    std::uint64_t request = 0, full_blocks = 0, input_tokens = 0, session = 0;
    std::uint32_t turn = 0;
    bool continued = false;
  };
  std::unordered_map<block_key, entry> last_full_;
  std::uint64_t count_ = 0, continuations_ = 0;
};

/// Each request's session, parent and turn as kvtk reads them (trace stats, session-aware
/// replay; simulate's closed loop takes parents the same way, des/closed_loop.hpp):
///   * a trace with neither session nor parent fields: inferred by session_inferrer;
///   * else parents by id when the trace has parents and ids, else the session's previous
///     request; sessions the trace's, else each request's root through its parents;
///   * turn: the trace's own when it has them (no_turn where a request has none), else (inferred
///     sessions) the inferrer's.
/// depth counts each request's ancestors (0 for a root), whatever the trace's turn numbering.
struct session_columns {
  std::vector<std::uint64_t> session, parent;  ///< parent: an index into the trace, or no_parent
  std::vector<std::uint32_t> turn, depth;
  bool inferred = false;
};

/// Each request's parent as an index into t (no_parent for a root), from the trace's fields:
/// by id when it has parents and ids, else the previous request of its session; all roots when
/// it has neither. A parent that is not earlier in the trace (or not in it) makes a root.
/// Simulate's closed loop and session_columns_of take parents this way.
/// Complexity: O(requests) expected.  Throws: std::bad_alloc.
inline std::vector<std::uint64_t> parents_of(const prefix_trace_view& t) {
  const std::size_t n = t.requests();
  std::vector<std::uint64_t> parent(n, no_parent);
  std::unordered_map<std::uint64_t, std::uint64_t> latest;  // id or session -> index
  const bool by_parent = !t.parent.empty() && !t.request_id.empty();
  if (!by_parent && t.session.empty()) return parent;
  for (std::size_t r = 0; r < n; ++r) {
    if (by_parent) {
      if (t.parent[r] != no_parent) {
        const auto it = latest.find(t.parent[r]);
        if (it != latest.end()) parent[r] = it->second;
      }
      if (t.request_id[r] != no_parent) latest[t.request_id[r]] = r;
    } else {
      const auto it = latest.find(t.session[r]);
      if (it != latest.end()) parent[r] = it->second;
      latest[t.session[r]] = r;
    }
  }
  return parent;
}

/// Complexity: O(blocks) expected.  Throws: std::bad_alloc.
inline session_columns session_columns_of(const prefix_trace_view& t) {
  session_columns c;
  const std::size_t n = t.requests();
  c.depth.assign(n, 0);
  if (t.session.empty() && t.parent.empty()) {
    c.inferred = true;
    session_inferrer infer;
    for (std::size_t r = 0; r < n; ++r) {
      const auto s = infer.next(t.blocks(r), t.input_tokens(r), t.cacheable(r, partial_block::skip).size());
      c.session.push_back(s.session);
      c.parent.push_back(s.parent);
      c.turn.push_back(s.turn);
      c.depth[r] = s.turn;
    }
    return c;
  }
  c.turn.assign(n, no_turn);
  if (!t.turn.empty()) c.turn.assign(t.turn.begin(), t.turn.end());
  c.parent = parents_of(t);
  for (std::size_t r = 0; r < n; ++r) {
    if (c.parent[r] != no_parent) c.depth[r] = c.depth[c.parent[r]] + 1;  // parents come first
  }
  if (!t.session.empty()) {
    c.session.assign(t.session.begin(), t.session.end());
  } else {
    c.session.resize(n);
    for (std::size_t r = 0; r < n; ++r) c.session[r] = c.parent[r] == no_parent ? r : c.session[c.parent[r]];
  }
  return c;
}

/// The kind name that marks a tool result: its parent's reply ended in a tool call.
inline constexpr std::string_view tool_result_kind = "tool";

/// What session-aware orders read of each request (access_hint's session fields), for a
/// replay: session key (the session + 1, so that 0 means none), turn (the request's depth in its
/// session: 0 for a first turn), and awaits_tool (1 when the reply ended in a tool call: the
/// request has a tool_s when the trace has that field; else some request of kind `tool` has it as
/// its parent). `source` says where sessions came from: "trace" or "inferred".
struct session_signals {
  std::vector<std::uint64_t> session;
  std::vector<std::uint32_t> turn;
  std::vector<std::uint8_t> awaits_tool;
  std::string source;

  /// Effects: points v's session, turn and awaits_tool columns at these (v is a copy of the
  /// trace's view; the trace's own session and turn columns are replaced in it).
  void attach(prefix_trace_view& v) const noexcept {
    v.session = session;
    v.turn = turn;
    v.awaits_tool = awaits_tool;
  }
};

/// The session signals of trace t, whose kind names are `kind_names` (index 0 = none).
/// Complexity: O(blocks) expected.  Throws: std::bad_alloc.
inline session_signals session_signals_of(const prefix_trace_view& t,
                                          std::span<const std::string> kind_names) {
  session_columns c = session_columns_of(t);
  session_signals s;
  s.source = c.inferred ? "inferred" : "trace";
  const std::size_t n = t.requests();
  s.session.resize(n);
  for (std::size_t r = 0; r < n; ++r) s.session[r] = c.session[r] + 1;
  s.turn = std::move(c.depth);
  s.awaits_tool.assign(n, 0);
  std::uint32_t tool = 0;  // 0: the trace has no tool results
  for (std::size_t k = 1; k < kind_names.size(); ++k) {
    if (kind_names[k] == tool_result_kind) tool = static_cast<std::uint32_t>(k);
  }
  bool any_tool_s = false;
  for (std::size_t r = 0; r < t.tool_s.size(); ++r) {
    if (t.tool_s[r] == t.tool_s[r]) {  // not NaN
      s.awaits_tool[r] = 1;
      any_tool_s = true;
    }
  }
  if (!any_tool_s && tool != 0 && !t.kind.empty()) {
    for (std::size_t r = 0; r < n; ++r) {
      if (t.kind[r] == tool && c.parent[r] != no_parent) s.awaits_tool[c.parent[r]] = 1;
    }
  }
  return s;
}

}  // namespace kvtk::prefix
