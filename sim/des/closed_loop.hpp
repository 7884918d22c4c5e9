// sim/des/closed_loop.hpp — closed-loop arrivals (`arrivals: closed`): a session's request is
// sent only after the request it follows has completed, plus the user's (or tool's) delay.
//
// The rules (docs/simulate.md "Closed-loop arrivals"):
//  * A request's parent: the trace's parent field (its id, the latest earlier request with that
//    id); else, in a trace with session ids, the previous request of its session. A request with
//    no parent earlier in the trace (the first one, and fan-in ids, are all looked up) is a root. A trace with neither
//    field is refused: `kvtk trace convert --infer-sessions` writes them.
//  * Roots arrive at their timestamps.
//  * A child is released when its parent ends (finished, or refused: rejected requests end at
//    arrival, and their children follow as if the user had seen an error) plus its delay:
//      delay = max(0, (child's arrival - parent's arrival) - parent's latency estimate),
//    the gap the trace recorded less the time its own system took to answer the parent, which
//    the trace does not record. The estimate (`closed_latency`): "unloaded" (the default) = the
//    parent's prefill of its whole prompt plus (output - 1) decode steps of a one-request batch at
//    the middle of its output, on the simulated instance, no queueing, no cache; "zero" = the
//    whole gap is think time. Where the parent's reply ended in a tool call whose duration the
//    trace records (kvtk's `tool_s`, which `kvtk trace gen` writes for agent steps), the delay is
//    that duration instead: the tool starts when the reply ends.
//  * Fan-in (kvtk JSONL `"parent": [a, b, ...]`, a join of sub-agents' results): a request with
//    several parents waits for all of them. Its think time is measured once, from the parent
//    the trace's own system answered last (the latest arrival + latency estimate): that edge
//    carries the delay above, the others none. It is released at the latest of (parent's end +
//    edge delay). Giving every edge its own gap would make the spawning step's edge wait the
//    sub-agents' whole recorded run, so a join could never come earlier than the trace's even
//    when the simulated sub-agents finish sooner. Further parents are found by id (a trace
//    without request ids has none); one not earlier in the trace adds no wait.
// With zero service time and the "zero" estimate a child is released at each parent's arrival +
// the gap, i.e. at its own timestamp: closed equals open (tested).
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "des/timing.hpp"
#include "kvtk/prefix/sessions.hpp"
#include "kvtk/prefix/replay.hpp"

namespace kvtk::sim::des::detail {

struct closed_loop_plan {
  static constexpr std::uint32_t none = ~std::uint32_t{0};
  std::vector<std::uint32_t> parent;        ///< per request: its (first) parent's index, or none
  std::vector<double> delay_s;              ///< per request: after that parent ends
  std::vector<std::uint32_t> waits;         ///< per request: parents it waits for (0: a root)
  std::vector<std::uint32_t> child_offset;  ///< edges from r: child[child_offset[r] .. [r+1])
  std::vector<std::uint32_t> child;         ///< the child of each edge
  std::vector<double> edge_delay_s;         ///< each edge's delay after its parent ends

  /// Effects: the parents and delays of trace `t`; `latency(r)` estimates request r's latency
  /// as the trace's own system served it.  Throws: std::invalid_argument for a trace with
  /// neither parent nor session fields.
  template <class Latency>
  static closed_loop_plan make(const kvtk::prefix::prefix_trace_view& t, Latency&& latency) {
    if (t.requests() >= closed_loop_plan::none) {
      throw std::invalid_argument("arrivals 'closed' handles fewer than 2^32 - 1 requests");
    }
    const auto n = static_cast<std::uint32_t>(t.requests());
    const bool by_parent = !t.parent.empty() && !t.request_id.empty();
    if (!by_parent && t.session.empty()) {
      throw std::invalid_argument("arrivals 'closed' needs session fields (a parent with request "
                                  "ids, or a session per request); kvtk trace convert --infer-sessions writes them "
                                  "for a trace without any (docs/formats.md \"Inferred sessions\")");
    }
    closed_loop_plan p;
    p.parent.assign(n, none);
    p.delay_s.assign(n, 0.0);
    p.waits.assign(n, 0);
    // Edges (parent, child, delay) in child order; the first parent first. recorded_end: when
    // the trace's own system answered the edge's parent (its arrival + latency estimate).
    std::vector<std::uint32_t> from;
    std::vector<double> recorded_end;
    const auto add_edge = [&](std::uint32_t parent, std::uint32_t r) {
      for (std::size_t e = p.child.size() - p.waits[r]; e < p.child.size(); ++e) {
        if (from[e] == parent) return;  // listed twice
      }
      if (p.child.size() >= closed_loop_plan::none) {
        throw std::invalid_argument("arrivals 'closed' handles fewer than 2^32 - 1 parent links");
      }
      const double answer = latency(parent);
      const bool tool = !t.tool_s.empty() && !std::isnan(t.tool_s[parent]);
      const double gap = t.arrival_s[r] - t.arrival_s[parent];
      from.push_back(parent);
      p.child.push_back(r);
      p.edge_delay_s.push_back(tool ? t.tool_s[parent] : std::max(0.0, gap - answer));
      recorded_end.push_back(t.arrival_s[parent] + answer);
      ++p.waits[r];
    };
    // Fan-in: only the edge from the parent answered last keeps its delay (header comment).
    const auto think_once = [&](std::uint32_t r) {
      const std::size_t first = p.child.size() - p.waits[r];
      std::size_t last = first;
      for (std::size_t e = first + 1; e < p.child.size(); ++e) {
        if (recorded_end[e] > recorded_end[last]) last = e;
      }
      for (std::size_t e = first; e < p.child.size(); ++e) {
        if (e != last) p.edge_delay_s[e] = 0;
      }
      p.delay_s[r] = p.edge_delay_s[first];
    };
    const std::vector<std::uint64_t> parents = kvtk::prefix::parents_of(t);
    const bool fan_in = !t.join_offsets.empty() && !t.request_id.empty();
    std::unordered_map<std::uint64_t, std::uint32_t> latest;  // fan-in: id -> latest request so far
    for (std::uint32_t r = 0; r < n; ++r) {
      if (parents[r] != kvtk::prefix::no_parent) {
        p.parent[r] = static_cast<std::uint32_t>(parents[r]);
        add_edge(p.parent[r], r);
        p.delay_s[r] = p.edge_delay_s.back();
      }
      if (!fan_in) continue;
      for (const std::uint64_t id : t.joins(r)) {
        if (const auto it = latest.find(id); it != latest.end()) add_edge(it->second, r);
      }
      if (p.waits[r] > 1) think_once(r);
      if (t.request_id[r] != kvtk::prefix::no_parent) latest[t.request_id[r]] = r;
    }
    // Regroup the edges by parent (counting sort, stable: children in trace order).
    p.child_offset.assign(n + 1, 0);
    for (const std::uint32_t f : from) ++p.child_offset[f + 1];
    for (std::uint32_t r = 0; r < n; ++r) p.child_offset[r + 1] += p.child_offset[r];
    std::vector<std::uint32_t> child(p.child.size());
    std::vector<double> delay(p.child.size());
    std::vector<std::uint32_t> fill(p.child_offset.begin(), p.child_offset.end() - 1);
    for (std::size_t e = 0; e < from.size(); ++e) {
      const std::uint32_t at = fill[from[e]]++;
      child[at] = p.child[e];
      delay[at] = p.edge_delay_s[e];
    }
    p.child = std::move(child);
    p.edge_delay_s = std::move(delay);
    return p;
  }
};

/// The "unloaded" latency estimate of one request (see the header comment).
/// The prefill runs in iterations of at most `chunk` new tokens (the scheduler's chunk or token
/// budget; 0 = one iteration), as the simulation runs it: one iteration of a long prompt could be
/// beyond a timing table's reach where no real iteration is.
inline double unloaded_latency_s(const iteration_timing& timing, double kv_bytes_per_token,
                                 std::uint64_t input_tokens, std::uint64_t output_tokens,
                                 std::uint64_t chunk) {
  double s = timing.chunked_prefill_s(0, input_tokens, chunk);
  if (output_tokens > 1) {
    decode_batch d;
    d.requests = 1;
    d.context_tokens = static_cast<double>(input_tokens) + static_cast<double>(output_tokens) / 2;
    d.kv_bytes = d.context_tokens * kv_bytes_per_token;
    s += static_cast<double>(output_tokens - 1) * timing.decode_s(d);
  }
  return s;
}

}  // namespace kvtk::sim::des::detail
