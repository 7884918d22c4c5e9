// kvtk/prefix/mrc.hpp — miss-ratio curves of prefix caches.
//
// Exact curve for prefix LRU (flat LRU index) in one pass. For each cacheable block reference take
// its LRU stack depth (1 = most recent) *before* the request updates anything, and keep the running
// maximum along the request: the block is a prefix hit at capacity C iff that maximum is <= C
// (LRU's inclusion property makes "resident at C" equal "depth <= C", and a prefix hit needs every
// earlier block of the request resident too). Depths come from a Fenwick tree over reference times
// holding a 1 at each key's latest reference: O(log n) per reference, and the whole curve — every
// capacity — in one pass.
//
// Sampled curve (SHARDS-style, Waldspurger et al., FAST'15): keep a block key iff its hash falls
// under the rate, measure the depths of kept keys among kept keys only, and read capacity C at
// C * rate; two half-samples give an error estimate (see sampled_prefix_lru_mrc).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "kvtk/detail/frequency_sketch.hpp"
#include "kvtk/detail/key_table.hpp"
#include "kvtk/prefix/replay.hpp"

namespace kvtk::prefix {

/// A prefix-LRU miss-ratio curve: hits at every capacity.
/// Thread safety: a value; the curve functions below keep local state and only read the trace.
class prefix_mrc {
 public:
  prefix_mrc() = default;
  /// cum_blocks[c] / cum_tokens[c] = block / token hits at capacity c (non-decreasing).
  prefix_mrc(std::vector<std::uint64_t> cum_blocks, std::vector<std::uint64_t> cum_tokens)
      : cum_blocks_(std::move(cum_blocks)), cum_tokens_(std::move(cum_tokens)) {}

  /// Block hits at a capacity of c blocks.  Complexity: O(1).
  [[nodiscard]] std::uint64_t block_hits(std::uint64_t c) const noexcept {
    return cum_blocks_.empty() ? 0
                               : cum_blocks_[std::min<std::uint64_t>(c, cum_blocks_.size() - 1)];
  }
  [[nodiscard]] std::uint64_t token_hits(std::uint64_t c) const noexcept {
    return cum_tokens_.empty() ? 0
                               : cum_tokens_[std::min<std::uint64_t>(c, cum_tokens_.size() - 1)];
  }
  [[nodiscard]] double block_hit_ratio(std::uint64_t c) const noexcept {
    return block_refs ? static_cast<double>(block_hits(c)) / static_cast<double>(block_refs) : 0;
  }
  [[nodiscard]] double token_hit_ratio(std::uint64_t c) const noexcept {
    return token_refs ? static_cast<double>(token_hits(c)) / static_cast<double>(token_refs) : 0;
  }
  /// The capacity beyond which nothing more hits (the largest finite depth).
  [[nodiscard]] std::uint64_t saturation() const noexcept {
    return cum_blocks_.empty() ? 0 : cum_blocks_.size() - 1;
  }

  std::uint64_t requests = 0, block_refs = 0, token_refs = 0;

 private:
  std::vector<std::uint64_t> cum_blocks_, cum_tokens_;  // index = capacity
};

namespace detail_mrc {
// Fenwick tree oriented for suffix sums: add(i) walks *down* from i and suffix(i) walks *up* from i
// and may stop past the newest time written, because nothing above it was ever touched. Updates
// happen at the newest time, so both walks stay in recently used memory instead of striding
// through the cold upper part of an 11.5 M-entry array (measured in bench/RESULTS.md).
class fenwick {
 public:
  explicit fenwick(std::size_t n) : t_(n + 1, 0) {}
  void add(std::size_t i, std::int32_t d) noexcept {  // 1-based
    for (; i > 0; i -= i & (~i + 1)) t_[i] += d;
  }
  /// Sum of positions [i, limit] (positions above limit must be zero).
  [[nodiscard]] std::int64_t suffix(std::size_t i, std::size_t limit) const noexcept {
    std::int64_t s = 0;
    for (; i <= limit; i += i & (~i + 1)) s += t_[i];
    return s;
  }

 private:
  std::vector<std::int32_t> t_;
};
}  // namespace detail_mrc

namespace detail_mrc {
/// The prefix-LRU depth histogram of the block references whose key passes keep(key); the
/// others are invisible (neither measured nor moved to the top). With every key kept this is the
/// exact curve and token_refs counts every input token; otherwise token_refs counts the tokens of
/// the kept blocks (the sampled curve's denominator).
template <class Trace, class Keep>
prefix_mrc lru_depths(const Trace& t, partial_block p, Keep&& keep, bool all_kept) {
  std::uint64_t refs = 0;
  for (std::size_t r = 0; r < t.requests(); ++r) {
    if (all_kept) {
      refs += t.cacheable(r, p).size();
    } else {
      for (block_key k : t.cacheable(r, p)) refs += keep(k) ? 1 : 0;
    }
  }
  std::uint64_t requests = 0, block_refs = 0, token_refs = 0;
  // Distinct keys get dense ids; seen[id] = {key, time (1-based) of its latest reference}.
  struct record {
    block_key key;
    std::uint64_t last;
  };
  std::vector<record> seen;
  seen.reserve(refs);
  struct by_id {
    const std::vector<record>* seen;
    std::uint64_t operator()(std::uint32_t i) const noexcept { return (*seen)[i].key; }
  };
  if (refs >= (1ull << 31)) throw std::invalid_argument("exact_prefix_lru_mrc: trace too long");
  detail::key_table<by_id> ids(static_cast<std::uint32_t>(std::max<std::uint64_t>(refs, 1)),
                               by_id{&seen}, 2);
  detail_mrc::fenwick marks(refs);
  std::vector<std::uint64_t> hist_blocks(1, 0), hist_tokens(1, 0);  // index = running-max depth
  std::vector<std::uint64_t> depth;
  std::uint64_t now = 0;
  constexpr std::uint64_t infinite = ~std::uint64_t{0};
  for (std::size_t r = 0; r < t.requests(); ++r) {
    const auto blocks = t.cacheable(r, p);
    const std::uint64_t L = t.input_tokens(r);
    const std::uint64_t bt = t.block_tokens_of(r);
    ++requests;
    if (all_kept) {
      block_refs += blocks.size();
      token_refs += L;
    }
    // Depths before the request updates anything.
    for (block_key k : blocks) ids.prefetch(k);
    depth.assign(blocks.size(), infinite);
    std::uint64_t run = 0;
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      if (!all_kept && !keep(blocks[i])) {
        depth[i] = run;  // not measured: the request's running maximum so far
        continue;
      }
      if (!all_kept) {
        ++block_refs;
        token_refs += tokens_in_block(L, bt, i);
      }
      const std::uint32_t id = ids.find(blocks[i]);
      std::uint64_t d = infinite;
      if (id != ids.npos) d = static_cast<std::uint64_t>(marks.suffix(seen[id].last, now));
      run = (run == infinite || d == infinite) ? infinite : std::max(run, d);
      depth[i] = run;
    }
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      if (depth[i] == infinite) break;
      if (!all_kept && !keep(blocks[i])) continue;
      if (depth[i] >= hist_blocks.size()) {
        hist_blocks.resize(depth[i] + 1, 0);
        hist_tokens.resize(depth[i] + 1, 0);
      }
      ++hist_blocks[depth[i]];
      hist_tokens[depth[i]] += tokens_in_block(L, bt, i);
    }
    // Then the LRU updates, forward.
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      if (!all_kept && !keep(blocks[i])) continue;
      ++now;
      std::uint32_t id = ids.find(blocks[i]);
      if (id == ids.npos) {
        id = static_cast<std::uint32_t>(seen.size());
        seen.push_back({blocks[i], 0});
        ids.insert(blocks[i], id);
      } else {
        marks.add(seen[id].last, -1);
      }
      seen[id].last = now;
      marks.add(now, 1);
    }
  }
  for (std::size_t d = 1; d < hist_blocks.size(); ++d) {
    hist_blocks[d] += hist_blocks[d - 1];
    hist_tokens[d] += hist_tokens[d - 1];
  }
  prefix_mrc out(std::move(hist_blocks), std::move(hist_tokens));
  out.requests = requests;
  out.block_refs = block_refs;
  out.token_refs = token_refs;
  return out;
}
}  // namespace detail_mrc

/// Exact prefix-LRU curve of trace t.
/// Complexity: O(refs · log refs) time, O(refs) memory.  Throws: std::bad_alloc.
template <class Trace = prefix_trace>
prefix_mrc exact_prefix_lru_mrc(const Trace& t, partial_block p = partial_block::skip) {
  return detail_mrc::lru_depths(t, p, [](block_key) { return true; }, true);
}

/// A sampled prefix-LRU curve and its scale.
struct sampled_prefix_mrc {
  prefix_mrc sample;         ///< depths in sample units; refs = the sampled block references
  double rate = 1.0;         ///< the share of block keys kept
  double token_scale = 1.0;  ///< the trace's cacheable tokens / its input tokens
  prefix_mrc halves[2];      ///< the two half-samples (one more hash bit), when asked for
  bool has_halves = false;

  /// Estimated block hit ratio of the full trace at capacity c.  Complexity: O(1).
  [[nodiscard]] double block_hit_ratio(std::uint64_t c) const noexcept {
    return sample.block_hit_ratio(scaled(c, rate));
  }
  /// Estimated token hit ratio (hit tokens / input tokens) at capacity c.
  [[nodiscard]] double token_hit_ratio(std::uint64_t c) const noexcept {
    return sample.token_hit_ratio(scaled(c, rate)) * token_scale;
  }
  /// The sampling error of token_hit_ratio(c), from the two half-samples (each a sample at
  /// rate / 2): |h1 - h2| / 2 estimates one standard error of the full sample's estimate.
  /// 0 without half-samples.  Complexity: O(1).
  [[nodiscard]] double error_estimate(std::uint64_t c) const noexcept {
    if (!has_halves) return 0;
    const double a = halves[0].token_hit_ratio(scaled(c, rate / 2)) * token_scale;
    const double b = halves[1].token_hit_ratio(scaled(c, rate / 2)) * token_scale;
    return (a > b ? a - b : b - a) / 2;
  }

 private:
  static std::uint64_t scaled(std::uint64_t c, double r) noexcept {
    return static_cast<std::uint64_t>(static_cast<double>(c) * r + 0.5);
  }
};

namespace detail_mrc {
/// SHARDS-adj (Waldspurger et al., FAST'15, section 3.3): a hot key in or out of the sample moves
/// the sampled reference count away from rate x references, and its references are mostly
/// short-distance hits. The difference between the expected and the actual count is added to the
/// smallest depth (removed from the smallest depths when negative), and the expected counts
/// become the denominators.
inline prefix_mrc shards_adjusted(const prefix_mrc& m, double expected_refs,
                                  double expected_tokens) {
  const double d_blocks = expected_refs - static_cast<double>(m.block_refs);
  const double d_tokens = expected_tokens - static_cast<double>(m.token_refs);
  const std::uint64_t top = m.saturation() + 1;
  std::vector<std::uint64_t> blocks(top + 1, 0), tokens(top + 1, 0);
  auto clamp = [](double v, double hi) {
    return static_cast<std::uint64_t>(std::llround(std::min(std::max(v, 0.0), hi)));
  };
  for (std::uint64_t c = 1; c <= top; ++c) {
    blocks[c] = clamp(static_cast<double>(m.block_hits(c)) + d_blocks, expected_refs);
    tokens[c] = clamp(static_cast<double>(m.token_hits(c)) + d_tokens, expected_tokens);
  }
  prefix_mrc out(std::move(blocks), std::move(tokens));
  out.requests = m.requests;
  out.block_refs = static_cast<std::uint64_t>(std::llround(expected_refs));
  out.token_refs = static_cast<std::uint64_t>(std::llround(expected_tokens));
  return out;
}
}  // namespace detail_mrc

/// SHARDS-style sampled curve (Waldspurger et al., FAST'15) over block keys: a key is kept iff
/// mix64(key) mod 2^24 < rate * 2^24, every reference to a kept key is measured (its depth
/// counted among kept keys only) and every other reference is invisible; capacity C reads the
/// sample's histogram at C * rate. Because the decision belongs to the key, a block shared by
/// many requests (a system prompt) is in or out for its whole life, as SHARDS requires; sampling
/// whole requests instead thins a shared block's references and inflates its depth by 1 / rate.
/// The prefix rule is kept on the probes: a kept block's depth is the running maximum over the
/// kept blocks before it in its request (chained prefix keys make an earlier block at least as
/// recent as a later one, so the unseen blocks rarely raise it).
/// The histogram is SHARDS-adjusted (detail_mrc::shards_adjusted) for the hot shared blocks.
/// `half_curves`: also compute the curves of the two halves of the sample (split by one more hash
/// bit) for error_estimate. Requires: 0 < rate <= 1.  Complexity: one pass over the trace with
/// O(log sampled refs) per sampled reference (three with half_curves).  Throws: std::bad_alloc.
template <class Trace = prefix_trace>
sampled_prefix_mrc sampled_prefix_lru_mrc(const Trace& t, double rate,
                                          partial_block p = partial_block::skip,
                                          bool half_curves = false) {
  if (!(rate > 0.0 && rate <= 1.0)) {
    throw std::invalid_argument("sampled_prefix_lru_mrc: rate must be in (0, 1]");
  }
  const auto threshold = static_cast<std::uint64_t>(rate * static_cast<double>(1u << 24));
  auto kept = [threshold](block_key k) { return (detail::mix64(k) & ((1u << 24) - 1)) < threshold; };
  sampled_prefix_mrc out;
  out.rate = rate;
  std::uint64_t cacheable_tokens = 0, input_tokens = 0;
  for (std::size_t r = 0; r < t.requests(); ++r) {
    const std::uint64_t L = t.input_tokens(r), n = t.cacheable(r, p).size();
    cacheable_tokens += std::min<std::uint64_t>(n * t.block_tokens_of(r), L);
    input_tokens += L;
  }
  out.token_scale = input_tokens ? static_cast<double>(cacheable_tokens) /
                                       static_cast<double>(input_tokens)
                                 : 1.0;
  std::uint64_t all_refs = 0;
  for (std::size_t r = 0; r < t.requests(); ++r) all_refs += t.cacheable(r, p).size();
  const double expected_refs = static_cast<double>(all_refs) * rate;
  const double expected_tokens = static_cast<double>(cacheable_tokens) * rate;
  out.sample = detail_mrc::shards_adjusted(detail_mrc::lru_depths(t, p, kept, false),
                                           expected_refs, expected_tokens);
  if (half_curves) {
    for (int h = 0; h < 2; ++h) {
      out.halves[h] = detail_mrc::shards_adjusted(
          detail_mrc::lru_depths(
              t, p,
              [&](block_key k) {
                return kept(k) && static_cast<int>((detail::mix64(k) >> 24) & 1) == h;
              },
              false),
          expected_refs / 2, expected_tokens / 2);
    }
    out.has_halves = true;
  }
  return out;
}

}  // namespace kvtk::prefix
