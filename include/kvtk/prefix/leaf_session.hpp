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
//   * pinned: the full blocks of a request whose reply awaits a tool, ranked by their deadline
//     (the request's arrival + the TTL in force then); a partial last block is never pinned (a
//     next turn rewrites it, so it is never reused as it is);
//   * LRU: every other block, ranked by its last access (the tree's stamp).
// A later access re-ranks a block by that access's request. Victim: first every pinned leaf
// whose deadline has passed moves to the LRU segment at its last access's rank (an expired pin
// is an ordinary block again); then the least recently used LRU leaf; only when no LRU leaf is
// evictable, the pinned leaf with the earliest deadline.
//
// The TTL (Continuum's cost-benefit rule, in a cache's own units). The policy learns, per
// session, the time from a request that awaits a tool to the session's next request (a *return*;
// sessions in a direct-mapped table, a collision forgets the older wait), in a histogram of
// log-spaced gaps (buckets of 2^(1/2), from 10 ms), and counts the waits begun. Let F(x) be the
// share of waits that returned within x, and H the cache's horizon: the mean age (time since
// last access) of the LRU leaves it evicts (a running mean, 1/64 weight). An unpinned block
// survives about H anyway, so pinning to τ > H gains the returns in (H, τ] and costs the extra
// block-seconds held, priced at 1/H hit per block-second (the rate at which the cache's
// marginal blocks earn hits in the characteristic-time approximation):
//   U(τ) = F(τ) - F(H) - E[(min(T, τ) - H)+] / H,        TTL = argmax U over bucket edges > H,
// or 0 (no pinning) when no U is positive, before 64 waits have been seen, or before the cache
// has evicted (H unknown). Recomputed every 256 requests. In a replay there is no queue, so the
// queueing part of Continuum's benefit is not modelled: a return that hits is worth one block
// hit, as every hit is.
//
// Without session fields, times or tool results in the trace, nothing is pinned: the order is
// radix LRU exactly (tests/test_session_policies.cpp checks it).
//
// Memory: 24 bytes per block of capacity (stamp, last access, deadline) plus a session table of
// 16 bytes per entry (a power of two >= capacity / 4, at least 1,024); no allocation after
// construction. Deterministic: the trace's times, never a clock.
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
  static constexpr unsigned hints_read = hint_fields::session | hint_fields::full_blocks;
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
  /// to sum_s[b]); 0 when no U is positive. A bucket straddling H counts the share of it above H,
  /// at the bucket's mean gap.
  /// Requires: waits > 0, horizon_s > 0.  Complexity: O(gap_buckets).
  static double best_ttl(const std::array<double, gap_buckets>& count,
                         const std::array<double, gap_buckets>& sum_s, double waits,
                         double horizon_s) noexcept {
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
      const double u = (returned - (held + still_waiting * (tau - H)) / H) / waits;
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
        : stamp_(capacity), last_s_(capacity), deadline_s_(capacity),
          waits_(table_size(capacity)) {}

    template <class Tree>
    std::uint64_t on_insert(std::uint32_t s, std::uint64_t stamp, const access_hint& h,
                            Tree&) noexcept {
      return access(s, stamp, h);
    }
    template <class Tree>
    std::uint64_t on_touch(std::uint32_t s, std::uint64_t, std::uint64_t stamp,
                           const access_hint& h, Tree&) noexcept {
      return access(s, stamp, h);
    }
    void on_evict(std::uint32_t s, std::uint64_t rank, block_key) noexcept {
      if (rank & pinned_bit) return;
      const double age = std::max(0.0, now_s_ - last_s_[s]);
      horizon_s_ = evictions_ == 0 ? age : horizon_s_ + (age - horizon_s_) / 64.0;
      ++evictions_;
    }
    template <class Tree>
    std::uint32_t pick_victim(Tree& tree) noexcept {
      while (tree.evictable(1) > 0) {
        const std::uint32_t t = tree.top(1);
        if (deadline_s_[t] > now_s_) break;
        tree.rerank(t, stamp_[t]);  // expired: an ordinary block at its last access
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
    /// Waits on a tool begun, and how many of them returned (decayed counts).
    [[nodiscard]] double waits() const noexcept { return waits_begun_; }
    [[nodiscard]] double returns() const noexcept {
      double n = 0;
      for (const double c : count_) n += c;
      return n;
    }
    [[nodiscard]] std::size_t memory_bytes() const noexcept {
      return stamp_.size() * (sizeof(std::uint64_t) + 2 * sizeof(double)) +
             waits_.size() * sizeof(wait);
    }

   private:
    struct wait {
      std::uint64_t session = 0;  // 0: empty
      double since_s = -1;        // < 0: not waiting
    };
    static std::size_t table_size(std::uint32_t capacity) {
      std::size_t n = 1024;
      while (n < capacity / 4) n *= 2;
      return n;
    }

    std::uint64_t access(std::uint32_t s, std::uint64_t stamp, const access_hint& h) noexcept {
      stamp_[s] = stamp;
      last_s_[s] = h.time_s;
      const bool partial = h.depth >= h.full_blocks;
      if (!h.awaits_tool || partial || ttl_s_ <= 0) return stamp & ~pinned_bit;
      deadline_s_[s] = h.time_s + ttl_s_;
      // Deadlines in microseconds keep their order in the rank's 63 bits (292,000 years).
      const double us = std::clamp(deadline_s_[s] * 1e6, 0.0, 9.2e18);
      return pinned_bit | static_cast<std::uint64_t>(us);
    }

   public:
    /// Effects: starts a request (its hint, before any of its blocks is matched, touched or
    /// inserted, so that its evictions see its time): records a return when its session was
    /// waiting on a tool, starts a wait when its reply awaits one; every 256 requests refreshes
    /// the TTL. radix_index::process calls it.  Complexity: O(1) (O(gap_buckets) on a refresh).
    void on_request(const access_hint& h) noexcept {
      now_s_ = std::max(now_s_, h.time_s);
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
      if (waits_begun_ < min_waits || evictions_ == 0 || horizon_s_ <= 0) return;
      ttl_s_ = best_ttl(count_, sum_s_, waits_begun_, horizon_s_);
      for (unsigned b = 0; b < gap_buckets; ++b) {
        count_[b] /= 2;
        sum_s_[b] /= 2;
      }
      waits_begun_ /= 2;
    }

    std::vector<std::uint64_t> stamp_;
    std::vector<double> last_s_, deadline_s_;
    std::vector<wait> waits_;
    std::array<double, gap_buckets> count_{}, sum_s_{};
    double waits_begun_ = 0, now_s_ = 0, horizon_s_ = 0, ttl_s_ = 0;
    std::uint64_t requests_ = 0, evictions_ = 0;
    bool fixed_ = false;
  };
};

}  // namespace kvtk::prefix
