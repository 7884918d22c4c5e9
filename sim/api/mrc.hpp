// sim/api/mrc.hpp — `kvtk mrc` as a library call: the exact prefix-LRU miss-ratio curve of a
// trace in one pass, or a SHARDS-style sampled curve, optionally with the offline optimum.
//
//   kvtk::sim::mrc_options o;
//   o.trace = "traces/mooncake_fast25_conversation_trace.jsonl";
//   o.opt = true;
//   for (const auto& p : kvtk::sim::run(o).curve) std::cout << p["token_hit_ratio"] << "\n";
//
// Definitions: include/kvtk/prefix/mrc.hpp (exact) and docs/prefix.md (sampling and its error).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/progress.hpp"

namespace kvtk::sim {

/// What `kvtk mrc` does; each field is the option of the same name (dashes as underscores).
struct mrc_options {
  std::string trace;                   ///< trace path (required; any format)
  std::string format = "auto";         ///< a format name, or auto
  std::uint32_t block_tokens = 0;      ///< tokens per block; 0 = the trace's
  std::string partial_block = "skip";  ///< skip | cache
  /// Capacities to report: blocks, tokens ("3Mtok") or bytes ("64GiB", needs model). Empty:
  /// `points` log-spaced sizes up to where the curve saturates.
  std::vector<std::string> capacity;
  std::uint32_t points = 24;  ///< log-spaced capacities when capacity is empty, in [2, 10000]
  std::string model;          ///< model preset or .json for byte capacities ("" = none)
  double sample = 1.0;        ///< sampling rate in (0, 1]; below 1 the sampled curve
  bool opt = false;           ///< also replay the offline optimum at every capacity
  /// Engine modes to replay at every capacity beside the curve (vllm, sglang; ideal is the curve
  /// itself): each adds <engine>_block_hit_ratio and <engine>_token_hit_ratio to every point.
  /// Engine accounting is not a stack algorithm, so each point is one replay.
  std::vector<std::string> engine;
  bool skip_invalid = false;  ///< skip malformed trace lines (counted) instead of stopping
  /// Where the optimum's next uses come from: auto | off | a directory (replay_options).
  std::string next_use_cache = "auto";
};

nlohmann::json to_json(const mrc_options& o);
/// Throws usage_error naming an unknown key or a value of the wrong type.
mrc_options mrc_options_from_json(const nlohmann::json& j);
/// Checks the options and resolves format and block_tokens from the trace, in place. Throws
/// usage_error naming the option; trace_error when the trace cannot be read.
void validate(mrc_options& o);

struct mrc_result {
  nlohmann::json trace;   ///< path, format, requests, block_refs, token_refs, saturation_blocks, ...
  nlohmann::json sample;  ///< rate, sampled references, max_error_estimate; null for the exact curve
  nlohmann::json curve;   ///< one point per capacity: capacity_blocks, block/token hit ratios, ...
  std::vector<std::string> warnings;  ///< e.g. a sampled curve whose error estimate exceeds 0.05
};

/// Progress is in block references: the curve's pass, then each optimum replay.
/// Effects: one pass for the curve (exact or sampled) plus one next-use pass and one optimum
/// replay per capacity when opt. Throws: as validate(); std::runtime_error when a sample keeps
/// fewer than 1,000 block references (too few for a curve).
mrc_result run(mrc_options options, const progress_callback& progress = {});

nlohmann::json to_json(const mrc_result& r);  ///< `kvtk mrc --json`
std::string to_csv(const mrc_result& r);      ///< `kvtk mrc --csv`
std::string to_text(const mrc_result& r);     ///< the table `kvtk mrc` prints

}  // namespace kvtk::sim
