// kvtk/prefix/leaf_session.hpp — session-ttl: LRU over the leaves of a prefix_tree that keeps a
// session's blocks for a time-to-live while the session waits on a tool call, as Continuum does
// (Li et al., "Continuum: Efficient and Robust Multi-Turn LLM Agent Scheduling with KV Cache
// Time-to-Live", 2025).
//
// Signal (access_hint's session fields, all known to an engine when the request's reply ends):
// the request's session, its arrival time, and whether its reply ended in a tool call
// (awaits_tool). Nothing about the future: the time the tool will take is not known, only the
// distribution of the durations seen so far.
//
// Semantics. Two segments of evictable leaves:
//   * pinned: the full blocks of a request whose reply awaits a tool, until their deadline (the
//     request's arrival + the TTL in force then, raised to the previous pin's deadline if that is
//     later, so that deadlines never decrease in pin order when a learned TTL shrinks); a partial
//     last block is never pinned (a next turn rewrites it, so it is never reused as it is), nor
//     is a block of a request without a (finite) time;
//   * LRU: every other block, ranked by its last access (the tree's stamp).
// A later access re-ranks a block by that access's request. Victim: first the pins whose
// deadline has passed are released, in the order they were pinned (which is deadline order),
// each to the LRU segment at its last access's rank (an expired pin is an ordinary
// block again); then the least recently used LRU leaf; only when no LRU leaf is evictable, the
// pinned leaf with the *latest* deadline. Why the latest: pinned sessions that do not all fit
// return about a tool call after their last access, so the one pinned last returns last; evicting
// it first (Belady's choice under that estimate) keeps a stable set of sessions whole, where
// the earliest deadline first would cycle through them all and keep none (LRU's failure on a
// loop larger than the cache).
//
// The TTL (Continuum's cost-benefit rule, in a cache's own units). The policy learns, per
// session, the time from a request that awaits a tool to the session's next request (a *return*;
// sessions in a direct-mapped table, a collision forgets the older wait), in a histogram of
// log-spaced gaps (buckets of 2^(1/2), from 10 ms), and counts the waits begun. Let F(x) be the
// share of waits that returned within x, and H the cache's horizon: the mean age (time since
// last access) of the LRU leaves it evicts (a running mean, 1/64 weight). An unpinned block
// survives about H anyway, so pinning to τ > H gains the returns in (H, τ] and costs the extra
// block-seconds held, each worth v hits: the hits one more block of cache would earn per second,
// measured by a ghost of the last G = max(capacity / 8, 64) LRU evictions (v = misses on a key
// in the ghost per second / G: G more blocks would have turned them into hits):
//   U(τ) = F(τ) - F(H) - v E[(min(T, τ) - H)+],        TTL = argmax U over bucket edges > H,
// or 0 (no pinning) when no U is positive, before 64 waits have been seen, or before the cache
// has evicted (H unknown). Recomputed every 256 requests (v: the ghost hits since the last
// refresh over the seconds since it, averaged half-and-half with the previous v). In a replay
// there is no queue, so the queueing part of Continuum's benefit is not modelled: a return that
// hits is worth one block hit, as every hit is.
//
// Without session fields, times or tool results in the trace, nothing is pinned: the order is
// radix LRU exactly (tests/test_session_policies.cpp checks it).
//
// Memory: 24 bytes per block of capacity (stamp, last access, pin id), a release
// queue of 24 bytes per entry (a power of two >= 2 * capacity: when full, its oldest pin is
// released early), a session table of
// 16 bytes per entry (a power of two >= capacity / 4, at least 1,024) and a ghost table of 16
// bytes per entry (a power of two >= 4 G); no allocation after construction. Deterministic: the trace's times, never a clock.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include "kvtk/concepts.hpp"

namespace kvtk::prefix {

/// Thread safety: its state lives inside the prefix_tree and follows the tree's rules.
struct leaf_session_ttl {
  static constexpr std::string_view name = "session-ttl";
  static constexpr unsigned hints_read =
      hint_fields::session | hint_fields::full_blocks | hint_fields::depth;
  static constexpr unsigned segments = 2;
  static constexpr std::uint64_t pinned_bit = std::uint64_t{1} << 63;
  static constexpr unsigned gap_buckets = 64;
  static constexpr double first_edge_s = 0.01;  ///< bucket b holds gaps <= 0.01 s * 2^(b/2)
  static constexpr std::uint32_t min_waits = 64;
  static constexpr std::uint32_t refresh_requests = 256;

  /// The upper edge of gap bucket b, seconds.
  static double edge_s(unsigned b) noexcept { return first_edge_s * std::exp2(0.5 * b); }

  /// The TTL that maximises U(τ) (the header comment) over the bucket edges above `horizon_s`,
  /// given `waits` waits begun, of which count[b] returned after a gap in bucket b (gaps summing
  /// to sum_s[b]), and a block-second worth `value` hits; 0 when no U is positive. A bucket straddling H counts the share of it above H,
  /// at the bucket's mean gap.
  /// Requires: waits > 0, horizon_s > 0.  Complexity: O(gap_buckets).
  static double best_ttl(const std::array<double, gap_buckets>& count,
                         const std::array<double, gap_buckets>& sum_s, double waits,
                         double horizon_s, double value) noexcept {
    const double H = horizon_s;
    double early = 0;  // returns within H: an unpinned block catches them anyway
    for (unsigned b = 0; b < gap_buckets; ++b) {
      const double hi = edge_s(b), lo = b == 0 ? 0.0 : edge_s(b - 1);
      if (hi <= H) {
        early += count[b];
      } else {
        if (lo < H) early += count[b] * (H - lo) / (hi - lo);
        break;
      }
    }
    double best = 0, best_tau = 0;
    double returned = 0, held = 0;  // returns in (H, τ]; Σ (gap - H) over them
    for (unsigned b = 0; b < gap_buckets; ++b) {
      const double tau = edge_s(b);
      if (tau <= H) continue;
      const double lo = b == 0 ? 0.0 : edge_s(b - 1);
      const double share = lo >= H ? 1.0 : (tau - H) / (tau - lo);
      returned += count[b] * share;
      const double mean = count[b] > 0 ? sum_s[b] / count[b] : tau;
      held += count[b] * share * std::max(0.0, mean - H);
      const double still_waiting = std::max(0.0, waits - returned - early);
      const double u = (returned - value * (held + still_waiting * (tau - H))) / waits;
      if (u > best) {
        best = u;
        best_tau = tau;
      }
    }
    return best_tau;
  }

  class state {
   public:
    explicit state(std::uint32_t capacity)
        : stamp_(capacity), last_s_(capacity), pin_id_(capacity, 0),
          releases_(ring_size(capacity)),
          waits_(table_size(capacity)),
          ghost_window_(std::max<std::uint64_t>(capacity / 8, 64)),
          ghost_(ghost_size(ghost_window_)) {}

    template <class Tree>
    std::uint64_t on_insert(std::uint32_t s, std::uint64_t stamp, const access_hint& h,
                            Tree& tree) noexcept {
      const ghost_entry& g = ghost_[mix(tree.at(s).key) & (ghost_.size() - 1)];
      if (g.at != 0 && g.key == tree.at(s).key && lru_evictions_ - g.at < ghost_window_) ghost_hits_ += 1;
      return access(s, stamp, h, tree);
    }
    template <class Tree>
    std::uint64_t on_touch(std::uint32_t s, std::uint64_t, std::uint64_t stamp,
                           const access_hint& h, Tree& tree) noexcept {
      return access(s, stamp, h, tree);
    }
    void on_evict(std::uint32_t s, std::uint64_t rank, block_key key) noexcept {
      pin_id_[s] = 0;
      if (rank & pinned_bit) return;
      if (!std::isfinite(last_s_[s])) return;  // a request without a time
      const double age = std::max(0.0, now_s_ - last_s_[s]);
      horizon_s_ = lru_evictions_ == 0 ? age : horizon_s_ + (age - horizon_s_) / 64.0;
      ghost_[mix(key) & (ghost_.size() - 1)] = {key, ++lru_evictions_};
    }
    template <class Tree>
    std::uint32_t pick_victim(Tree& tree) noexcept {
      while (head_ != tail_ && releases_[head_ & (releases_.size() - 1)].deadline_s <= now_s_) {
        release(tree);
      }
      if (tree.evictable(0) > 0) return tree.top(0);
      return tree.evictable(1) > 0 ? tree.top(1) : Tree::root;
    }

    /// Effects: from now on the TTL is `seconds` (0: never pin) and is no longer learned, for an
    /// engine that sets its own (and for tests).  Complexity: O(1).
    void fix_ttl(double seconds) noexcept {
      ttl_s_ = std::max(0.0, seconds);
      fixed_ = true;
    }
    /// The TTL in force, seconds (0: nothing is pinned).
    [[nodiscard]] double ttl_s() const noexcept { return ttl_s_; }
    /// The horizon H, seconds (0 before the first eviction of an LRU leaf).
    [[nodiscard]] double horizon_s() const noexcept { return horizon_s_; }
    /// The value of a block-second, hits (v), as last measured.
    [[nodiscard]] double value() const noexcept { return value_; }
    /// Waits on a tool begun, and how many of them returned (decayed counts).
    [[nodiscard]] double waits() const noexcept { return waits_begun_; }
    [[nodiscard]] double returns() const noexcept {
      double n = 0;
      for (const double c : count_) n += c;
      return n;
    }
    [[nodiscard]] std::size_t memory_bytes() const noexcept {
      return stamp_.size() * (2 * sizeof(std::uint64_t) + sizeof(double)) +
             releases_.size() * sizeof(pin) +
             waits_.size() * sizeof(wait) + ghost_.size() * sizeof(ghost_entry);
    }

   private:
    struct wait {
      std::uint64_t session = 0;  // 0: empty
      double since_s = -1;        // < 0: not waiting
    };
    struct pin {
      double deadline_s = 0;
      std::uint32_t slot = 0;
      std::uint64_t id = 0;
    };
    static std::size_t ring_size(std::uint32_t capacity) {
      std::size_t n = 64;
      while (n < 2 * std::size_t{capacity}) n *= 2;
      return n;
    }
    struct ghost_entry {
      block_key key = 0;
      std::uint64_t at = 0;  // LRU evictions when it was evicted (0: empty)
    };
    static std::size_t ghost_size(std::uint64_t window) {
      std::size_t n = 256;
      while (n < 4 * window) n *= 2;
      return n;
    }
    static std::size_t table_size(std::uint32_t capacity) {
      std::size_t n = 1024;
      while (n < capacity / 4) n *= 2;
      return n;
    }

    template <class Tree>
    std::uint64_t access(std::uint32_t s, std::uint64_t stamp, const access_hint& h,
                         Tree& tree) noexcept {
      stamp_[s] = stamp;
      last_s_[s] = h.time_s;
      const bool partial = h.depth >= h.full_blocks;
      if (!h.awaits_tool || partial || ttl_s_ <= 0 || !std::isfinite(h.time_s)) {
        pin_id_[s] = 0;
        return stamp & ~pinned_bit;
      }
      if (tail_ - head_ == releases_.size()) release(tree);  // full: the oldest pin goes early
      const double deadline = std::max(h.time_s + ttl_s_, last_deadline_s_);
      last_deadline_s_ = deadline;
      pin_id_[s] = ++pins_made_;
      releases_[tail_++ & (releases_.size() - 1)] = {deadline, s, pin_id_[s]};
      // The latest deadline has the smallest rank; microseconds below 2^62 (146,000 years).
      const double us = std::clamp(deadline * 1e6, 0.0, 4.6e18);
      return pinned_bit | ((std::uint64_t{1} << 62) - static_cast<std::uint64_t>(us));
    }

    // Releases the oldest pin in the queue, if its block still holds that pin: to the LRU
    // segment at its last access's rank.
    template <class Tree>
    void release(Tree& tree) noexcept {
      const pin p = releases_[head_++ & (releases_.size() - 1)];
      if (pin_id_[p.slot] == p.id) {  // the pin it was queued for, not a later one
        pin_id_[p.slot] = 0;
        tree.rerank(p.slot, stamp_[p.slot]);
      }
    }

   public:
    /// Effects: starts a request (its hint, before any of its blocks is matched, touched or
    /// inserted, so that its evictions see its time): records a return when its session was
    /// waiting on a tool, starts a wait when its reply awaits one; every 256 requests refreshes
    /// the TTL. radix_index::process calls it.  Complexity: O(1) (O(gap_buckets) on a refresh).
    void on_request(const access_hint& h) noexcept {
      if (std::isfinite(h.time_s)) {
        if (!timed_) window_start_s_ = h.time_s;  // v's first window starts at the first time
        timed_ = true;
        now_s_ = std::max(now_s_, h.time_s);
      }
      if (h.session != 0) {
        wait& w = waits_[mix(h.session) & (waits_.size() - 1)];
        if (w.session == h.session && w.since_s >= 0) record_return(now_s_ - w.since_s);
        if (h.awaits_tool) {
          w = {h.session, now_s_};
          waits_begun_ += 1;
        } else if (w.session == h.session) {
          w.since_s = -1;
        }
      }
      if (++requests_ % refresh_requests == 0 && !fixed_) refresh_ttl();
    }

   private:
    static std::uint64_t mix(std::uint64_t x) noexcept {
      x ^= x >> 33;
      x *= 0xff51afd7ed558ccdull;
      return x ^ (x >> 33);
    }

    void record_return(double gap_s) noexcept {
      unsigned b = 0;
      while (b + 1 < gap_buckets && gap_s > edge_s(b)) ++b;
      count_[b] += 1;
      sum_s_[b] += gap_s;
    }

    // The TTL from the statistics; the counts then halve, so that it follows a workload that
    // changes.
    void refresh_ttl() noexcept {
      const double seconds = now_s_ - window_start_s_;
      if (lru_evictions_ == 0) {  // warm-up: v's window starts at the first eviction's era
        window_start_s_ = now_s_;
        ghost_hits_ = 0;
        return;
      }
      if (seconds <= 0) return;
      const double v = ghost_hits_ / (static_cast<double>(ghost_window_) * seconds);
      value_ = value_ < 0 ? v : 0.5 * (value_ + v);
      ghost_hits_ = 0;
      window_start_s_ = now_s_;
      if (waits_begun_ < min_waits || horizon_s_ <= 0) return;
      ttl_s_ = best_ttl(count_, sum_s_, waits_begun_, horizon_s_, value_);
      for (unsigned b = 0; b < gap_buckets; ++b) {
        count_[b] /= 2;
        sum_s_[b] /= 2;
      }
      waits_begun_ /= 2;
    }

    std::vector<std::uint64_t> stamp_;
    std::vector<double> last_s_;
    std::vector<std::uint64_t> pin_id_;  // the block's pin (0: not pinned)
    std::uint64_t pins_made_ = 0;
    std::vector<pin> releases_;  // pins in pin order, a ring: [head_, tail_)
    std::uint64_t head_ = 0, tail_ = 0;
    std::vector<wait> waits_;
    std::uint64_t ghost_window_;
    std::vector<ghost_entry> ghost_;
    double ghost_hits_ = 0, value_ = -1, window_start_s_ = 0, last_deadline_s_ = 0;
    std::array<double, gap_buckets> count_{}, sum_s_{};
    double waits_begun_ = 0, now_s_ = 0, horizon_s_ = 0, ttl_s_ = 0;
    std::uint64_t requests_ = 0, lru_evictions_ = 0;
    bool fixed_ = false, timed_ = false;
  };
};

}  // namespace kvtk::prefix
