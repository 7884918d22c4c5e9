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
// Sampled curve (SHARDS-style, Waldspurger et al., FAST'15, adapted to prefixes): keep a request
// iff hash(its block at depth `sample_depth`) falls under the rate, so whole prefix subtrees are
// sampled together (sampling single blocks would break prefixes apart); compute the exact curve of
// the sample and read capacity C at C * rate.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kvtk/detail/frequency_sketch.hpp"
#include "kvtk/detail/key_table.hpp"
#include "kvtk/prefix/replay.hpp"

namespace kvtk::prefix {

/// A prefix-LRU miss-ratio curve: hits at every capacity.
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

/// Exact prefix-LRU curve of trace t (requests with include[r] == false are skipped when given).
/// Complexity: O(refs · log refs) time, O(refs) memory.  Throws: std::bad_alloc.
template <class Trace = prefix_trace>
prefix_mrc exact_prefix_lru_mrc(const Trace& t, partial_block p = partial_block::skip,
                                const std::vector<bool>* include = nullptr) {
  std::uint64_t refs = 0;
  for (std::size_t r = 0; r < t.requests(); ++r) {
    if (!include || (*include)[r]) refs += t.cacheable(r, p).size();
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
    if (include && !(*include)[r]) continue;
    const auto blocks = t.cacheable(r, p);
    const std::uint64_t L = t.input_tokens(r);
    ++requests;
    block_refs += blocks.size();
    token_refs += L;
    // Depths before the request updates anything.
    for (block_key k : blocks) ids.prefetch(k);
    depth.assign(blocks.size(), infinite);
    std::uint64_t run = 0;
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      const std::uint32_t id = ids.find(blocks[i]);
      std::uint64_t d = infinite;
      if (id != ids.npos) d = static_cast<std::uint64_t>(marks.suffix(seen[id].last, now));
      run = (run == infinite || d == infinite) ? infinite : std::max(run, d);
      depth[i] = run;
    }
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      if (depth[i] == infinite) break;
      if (depth[i] >= hist_blocks.size()) {
        hist_blocks.resize(depth[i] + 1, 0);
        hist_tokens.resize(depth[i] + 1, 0);
      }
      ++hist_blocks[depth[i]];
      const std::uint64_t bt = t.block_tokens_of(r);
      hist_tokens[depth[i]] +=
          std::min<std::uint64_t>((i + 1) * bt, L) - std::min<std::uint64_t>(i * bt, L);
    }
    // Then the LRU updates, forward.
    for (std::size_t i = 0; i < blocks.size(); ++i) {
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

/// A sampled prefix-LRU curve and its scale.
struct sampled_prefix_mrc {
  prefix_mrc sample;
  double rate = 1.0;
  std::uint32_t depth = 0;  ///< the block depth requests were sampled by
  std::size_t sampled_requests = 0;
  /// Estimated block hit ratio of the full trace at capacity c.
  [[nodiscard]] double block_hit_ratio(std::uint64_t c) const noexcept {
    return sample.block_hit_ratio(static_cast<std::uint64_t>(static_cast<double>(c) * rate + 0.5));
  }
  [[nodiscard]] double token_hit_ratio(std::uint64_t c) const noexcept {
    return sample.token_hit_ratio(static_cast<std::uint64_t>(static_cast<double>(c) * rate + 0.5));
  }
};

/// Sample by the shallowest depth with enough distinct subtrees (see sampled_prefix_lru_mrc).
inline constexpr std::uint32_t auto_sample_depth = ~std::uint32_t{0};

/// SHARDS-style sampled curve: request r is kept iff mix64(its block at depth d, or its last block
/// if shorter) mod 2^24 < rate * 2^24, so requests sharing their first d+1 blocks are kept or
/// dropped together. With auto_sample_depth (the default), d is the shallowest depth (0..7) at
/// which the trace has at least min(requests / 10, 20 / rate) distinct blocks: sampling by a block
/// every request shares (Mooncake's conversation trace starts every request with block 0) would
/// keep all or nothing. Requires: 0 < rate <= 1.  Complexity: one exact curve of the sample plus
/// an O(requests) pre-pass.
template <class Trace = prefix_trace>
sampled_prefix_mrc sampled_prefix_lru_mrc(const Trace& t, double rate,
                                          partial_block p = partial_block::skip,
                                          std::uint32_t sample_depth = auto_sample_depth) {
  if (!(rate > 0.0 && rate <= 1.0)) {
    throw std::invalid_argument("sampled_prefix_lru_mrc: rate must be in (0, 1]");
  }
  auto key_at = [&](std::size_t r, std::uint32_t d) {
    const auto b = t.cacheable(r, p);
    return b[std::min<std::size_t>(d, b.size() - 1)];
  };
  if (sample_depth == auto_sample_depth) {
    const double want = std::min(static_cast<double>(t.requests()) / 10.0, 20.0 / rate);
    sample_depth = 7;
    for (std::uint32_t d = 0; d < 7; ++d) {
      std::unordered_set<block_key> distinct;
      for (std::size_t r = 0; r < t.requests(); ++r) {
        if (!t.cacheable(r, p).empty()) distinct.insert(key_at(r, d));
      }
      if (static_cast<double>(distinct.size()) >= want) {
        sample_depth = d;
        break;
      }
    }
  }
  const auto threshold = static_cast<std::uint64_t>(rate * static_cast<double>(1u << 24));
  std::vector<bool> include(t.requests(), false);
  sampled_prefix_mrc out;
  out.rate = rate;
  out.depth = sample_depth;
  for (std::size_t r = 0; r < t.requests(); ++r) {
    if (t.cacheable(r, p).empty()) continue;
    include[r] = (detail::mix64(key_at(r, sample_depth)) & ((1u << 24) - 1)) < threshold;
    out.sampled_requests += include[r];
  }
  out.sample = exact_prefix_lru_mrc(t, p, &include);
  return out;
}

}  // namespace kvtk::prefix
