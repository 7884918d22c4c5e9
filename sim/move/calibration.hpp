// sim/move/calibration.hpp — the calibration JSON of `kvtk move bench` (host) and
// `cuda/validate.sh` (CUDA) as the link model of `kvtk replay`, `kvtk simulate` and
// `kvtk move replay`.
//
// The file holds, under "calibration", one fit per "PATH MECHANISM" key, PATH being
// "from->to" over the pool kinds hbm, dram and file ("h2d" = dram->hbm, "d2h" = hbm->dram in the
// CUDA bench's output), each {alpha_s, beta_s, bytes_per_s}: a transfer of n blocks and b bytes
// takes alpha + n*beta + b/B. A null fit (too few samples) is skipped; keys whose path is not
// hbm/dram/file (e.g. "bidir") are kept but match no link.
//
// Applying it to a hierarchy: tier s (s >= 1) is read into tier s-1 over "kind(s)->kind(s-1)"
// (latency_s = alpha, read_per_block_s = beta, read_bytes_per_s = B) and written over
// "kind(s-1)->kind(s)" (write_latency_s = alpha, write_per_block_s = beta, write_bytes_per_s = B). Tier names map to
// kinds: hbm/gpu/hbm* -> hbm, dram/host/cpu -> dram, ssd/nvme/file/disk -> file; the host backend
// of `kvtk move replay` holds hbm in DRAM, so there hbm counts as dram. When no mechanism is
// named, each link takes the mechanism with the smallest predicted time for a 256-block
// transfer of the hierarchy's block size (the batch size the targets use).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kvtk/move/timing_fit.hpp"
#include "kvtk/tier/tier_spec.hpp"

namespace kvtk::sim::move {

struct link_fit {
  std::string from, to, mechanism;  ///< pool kinds and the copy mechanism
  kvtk::move::timing_model model;
  bool clamped = false;  ///< a negative alpha or beta from the fit was raised to 0
};

struct calibration {
  std::string source;          ///< the file it came from
  std::vector<link_fit> fits;  ///< every usable fit in the file

  /// Reads a calibration file. Throws std::runtime_error "PATH: reason" when the file is not
  /// JSON, lacks a "calibration" object, or a fit has a missing or non-finite field or B < 0.
  static calibration load(const std::string& path);
  /// The fit for from->to: `mechanism` when non-empty, else the fastest for 256 blocks of
  /// block_bytes. nullopt when the path (or that mechanism) was not measured.
  [[nodiscard]] std::optional<link_fit> find(const std::string& from, const std::string& to,
                                             std::uint64_t block_bytes,
                                             const std::string& mechanism) const;
};

/// "hbm", "dram", "file", or "" for a tier name kvtk does not map (README "Tiers").
std::string pool_kind(const std::string& tier_name, bool hbm_is_dram = false);

/// Sets the link figures of every tier s >= 1 whose path was measured. Returns, per link, what
/// was applied (the report's "calibration" array); links with no fit keep their figures and are
/// listed with "calibrated": false.
nlohmann::json apply_calibration(kvtk::tier::hierarchy_config& cfg, const calibration& cal,
                                 const std::string& mechanism, bool hbm_is_dram = false);

}  // namespace kvtk::sim::move
