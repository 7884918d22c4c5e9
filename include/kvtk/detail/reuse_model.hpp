// kvtk/detail/reuse_model.hpp — the online learner behind the reuse-ranked policies.
//
// Design
// ------
// A block access is an *event* of one of `classes` classes, from what an engine knows when the
// request arrives:
//   class 0                  the request's partial last block (a block that is not full);
//   1 + 4 * r + t            r = bucket of the key's reference count so far, this one included
//                            (1, 2, 3-4, 5-8, 9+), t = the request's continuation depth (0..3+,
//                            see leaf_reuse), 0 where unknown.
// An event is *reused* when the same key is referenced again, while resident or after its eviction
// (remembered by the history table below). The model keeps, per class, decayed counts of events
// and reused events, and over all reuses the mean reuse distance (in stamps: block touches and
// inserts), and derives
//   p_c    = (reused_c + 1) / (events_c + 2)          the class's reuse probability;
//   tau    = horizon_multiplier * mean reuse distance  the time scale of reuse;
//   offset_c = tau * ln p_c  (<= 0)
// A policy ranks an access at stamp s by s + offset_c: within a class it is LRU, and a class whose
// blocks are reused half as often is treated as if last used tau * ln 2 stamps earlier. This is
// the rank that orders blocks by expected reuse when reuse hazard decays as exp(-age / tau)
// (p_c * exp(-age / tau) > p_d * exp(-age' / tau) <=> s + tau ln p_c > s' + tau ln p_d).
//
// Decay: when the events counted reach window_per_block * capacity, every count is halved, so the
// model follows a workload that changes. Offsets are recomputed every 256 events (and on decay),
// so the hot path does no logarithm.
//
// History: a direct-mapped table of history_per_block * capacity 8-byte entries {27-bit tag,
// 5-bit class, 32-bit stamp} remembering evicted keys; a later miss on a remembered key counts as a
// reuse of its last event and restores its reference-count bucket. Collisions overwrite (the table
// is a sample, not a set): it only feeds statistics, never correctness.
//
// Cost: no allocation after construction; O(1) per event. Memory: 8 * history_per_block bytes per
// block of capacity plus a few hundred bytes. Deterministic: no randomness, no clocks.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

namespace kvtk::detail {

/// Tunables of reuse_model (the defaults are what the registered policies use).
struct reuse_config {
  /// tau = horizon_multiplier * mean observed reuse distance. Unitless; default 3.
  double horizon_multiplier = 3.0;
  /// History entries per block of capacity (8 bytes each). Default 4.
  std::uint32_t history_per_block = 4;
  /// Events per block of capacity between halvings of the statistics. Default 64.
  std::uint32_t window_per_block = 64;
};

class reuse_model {
 public:
  static constexpr unsigned classes = 21;
  static constexpr unsigned partial_class = 0;
  static constexpr unsigned max_turn = 3;

  /// Requires: capacity > 0.  Throws: std::bad_alloc.
  explicit reuse_model(std::uint32_t capacity, const reuse_config& cfg = {})
      : cfg_(cfg),
        history_(std::clamp<std::uint64_t>(std::uint64_t{capacity} * cfg.history_per_block, 1,
                                            std::uint64_t{1} << 31),
                 0),
        window_(std::max<double>(double(capacity) * cfg.window_per_block, 1024.0)),
        tau_(double(capacity)) {
    refresh();
  }

  /// The reference-count bucket (0..4) of a key referenced `refs` times (>= 1).
  static constexpr unsigned refs_bucket(std::uint32_t refs) noexcept {
    return refs <= 1 ? 0 : refs == 2 ? 1 : refs <= 4 ? 2 : refs <= 8 ? 3 : 4;
  }
  /// A representative reference count of a bucket (inverse of refs_bucket, the smallest).
  static constexpr std::uint32_t bucket_refs(unsigned b) noexcept {
    constexpr std::array<std::uint32_t, 5> r{1, 2, 3, 5, 9};
    return r[b];
  }
  static constexpr unsigned class_of(std::uint32_t refs, std::uint32_t turn,
                                     bool partial) noexcept {
    if (partial) return partial_class;
    return 1 + 4 * refs_bucket(refs) + std::min<std::uint32_t>(turn, max_turn);
  }
  static constexpr unsigned refs_bucket_of_class(unsigned c) noexcept {
    return c == partial_class ? 0 : (c - 1) / 4;
  }

  /// Effects: counts one event of class c.  Complexity: O(1) amortized.
  void on_event(unsigned c) noexcept {
    events_[c] += 1.0;
    total_ += 1.0;
    if (total_ >= window_) {
      for (unsigned i = 0; i < classes; ++i) {
        events_[i] *= 0.5;
        reused_[i] *= 0.5;
      }
      gap_sum_ *= 0.5;
      gap_count_ *= 0.5;
      total_ = 0.0;
      refresh();
    } else if (++since_refresh_ == 256) {
      refresh();
    }
  }
  /// Effects: counts a reuse of an event of class c, `gap` stamps after it.
  void on_reuse(unsigned c, std::uint64_t gap) noexcept {
    reused_[c] += 1.0;
    gap_sum_ += double(gap);
    gap_count_ += 1.0;
  }
  /// tau * ln p_c, as of the last refresh (<= 0).
  [[nodiscard]] std::int64_t offset(unsigned c) const noexcept { return offset_[c]; }
  [[nodiscard]] double reuse_probability(unsigned c) const noexcept {
    return (reused_[c] + 1.0) / (events_[c] + 2.0);
  }
  [[nodiscard]] double tau() const noexcept { return tau_; }

  /// Effects: remembers an evicted key's last event (class c at `stamp`).
  void remember(std::uint64_t key, unsigned c, std::uint64_t stamp) noexcept {
    const std::uint64_t h = mix(key);
    history_[index(h)] = (tag(h) << 37) | (std::uint64_t{c} << 32) | (stamp & 0xffffffffu);
  }
  /// Effects: if key is remembered, forgets it and returns true with its last event's class and
  /// the stamps since then (mod 2^32); else false.
  bool recall(std::uint64_t key, std::uint64_t now, unsigned& c, std::uint64_t& gap) noexcept {
    const std::uint64_t h = mix(key);
    std::uint64_t& e = history_[index(h)];
    if (e == 0 || (e >> 37) != tag(h)) return false;
    c = unsigned(e >> 32) & 31u;
    gap = (now - e) & 0xffffffffu;
    e = 0;
    return true;
  }
  [[nodiscard]] std::size_t memory_bytes() const noexcept {
    return history_.size() * sizeof(std::uint64_t) + sizeof(*this);
  }

 private:
  static std::uint64_t mix(std::uint64_t k) noexcept {
    k ^= k >> 31;
    k *= 0xbf58476d1ce4e5b9ULL;
    k ^= k >> 29;
    return k;
  }
  std::size_t index(std::uint64_t h) const noexcept {
    return std::size_t(((h & 0xffffffffu) * std::uint64_t(history_.size())) >> 32);  // size < 2^32
  }
  static std::uint64_t tag(std::uint64_t h) noexcept { return (h >> 37) | 1; }  // never 0
  void refresh() noexcept {
    since_refresh_ = 0;
    if (gap_count_ >= 1.0) tau_ = cfg_.horizon_multiplier * gap_sum_ / gap_count_;
    tau_ = std::clamp(tau_, 1.0, 1e15);
    for (unsigned c = 0; c < classes; ++c) {
      offset_[c] = std::int64_t(tau_ * std::log(reuse_probability(c)));
    }
  }

  reuse_config cfg_;
  std::vector<std::uint64_t> history_;
  std::array<double, classes> events_{}, reused_{};
  std::array<std::int64_t, classes> offset_{};
  double window_, total_ = 0.0, gap_sum_ = 0.0, gap_count_ = 0.0, tau_;
  unsigned since_refresh_ = 0;
};

}  // namespace kvtk::detail
