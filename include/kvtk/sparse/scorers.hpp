// kvtk/sparse/scorers.hpp — block scorers: which KV blocks a sparse-attention method keeps longest.
//
// A scorer is a stateless family type:
//
//   struct h2o {
//     static constexpr std::string_view name = "h2o";  // registry / CLI name
//     struct config { ... };                          // every field documents unit and default
//     explicit h2o(const config&);
//     double score(const block_stats&, const score_context&) const noexcept;  // higher = keep
//   };
//
// Conventions every scorer follows, so managers can rely on them:
// * Protected blocks (attention sinks, the recent window; see is_protected) score +infinity and are
//   therefore never a victim. Managers also skip them before scoring, so the check is a guard.
// * Scores are never NaN (managers order candidates with <). Ties are broken by the managers:
//   lower position goes first.
// * Scores are read at ctx.step, after that step's selections were recorded.
//
// The scorers: streaming_llm (age), h2o (accumulated mass), tova (last-step mass), snapkv
// (prefill observation window), infllm_lru_s (decayed selection count), selection_lru (selection
// recency), quest (upper bound of q.k from per-block key min/max).
/// Thread safety: scorers are stateless (score() is const and pure); all_scorers is compile-time.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string_view>
#include <tuple>
#include <vector>

#include "kvtk/names.hpp"
#include "kvtk/sparse/block_stats.hpp"

namespace kvtk::sparse {

/// Everything a scorer may read besides the block's own record.
struct score_context {
  /// The step being scored (the latest step recorded).
  step_index step = 0;
  /// Current context length in blocks.
  std::uint32_t context_blocks = 0;
  /// Blocks 0..sinks-1 are attention sinks (protected).
  std::uint32_t sinks = 0;
  /// The last recent_window blocks are protected.
  std::uint32_t recent_window = 0;
  /// Decay used when the records were written (read decayed fields with the same factors).
  decay_params decay{};
  /// Quest: the current query (keys->dims() floats) and the key summaries; empty / null = unset.
  std::span<const float> query{};
  const key_summary_store* keys = nullptr;
};

inline constexpr double keep_forever = std::numeric_limits<double>::infinity();

/// True for sinks and the recent window (by position or by the record's flags).
[[nodiscard]] inline bool is_protected(const block_stats& b, const score_context& c) noexcept {
  // Positions are < context_blocks, so a window of 0 protects nothing.
  return b.sink || b.recent || b.position < c.sinks ||
         std::uint64_t{b.position} + c.recent_window >= c.context_blocks;
}

template <class S>
concept block_scorer = requires(const S s, const block_stats& b, const score_context& c) {
  { S::name } -> std::convertible_to<std::string_view>;
  typename S::config;
  { s.score(b, c) }
  noexcept->std::same_as<double>;
}
&&std::constructible_from<S, const typename S::config&>;

/// StreamingLLM (Xiao et al. 2023): keep sinks and a recent window, drop the oldest of the rest.
struct streaming_llm {
  static constexpr std::string_view name = "streaming-llm";
  /// No parameters: sinks and window come from score_context.
  struct config {};
  explicit streaming_llm(const config& = {}) noexcept {}
  /// Score = position (older = lower); +inf when protected.
  [[nodiscard]] double score(const block_stats& b, const score_context& c) const noexcept {
    return is_protected(b, c) ? keep_forever : static_cast<double>(b.position);
  }
};

/// H2O (Zhang et al. 2023): heavy hitters by accumulated attention mass.
struct h2o {
  static constexpr std::string_view name = "h2o";
  /// No parameters; forgetting is score_context::decay.mass_decay.
  struct config {};
  explicit h2o(const config& = {}) noexcept {}
  /// Score = accumulated mass decayed to ctx.step; +inf when protected.
  [[nodiscard]] double score(const block_stats& b, const score_context& c) const noexcept {
    return is_protected(b, c) ? keep_forever : accumulated_mass_at(b, c.step, c.decay);
  }
};

/// TOVA (Oren et al. 2024): keep the blocks the latest step attended to most.
struct tova {
  static constexpr std::string_view name = "tova";
  struct config {};
  explicit tova(const config& = {}) noexcept {}
  /// Score = mass received in step ctx.step (0 if not selected then); +inf when protected.
  [[nodiscard]] double score(const block_stats& b, const score_context& c) const noexcept {
    return is_protected(b, c) ? keep_forever : last_step_mass_at(b, c.step);
  }
};

/// SnapKV (Li et al. 2024): rank prefill blocks by the observation window's pooled attention.
struct snapkv {
  static constexpr std::string_view name = "snapkv";
  struct config {
    /// Blocks the observation window scored (the prefill, in blocks). Blocks at or past it were
    /// written during decode; SnapKV never compresses those, so they score +inf. Default 0 = every
    /// block is ranked by its window_score.
    std::uint32_t prefill_blocks = 0;
  };
  config cfg;
  snapkv() noexcept = default;
  explicit snapkv(const config& c) noexcept : cfg(c) {}
  /// Score = window_score; +inf when protected or decode-written.
  [[nodiscard]] double score(const block_stats& b, const score_context& c) const noexcept {
    if (is_protected(b, c) || (cfg.prefill_blocks != 0 && b.position >= cfg.prefill_blocks)) {
      return keep_forever;
    }
    return b.window_score;
  }
};

/// PyramidKV (Cai et al. 2024): lower layers get larger KV budgets than upper ones.
/// Returns per-group budgets for `groups` layer groups (group 0 = lowest layers): weights
/// groups, groups-1, ..., 1 (linearly decreasing, top group gets 1/groups of the bottom's share);
/// budget_g = floor(total * w_g / sum w), and the remainder (< groups) adds one block to each of
/// the lowest groups in order. The result sums exactly to total and never increases with g.
/// Requires: 0 < groups <= 65536.  Throws: std::invalid_argument, std::bad_alloc.
[[nodiscard]] inline std::vector<std::uint32_t> pyramid_budgets(std::uint32_t total,
                                                                std::uint32_t groups) {
  if (groups == 0 || groups > 65536) {
    throw std::invalid_argument("pyramid_budgets: groups must be in [1, 65536]");
  }
  const std::uint64_t weight_sum = std::uint64_t{groups} * (groups + 1) / 2;
  std::vector<std::uint32_t> out(groups);
  std::uint64_t assigned = 0;
  for (std::uint32_t g = 0; g < groups; ++g) {
    out[g] = static_cast<std::uint32_t>(std::uint64_t{total} * (groups - g) / weight_sum);
    assigned += out[g];
  }
  for (std::uint32_t g = 0; assigned < total; ++g, ++assigned) ++out[g];
  return out;
}

/// InfLLM (Xiao et al. 2024) LRU-S: score(t) = score(t-1) * decay + [selected at t].
struct infllm_lru_s {
  static constexpr std::string_view name = "infllm-lru-s";
  /// No parameters; the decay factor is score_context::decay.count_decay.
  struct config {};
  explicit infllm_lru_s(const config& = {}) noexcept {}
  [[nodiscard]] double score(const block_stats& b, const score_context& c) const noexcept {
    return is_protected(b, c) ? keep_forever : selection_count_at(b, c.step, c.decay);
  }
};

/// LRU over selection recency: the block whose latest selection is oldest goes first; blocks
/// selected in the same step go in selection order (selection_sequence). Never selected = -1,
/// i.e. before every selected block (ties among them: lower position first).
struct selection_lru {
  static constexpr std::string_view name = "selection-lru";
  struct config {};
  explicit selection_lru(const config& = {}) noexcept {}
  [[nodiscard]] double score(const block_stats& b, const score_context& c) const noexcept {
    if (is_protected(b, c)) return keep_forever;
    return b.selection_sequence == 0 ? -1.0 : static_cast<double>(b.selection_sequence);
  }
};

/// Quest (Tang et al. 2024): an upper bound of q.k over any key k with min <= k <= max per
/// dimension: sum_d max(q_d * max_d, q_d * min_d).  Complexity: O(dims).
[[nodiscard]] inline double quest_bound(const float* query, const float* key_min,
                                        const float* key_max, std::size_t dims) noexcept {
  double bound = 0.0;
  for (std::size_t d = 0; d < dims; ++d) {
    const double hi = static_cast<double>(query[d]) * key_max[d];
    const double lo = static_cast<double>(query[d]) * key_min[d];
    bound += hi > lo ? hi : lo;
  }
  return bound;
}

/// Quest as a keep score: the bound for the context's query; 0 when no query or store is set.
struct quest {
  static constexpr std::string_view name = "quest";
  struct config {};
  explicit quest(const config& = {}) noexcept {}
  [[nodiscard]] double score(const block_stats& b, const score_context& c) const noexcept {
    if (is_protected(b, c)) return keep_forever;
    if (c.keys == nullptr || c.query.size() < c.keys->dims() ||
        b.position >= c.keys->max_blocks()) {
      return 0.0;
    }
    return quest_bound(c.query.data(), c.keys->min(b.position).data(),
                       c.keys->max(b.position).data(), c.keys->dims());
  }
};

/// A compile-time list of scorers (the registry, tests and benchmarks expand it).
template <class... Ss>
struct scorer_list {
  static constexpr std::size_t size = sizeof...(Ss);
  static constexpr std::array<std::string_view, sizeof...(Ss)> names = {Ss::name...};
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  using tuple = std::tuple<Ss...>;

  /// Calls f.template operator()<S>() for every S, in order.
  template <class F>
  static constexpr void for_each(F&& f) {
    (f.template operator()<Ss>(), ...);
  }
  /// Index of the scorer called `name`, or npos.  Complexity: O(size).
  [[nodiscard]] static constexpr std::size_t index_of(std::string_view name) noexcept {
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) return i;
    }
    return npos;
  }
  /// Throws: unknown_name (kind "scorer") when no scorer is called `name`.
  static void require(std::string_view name) {
    if (index_of(name) == npos) throw unknown_name("scorer", std::string(name), name_list(names));
  }
  /// Calls f.template operator()<S>() for the scorer called `name`; false if there is none.
  template <class F>
  static constexpr bool visit(std::string_view name, F&& f) {
    bool found = false;
    ((!found && Ss::name == name ? (f.template operator()<Ss>(), found = true) : false), ...);
    return found;
  }
};

/// Every scorer, in registry order.
using all_scorers =
    scorer_list<selection_lru, streaming_llm, h2o, tova, snapkv, infllm_lru_s, quest>;

static_assert(block_scorer<selection_lru> && block_scorer<streaming_llm> && block_scorer<h2o> &&
              block_scorer<tova> && block_scorer<snapkv> && block_scorer<infllm_lru_s> &&
              block_scorer<quest>);
static_assert(all_scorers::index_of("h2o") == 2 &&
              all_scorers::index_of("nope") == all_scorers::npos);

}  // namespace kvtk::sparse
