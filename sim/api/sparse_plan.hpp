// sim/api/sparse_plan.hpp — what `kvtk sparse` (api/sparse.hpp) derives from its options before it
// runs anything: the job grid (manager x scorer x budget x drift x prefetch), the link and step
// time every job shares, and the generated pattern's configuration. Internal to kvtk_sim.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/sparse.hpp"
#include "kvtk/sparse/decode_step.hpp"
#include "kvtk/sparse/pattern_gen.hpp"
#include "kvtk/sparse/residency.hpp"

namespace kvtk::sim::sparse_detail {

/// One cell of the grid.
struct job {
  std::string manager, scorer, budget_text;
  kvtk::sparse::hbm_budget budget;
  double drift = -1;  ///< generated patterns only (< 0: from a trace)
  std::string prefetch_text = "none";
  kvtk::sparse::prefetch_mode prefetch = kvtk::sparse::prefetch_mode::none;
  double accuracy = 1.0;     ///< next-step predictor accuracy
  bool layer_ahead = false;  ///< recalls load one layer ahead (timing only; no prefetch)
};

/// What every job shares.
struct run_options {
  kvtk::sparse::decode_link link;  ///< the host link and page bytes (layer_ahead set per job)
  double step_s = 0.025;           ///< decode compute per step: prefetches hide behind it
  std::uint32_t sinks = 1, recent = 2;  ///< the pattern preset's unless given
  std::uint64_t seed = 1;
  std::size_t series_points = 200;  ///< samples of hbm_blocks_over_time
};

/// Everything run() derives from the options.
struct plan {
  std::vector<job> jobs;
  run_options common;
  kvtk::sparse::pattern_config base;
  std::uint32_t page_tokens = 0;
};

/// Throws usage_error naming the first bad option.
plan make_plan(const sparse_options& o);

}  // namespace kvtk::sim::sparse_detail
