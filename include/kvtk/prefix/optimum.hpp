// kvtk/prefix/optimum.hpp — the offline optimum every prefix-cache result is a share of, and an
// upper bound on every policy's hits.
//
// Definitions (docs/prefix.md, "The optimum and the bound", proves the bound):
// * The stream: the trace's cacheable block references in replay order; next_use_positions(t, p)
//   gives each reference the position of its key's next one.
// * The bound: the hits of flat MIN with bypass on the stream, a cache of `capacity` blocks. On a
//   reference the block hits if resident; then it is kept when it has a next use and either a
//   node is free or its next use is sooner than the furthest next use resident (that block
//   goes); otherwise it is not kept (bypass). Every index kvtk replays (flat with any policy,
//   radix with any leaf order and admission, hash chain, the engine modes) holds at most
//   `capacity` blocks, stores a block only while it is being referenced, and counts a hit only
//   for a block resident when its request starts, so each of its runs is matched by a flat
//   strategy with at least its hits at every request, and MIN with bypass has the most hits of
//   any flat strategy. Hence every result's bound_fraction = block hits / bound <= 1, by proof.
// * The offline optimum: the best of three offline policies, each a real policy that a cache of
//   `capacity` blocks could run, scored by the same definitions as every other result:
//     radix belady         leaf-only Belady admitting every block (radix_index<leaf_belady>)
//     radix belady+belady  leaf-only Belady with bypass (admit_belady): a new block is cached
//                          only when its next use is sooner than the furthest evictable leaf's
//     flat min             the bound's own strategy, scored as a flat prefix cache (a block hits
//                          when it and every earlier block of its request was resident at the
//                          request's start)
//   With ties, the first listed. On traces of one block per request the last two coincide with
//   the bound (a radix tree of single blocks is flat, and MIN with bypass is optimal) and radix
//   belady, which may not decline, is at most it, so only the bound's pass runs and
//   opt_fraction = bound_fraction. No fast exact algorithm is known for
//   the best prefix-constrained policy, so opt_fraction <= 1 is a measured property
//   (docs/policy-quality.md), not a proved one; bound_fraction <= 1 is proved.
// * Warm-up (kvtk tune's holdout): with count_from = s, requests before s are not counted and the
//   bound starts from the best state a cache could be in at s: the `capacity` blocks, among
//   those referenced before s, whose next uses are soonest. The radix candidates replay the
//   whole trace and count from s.
/// Thread safety: one counter per thread; next uses and the trace are only read.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "kvtk/offline.hpp"
#include "kvtk/policy/belady.hpp"
#include "kvtk/prefix/admission.hpp"
#include "kvtk/prefix/leaf_policies.hpp"
#include "kvtk/prefix/replay.hpp"

namespace kvtk::prefix {

namespace detail_optimum {

/// A set of positions in [0, n) with the largest in O(log64 n): one bit per position, and above
/// it levels of one bit per non-zero word below, up to a single word. Memory: n/8 bytes and 1/63
/// of that again.
class position_set {
 public:
  /// Throws: std::bad_alloc.
  explicit position_set(std::uint64_t n) {
    std::uint64_t words = std::max<std::uint64_t>((n + 63) / 64, 1);
    for (;;) {
      levels_.emplace_back(words, 0);
      if (words == 1) break;
      words = (words + 63) / 64;
    }
  }
  [[nodiscard]] bool contains(std::uint64_t p) const noexcept {
    return (levels_[0][p >> 6] >> (p & 63)) & 1;
  }
  /// Requires: p < n.
  void insert(std::uint64_t p) noexcept {
    for (auto& level : levels_) {
      std::uint64_t& w = level[p >> 6];
      const bool had = w != 0;
      w |= std::uint64_t{1} << (p & 63);
      if (had) return;
      p >>= 6;
    }
  }
  /// Requires: p < n.
  void erase(std::uint64_t p) noexcept {
    for (auto& level : levels_) {
      std::uint64_t& w = level[p >> 6];
      w &= ~(std::uint64_t{1} << (p & 63));
      if (w != 0) return;
      p >>= 6;
    }
  }
  /// Requires: not empty.
  [[nodiscard]] std::uint64_t max() const noexcept {
    std::uint64_t i = 0;
    for (std::size_t k = levels_.size(); k-- > 0;) {
      i = i * 64 + static_cast<std::uint64_t>(63 - std::countl_zero(levels_[k][i]));
    }
    return i;
  }

 private:
  std::vector<std::vector<std::uint64_t>> levels_;
};

}  // namespace detail_optimum

/// Flat MIN with bypass over the stream (the bound), in one forward pass over next uses, and the
/// same strategy scored as a flat prefix cache. A resident block is identified by the position of
/// its next reference, so the resident set is a set of future positions: a reference at j hits
/// iff j is in it, and the block used furthest in the future is its largest element. No key is
/// looked up. add() takes consecutive ranges of requests (as next_use_ideal_counter), so that a
/// caller can let go of the trace and of next uses behind it.
/// Thread safety: one counter per thread; next_use and the trace are only read.
class min_bypass_counter {
 public:
  /// Requires: next_use outlives the counter. count_from: the first request whose hits count.
  /// Complexity: O(references / 8) bytes.
  /// Throws: std::invalid_argument for capacity 0; std::bad_alloc.
  min_bypass_counter(std::span<const std::uint64_t> next_use, std::uint64_t capacity,
                     std::size_t count_from = 0)
      : next_(next_use), live_(next_use.size()), capacity_(checked(capacity)),
        count_from_(count_from) {}

  /// Effects: processes requests [first, last) of t (the next range after the previous call's).
  /// Complexity: O(references · log64 references).
  /// Throws: std::invalid_argument when next_use is too short or not a list of later positions.
  void add(const prefix_trace_view& t, partial_block p, std::size_t first, std::size_t last) {
    for (std::size_t r = first; r < last; ++r) {
      const auto blocks = t.cacheable(r, p);
      const std::uint64_t begin = pos_, end = pos_ + blocks.size();
      if (end > next_.size()) throw std::invalid_argument("optimum: next_use too short");
      if (r == count_from_) trim();
      const bool counting = r >= count_from_;
      if (counting) count_request(t, r, begin, end);
      for (std::uint64_t j = begin; j < end; ++j) step(j, counting);
      pos_ = end;
    }
  }
  /// Block hits of the bound (references resident when made), over the counted requests.
  [[nodiscard]] std::uint64_t bound_hits() const noexcept { return bound_hits_; }
  /// The same strategy's counts as a flat prefix cache (hits = leading blocks resident at the
  /// request's start), over the counted requests.
  [[nodiscard]] const prefix_counts& flat_counts() const noexcept { return flat_; }
  [[nodiscard]] std::uint64_t position() const noexcept { return pos_; }
  /// Throws: std::invalid_argument unless every reference was added.
  void finish() const {
    if (pos_ != next_.size()) throw std::invalid_argument("optimum: next_use too long");
  }

 private:
  static std::uint64_t checked(std::uint64_t capacity) {
    if (capacity == 0) throw std::invalid_argument("optimum: capacity must be at least 1 block");
    return capacity;
  }
  // Before the counted requests the cache is unbounded: trim() then keeps the `capacity` soonest
  // next uses, the best state a real cache could have reached.
  void trim() noexcept {
    while (size_ > capacity_) {
      live_.erase(live_.max());
      --size_;
    }
  }
  void step(std::uint64_t j, bool counting) {
    const std::uint64_t nx = next_[j];
    if (live_.contains(j)) {
      live_.erase(j);
      --size_;
      bound_hits_ += counting;
    }
    if (nx == access_hint::never) return;
    if (nx <= j || nx >= next_.size()) {
      throw std::invalid_argument("optimum: next_use is not a list of later positions");
    }
    if (!counting || size_ < capacity_) {
      live_.insert(nx);
      ++size_;
    } else if (const std::uint64_t far = live_.max(); nx < far) {
      live_.erase(far);
      live_.insert(nx);
      ++flat_.evictions;
    }
  }
  // Residency at the request's start: position j's bit, or for a key repeated inside the request
  // that of its first occurrence here (its own bit is only set by that occurrence).
  void count_request(const prefix_trace_view& t, std::size_t r, std::uint64_t begin,
                     std::uint64_t end) {
    const std::uint64_t n = end - begin;
    if (start_.size() < n) start_.resize(n);
    for (std::uint64_t j = begin; j < end; ++j) start_[j - begin] = live_.contains(j);
    for (std::uint64_t j = begin; j < end; ++j) {
      const std::uint64_t nx = next_[j];
      if (nx != access_hint::never && nx > j && nx < end) start_[nx - begin] = start_[j - begin];
    }
    std::uint64_t h = 0;
    while (h < n && start_[h]) ++h;
    const std::uint64_t L = t.input_tokens(r);
    ++flat_.requests;
    flat_.block_refs += n;
    flat_.block_hits += h;
    flat_.token_refs += L;
    flat_.token_hits += std::min<std::uint64_t>(h * t.block_tokens_of(r), L);
  }

  std::span<const std::uint64_t> next_;
  detail_optimum::position_set live_;
  std::uint64_t capacity_, size_ = 0, pos_ = 0, bound_hits_ = 0;
  std::size_t count_from_;
  prefix_counts flat_;
  std::vector<std::uint8_t> start_;
};

/// The offline optimum and the bound of a cache of `capacity` blocks (see the definitions
/// above), from one pass over the trace: add() takes consecutive ranges of requests.
/// Thread safety: one per thread; next_use and the trace are only read.
class offline_optimum {
 public:
  struct candidate {
    std::string_view policy;  ///< "radix belady", "radix belady+belady" or "flat min"
    prefix_counts counts;
  };
  struct result {
    prefix_counts counts;     ///< the best candidate's (most block hits; ties: the first listed)
    std::string_view policy;  ///< the best candidate's name
    std::uint64_t bound_block_hits = 0;  ///< the upper bound on any policy's block hits
    std::array<candidate, 3> candidates{};
    std::size_t candidate_count = 0;  ///< 1 on traces of one block per request (flat min)

    /// c's block hits as a share of the bound: <= 1 for every policy, by proof; 1 when the
    /// bound is 0.
    [[nodiscard]] double bound_fraction(const prefix_counts& c) const noexcept {
      return bound_block_hits ? static_cast<double>(c.block_hits) /
                                    static_cast<double>(bound_block_hits)
                              : 1.0;
    }
  };

  /// single_block: no request has more than one cacheable block (single_block_requests over
  /// the whole trace): the radix candidates are then skipped, being equal to flat min.
  /// Requires: next_use = next_use_positions(t, p) of the trace later added, outliving this.
  /// Throws: std::invalid_argument for capacity 0, or >= 2^31 with multi-block requests;
  /// std::bad_alloc.
  offline_optimum(std::uint32_t capacity, bool single_block, std::span<const std::uint64_t> next,
                  std::size_t count_from = 0)
      : next_(next), bound_(next, capacity, count_from), count_from_(count_from) {
    if (!single_block) {
      forced_.emplace(capacity);
      bypass_.emplace(capacity);
    }
  }

  /// Effects: replays requests [first, last) of t through every candidate.
  /// Throws: std::invalid_argument for next uses that do not fit the trace.
  void add(const prefix_trace_view& t, partial_block p, std::size_t first, std::size_t last) {
    bound_.add(t, p, first, last);
    if (!forced_) return;
    for (const auto& [a, b] : {std::pair{first, std::min(last, count_from_)},
                               std::pair{std::max(first, count_from_), last}}) {
      if (a >= b) continue;
      const bool counted = a >= count_from_;
      if (counted && a == count_from_) snapshot();
      replay_requests(t, *forced_, p, next_, a, b, counted ? forced_counts_ : warm_, forced_pos_);
      replay_requests(t, *bypass_, p, next_, a, b, counted ? bypass_counts_ : warm_, bypass_pos_);
    }
  }

  /// The position in next_use of the next request's first cacheable block.
  [[nodiscard]] std::uint64_t position() const noexcept { return bound_.position(); }

  /// The counts once every request was added.
  /// Throws: std::invalid_argument unless every reference was added.
  [[nodiscard]] result finish() const {
    bound_.finish();
    result out;
    out.bound_block_hits = bound_.bound_hits();
    if (forced_) {
      prefix_counts f = forced_counts_, b = bypass_counts_;
      // count_from past the last request: nothing was counted, evictions included.
      f.evictions = snapped_ ? forced_->evictions() - forced_evictions_ : 0;
      b.evictions = snapped_ ? bypass_->evictions() - bypass_evictions_ : 0;
      out.candidates = {candidate{"radix belady", f}, candidate{"radix belady+belady", b},
                        candidate{"flat min", bound_.flat_counts()}};
      out.candidate_count = 3;
    } else {
      out.candidates[0] = {"flat min", bound_.flat_counts()};
      out.candidate_count = 1;
    }
    std::size_t best = 0;
    for (std::size_t i = 1; i < out.candidate_count; ++i) {
      if (out.candidates[i].counts.block_hits > out.candidates[best].counts.block_hits) best = i;
    }
    out.counts = out.candidates[best].counts;
    out.policy = out.candidates[best].policy;
    return out;
  }

 private:
  void snapshot() noexcept {
    forced_evictions_ = forced_->evictions();
    bypass_evictions_ = bypass_->evictions();
    snapped_ = true;
  }
  std::span<const std::uint64_t> next_;
  min_bypass_counter bound_;
  std::size_t count_from_;
  std::optional<radix_index<leaf_belady>> forced_;
  std::optional<radix_index<leaf_belady, admit_belady>> bypass_;
  prefix_counts forced_counts_, bypass_counts_, warm_;
  std::uint64_t forced_pos_ = 0, bypass_pos_ = 0, forced_evictions_ = 0, bypass_evictions_ = 0;
  bool snapped_ = false;
};

/// The optimum and the bound of trace t at `capacity`, given next_use = next_use_positions(t, p).
/// Complexity: one pass of each candidate.  Throws: as offline_optimum.
inline offline_optimum::result optimum_and_bound(const prefix_trace_view& t,
                                                 std::uint32_t capacity, partial_block p,
                                                 std::span<const std::uint64_t> next_use,
                                                 std::size_t count_from = 0) {
  offline_optimum o(capacity, single_block_requests(t, p, 0, t.requests()), next_use, count_from);
  o.add(t, p, 0, t.requests());
  return o.finish();
}

/// The offline optimum's counts (optimum_and_bound(...).counts): every policy's counts
/// .fraction_of() it give its opt_fraction.  Throws: as offline_optimum.
inline prefix_counts replay_optimum(const prefix_trace_view& t, std::uint32_t capacity,
                                    partial_block p, std::span<const std::uint64_t> next_use) {
  return optimum_and_bound(t, capacity, p, next_use).counts;
}

/// The same, computing the next uses itself (one backward pass; pass them in when several
/// capacities share one trace).
inline prefix_counts replay_optimum(const prefix_trace_view& t, std::uint32_t capacity,
                                    partial_block p = partial_block::skip) {
  const std::vector<std::uint64_t> next = next_use_positions(t, p);
  return replay_optimum(t, capacity, p, next);
}

}  // namespace kvtk::prefix
