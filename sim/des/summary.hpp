// sim/des/summary.hpp — the one summary builder of kvtk simulate. Every scheduler's summary has
// these keys, computed the same way from the retired outcomes (des/outcomes.hpp); each scheduler
// then adds its own (kvtk's: tiers, pool, bytes and savings; the engines': KV blocks,
// iterations, evictions). docs/simulate.md lists them.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "des/outcomes.hpp"

namespace kvtk::sim::des::detail {

/// What a scheduler knows beyond the outcomes' totals.
struct summary_inputs {
  std::uint64_t rejected = 0;     ///< requests refused (SLO admission, or unschedulable)
  std::uint64_t preemptions = 0;  ///< requests preempted or retracted
  double busy_s = 0;              ///< summed busy seconds of every instance
  double instances = 0;           ///< instances (prefill and decode)
  std::uint64_t max_live = 0;     ///< the request window's peak (des/outcomes.hpp)
  nlohmann::json timing;          ///< iteration_timing::describe()
  nlohmann::json scheduler;       ///< engine_scheduler_config::describe()
};

/// The shared keys: requests, block and token refs/hits/ratios, rejected, the latency
/// distributions (ttft_s, tbt_s, e2e_s, queueing_s, token_gap_s), span_s, throughput, output
/// tokens, goodput, gpu_busy_fraction, timing, scheduler, preemptions, max_live_requests.
/// Rates are per second of span (first arrival to last completion); 0 for an empty span.
inline nlohmann::json common_summary(const outcome_totals& k, const latency_stats& token_gaps,
                                     const summary_inputs& in) {
  const double span = k.last - k.first;
  auto ratio = [](std::uint64_t a, std::uint64_t b) {
    return b ? static_cast<double>(a) / static_cast<double>(b) : 0.0;
  };
  auto per_s = [&](double x) { return span > 0 ? x / span : 0.0; };
  return {{"requests", k.requests},
          {"block_refs", k.refs},
          {"block_hits", k.hits},
          {"block_hit_ratio", ratio(k.hits, k.refs)},
          {"token_refs", k.tok},
          {"token_hits", k.tok_hits},
          {"token_hit_ratio", ratio(k.tok_hits, k.tok)},
          {"rejected", in.rejected},
          {"ttft_s", k.ttft.json()},
          {"tbt_s", k.tbt.json()},
          {"token_gap_s", token_gaps.tail_json()},
          {"e2e_s", k.e2e.json()},
          {"queueing_s", k.queueing.json()},
          {"span_s", span},
          {"throughput_requests_per_s", per_s(static_cast<double>(k.requests - in.rejected))},
          {"output_tokens", k.out_tokens},
          {"output_tokens_per_s", per_s(static_cast<double>(k.out_tokens))},
          {"goodput_requests_per_s", per_s(static_cast<double>(k.good))},
          {"gpu_busy_fraction",
           span > 0 && in.instances > 0 ? in.busy_s / (span * in.instances) : 0.0},
          {"timing", in.timing},
          {"scheduler", in.scheduler},
          {"preemptions", in.preemptions},
          {"max_live_requests", in.max_live}};
}

}  // namespace kvtk::sim::des::detail
