// kvtk/sparse/residency_core.hpp — what both residency managers (residency.hpp) share: the
// HBM budget and its units, the configuration, the counters, and residency_core (the per-block
// records, the dense resident set, the budget, and victim selection).
//
// Common rules
// * append_block() adds block n (the context grows by a prefill or decode block); its KV was just
//   written, so it is resident. The budget is restored at the end of the next step(), not at the
//   append (lossy_manager::enforce_budget() does it at once, e.g. right after a SnapKV prefill).
// * Protected = sinks (positions < sinks), the recent window (the last recent_window positions)
//   and blocks whose record has sink/recent set. Protected blocks are never dropped or evicted.
// * Budget: hbm_budget (blocks, tokens / block_tokens rounded down, or a fraction of the current
//   context rounded up) is re-evaluated whenever the context grows. If it is below the number of
//   position-protected blocks, protection wins: effective_budget() = that count, and every step
//   where this happens counts in budget_raised_steps. (Blocks protected only by record flags do
//   not raise the budget; a step they push over it counts in over_budget_steps.)
// * Victim order: ascending (score, position) under a strict total order; scorers never return
//   NaN. For selection_lru the score is the selection sequence, so blocks selected in the same step
//   go in the order the step listed them, and never-selected blocks go first, by position.
// * Selections >= context_blocks() are ignored and counted in invalid_selections. Duplicates in
//   one span count as separate selections (the second is a hit). weights may be empty (all 1) or
//   shorter than the selection (missing weights are 1).
//
// Cost: both managers allocate everything in the constructor (O(max_blocks)); append_block(),
// step() and prefetch() are noexcept and allocation-free. With selection_lru victims come from an
// index-linked list kept in victim order (O(1) per selection and per eviction, plus the protected
// or pending blocks passed over). Other scorers score the resident blocks only when a step has to
// evict (O(resident) scan + nth_element for the k lowest).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "kvtk/sparse/block_stats.hpp"
#include "kvtk/sparse/scorers.hpp"

namespace kvtk::sparse {

inline constexpr std::uint32_t no_block = std::numeric_limits<std::uint32_t>::max();

/// An HBM budget for one request, in one of three units.
struct hbm_budget {
  enum class unit : std::uint8_t { blocks, tokens, context_fraction };
  unit kind = unit::blocks;
  /// Blocks, tokens, or a fraction of the context in [0, 1], according to kind.
  double amount = 0;
  static constexpr hbm_budget in_blocks(std::uint32_t n) noexcept {
    return {unit::blocks, double(n)};
  }
  static constexpr hbm_budget in_tokens(std::uint64_t n) noexcept {
    return {unit::tokens, double(n)};
  }
  static constexpr hbm_budget fraction_of_context(double f) noexcept {
    return {unit::context_fraction, f};
  }
};

/// The budget in blocks for a context of context_blocks blocks: blocks as given; tokens /
/// block_tokens rounded down (a partial block does not fit); fraction * context rounded up (with a
/// 1e-12 relative tolerance, so 0.7 of 10 is 7). Requires: block_tokens > 0.  Complexity: O(1).
[[nodiscard]] inline std::uint32_t budget_blocks(const hbm_budget& b, std::uint32_t context_blocks,
                                                 std::uint32_t block_tokens) noexcept {
  double blocks = b.amount;
  if (b.kind == hbm_budget::unit::tokens) blocks = std::floor(b.amount / block_tokens);
  if (b.kind == hbm_budget::unit::context_fraction) {
    blocks = std::ceil(b.amount * context_blocks * (1.0 - 1e-12));
  }
  return blocks >= 4294967295.0 ? no_block : static_cast<std::uint32_t>(blocks);
}

/// Number of blocks protected by position: min(sinks, n) + min(recent, n - that).
[[nodiscard]] constexpr std::uint32_t protected_count(std::uint32_t context_blocks,
                                                      std::uint32_t sinks,
                                                      std::uint32_t recent_window) noexcept {
  const std::uint32_t s = std::min(sinks, context_blocks);
  return s + std::min(recent_window, context_blocks - s);
}

enum class prefetch_mode : std::uint8_t { none, next_step };

struct residency_config {
  /// Largest context in blocks (preallocation). Required, in [1, 2^32 - 2].
  std::uint32_t max_blocks = 0;
  /// HBM budget; default 0 blocks (then only protected blocks stay).
  hbm_budget budget{};
  /// Tokens per block, for token budgets. Default 64.
  std::uint32_t block_tokens = 64;
  /// Attention-sink blocks at the start of the context. Default 1.
  std::uint32_t sinks = 1;
  /// Most recent blocks always kept. Default 1 (the block being written).
  std::uint32_t recent_window = 1;
  /// Decay applied to selection counts and accumulated mass. Default none.
  decay_params decay{};
  /// offload_recall_manager only. Default none.
  prefetch_mode prefetch = prefetch_mode::none;
};

struct residency_counters {
  std::uint64_t steps = 0;
  std::uint64_t selections = 0;          ///< valid selected entries
  std::uint64_t invalid_selections = 0;  ///< entries >= context_blocks, ignored
  std::uint64_t hits = 0;                ///< selections of a resident block (incl. prefetch hits)
  std::uint64_t recalls = 0;             ///< offload: critical-path loads of selected blocks
  std::uint64_t prefetches_issued = 0;   ///< offload: loads off the critical path
  std::uint64_t prefetch_hits = 0;       ///< pending prefetched blocks the next step selected
  std::uint64_t wasted_prefetches = 0;   ///< pending prefetched blocks the next step did not select
  std::uint64_t prefetches_dropped = 0;  ///< listed for prefetch but no room could be made
  std::uint64_t evictions = 0;           ///< offload: moved to the lower tier; lossy: dropped
  std::uint64_t dropped_selections = 0;  ///< lossy: selections of dropped blocks
  std::uint64_t over_budget_steps = 0;   ///< steps that ended with resident > effective budget
  std::uint64_t budget_raised_steps = 0;  ///< steps whose budget was raised to the protected count
  std::uint32_t last_step_recalls = 0;    ///< recalls in the latest step
  std::uint32_t resident_blocks = 0;      ///< resident after the latest step
  std::uint32_t resident_max = 0;         ///< max resident after any step
  double total_mass = 0;                  ///< sum of weights of valid selections
  double dropped_mass = 0;                ///< lossy: sum of weights of selections of dropped blocks

  /// Adds another manager's counters (a total over requests): every count and mass adds,
  /// resident_max takes the larger, and the latest-step fields (last_step_recalls,
  /// resident_blocks) add too, as a sum over managers at their latest step.
  /// Complexity: O(1). Throws: nothing.
  residency_counters& operator+=(const residency_counters& o) noexcept {
    steps += o.steps;
    selections += o.selections;
    invalid_selections += o.invalid_selections;
    hits += o.hits;
    recalls += o.recalls;
    prefetches_issued += o.prefetches_issued;
    prefetch_hits += o.prefetch_hits;
    wasted_prefetches += o.wasted_prefetches;
    prefetches_dropped += o.prefetches_dropped;
    evictions += o.evictions;
    dropped_selections += o.dropped_selections;
    over_budget_steps += o.over_budget_steps;
    budget_raised_steps += o.budget_raised_steps;
    last_step_recalls += o.last_step_recalls;
    resident_blocks += o.resident_blocks;
    resident_max = resident_max > o.resident_max ? resident_max : o.resident_max;
    total_mass += o.total_mass;
    dropped_mass += o.dropped_mass;
    return *this;
  }
};

namespace detail {

/// What both managers share: the records, the resident set, the budget and victim selection.
/// Thread safety: as block_cache; a store given to set_query() must not change during a step.
template <class Scorer>
class residency_core {
 public:
  /// selection_lru gets an index-linked list in victim order instead of scoring scans.
  static constexpr bool uses_recency_list = std::is_same_v<Scorer, selection_lru>;

  /// Effects: appends block context_blocks() as a resident block; returns its index, or no_block
  /// if max_blocks are in use. Re-evaluates the budget. Complexity: O(1) (selection_lru: plus the
  /// selected blocks passed over to place a never-selected block).
  std::uint32_t append_block() noexcept {
    const std::uint32_t i = ctx_.context_blocks;
    if (i == max_blocks_) return no_block;
    stats_[i] = block_stats{};
    stats_[i].position = i;
    stats_[i].decay_step = counters_.steps;
    ++ctx_.context_blocks;
    add_resident(i);
    if constexpr (uses_recency_list) link_sorted(i, /*from_back=*/true);
    refresh_budget();
    return i;
  }

  [[nodiscard]] bool is_resident(std::uint32_t i) const noexcept {
    return i < ctx_.context_blocks && slot_[i] != no_block;
  }
  /// True for sinks and the recent window (by position or record flags).
  [[nodiscard]] bool is_protected(std::uint32_t i) const noexcept {
    return sparse::is_protected(stats_[i], ctx_);
  }
  /// The block's record; the engine may set window_score and the sink/recent flags.
  [[nodiscard]] const block_stats& block(std::uint32_t i) const noexcept { return stats_[i]; }
  [[nodiscard]] block_stats& block(std::uint32_t i) noexcept { return stats_[i]; }
  /// The scorer's current score of block i (ties: lower position is evicted first).
  [[nodiscard]] double score(std::uint32_t i) const noexcept {
    return scorer_.score(stats_[i], ctx_);
  }
  /// Quest: the query of the next victim choices and the key summaries (the store must outlive
  /// its use here).  Complexity: O(1).
  void set_query(std::span<const float> query, const key_summary_store* keys) noexcept {
    ctx_.query = query;
    ctx_.keys = keys;
  }

  [[nodiscard]] const residency_counters& counters() const noexcept { return counters_; }
  [[nodiscard]] const score_context& context() const noexcept { return ctx_; }
  [[nodiscard]] std::uint32_t context_blocks() const noexcept { return ctx_.context_blocks; }
  [[nodiscard]] std::uint32_t max_blocks() const noexcept { return max_blocks_; }
  [[nodiscard]] std::uint32_t requested_budget() const noexcept { return requested_budget_; }
  [[nodiscard]] std::uint32_t effective_budget() const noexcept { return effective_budget_; }
  [[nodiscard]] std::uint32_t resident_blocks() const noexcept {
    return static_cast<std::uint32_t>(resident_.size());
  }
  /// The resident block indices, in no particular order; valid until the next mutation.
  [[nodiscard]] std::span<const std::uint32_t> resident_set() const noexcept { return resident_; }

 protected:
  /// Throws: std::invalid_argument on a bad configuration, std::bad_alloc.
  residency_core(const residency_config& cfg, const typename Scorer::config& scorer_cfg)
      : scorer_(scorer_cfg),
        budget_(cfg.budget),
        block_tokens_(cfg.block_tokens),
        max_blocks_(cfg.max_blocks) {
    if (cfg.max_blocks == 0 || cfg.max_blocks >= no_block - 1 || cfg.block_tokens == 0) {
      throw std::invalid_argument("residency: max_blocks and block_tokens must be positive");
    }
    const bool fraction = cfg.budget.kind == hbm_budget::unit::context_fraction;
    if (!(cfg.budget.amount >= 0) || (fraction && cfg.budget.amount > 1.0)) {
      throw std::invalid_argument("residency: budget must be >= 0 (a fraction at most 1)");
    }
    if (!(cfg.decay.count_decay > 0 && cfg.decay.count_decay <= 1) ||
        !(cfg.decay.mass_decay > 0 && cfg.decay.mass_decay <= 1)) {
      throw std::invalid_argument("residency: decay factors must be in (0, 1]");
    }
    ctx_.sinks = cfg.sinks;
    ctx_.recent_window = cfg.recent_window;
    ctx_.decay = cfg.decay;
    stats_.resize(max_blocks_);
    slot_.assign(max_blocks_, no_block);
    resident_.reserve(max_blocks_);
    if constexpr (uses_recency_list) {
      prev_.assign(max_blocks_ + 1, no_block);
      next_.assign(max_blocks_ + 1, no_block);
      prev_[head()] = next_[head()] = head();
    } else {
      candidates_.reserve(max_blocks_);
    }
    refresh_budget();
  }

  /// Effects: opens step counters_.steps; returns its number.
  step_index begin_step() noexcept {
    ctx_.step = counters_.steps;
    counters_.last_step_recalls = 0;
    return ctx_.step;
  }
  /// Effects: closes the step: over-budget and raised-budget accounting, resident high-water mark.
  void end_step(bool budget_met) noexcept {
    if (!budget_met) ++counters_.over_budget_steps;
    if (requested_budget_ < effective_budget_) ++counters_.budget_raised_steps;
    counters_.resident_blocks = resident_blocks();
    counters_.resident_max = std::max(counters_.resident_max, counters_.resident_blocks);
    ++counters_.steps;
  }

  /// Effects: records a selection of resident block i at step t (selection_lru: i becomes the
  /// last victim).  Complexity: O(1).
  void record(std::uint32_t i, step_index t, double weight) noexcept {
    record_selection(stats_[i], t, weight, ++sequence_, ctx_.decay);
    if constexpr (uses_recency_list) {
      if (prev_[i] != no_block) unlink(i);
      link_before(i, head());
    }
  }

  /// Effects: adds i to the resident set (selection_lru: not linked; the caller places it).
  void add_resident(std::uint32_t i) noexcept {
    slot_[i] = static_cast<std::uint32_t>(resident_.size());
    resident_.push_back(i);  // within the reserved capacity: no allocation
  }
  void add_resident_in_order(std::uint32_t i) noexcept {
    add_resident(i);
    if constexpr (uses_recency_list) link_sorted(i, /*from_back=*/false);
  }

  /// Effects: evicts up to k blocks satisfying eligible, lowest (score, position) first; returns
  /// how many.  Complexity: selection_lru O(k + ineligible passed over); others O(resident).
  template <class Eligible>
  std::uint32_t evict_lowest(std::uint64_t k, Eligible&& eligible) noexcept {
    if (k == 0) return 0;
    std::uint32_t evicted = 0;
    if constexpr (uses_recency_list) {
      for (std::uint32_t i = next_[head()]; i != head() && evicted < k;) {
        const std::uint32_t after = next_[i];
        if (eligible(i)) {
          remove_resident(i);
          ++evicted;
        }
        i = after;
      }
    } else {
      candidates_.clear();
      for (const std::uint32_t i : resident_) {
        if (eligible(i)) candidates_.push_back({scorer_.score(stats_[i], ctx_), i});
      }
      const auto lower = [](const candidate& a, const candidate& b) {
        return a.score < b.score || (a.score == b.score && a.block < b.block);
      };
      const std::size_t n = std::min<std::uint64_t>(k, candidates_.size());
      if (n < candidates_.size()) {
        std::nth_element(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(n),
                         candidates_.end(), lower);
      }
      for (std::size_t j = 0; j < n; ++j) remove_resident(candidates_[j].block);
      evicted = static_cast<std::uint32_t>(n);
    }
    counters_.evictions += evicted;
    return evicted;
  }

  /// Effects: evicts eligible blocks until resident <= budget; returns whether it got there.
  template <class Eligible>
  bool restore_budget(Eligible&& eligible) noexcept {
    const std::uint32_t resident = resident_blocks();
    if (resident <= effective_budget_) return true;
    const std::uint32_t need = resident - effective_budget_;
    return evict_lowest(need, eligible) == need;
  }

  [[nodiscard]] bool valid(std::uint32_t i) const noexcept { return i < ctx_.context_blocks; }
  [[nodiscard]] static double weight_at(std::span<const float> w, std::size_t j) noexcept {
    return j < w.size() ? static_cast<double>(w[j]) : 1.0;
  }

  Scorer scorer_;
  score_context ctx_{};
  residency_counters counters_{};
  std::vector<block_stats> stats_;

 private:
  struct candidate {
    double score;
    std::uint32_t block;
  };

  void refresh_budget() noexcept {
    requested_budget_ = budget_blocks(budget_, ctx_.context_blocks, block_tokens_);
    effective_budget_ = std::max(
        requested_budget_, protected_count(ctx_.context_blocks, ctx_.sinks, ctx_.recent_window));
  }

  void remove_resident(std::uint32_t i) noexcept {
    const std::uint32_t s = slot_[i];
    const std::uint32_t last = resident_.back();
    resident_[s] = last;
    slot_[last] = s;
    resident_.pop_back();
    slot_[i] = no_block;
    if constexpr (uses_recency_list) unlink(i);
  }

  // Recency list (selection_lru): circular, sentinel head() = max_blocks_; front = first victim.
  // Order = ascending (selection_sequence, position), the scorer's victim order.
  [[nodiscard]] std::uint32_t head() const noexcept { return max_blocks_; }
  [[nodiscard]] bool key_less(std::uint32_t a, std::uint32_t b) const noexcept {
    const std::uint64_t sa = stats_[a].selection_sequence, sb = stats_[b].selection_sequence;
    return sa < sb || (sa == sb && a < b);
  }
  void link_before(std::uint32_t i, std::uint32_t at) noexcept {
    prev_[i] = prev_[at];
    next_[i] = at;
    next_[prev_[at]] = i;
    prev_[at] = i;
  }
  void unlink(std::uint32_t i) noexcept {
    next_[prev_[i]] = next_[i];
    prev_[next_[i]] = prev_[i];
    prev_[i] = next_[i] = no_block;
  }
  /// Links i at its key position, searching from the back (a new block: only selected blocks
  /// follow it) or from the front (a prefetched block: it was evicted, so it is old).
  void link_sorted(std::uint32_t i, bool from_back) noexcept {
    std::uint32_t at = head();
    if (from_back) {
      while (prev_[at] != head() && key_less(i, prev_[at])) at = prev_[at];
    } else {
      at = next_[head()];
      while (at != head() && key_less(at, i)) at = next_[at];
    }
    link_before(i, at);
  }

  hbm_budget budget_;
  std::uint32_t block_tokens_;
  std::uint32_t max_blocks_;
  std::uint32_t requested_budget_ = 0;
  std::uint32_t effective_budget_ = 0;
  std::uint64_t sequence_ = 0;
  std::vector<std::uint32_t> slot_;      // block -> index in resident_, or no_block
  std::vector<std::uint32_t> resident_;  // dense resident set
  std::vector<std::uint32_t> prev_, next_;
  std::vector<candidate> candidates_;
};

}  // namespace detail

}  // namespace kvtk::sparse
