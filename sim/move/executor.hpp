// sim/move/executor.hpp — replays a trace through a tier hierarchy and performs every decision
// on real memory: a promotion reads the block up (through a staging buffer, since its slot may
// be reused before it lands), a demotion or copy writes it down, a freshly computed block is
// written with its pattern. Tiers named hbm/dram (any name but a file kind) are page-aligned
// DRAM pools; tiers named ssd/nvme/file/disk are one file each (O_DIRECT when the filesystem
// accepts it), so the file tier's reads and writes are real pread/pwrite calls.
//
// Verification: every arrival in memory is checked byte for byte against the block's pattern;
// a write to a file is checked when it is read back (every promotion from a file) and, at the
// end of the run, every block resident in every tier is checked where it rests. A single
// corrupted or lost block fails the run. Per link the blocks moved, the measured copy time and
// the tier model's prediction are reported: each moved block is one copy call, so the model
// predicts calls * (alpha + beta) + bytes / B (alpha = latency_s, beta = per-block seconds).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvtk/prefix/replay.hpp"
#include "kvtk/tier/tier_index.hpp"
#include "move/host_move.hpp"

namespace kvtk::sim::move {

struct link_measure {
  std::uint64_t blocks_up = 0, blocks_down = 0;
  double seconds_up = 0, seconds_down = 0;
};

/// One tier's storage: a DRAM pool, or a file (with a one-block bounce buffer for file->file).
struct tier_storage {
  std::unique_ptr<host_pool> memory;
  std::unique_ptr<file_pool> file;
  std::string file_path;  ///< removed when the run ends
};

struct executor_state {
  std::vector<tier_storage> tiers;
  std::unique_ptr<host_pool> staging;  ///< promotions of the current request (page-aligned)
  std::unique_ptr<host_pool> bounce;   ///< one block, for copies between two files
  std::vector<std::pair<kvtk::block_key, std::size_t>> staged;  // key -> staging index
  std::vector<link_measure> links;
  std::uint64_t block_bytes = 0, verified = 0, failures = 0, fresh = 0, io_errors = 0;
  std::string first_error;
};

struct executor_observer {
  executor_state* st = nullptr;
  /// A request begins: its promotions are staged from the start of the staging pool.
  void request_started() noexcept;
  void staged(std::size_t tier, std::uint32_t slot, kvtk::block_key key) noexcept;
  void placed(std::size_t tier, std::uint32_t slot, kvtk::block_key key, bool from_staging) noexcept;
  void copied(std::size_t from, std::uint32_t from_slot, std::size_t to, std::uint32_t to_slot,
              kvtk::block_key key) noexcept;
};

/// Replays `t` through `cfg` on pools of `block_bytes`-byte blocks; file tiers live in
/// `file_dir` (removed afterwards). Returns the counts, per-link measured vs predicted times,
/// the at-rest sweep and the integrity verdict.
/// Throws std::invalid_argument for a bad hierarchy; std::runtime_error when a file cannot be
/// created; std::bad_alloc when the pools do not fit.
nlohmann::json execute(const kvtk::prefix::prefix_trace_view& t,
                       const kvtk::tier::hierarchy_config& cfg, std::uint64_t block_bytes,
                       kvtk::prefix::partial_block partial, const std::string& file_dir);

}  // namespace kvtk::sim::move
