// kvtk/sparse/block_stats.hpp — what a sparse-attention engine can tell a KV policy about each
// block.
//
// A "block" is one KV block (page) of one request's context, indexed 0..n-1 by position. During
// decode a sparse-attention method selects a subset of blocks per step; scorers
// (kvtk/sparse/scorers.hpp) turn the record below into a keep-longer-is-higher score, and the
// residency managers (kvtk/sparse/residency.hpp) keep it up to date from each step's selection.
//
// What each method reads, and what exporting it costs the engine
// ---------------------------------------------------------------
// clang-format off
//   position, sink, recent flags
//       read by: StreamingLLM, and every scorer (protection)
//       cost: free (the block table already has them)
//   last_selected_step, selection_sequence
//       read by: selection LRU (ArkVale- and ShadowKV-style caches)
//       cost: free (the step's top-k index list is already in HBM or on the host)
//   selection_count (decayed)
//       read by: InfLLM LRU-S
//       cost: the same list; one multiply-add per selected block (decay applied lazily)
//   accumulated_mass (decayed)
//       read by: H2O
//       cost: attention probabilities summed per block per step (per layer/head).
//             FlashAttention-style kernels never materialise them, so this needs an extra pass
//             or a kernel that emits per-block row sums using the softmax normaliser
//   last_step_mass
//       read by: TOVA
//       cost: the same per-block sums, latest step only
//   window_score
//       read by: SnapKV / PyramidKV
//       cost: once, at prefill: the last w queries' attention to every block (w x n scores),
//             pooled; nothing during decode
//   key min/max (key_summary_store)
//       read by: Quest, ArkVale bounds
//       cost: 2*d values per block, written once when the block fills (a reduction over its
//             tokens)
//   key mean (key_summary_store)
//       read by: InfLLM / GSA-style scoring
//       cost: d values per block, written once when the block fills
// clang-format on
//
// Decay is lazy: a decayed field holds its value as of `decay_step`; its value at step t is
// stored * factor^(t - decay_step). A block no step touches costs nothing per step, and a factor
// of 1 (the default) skips std::pow entirely.
//
// Invariants: decay_step <= every step the record is read or updated at (steps only move
// forward); last_step_mass is the mass of step last_selected_step and reads as 0 at any other
// step; selection_sequence is 0 until the first selection, then strictly increases with every
// selection the owning manager records (it orders blocks selected in the same step).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

namespace kvtk::sparse {

/// Decode step number; steps count from 0.
using step_index = std::uint64_t;
inline constexpr step_index never_selected = std::numeric_limits<step_index>::max();

/// Per-step decay factors, each in (0, 1]; 1 = no decay (the default).
struct decay_params {
  /// Factor applied per step to selection_count (InfLLM's LRU-S uses e.g. 0.9). Default 1.
  double count_decay = 1.0;
  /// Factor applied per step to accumulated_mass (H2O with forgetting). Default 1 (plain sum).
  double mass_decay = 1.0;
};

/// One block's statistics. 64 bytes: one cache line per block on the hot path.
struct block_stats {
  /// Block index in the request (0 = first block).
  std::uint32_t position = 0;
  /// Engine-set protection flags (attention sinks, recent window). Managers also protect by
  /// position (score_context), so an engine only sets these for blocks it protects by other rules.
  bool sink = false;
  bool recent = false;
  /// Step of the latest selection; never_selected before the first.
  step_index last_selected_step = never_selected;
  /// Ordinal of the latest selection among all selections the manager recorded; 0 = never.
  std::uint64_t selection_sequence = 0;
  /// Selections (at most one per step), decayed by count_decay; value as of decay_step.
  double selection_count = 0;
  /// Sum of selection weights (attention mass), decayed by mass_decay; value as of decay_step.
  double accumulated_mass = 0;
  /// Weight received in step last_selected_step.
  double last_step_mass = 0;
  /// SnapKV observation-window score (prefill); 0 unless the engine sets it.
  double window_score = 0;
  /// Step the decayed fields are expressed at.
  step_index decay_step = 0;
};

/// Returns factor^(to - from), 1 when to <= from or factor == 1.  Complexity: O(1).
[[nodiscard]] inline double decay_between(double factor, step_index from, step_index to) noexcept {
  if (factor == 1.0 || to <= from) return 1.0;
  return std::pow(factor, static_cast<double>(to - from));
}

/// The decayed selection count at step now (no mutation).  Requires: now >= b.decay_step.
[[nodiscard]] inline double selection_count_at(const block_stats& b, step_index now,
                                               const decay_params& d) noexcept {
  return b.selection_count * decay_between(d.count_decay, b.decay_step, now);
}
/// The decayed accumulated mass at step now (no mutation).  Requires: now >= b.decay_step.
[[nodiscard]] inline double accumulated_mass_at(const block_stats& b, step_index now,
                                                const decay_params& d) noexcept {
  return b.accumulated_mass * decay_between(d.mass_decay, b.decay_step, now);
}
/// Mass the block received in step now (0 if step now did not select it).
[[nodiscard]] inline double last_step_mass_at(const block_stats& b, step_index now) noexcept {
  return b.last_selected_step == now ? b.last_step_mass : 0.0;
}

/// Effects: brings the decayed fields to step now.  Requires: now >= b.decay_step.
/// Complexity: O(1); two std::pow calls unless the factors are 1.
inline void apply_decay(block_stats& b, step_index now, const decay_params& d) noexcept {
  if (now <= b.decay_step) return;
  b.selection_count = selection_count_at(b, now, d);
  b.accumulated_mass = accumulated_mass_at(b, now, d);
  b.decay_step = now;
}

/// Effects: records that step now selected the block with attention mass `weight`: decays to now,
/// then count += 1 (once per step: a second selection in the same step adds only its mass),
/// mass += weight, last_step_mass += weight, last_selected_step = now,
/// selection_sequence = sequence.  Requires: now >= b.decay_step.  Complexity: O(1).
inline void record_selection(block_stats& b, step_index now, double weight, std::uint64_t sequence,
                             const decay_params& d) noexcept {
  apply_decay(b, now, d);
  if (b.last_selected_step != now) {
    b.selection_count += 1.0;
    b.last_step_mass = 0.0;
    b.last_selected_step = now;
  }
  b.accumulated_mass += weight;
  b.last_step_mass += weight;
  b.selection_sequence = sequence;
}

/// Per-block key summaries in one flat store: min, max and mean key (d floats each) per block,
/// block-major, so a block's min (or max, or mean) vector is contiguous. Sized at construction
/// (3 * dims * max_blocks floats); nothing allocates afterwards.
/// Thread safety: as block_cache (block_stats and decay_params are plain values).
class key_summary_store {
 public:
  /// Requires: dims > 0, max_blocks > 0.  Effects: zero-filled store.
  /// Throws: std::invalid_argument on a zero size, std::bad_alloc.
  key_summary_store(std::uint32_t dims, std::uint32_t max_blocks)
      : dims_(dims), blocks_(max_blocks) {
    if (dims == 0 || max_blocks == 0) {
      throw std::invalid_argument("key_summary_store: dims and max_blocks must be positive");
    }
    const std::size_t n = std::size_t{dims} * max_blocks;
    min_.assign(n, 0.0f);
    max_.assign(n, 0.0f);
    mean_.assign(n, 0.0f);
  }

  /// Requires: block < max_blocks(), tokens > 0, keys.size() >= tokens * dims() (row-major,
  /// one row per token).  Effects: stores the per-dimension min, max and mean over the rows.
  /// Complexity: O(tokens * dims).
  void summarize(std::uint32_t block, std::span<const float> keys, std::uint32_t tokens) noexcept {
    float* lo = &min_[offset(block)];
    float* hi = &max_[offset(block)];
    float* mean = &mean_[offset(block)];
    std::copy_n(keys.data(), dims_, lo);
    std::copy_n(keys.data(), dims_, hi);
    std::fill_n(mean, dims_, 0.0f);
    for (std::uint32_t t = 0; t < tokens; ++t) {
      const float* row = keys.data() + std::size_t{t} * dims_;
      for (std::uint32_t d = 0; d < dims_; ++d) {
        lo[d] = std::min(lo[d], row[d]);
        hi[d] = std::max(hi[d], row[d]);
        mean[d] += row[d];
      }
    }
    for (std::uint32_t d = 0; d < dims_; ++d) mean[d] /= static_cast<float>(tokens);
  }

  /// Views of one block's summaries (dims() floats).  Requires: block < max_blocks().
  [[nodiscard]] std::span<const float> min(std::uint32_t block) const noexcept {
    return {&min_[offset(block)], dims_};
  }
  [[nodiscard]] std::span<const float> max(std::uint32_t block) const noexcept {
    return {&max_[offset(block)], dims_};
  }
  [[nodiscard]] std::span<const float> mean(std::uint32_t block) const noexcept {
    return {&mean_[offset(block)], dims_};
  }
  /// Writable views, for engines whose kernels produce the summaries directly.
  [[nodiscard]] std::span<float> min(std::uint32_t block) noexcept {
    return {&min_[offset(block)], dims_};
  }
  [[nodiscard]] std::span<float> max(std::uint32_t block) noexcept {
    return {&max_[offset(block)], dims_};
  }
  [[nodiscard]] std::span<float> mean(std::uint32_t block) noexcept {
    return {&mean_[offset(block)], dims_};
  }

  [[nodiscard]] std::uint32_t dims() const noexcept { return dims_; }
  [[nodiscard]] std::uint32_t max_blocks() const noexcept { return blocks_; }
  [[nodiscard]] std::size_t memory_bytes() const noexcept {
    return 3 * min_.size() * sizeof(float);
  }

 private:
  [[nodiscard]] std::size_t offset(std::uint32_t block) const noexcept {
    return std::size_t{block} * dims_;
  }
  std::uint32_t dims_;
  std::uint32_t blocks_;
  std::vector<float> min_, max_, mean_;
};

}  // namespace kvtk::sparse
