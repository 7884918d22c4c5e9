// sim/api/replay.hpp — `kvtk replay` as a library call: a request trace through every
// (index, policy, capacity) combination and every tier hierarchy asked for.
//
//   kvtk::sim::replay_options o;
//   o.trace = "traces/mooncake_fast25_conversation_trace.jsonl";
//   o.policy = {"lru", "arc"};
//   o.capacity = {"1000", "3Mtok"};
//   const kvtk::sim::replay_result r = kvtk::sim::run(o);
//   for (const auto& row : r.results) std::cout << row["block_hit_ratio"] << "\n";
//
// The CLI parses argv into these options and prints what to_text / to_json / to_csv give; the
// Python package binds the same functions. Semantics of a replay: include/kvtk/prefix/replay.hpp;
// the JSON's fields: docs/replay-result.schema.json.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/progress.hpp"

namespace kvtk::sim {

class phase_clock;  // util/phase_clock.hpp

/// What `kvtk replay` does; each field is the option of the same name (dashes as underscores).
struct replay_options {
  std::string trace;                          ///< trace path (required; any format)
  std::string format = "auto";                ///< a format name, or auto (detected from content)
  std::uint32_t block_tokens = 0;             ///< tokens per block; 0 = the trace's
  /// Accounting: ideal (kvtk's definitions; runs the index x policy grid) and/or engine modes
  /// vllm | sglang, each one job per capacity that counts as that engine's own cache code does
  /// (include/kvtk/prefix/engine_index.hpp). Without ideal the grid does not run.
  std::vector<std::string> engine = {"ideal"};
  std::vector<std::string> index = {"radix"};  ///< radix | flat | hashchain
  std::vector<std::string> policy = {"lru"};  ///< policy names, or {"all"}; each runs with every
                                              ///< listed index that knows it
  /// Capacities: blocks ("1000"), tokens ("3Mtok") or bytes ("64GiB", needs model). Empty: 1000,
  /// 10000, 100000 without tiers, and no index grid at all with tiers.
  std::vector<std::string> capacity;
  std::string model;                  ///< model preset or .json for byte capacities ("" = none)
  std::string partial_block = "skip";  ///< skip | cache (the partial last block of a request)
  std::uint32_t threads = 1;          ///< worker threads in [1, 256]; results do not depend on it
  bool opt = true;                    ///< compute the offline optimum (opt_fraction)
  bool ideal = true;                  ///< compute the ideal (infinite-cache) ratios
  std::string pricing;                ///< price preset or .json: attach an API cost ("" = none)
  std::vector<std::string> tiers;     ///< hierarchies "name:capacity:policy[:usd_per_gb_month],..."
  std::vector<std::string> tier_config;  ///< hierarchies as JSON files
  /// The engine's own offload tier under `--engine vllm` (vLLM 0.33's OffloadingConnector, CPU
  /// spec): "cpu:SIZE[:POLICY[:usd_per_gb_month]][,block_size=N,store_threshold=N,...]", one job
  /// per spec and capacity (api/offload.hpp, docs/tiers.md "Engine offload tiers").
  std::vector<std::string> offload;
  std::string inclusion = "exclusive";   ///< tiers: exclusive | inclusive
  /// tiers: the top tier: flat (a block_cache, tier_hierarchy) | radix (a prefix_tree whose leaf
  /// order is the top tier's policy, radix_tier_hierarchy; exclusive write-back only). The CLI
  /// sets radix when --index radix is given explicitly with --tiers.
  std::string tier_top = "flat";
  std::string write_policy = "write-back";  ///< tiers: write-back | write-through | ...
  std::string admission = "always";         ///< tiers: always | frequency[:N] | tinylfu[:N] | ...
  std::string calibration;            ///< tiers: calibration JSON for the link figures ("" = none)
  std::string calibration_mechanism;  ///< tiers: the fit to use ("" = fastest for 256 blocks)
  bool skip_invalid = false;          ///< skip malformed trace lines (counted) instead of stopping
  /// Where the next uses (for opt and offline policies) come from: auto (a sidecar file for kvtb
  /// traces with more than 32 Mi block keys, else memory) | off (memory) | a directory for the
  /// sidecar (kvtb traces). Results are the same every way (api/next_uses.hpp, docs/formats.md).
  std::string next_use_cache = "auto";
  bool timings = false;               ///< record where the time went (result.timings)
};

/// The options as JSON ({"trace": ..., "index": [...], ...}: every field, by its name above).
nlohmann::json to_json(const replay_options& o);
/// Options from JSON: any subset of to_json's keys; the rest keep their defaults.
/// Throws usage_error naming the key for an unknown key or a value of the wrong type.
replay_options replay_options_from_json(const nlohmann::json& j);

/// Checks the options and resolves format "auto" and block_tokens 0 from the trace, in place.
/// Throws: usage_error naming the option and the problem; trace_error when the trace cannot
/// be read. run() calls it too; calling it first reports bad options before any work.
void validate(replay_options& o);

/// What one replay produced.
struct replay_result {
  nlohmann::json trace;    ///< the trace: path, format, requests, block_refs, ideal ratios, ...
  nlohmann::json results;  ///< one object per job (index x policy x capacity, then hierarchies)
  /// Per capacity with an optimum: its policy (the best candidate), counts, the bound and every
  /// candidate's block hits (kvtk/prefix/optimum.hpp); an empty array without it.
  nlohmann::json optimum = nlohmann::json::array();
  nlohmann::json timings;  ///< where the time went (options.timings), else null
  std::vector<std::string> warnings;  ///< input notes (skipped lines, unused records): shown by the CLI
  std::shared_ptr<phase_clock> clock;  ///< the running clock when options.timings
  double optimum_seconds = 0;               ///< time spent on the optimum, inside "replay"
};

/// Requires: nothing (the options are validated). Effects: loads the trace, replays every job
/// (on options.threads threads), computes the ideal and the optimum when asked.
/// Complexity: O(jobs x block references). Throws: as validate(); memory_budget_error when the
/// caches cannot fit this process's memory; trace_error for a malformed trace.
replay_result run(replay_options options, const progress_callback& progress = {});

/// {"trace": ..., "results": [...]} plus "timings" when present: `kvtk replay --json`.
nlohmann::json to_json(const replay_result& r);
/// One line per result with a header: `kvtk replay --csv`.
std::string to_csv(const replay_result& r);
/// The table `kvtk replay` prints.
std::string to_text(const replay_result& r);

}  // namespace kvtk::sim
