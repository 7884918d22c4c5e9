// kvtk/sparse/pattern_gen.hpp — deterministic synthetic sparse-attention selection patterns.
//
// Model of one request's decode: a context of n blocks; every step selects
//   the sinks (blocks 0..sinks-1) + the recent window (the last recent_window blocks), always,
//   + a heavy-hitter set of h = min(heavy_blocks, m) blocks from the m "older" blocks between them.
// Older blocks carry a fixed random importance order (a permutation); heavy hitters are drawn
// Zipf-like over that order: rank r (0-based) with probability proportional to (r+1)^-exponent.
// From step to step:
//   1. growth (grow = true): before every step t > 0 with t % block_tokens == 0 the context gains a
//      block (one token per decode step); the block leaving the recent window joins the older
//      blocks at a uniformly random rank (inside-out Fisher-Yates, so the order stays uniform);
//   2. persistence: round(persistence * h) heavy hitters, a uniform random subset, survive;
//   3. drift: each survivor, independently with probability drift, is replaced by a uniformly
//      random older block outside the set (a fresh block: possibly unimportant so far, or one a
//      residency manager evicted long ago);
//   4. the set is refilled to h by Zipf draws (rejecting members; after 32 rejections a uniform
//      non-member).
// Step 0 draws the whole set by Zipf. persistence 1 and drift 0 therefore give an identical heavy
// set every step (the context may grow around it). A step emits its blocks sorted by position
// with one weight each: 1 (weight_mode::unit), or the block's token count in a top-k token
// selection (weight_mode::token_count: block_tokens for sink and recent blocks, uniform in
// [1, block_tokens] per heavy block and step).
//
// Determinism: the only randomness is xoshiro256** seeded by splitmix64 from `seed`, and the only
// floating point is IEEE double arithmetic and std::pow, so one seed gives one pattern on every
// standard library (std::*_distribution is deliberately not used: its output is not specified).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "kvtk/detail/mix.hpp"
#include "kvtk/sparse/block_stats.hpp"

namespace kvtk::sparse {

/// splitmix64 (Steele, Lea & Flood 2014): a 64-bit seed expander (kvtk/detail/mix.hpp).
using splitmix64 = kvtk::detail::splitmix64;

/// xoshiro256** (Blackman & Vigna 2018), seeded through splitmix64.
class xoshiro256ss {
 public:
  explicit constexpr xoshiro256ss(std::uint64_t seed) noexcept {
    splitmix64 sm{seed};
    for (std::uint64_t& w : s_) w = sm.next();
  }
  constexpr std::uint64_t next() noexcept {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// Uniform in [0, n) for 0 < n < 2^32 (multiply-shift; bias < n / 2^32).
  std::uint32_t below(std::uint32_t n) noexcept {
    return static_cast<std::uint32_t>(((next() >> 32) * n) >> 32);
  }

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) noexcept {
    return (x << k) | (x >> (64 - k));
  }
  std::uint64_t s_[4] = {};
};

enum class weight_mode : std::uint8_t { unit, token_count };

struct pattern_config {
  /// Context length in blocks at step 0. > 0. Default 2048.
  std::uint32_t context_blocks = 2048;
  /// Tokens per block; with grow, decode steps per new block. > 0. Default 64.
  std::uint32_t block_tokens = 64;
  /// Whether the context grows by one block every block_tokens steps. Default false.
  bool grow = false;
  /// Sink blocks, always selected. Default 1.
  std::uint32_t sinks = 1;
  /// Recent blocks, always selected. Default 2.
  std::uint32_t recent_window = 2;
  /// Heavy hitters per step (capped by the older blocks available). Default 29.
  std::uint32_t heavy_blocks = 29;
  /// Zipf exponent over the importance order; 0 = uniform. >= 0. Default 1.
  double zipf_exponent = 1.0;
  /// Fraction of the heavy set kept from the previous step, in [0, 1]. Default 1.
  double persistence = 1.0;
  /// Per-step probability that a kept heavy hitter is replaced by a fresh block, in [0, 1].
  /// Default 0.
  double drift = 0.0;
  /// Weight of each selected block. Default unit.
  weight_mode weights = weight_mode::unit;
  std::uint64_t seed = 1;

  /// DeepSeek V3.2 DSA: top-2048 tokens in 64-token pages, so at most 32 pages per step
  /// (1 sink + 2 recent + 29 heavy); weight = the page's tokens in the top-k. The persistence 0.9
  /// and drift 0.02 are illustrative, not measured.
  static pattern_config dsa(std::uint32_t context_blocks, std::uint64_t seed = 1) {
    pattern_config c;
    c.context_blocks = context_blocks;
    c.persistence = 0.9;
    c.drift = 0.02;
    c.weights = weight_mode::token_count;
    c.seed = seed;
    return c;
  }
  /// Quest: top-K pages of 16 tokens (1 sink + 1 recent + K-2 heavy), weight 1; K >= 2.
  static pattern_config quest(std::uint32_t context_blocks, std::uint32_t top_k,
                              std::uint64_t seed = 1) {
    pattern_config c;
    c.context_blocks = context_blocks;
    c.block_tokens = 16;
    c.recent_window = 1;
    c.heavy_blocks = top_k > 2 ? top_k - 2 : 0;
    c.persistence = 0.9;
    c.drift = 0.02;
    c.seed = seed;
    return c;
  }
};

/// One step's selection; the spans stay valid until the generator's next call.
struct step_selection {
  std::span<const std::uint32_t> blocks;  ///< sorted by position, distinct
  std::span<const float> weights;         ///< parallel to blocks
  std::uint32_t context_blocks = 0;       ///< context length at this step
};

/// Thread safety: as block_cache: next() advances the state (one generator per thread).
class pattern_generator {
 public:
  /// Throws: std::invalid_argument on a parameter outside its documented range, std::bad_alloc.
  explicit pattern_generator(const pattern_config& cfg)
      : cfg_(cfg), rng_(cfg.seed), context_(cfg.context_blocks) {
    if (cfg.context_blocks == 0 || cfg.block_tokens == 0 || !(cfg.zipf_exponent >= 0) ||
        !(cfg.persistence >= 0 && cfg.persistence <= 1) || !(cfg.drift >= 0 && cfg.drift <= 1)) {
      throw std::invalid_argument("pattern_generator: parameter out of range");
    }
    member_.assign(context_, 0);
    extend_older();
  }

  /// Effects: advances one decode step (growth, persistence, drift, refill) and returns its
  /// selection.  Complexity: O(h log h + sinks + recent) expected.  Throws: std::bad_alloc
  /// (growth).
  step_selection next() {
    if (cfg_.grow && step_ > 0 && step_ % cfg_.block_tokens == 0) {
      ++context_;
      member_.push_back(0);
      extend_older();
    }
    const std::uint32_t h = std::min<std::uint32_t>(cfg_.heavy_blocks, older_count());
    if (step_ > 0) {
      const auto keep = static_cast<std::size_t>(std::llround(cfg_.persistence * heavy_.size()));
      for (std::size_t i = 0; keep < heavy_.size() && i < keep; ++i) {  // partial shuffle
        std::swap(heavy_[i], heavy_[i + rng_.below(static_cast<std::uint32_t>(heavy_.size() - i))]);
      }
      while (heavy_.size() > keep) {
        member_[heavy_.back()] = 0;
        heavy_.pop_back();
      }
      for (std::uint32_t& b : heavy_) {
        if (cfg_.drift > 0 && rng_.uniform() < cfg_.drift) {
          member_[b] = 0;
          b = uniform_non_member();
          member_[b] = 1;
        }
      }
    }
    while (heavy_.size() < h) {
      std::uint32_t b = zipf_draw();
      for (int tries = 0; member_[b] && tries < 32; ++tries) b = zipf_draw();
      if (member_[b]) b = uniform_non_member();
      member_[b] = 1;
      heavy_.push_back(b);
    }
    emit();
    ++step_;
    return {blocks_, weights_, context_};
  }

  [[nodiscard]] std::uint32_t context_blocks() const noexcept { return context_; }
  /// Steps generated so far.
  [[nodiscard]] step_index steps() const noexcept { return step_; }
  [[nodiscard]] const pattern_config& config() const noexcept { return cfg_; }

 private:
  [[nodiscard]] std::uint32_t sinks() const noexcept { return std::min(cfg_.sinks, context_); }
  [[nodiscard]] std::uint32_t older_count() const noexcept {
    const std::uint64_t guarded = std::uint64_t{cfg_.sinks} + cfg_.recent_window;
    return context_ > guarded ? static_cast<std::uint32_t>(context_ - guarded) : 0;
  }

  // Adds the blocks that joined the older range [sinks, sinks + m) to the importance order.
  void extend_older() {
    while (order_.size() < older_count()) {
      const auto block = static_cast<std::uint32_t>(cfg_.sinks + order_.size());
      const std::uint32_t j = rng_.below(static_cast<std::uint32_t>(order_.size() + 1));
      order_.push_back(block);
      std::swap(order_[j], order_.back());
      const double w = std::pow(static_cast<double>(cdf_.size() + 1), -cfg_.zipf_exponent);
      cdf_.push_back((cdf_.empty() ? 0.0 : cdf_.back()) + w);
    }
  }
  std::uint32_t zipf_draw() noexcept {
    const double u = rng_.uniform() * cdf_.back();
    const auto rank =
        static_cast<std::size_t>(std::upper_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
    return order_[std::min(rank, order_.size() - 1)];
  }
  // Requires: some older block is not a member.
  std::uint32_t uniform_non_member() noexcept {
    const std::uint32_t m = older_count();
    for (int tries = 0; tries < 64; ++tries) {
      const std::uint32_t b = cfg_.sinks + rng_.below(m);
      if (!member_[b]) return b;
    }
    const std::uint32_t start = rng_.below(m);
    for (std::uint32_t k = 0;; ++k) {
      const std::uint32_t b = cfg_.sinks + (start + k) % m;
      if (!member_[b]) return b;
    }
  }
  void emit() {
    blocks_.clear();
    weights_.clear();
    const auto full = static_cast<float>(cfg_.block_tokens);
    const auto add = [&](std::uint32_t b, float w) {
      blocks_.push_back(b);
      weights_.push_back(cfg_.weights == weight_mode::unit ? 1.0f : w);
    };
    for (std::uint32_t b = 0; b < sinks(); ++b) add(b, full);
    const std::size_t first_heavy = blocks_.size();
    for (const std::uint32_t b : heavy_) blocks_.push_back(b);
    std::sort(blocks_.begin() + static_cast<std::ptrdiff_t>(first_heavy), blocks_.end());
    for (std::size_t k = first_heavy; k < blocks_.size(); ++k) {
      weights_.push_back(cfg_.weights == weight_mode::unit
                             ? 1.0f
                             : static_cast<float>(1 + rng_.below(cfg_.block_tokens)));
    }
    const std::uint32_t recent_start =
        std::max(sinks(), context_ > cfg_.recent_window ? context_ - cfg_.recent_window : 0u);
    for (std::uint32_t b = recent_start; b < context_; ++b) add(b, full);
  }

  pattern_config cfg_;
  xoshiro256ss rng_;
  std::uint32_t context_;
  step_index step_ = 0;
  std::vector<std::uint32_t> order_;   // importance order of the older blocks (rank -> block)
  std::vector<double> cdf_;            // cdf_[r] = sum_{k<=r} (k+1)^-exponent
  std::vector<std::uint8_t> member_;   // block -> in heavy_
  std::vector<std::uint32_t> heavy_;   // current heavy hitters
  std::vector<std::uint32_t> blocks_;  // emitted selection
  std::vector<float> weights_;
};

/// A whole pattern kept in memory (for benchmarks and repeated replays).
struct pattern_trace {
  std::vector<std::uint32_t> offsets{0};  ///< step s = entries [offsets[s], offsets[s+1])
  std::vector<std::uint32_t> blocks;
  std::vector<float> weights;
  std::vector<std::uint32_t> context;  ///< context length at step s

  [[nodiscard]] std::size_t steps() const noexcept { return context.size(); }
  /// Requires: s < steps().
  [[nodiscard]] step_selection step(std::size_t s) const noexcept {
    const std::size_t a = offsets[s], n = offsets[s + 1] - a;
    return {std::span(blocks).subspan(a, n), std::span(weights).subspan(a, n), context[s]};
  }
  /// Largest context over the trace (the max_blocks a manager needs).
  [[nodiscard]] std::uint32_t max_context() const noexcept {
    return context.empty() ? 0 : *std::max_element(context.begin(), context.end());
  }
};

/// Generates `steps` steps of cfg's pattern.  Throws: std::invalid_argument, std::bad_alloc.
[[nodiscard]] inline pattern_trace generate_pattern(const pattern_config& cfg, std::size_t steps) {
  pattern_generator gen(cfg);
  pattern_trace t;
  t.context.reserve(steps);
  t.offsets.reserve(steps + 1);
  for (std::size_t s = 0; s < steps; ++s) {
    const step_selection sel = gen.next();
    t.blocks.insert(t.blocks.end(), sel.blocks.begin(), sel.blocks.end());
    t.weights.insert(t.weights.end(), sel.weights.begin(), sel.weights.end());
    t.offsets.push_back(static_cast<std::uint32_t>(t.blocks.size()));
    t.context.push_back(sel.context_blocks);
  }
  return t;
}

}  // namespace kvtk::sparse
