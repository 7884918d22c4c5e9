// sim/move/executor.hpp — replays a trace through a tier hierarchy and performs every decision
// on real host memory: a promotion reads the block up (through a staging buffer, since its slot
// may be reused before it lands), a demotion or copy writes it down, a freshly computed block is
// written with its pattern. Every arrival is verified byte for byte; per link the bytes moved and
// the measured copy time are kept beside the time the tier model predicts.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "kvtk/prefix/replay.hpp"
#include "kvtk/tier/tier_hierarchy.hpp"
#include "move/host_move.hpp"

namespace kvtk::sim::move {

struct link_measure {
  std::uint64_t blocks_up = 0, blocks_down = 0;
  double seconds_up = 0, seconds_down = 0;
};

struct executor_state {
  std::vector<std::unique_ptr<host_pool>> pools;  // one per tier, slot = block_cache slot
  std::vector<std::byte> staging;                 // promotions of the current request
  std::vector<std::pair<kvtk::block_key, std::size_t>> staged;  // key -> staging index
  std::vector<link_measure> links;
  std::uint64_t block_bytes = 0, verified = 0, failures = 0, fresh = 0;
};

struct executor_observer {
  executor_state* st = nullptr;
  void staged(std::size_t tier, std::uint32_t slot, kvtk::block_key key) noexcept;
  void placed(std::size_t tier, std::uint32_t slot, kvtk::block_key key, bool from_staging) noexcept;
  void copied(std::size_t from, std::uint32_t from_slot, std::size_t to, std::uint32_t to_slot,
              kvtk::block_key key) noexcept;
};

/// Replays `t` through `cfg` on host pools of `block_bytes`-byte blocks. Returns the counts, the
/// per-tier report, per-link measured vs predicted times, and the integrity verdict.
/// Throws std::invalid_argument for a bad hierarchy; std::bad_alloc when the pools do not fit.
nlohmann::json execute(const kvtk::prefix::prefix_trace_view& t,
                       const kvtk::tier::hierarchy_config& cfg, std::uint64_t block_bytes,
                       kvtk::prefix::partial_block partial);

}  // namespace kvtk::sim::move
