// sim/api/segments.hpp — a replay counted in segments of requests (kvtk tune's warm-up,
// choice and holdout ranges). Internal to kvtk_commands.
#pragma once

#include <cstdint>
#include <kvtk/prefix/replay.hpp>
#include <span>
#include <vector>

namespace kvtk::sim::index_runs {

/// Replays requests [0, bounds[0]) uncounted, then each [bounds[i], bounds[i+1]) counted apart.
template <class Index>
std::vector<kvtk::prefix::prefix_counts> replay_segments(
    const kvtk::prefix::prefix_trace_view& t, Index& idx, kvtk::prefix::partial_block pb,
    std::span<const std::uint64_t> next, std::span<const std::size_t> bounds) {
  std::vector<kvtk::prefix::prefix_counts> out(bounds.size() - 1);
  kvtk::prefix::prefix_counts skipped;
  std::uint64_t pos = 0;
  kvtk::prefix::replay_requests(t, idx, pb, next, 0, bounds[0], skipped, pos);
  for (std::size_t i = 0; i + 1 < bounds.size(); ++i) {
    const std::uint64_t before = idx.evictions();
    kvtk::prefix::replay_requests(t, idx, pb, next, bounds[i], bounds[i + 1], out[i], pos);
    out[i].evictions = idx.evictions() - before;
  }
  return out;
}

}  // namespace kvtk::sim::index_runs
