// kvtk/sparse/residency.hpp — which KV blocks of one request stay in HBM under sparse attention.
//
// Two managers over a per-request HBM budget in blocks, both driven by the engine's per-step
// selection (the block indices sparse attention used, with a weight = attention mass):
//
// lossy_manager<Scorer>  (H2O, StreamingLLM, SnapKV, TOVA, PyramidKV per layer group)
//   Blocks that fall out are dropped for good. step(): every valid selection counts into
//   total_mass; a selection of a resident block is a hit and updates its record; a selection of
//   a dropped block adds its weight to dropped_mass (the quality proxy: attention the model wanted
//   but could no longer get). Then, while resident > budget, the lowest-scoring resident block
//   that is not protected is dropped (selected blocks included: the score alone decides).
//
// offload_recall_manager<Scorer>  (Quest, InfLLM, ArkVale, ShadowKV, DSA top-k; lossless)
//   The full KV lives in a lower tier; HBM holds at most `budget` blocks after every step.
//   step(): every selected block must be in HBM after the step. A selected non-resident block is
//   recalled (a critical-path load: recalls, last_step_recalls); a resident one is a hit. Then,
//   while resident > budget, the lowest-scoring resident block that is neither protected nor
//   selected in this step moves to the lower tier (evictions). The step needs its whole selected
//   set, so if selected + protected blocks alone exceed the budget they are all kept, everything
//   else is evicted, and the step counts in over_budget_steps (resident then exceeds the budget
//   until a later step needs less). An engine knows the selection (top-k indices) before loading,
//   so "recall, then evict unselected" equals "evict unselected, then recall".
//   prefetch(blocks), mode next_step: between step t-1 and step t the caller passes the
//   predicted (or known) selection of step t. Each listed non-resident block is loaded off the
//   critical path (prefetches_issued) and is *pending* until the end of step t. Every block listed
//   since step t-1, resident or loaded, is *shielded*: no prefetch before step t evicts it. To make
//   room a prefetch evicts, in score order, resident blocks that are neither protected nor
//   shielded (blocks step t-1 selected are fair game: the prediction says step t does not need
//   them); when nothing is evictable the remaining listed blocks, in list order, are not loaded
//   (prefetches_dropped, once per distinct block). A prefetch never raises resident above the
//   budget. One call shields all its listed blocks before it evicts anything, so
//   it is not the same as listing them one call at a time (an earlier call may evict a block
//   that a later call lists).
//   Step t then counts each pending block it selects as a prefetch hit (also a hit) and each one it
//   does not select as a wasted prefetch (its bytes moved for nothing; the block stays resident and
//   is an ordinary eviction candidate). So after every step prefetch_hits + wasted_prefetches =
//   prefetches_issued. Mode none: prefetch() does nothing.
//
// Common rules (budget units, protection, victim order, invalid selections) and the cost of
// each operation: residency_core.hpp.

#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kvtk/sparse/residency_core.hpp"

namespace kvtk::sparse {

/// Lossy residency: blocks over the budget are dropped for good. Default scorer: h2o.
/// Thread safety: as block_cache (residency_core.hpp): one manager per request and thread.
template <block_scorer Scorer = h2o>
class lossy_manager : public detail::residency_core<Scorer> {
 public:
  /// Requires: see residency_config.  Throws: std::invalid_argument, std::bad_alloc.
  explicit lossy_manager(const residency_config& cfg,
                         const typename Scorer::config& scorer_cfg = {})
      : detail::residency_core<Scorer>(cfg, scorer_cfg) {}

  /// Effects: one decode step (see the header comment): hits update records, selections of
  /// dropped blocks add to dropped_mass, then the budget is restored by dropping the lowest
  /// scores. Requires: weights empty or parallel to selected.  Complexity: O(|selected|) +
  /// eviction (see header).  Throws: nothing; never allocates.
  void step(std::span<const std::uint32_t> selected, std::span<const float> weights = {}) noexcept {
    const step_index t = this->begin_step();
    residency_counters& c = this->counters_;
    for (std::size_t j = 0; j < selected.size(); ++j) {
      const std::uint32_t i = selected[j];
      if (!this->valid(i)) {
        ++c.invalid_selections;
        continue;
      }
      const double w = this->weight_at(weights, j);
      ++c.selections;
      c.total_mass += w;
      if (this->is_resident(i)) {
        ++c.hits;
        this->record(i, t, w);
      } else {
        ++c.dropped_selections;
        c.dropped_mass += w;
      }
    }
    this->end_step(enforce_budget());
  }

  /// Effects: drops the lowest-scoring unprotected blocks until resident <= effective_budget();
  /// returns whether it got there (false only when record flags protect too many blocks).
  bool enforce_budget() noexcept {
    return this->restore_budget([this](std::uint32_t i) { return !this->is_protected(i); });
  }

  [[nodiscard]] bool is_dropped(std::uint32_t i) const noexcept {
    return this->valid(i) && !this->is_resident(i);
  }
};

/// Lossless residency with recall from a lower tier. Default scorer: selection_lru.
/// Thread safety: as block_cache (residency_core.hpp): one manager per request and thread.
template <block_scorer Scorer = selection_lru>
class offload_recall_manager : public detail::residency_core<Scorer> {
 public:
  /// Requires: see residency_config.  Throws: std::invalid_argument, std::bad_alloc.
  explicit offload_recall_manager(const residency_config& cfg,
                                  const typename Scorer::config& scorer_cfg = {})
      : detail::residency_core<Scorer>(cfg, scorer_cfg), mode_(cfg.prefetch) {
    prefetch_mark_.assign(cfg.max_blocks, 0);
    shield_mark_.assign(cfg.max_blocks, 0);
    pending_.reserve(cfg.max_blocks);
  }

  /// Effects: one decode step (see the header comment). Postcondition: every valid selected block
  /// is resident; resident <= effective_budget() unless the step counted as over budget.
  /// Requires: weights empty or parallel to selected.  Complexity: O(|selected|) + eviction.
  /// Throws: nothing; never allocates.
  void step(std::span<const std::uint32_t> selected, std::span<const float> weights = {}) noexcept {
    const step_index t = this->begin_step();
    const std::uint64_t pending_mark = t + 1;
    residency_counters& c = this->counters_;
    for (std::size_t j = 0; j < selected.size(); ++j) {
      const std::uint32_t i = selected[j];
      if (!this->valid(i)) {
        ++c.invalid_selections;
        continue;
      }
      const double w = this->weight_at(weights, j);
      ++c.selections;
      c.total_mass += w;
      if (this->is_resident(i)) {
        ++c.hits;
        if (prefetch_mark_[i] == pending_mark && this->stats_[i].last_selected_step != t) {
          ++c.prefetch_hits;
        }
      } else {
        ++c.recalls;
        ++c.last_step_recalls;
        this->add_resident(i);  // linked by record()
      }
      this->record(i, t, w);
    }
    for (const std::uint32_t i : pending_) {
      if (this->stats_[i].last_selected_step != t) ++c.wasted_prefetches;
    }
    pending_.clear();
    this->end_step(this->restore_budget([this, t](std::uint32_t i) {
      return !this->is_protected(i) && this->stats_[i].last_selected_step != t;
    }));
  }

  /// Effects (mode next_step; mode none: nothing, returns 0): loads the listed non-resident blocks
  /// for the next step off the critical path, evicting unprotected, unshielded blocks in score
  /// order to stay within the budget; blocks for which no room can be made are not loaded.
  /// Returns the number loaded.  Complexity: O(|blocks|) + eviction.  Throws: nothing.
  std::uint32_t prefetch(std::span<const std::uint32_t> blocks) noexcept {
    if (mode_ == prefetch_mode::none) return 0;
    const std::uint64_t pending_mark = this->counters_.steps + 1;  // pending for the next step
    std::uint32_t wanted = 0;
    for (const std::uint32_t i : blocks) {
      if (!this->valid(i)) continue;
      shield_mark_[i] = pending_mark;
      if (!this->is_resident(i) && prefetch_mark_[i] != pending_mark) {
        prefetch_mark_[i] = pending_mark;
        ++wanted;
      }
    }
    if (wanted == 0) return 0;
    const std::uint32_t resident = this->resident_blocks();
    const std::uint32_t budget = this->effective_budget();
    const std::uint64_t over = std::uint64_t{resident} + wanted;
    const std::uint32_t evicted = this->evict_lowest(
        over > budget ? over - budget : 0, [this, pending_mark](std::uint32_t i) {
          return !this->is_protected(i) && shield_mark_[i] != pending_mark;
        });
    const std::uint32_t left = resident - evicted;
    std::uint32_t room = budget > left ? budget - left : 0;
    std::uint32_t issued = 0;
    for (const std::uint32_t i : blocks) {
      if (!this->valid(i) || this->is_resident(i) || prefetch_mark_[i] != pending_mark) continue;
      if (room == 0) {
        prefetch_mark_[i] = 0;
        ++this->counters_.prefetches_dropped;
        continue;
      }
      --room;
      ++issued;
      this->add_resident_in_order(i);
      pending_.push_back(i);  // at most max_blocks pending: no allocation
    }
    this->counters_.prefetches_issued += issued;
    return issued;
  }

  /// Whether block i is pending: prefetched for the next step and not yet judged.
  [[nodiscard]] bool is_pending(std::uint32_t i) const noexcept {
    return this->is_resident(i) && prefetch_mark_[i] == this->counters_.steps + 1;
  }
  [[nodiscard]] prefetch_mode mode() const noexcept { return mode_; }

 private:
  prefetch_mode mode_;
  std::vector<std::uint64_t> prefetch_mark_;  // step + 1 a block was prefetched for; 0 = none
  std::vector<std::uint64_t> shield_mark_;    // step + 1 a block was listed for prefetch
  std::vector<std::uint32_t> pending_;        // blocks prefetched for the next step
};

}  // namespace kvtk::sparse
