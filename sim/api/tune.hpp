// sim/api/tune.hpp — `kvtk tune` as a library call: pick the best online policy for a trace and a
// capacity on the first part of the trace, and report it on the rest (the holdout).
//
//   kvtk::sim::tune_options o;
//   o.trace = "traces/mooncake_fast25_conversation_trace.jsonl";
//   o.capacity = {"5859"};
//   const kvtk::sim::tune_result r = kvtk::sim::run(o);
//   std::cout << r.results[0]["recommendation"]["command"] << "\n";
//
// Definitions (docs/policy-quality.md "Tuning on one half, reporting on the other"):
//   * split: requests [0, k) tune, [k, n) evaluate, k = floor(n * (1 - holdout)); 1 <= k < n.
//   * tune: every candidate (index x online policy) replays [0, k/4) to warm up, then three
//     segments [k/4, k/2), [k/2, 3k/4), [3k/4, k), counted apart. The choice is the candidate
//     whose worst segment is best relative to radix LRU ((hits + 1) / (LRU's hits + 1); the first
//     candidate when radix LRU is not one); ties by total hits, then candidate order (--index,
//     then registry). Scoring warm, as the holdout is measured, and by the worst segment keeps a
//     policy that wins only in one stretch of the trace from being chosen (a plain first-half
//     total chose worse than LRU on 6 of 30 trace x capacity cells, this rule on 4; see
//     docs/policy-quality.md).
//   * evaluate: every candidate and the offline optimum replay [0, k) to warm up (not counted) and
//     then [k, n), counted: a deployed policy keeps its state, so the holdout sees a warm cache
//     and whatever the policy learned online. Nothing of [k, n) is seen before it is replayed, so
//     the chosen policy's holdout figure is an out-of-sample number. best_in_hindsight is the
//     candidate with the most holdout hits (for judging the choice, not for use).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kvtk::sim {

struct tune_options {
  std::string trace;              ///< trace path (required; any format)
  std::string format = "auto";    ///< a format name, or auto
  std::uint32_t block_tokens = 0;  ///< tokens per block; 0 = the trace's
  std::vector<std::string> capacity;  ///< capacities (required): blocks, tokens or bytes
  std::string model;                  ///< model preset for byte capacities
  double holdout = 0.5;               ///< share of requests held out, in (0, 1)
  std::string partial_block = "skip";  ///< skip | cache
  std::vector<std::string> index = {"radix", "flat"};  ///< candidate indexes: radix | flat
  std::vector<std::string> policy = {"all"};  ///< candidate policies (online only), or {"all"}
  std::uint32_t threads = 1;                   ///< worker threads; results do not depend on it
  bool skip_invalid = false;                   ///< skip malformed trace lines (counted)
  /// Where the optimum's next uses come from: auto | off | a directory (replay_options).
  std::string next_use_cache = "auto";
};

/// The options as JSON (every field, by its name above).
nlohmann::json to_json(const tune_options& o);
/// Options from JSON: any subset of to_json's keys. Throws usage_error naming the key for
/// an unknown key or a value of the wrong type.
tune_options tune_options_from_json(const nlohmann::json& j);

/// Throws usage_error naming the option (bad holdout, no capacity, an offline or unknown
/// policy, an unknown index); trace_error when the trace cannot be read.
void validate(tune_options& o);

struct tune_result {
  nlohmann::json trace;    ///< path, format, requests, tune_requests, holdout_requests
  nlohmann::json results;  ///< one object per capacity (docs/policy-quality.md "Tuning")
  std::vector<std::string> warnings;  ///< input notes (skipped lines, unused records): shown by the CLI
};

/// Effects: loads the trace, tunes and evaluates every capacity. Complexity: about
/// 3 x candidates replays per capacity. Throws: as validate(); trace_error.
tune_result run(tune_options o);

nlohmann::json to_json(const tune_result& r);
/// The report `kvtk tune` prints: per capacity the choice, its holdout figures beside LRU and the
/// optimum, and the command to paste.
std::string to_text(const tune_result& r);

}  // namespace kvtk::sim
