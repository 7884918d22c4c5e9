// kvtk/policy/s3fifo.hpp — S3-FIFO (Yang et al., "FIFO queues are all you need", SOSP'23).
//
// Small FIFO S (small_percent of capacity, default 10%), main FIFO M (the rest) and a ghost FIFO G
// of keys (as many entries as M holds at most: ghost_percent of capacity, default 90%).
// Each resident node has a 2-bit access counter (saturating at 3).
//   hit:             counter = min(counter + 1, 3); no movement
//   miss, key in G:  the key leaves G and the node is inserted into M
//   other miss:      inserted into S
//   evict:           if |S| >= small target (or M is empty): look at S's oldest node t —
//                      counter >= move_to_main_threshold -> t moves to M with counter 0 (and the
//                        loop continues; M may then be over its share, which the next pass fixes)
//                      else t is the victim and its key enters G
//                    else look at M's oldest node t — counter > 0 -> counter - 1, reinsert at M's
//                      back; else t is the victim (not ghosted).
// move_to_main_threshold defaults to 1: "accessed at least once since insertion" (paper §4.2).
// A pinned node at the front of S or M is reinserted at the back of its queue unchanged.
// Terminates because an unpinned node exists: every pass over S empties it toward M or evicts,
// and each pass over M lowers each unpinned counter.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/ghost_list.hpp"
#include "kvtk/detail/intrusive.hpp"
#include "kvtk/detail/segmented_list.hpp"

namespace kvtk {

/// Thread safety: the family is stateless; a container belongs to one block_cache and follows it.
struct s3fifo {
  static constexpr std::string_view name = "s3fifo";
  struct config {
    /// Small queue share of capacity, percent (1..99). Default 10.
    std::uint32_t small_percent = 10;
    /// Ghost queue weight as percent of capacity (1..1000). Default 90 (the size of M).
    std::uint32_t ghost_percent = 90;
    /// Hits while in S needed to move to M instead of being evicted (1..3). Default 1.
    std::uint32_t move_to_main_threshold = 1;
  };
  struct hook : detail::list_hook<s3fifo> {
    std::uint8_t freq = 0;
    std::uint8_t segment = 0;  // small or main
  };

  template <class Node>
  class container {
   public:
    using config_type = config;
    /// Throws: std::invalid_argument on out-of-range fields; std::bad_alloc.
    container(const policy_params& p, const config& cfg)
        : ghost_(p.max_entries), threshold_(cfg.move_to_main_threshold) {
      if (cfg.small_percent < 1 || cfg.small_percent > 99) {
        throw std::invalid_argument("s3fifo: small_percent must be in [1, 99]");
      }
      if (cfg.ghost_percent < 1 || cfg.ghost_percent > 1000) {
        throw std::invalid_argument("s3fifo: ghost_percent must be in [1, 1000]");
      }
      if (cfg.move_to_main_threshold < 1 || cfg.move_to_main_threshold > 3) {
        throw std::invalid_argument("s3fifo: move_to_main_threshold must be in [1, 3]");
      }
      small_target_ = p.capacity * cfg.small_percent / 100;
      if (small_target_ == 0) small_target_ = 1;
      ghost_cap_ = p.capacity * cfg.ghost_percent / 100;
      if (ghost_cap_ == 0) ghost_cap_ = 1;
    }

    void on_insert(Node& n, const access_hint&) noexcept {
      n.freq = 0;
      lists_.push_back(n, pending_main_ ? main : small);
      pending_main_ = false;
    }
    void on_hit(Node& n, const access_hint&) noexcept {
      if (n.freq < 3) ++n.freq;
    }
    void on_miss(block_key k, const access_hint&) noexcept {
      pending_main_ = ghost_.take(k) != detail::ghost_list::none;
    }
    /// Complexity: amortized O(1).
    template <class Pred>
    Node* evict(Pred&& pred) noexcept {
      std::size_t pinned_seen = 0;  // consecutive pinned nodes rotated at S's front
      for (;;) {
        if (!lists_[small].empty() &&
            (lists_.weight(small) >= small_target_ || lists_[main].empty())) {
          Node& t = lists_[small].front();
          if (!pred(t)) {
            lists_.rotate(small);
            // Everything left in S may be pinned: let M supply the victim if it can.
            if (++pinned_seen > lists_[small].size()) {
              pinned_seen = 0;
              if (Node* v = evict_main(pred)) return v;
            }
            continue;
          }
          pinned_seen = 0;
          if (t.freq >= threshold_) {
            t.freq = 0;
            lists_.move_to_back(t, main);
            continue;
          }
          return evict_small(t);
        }
        if (Node* v = evict_main(pred)) return v;
        // M has only pinned nodes: take from S regardless of its share.
        Node* v = detail::first_evictable(lists_[small], pred);
        return v == nullptr ? nullptr : evict_small(*v);
      }
    }
    void on_erase(Node& n) noexcept { lists_.erase(n); }
    [[nodiscard]] std::size_t size() const noexcept { return lists_.size(); }

    template <class F>
    void for_each(F&& f) const {
      lists_.for_each(f);
    }
    [[nodiscard]] const char* audit() const noexcept {
      if (!lists_.consistent()) return "s3fifo: S/M membership or weights out of sync";
      bool counters_ok = true;
      lists_.for_each([&](const Node& n) { counters_ok &= n.freq <= 3; });
      if (!counters_ok) return "s3fifo: counter above 3";
      if (ghost_.weight(0) > ghost_cap_) return "s3fifo: ghost over its share";
      return "";
    }

   private:
    Node* evict_small(Node& t) noexcept {
      lists_.erase(t);
      ghost_.push(0, t.key, t.size);
      while (ghost_.weight(0) > ghost_cap_) ghost_.pop(0);
      return &t;
    }
    // One CLOCK-like pass over M; nullptr if every node of M is pinned.
    template <class Pred>
    Node* evict_main(Pred& pred) noexcept {
      std::size_t pinned_run = 0;
      while (!lists_[main].empty()) {
        Node& t = lists_[main].front();
        if (!pred(t)) {
          lists_.rotate(main);
          if (++pinned_run >= lists_[main].size()) return nullptr;
          continue;
        }
        pinned_run = 0;
        if (t.freq > 0) {
          --t.freq;
          lists_.rotate(main);
          continue;
        }
        lists_.erase(t);
        return &t;
      }
      return nullptr;
    }

    static constexpr unsigned small = 0, main = 1;  // segments
    detail::segmented_list<Node, s3fifo, 2> lists_;
    std::uint64_t small_target_ = 0, ghost_cap_ = 0;
    detail::ghost_list ghost_;
    std::uint32_t threshold_;
    bool pending_main_ = false;
  };
};

static_assert(eviction_policy<s3fifo>);

}  // namespace kvtk
