// sim/api/compare.hpp — `kvtk compare` as a library call: a flat block trace (every record one
// unit-size request) through each eviction policy at each capacity, libCacheSim-style.
//
//   kvtk::sim::compare_options o;
//   o.trace = "traces/mooncake_fast25_conversation_trace.jsonl";
//   o.policy = {"lru", "arc", "s3fifo"};
//   for (const auto& r : kvtk::sim::run(o).results) std::cout << r["hit_ratio"] << "\n";
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/progress.hpp"

namespace kvtk::sim {

/// What `kvtk compare` does; each field is the option of the same name.
struct compare_options {
  std::string trace;            ///< flat trace path (required): mooncake, ids or oracle-general
  std::string format = "auto";  ///< mooncake | ids | oracle-general | auto
  std::vector<std::string> policy = {"all"};  ///< policy names, or {"all"}
  std::vector<std::string> capacity = {"1000", "5859", "10000"};  ///< in blocks, [1, 2^31)
};

nlohmann::json to_json(const compare_options& o);
/// Throws usage_error naming an unknown key or a value of the wrong type.
compare_options compare_options_from_json(const nlohmann::json& j);
/// Throws usage_error naming the option.
void validate(const compare_options& o);

struct compare_result {
  nlohmann::json trace;    ///< path, block_requests
  nlohmann::json results;  ///< per policy and capacity: requests, misses, hits, ratios, seconds
};

/// Progress is in block requests, one trace length per (policy, capacity).
/// Throws: as validate(); trace_error for a bad trace.
compare_result run(const compare_options& options, const progress_callback& progress = {});

nlohmann::json to_json(const compare_result& r);  ///< `kvtk compare --json`
std::string to_csv(const compare_result& r);      ///< `kvtk compare --csv`
std::string to_text(const compare_result& r);     ///< the table `kvtk compare` prints

}  // namespace kvtk::sim
