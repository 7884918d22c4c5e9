// sim/des/closed_loop.hpp — closed-loop arrivals (`arrivals: closed`): a session's request is
// sent only after the request it follows has completed, plus the user's (or tool's) delay.
//
// The rules (docs/simulate.md "Closed-loop arrivals"):
//  * A request's parent: the trace's parent field (its id, the latest earlier request with that
//    id); else, in a trace with session ids, the previous request of its session. A parent that
//    is not earlier in the trace (or not in it) makes the request a root. A trace with neither
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
//  * One parent per request (the trace formats hold one): fan-in is not modelled.
// With zero service time and the "zero" estimate a child is released at its parent's arrival +
// the gap, i.e. at its own timestamp: closed equals open (tested).
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "des/timing.hpp"
#include "kvtk/prefix/sessions.hpp"
#include "kvtk/prefix/replay.hpp"

namespace kvtk::sim::des::detail {

struct closed_loop_plan {
  static constexpr std::uint32_t none = ~std::uint32_t{0};
  std::vector<std::uint32_t> parent;        ///< per request: its parent's index, or none
  std::vector<double> delay_s;              ///< per request: after its parent ends
  std::vector<std::uint32_t> child_offset;  ///< children of r: child[child_offset[r] .. [r+1])
  std::vector<std::uint32_t> child;

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
    const std::vector<std::uint64_t> parents = kvtk::prefix::parents_of(t);
    for (std::uint32_t r = 0; r < n; ++r) {
      if (parents[r] != kvtk::prefix::no_parent) p.parent[r] = static_cast<std::uint32_t>(parents[r]);
      if (p.parent[r] != none) {
        const double gap = t.arrival_s[r] - t.arrival_s[p.parent[r]];
        const bool tool = !t.tool_s.empty() && !std::isnan(t.tool_s[p.parent[r]]);
        p.delay_s[r] = tool ? t.tool_s[p.parent[r]] : std::max(0.0, gap - latency(p.parent[r]));
      }
    }
    p.child_offset.assign(n + 1, 0);
    for (std::uint32_t r = 0; r < n; ++r) {
      if (p.parent[r] != none) ++p.child_offset[p.parent[r] + 1];
    }
    for (std::uint32_t r = 0; r < n; ++r) p.child_offset[r + 1] += p.child_offset[r];
    p.child.resize(p.child_offset[n]);
    std::vector<std::uint32_t> fill(p.child_offset.begin(), p.child_offset.end() - 1);
    for (std::uint32_t r = 0; r < n; ++r) {
      if (p.parent[r] != none) p.child[fill[p.parent[r]]++] = r;
    }
    return p;
  }
};

/// The "unloaded" latency estimate of one request (see the header comment).
inline double unloaded_latency_s(const iteration_timing& timing, double kv_bytes_per_token,
                                 std::uint64_t input_tokens, std::uint64_t output_tokens) {
  double s = timing.prefill_s(0, input_tokens);
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
