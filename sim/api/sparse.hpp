// sim/api/sparse.hpp — `kvtk sparse` as a library call: decode-step block selections (recorded
// in a kvtk JSONL trace, or generated) replayed against a per-request HBM budget through the
// residency managers of include/kvtk/sparse/. Semantics: docs/sparse.md.
//
//   kvtk::sim::sparse_options o;
//   o.scorer = {"selection-lru", "h2o"};
//   o.budget = {"128", "256"};
//   for (const auto& r : kvtk::sim::run(o).results) std::cout << r["stall_s"] << "\n";
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace kvtk::sim {

/// What `kvtk sparse` does; each field is the option of the same name (dashes as underscores).
/// The lists manager x scorer x budget x drift (x prefetch for offload) run as a grid.
struct sparse_options {
  std::string trace;                 ///< kvtk JSONL with decode records ("" = a generated pattern)
  std::string pattern = "dsa";       ///< generated: dsa | quest
  std::uint32_t context_blocks = 2048;  ///< pattern: context at step 0, in pages, [1, 2^24]
  std::uint32_t steps = 2000;        ///< pattern: decode steps per request, [1, 10^7]
  std::uint32_t requests = 1;        ///< pattern: independent requests (seeds), [1, 10^5]
  bool grow = false;                 ///< pattern: one more page every page_tokens steps
  std::uint32_t page_tokens = 0;     ///< tokens per page (0: dsa 64, quest 16; a trace's header)
  std::uint32_t top_k = 0;           ///< quest: pages per step (0 = 32)
  std::uint32_t heavy = 0;           ///< pattern: heavy-hitter pages per step (0 = the preset's)
  std::optional<double> persistence;  ///< pattern: heavy hitters kept step to step (preset 0.9)
  std::vector<std::string> drift;    ///< pattern: drift rates in [0, 1]; empty = 0.02
  double zipf = 1.0;                 ///< pattern: Zipf exponent of heavy-hitter importance
  std::uint64_t seed = 1;            ///< pattern and predictor seed
  std::vector<std::string> manager = {"offload"};       ///< offload | lossy
  std::vector<std::string> scorer = {"selection-lru"};  ///< victim orders
  std::vector<std::string> budget = {"256"};  ///< per request: pages, "16384tok" or "12.5%"
  std::optional<std::uint32_t> sinks;   ///< protected sink pages (the pattern preset's: 1)
  std::optional<std::uint32_t> recent;  ///< protected recent pages (dsa 2, quest 1)
  std::vector<std::string> prefetch = {"none"};  ///< none | layer-ahead | next-step[:ACC]
  std::optional<std::uint32_t> layers;  ///< layers for layer-ahead (the model preset's)
  std::string model = "deepseek-v3";    ///< KV bytes per token for page bytes
  double link_gb_per_s = 50;            ///< host -> HBM link bandwidth
  double link_latency_us = 10;          ///< fixed cost per transfer
  std::string calibration;              ///< link from a calibration JSON's h2d fit ("" = none)
  std::string calibration_mechanism;    ///< the fit to use ("" = fastest for 256 blocks)
  double step_ms = 25;                  ///< decode compute per step
  bool step_rows = false;               ///< record one CSV row per request and step (result.step_csv)
};

nlohmann::json to_json(const sparse_options& o);
/// Throws usage_error naming an unknown key or a value of the wrong type.
sparse_options sparse_options_from_json(const nlohmann::json& j);
/// Checks every option (and the trace's page size). Throws usage_error naming the option.
void validate(const sparse_options& o);

struct sparse_result {
  nlohmann::json summary;  ///< input, page_tokens, page_bytes, link, step_s, sinks, recent, results
  std::string step_csv;    ///< per request and step rows when options.step_rows, else empty
};

/// Throws: as validate(); trace_error for bad decode records.
sparse_result run(const sparse_options& options);

nlohmann::json to_json(const sparse_result& r);  ///< `kvtk sparse --json`
std::string to_text(const sparse_result& r);     ///< the table `kvtk sparse` prints

}  // namespace kvtk::sim
