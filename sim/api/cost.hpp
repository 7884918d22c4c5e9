// sim/api/cost.hpp — `kvtk cost` as a library call: what a cache hit ratio is worth, as an API
// bill with and without caching and, with a model and a GPU, as self-hosted GPU time, tier rent
// and transfer time; from token counts, or from a replay / simulate / mrc result.
//
//   kvtk::sim::cost_options o;
//   o.hit_ratio = 0.563;               // DeepSeek's published disk-cache share
//   o.input_tokens = 1e9;
//   std::cout << kvtk::sim::run(o).estimate["saving_usd"] << "\n";
//
// Formulas and assumptions: docs/cost.md and include/kvtk/cost/.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace kvtk::sim {

/// What `kvtk cost` does; each field is the option of the same name (dashes as underscores).
/// Give hit_tokens with miss_tokens or input_tokens, or hit_ratio with input_tokens, or one
/// result (from or from_result).
struct cost_options {
  std::string pricing = "deepseek-v3.2";   ///< price preset or .json file
  std::optional<double> hit_tokens;        ///< input tokens served from cache (whole number)
  std::optional<double> hit_ratio;         ///< share of input_tokens served from cache, [0, 1]
  std::optional<double> miss_tokens;       ///< input tokens computed
  std::optional<double> input_tokens;      ///< all input tokens
  double output_tokens = 0;                ///< output tokens
  std::string from;                        ///< a kvtk replay, simulate or mrc JSON result file
  nlohmann::json from_result;              ///< the same result as JSON (instead of from); null = none
  double offpeak_share = 0;                ///< share of tokens in the off-peak window, [0, 1]
  bool per_day = false;                    ///< scale counts to one day by the result's time span
  std::string model;                       ///< self-hosted view: model preset ("" = API view only)
  std::string gpu;                         ///< self-hosted view: GPU preset
  double gpu_hour = 2.0;                   ///< USD per GPU-hour
  double efficiency = 0.5;                 ///< achieved fraction of peak FLOP/s, (0, 1]
  double usd_per_gb_month = 0;             ///< break-even (mrc input): price of cache capacity
};

nlohmann::json to_json(const cost_options& o);
/// Throws usage_error naming an unknown key or a value of the wrong type.
cost_options cost_options_from_json(const nlohmann::json& j);
/// Throws usage_error naming the option and the problem.
void validate(const cost_options& o);

struct cost_result {
  /// One estimate (bill_usd, saving_usd, self_hosted, ...), {"estimates": [...]} for a replay
  /// result (one per job), or the break-even object for an mrc curve.
  nlohmann::json estimate;
};

/// Throws: usage_error for bad options or a result that cannot be priced;
/// std::runtime_error for a result file with a missing or mistyped field.
cost_result run(const cost_options& options);

nlohmann::json to_json(const cost_result& r);  ///< `kvtk cost --json`
std::string to_text(const cost_result& r);     ///< what `kvtk cost` prints

}  // namespace kvtk::sim
