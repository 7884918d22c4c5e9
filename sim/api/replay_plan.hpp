// sim/api/replay_plan.hpp — what `kvtk replay` (api/replay.hpp) derives from its options before
// it reads the trace: the jobs (index x policy x capacity grid and tier hierarchies), the partial-
// block rule and the price table. Internal to kvtk_sim.
#pragma once

#include <cstdint>
#include <kvtk/prefix/replay.hpp>
#include <kvtk/tier/tier_spec.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/offload.hpp"
#include "api/replay.hpp"
#include "kvtk/cost/pricing.hpp"

namespace kvtk::sim::replay_detail {

struct job {
  std::string index, policy;
  std::uint64_t capacity;
  int hierarchy = -1;          // index into the tier hierarchies (index "tiers")
  std::string capacity_given;  // the capacity as the user wrote it ("64GiB", "3Mtok", "1000")
  std::string engine = "ideal";  // ideal | vllm | sglang (api/replay.hpp)
  int offload = -1;              // index into the offload specs (index "offload")
};
struct outcome {
  kvtk::prefix::prefix_counts counts;
  double seconds = 0;
  nlohmann::json tiers;   // per-tier report of a hierarchy job
  nlohmann::json engine;  // an engine mode's version and final state
  nlohmann::json offload;  // an offload job's per-tier report (api/offload.hpp)
};

// Everything run() derives from the options before it reads the trace.
struct plan {
  kvtk::prefix::partial_block pb = kvtk::prefix::partial_block::skip;
  std::vector<job> jobs;
  std::vector<kvtk::tier::hierarchy_config> hierarchies;
  std::vector<offload_spec> offloads;  ///< --offload, checked
  std::string tier_top = "flat";  ///< replay_options::tier_top, checked
  std::vector<nlohmann::json> calibration_reports;
  std::vector<std::string> price_storage;
  kvtk::cost::price_table table;
  bool priced = false;
};

/// The capacities replayed when none are given (blocks).
const std::vector<std::string>& default_capacities();

/// Throws usage_error naming the first bad option.
plan make_plan(const replay_options& o);

}  // namespace kvtk::sim::replay_detail
