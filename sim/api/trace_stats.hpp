// sim/api/trace_stats.hpp — `kvtk trace stats` as a library call: what a request trace looks
// like (requests, span and arrival rate, length distributions, block references, unique blocks,
// ideal prefix hit ratios, reuse distances, sessions), in one pass.
//
//   kvtk::sim::trace_stats_options o;
//   o.trace = "traces/mooncake_fast25_conversation_trace.jsonl";
//   std::cout << kvtk::sim::run(o).stats["ideal_token_hit_ratio"] << "\n";
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kvtk::sim {

class phase_clock;  // util/phase_clock.hpp

/// What `kvtk trace stats` does; each field is the option of the same name.
struct trace_stats_options {
  std::string trace;                   ///< trace path (required; any format)
  std::string format = "auto";         ///< a format name, or auto
  std::uint32_t block_tokens = 0;      ///< tokens per block; 0 = the trace's
  std::string partial_block = "skip";  ///< skip | cache
  bool skip_invalid = false;           ///< skip malformed trace lines (counted) instead of stopping
  bool timings = false;                ///< keep the phase clock (result.clock)
};

nlohmann::json to_json(const trace_stats_options& o);
/// Throws usage_error naming an unknown key or a value of the wrong type.
trace_stats_options trace_stats_options_from_json(const nlohmann::json& j);
/// Throws usage_error naming the option.
void validate(const trace_stats_options& o);

struct trace_stats_result {
  nlohmann::json stats;                     ///< the figures (docs: README "trace stats")
  std::vector<std::string> warnings;  ///< input notes (skipped lines, unused records): shown by the CLI
  std::shared_ptr<phase_clock> clock;  ///< read / pass / summary laps when options.timings
};

/// Effects: one pass over the trace. Throws: as validate(); trace_error for a bad trace.
trace_stats_result run(trace_stats_options options);

nlohmann::json to_json(const trace_stats_result& r);  ///< `kvtk trace stats --json`
std::string to_text(const trace_stats_result& r);     ///< what `kvtk trace stats` prints

}  // namespace kvtk::sim
