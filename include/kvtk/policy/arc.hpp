// kvtk/policy/arc.hpp — Adaptive Replacement Cache (Megiddo & Modha, FAST'03).
//
// T1 (seen once recently) and T2 (seen at least twice) are LRU lists of resident nodes; B1 and B2
// are ghost lists of keys evicted from T1 and T2. p is the adaptive target for T1's weight.
// This is the paper's Fig. 4 algorithm, split along kvtk's miss protocol:
//   on_miss(x):  x in B1 -> p = min(c, p + max(|B2|/|B1|, 1)), x leaves B1, will enter T2
//                x in B2 -> p = max(0, p - max(|B1|/|B2|, 1)), x leaves B2, will enter T2
//                else (case IV) -> if |T1|+|B1| >= c: drop B1's LRU ghosts while that holds and
//                   B1 is non-empty; if B1 was empty (T1 fills the cache) the next eviction
//                   takes T1's LRU without ghosting it. Otherwise, if |T1|+|T2|+|B1|+|B2| >= 2c,
//                   drop B2's LRU ghosts until below. x will enter T1.
//   evict():     REPLACE: from T1 (ghosted to B1) if |T1| >= 1 and (|T1| > p or (x came from B2
//                and |T1| == p)), else from T2 (ghosted to B2); the other list when the chosen one
//                has no unpinned node.
//   on_hit(x):   move to T2's MRU end.
// p is a double, as in the paper (the delta is a ratio). |X| is the total node size of list X,
// which with unit sizes is the paper's count. Ghost lists also hold at most max_entries keys each.
// With unit sizes and no pins or erases this reproduces the paper exactly (tested against a
// textbook model and golden miss counts).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/ghost_list.hpp"
#include "kvtk/detail/intrusive.hpp"
#include "kvtk/detail/segmented_list.hpp"

namespace kvtk {

/// Thread safety: the family is stateless; a container belongs to one block_cache and follows it.
struct arc {
  static constexpr std::string_view name = "arc";
  /// ARC is self-tuning and has no parameters.
  struct config {};
  struct hook : detail::list_hook<arc> {
    std::uint8_t segment = 0;  // t1 or t2
  };

  template <class Node>
  class container {
   public:
    using config_type = config;
    /// Throws: std::bad_alloc.
    container(const policy_params& p, const config&)
        : c_(p.capacity),
          ghosts_(static_cast<std::uint32_t>(
              std::min<std::uint64_t>(std::uint64_t{p.max_entries} * 2, (1u << 31) - 1))) {}

    void on_insert(Node& n, const access_hint&) noexcept {
      lists_.push_back(n, pending_t2_ ? t2 : t1);
      pending_t2_ = false;
      pending_from_b2_ = false;
      evict_t1_plain_ = false;
    }
    void on_hit(Node& n, const access_hint&) noexcept { lists_.move_to_back(n, t2); }
    void on_miss(block_key x, const access_hint&) noexcept {
      pending_t2_ = false;
      pending_from_b2_ = false;
      evict_t1_plain_ = false;
      const auto w1 = static_cast<double>(ghosts_.weight(b1));
      const auto w2 = static_cast<double>(ghosts_.weight(b2));
      const int ghost = ghosts_.take(x);  // |B1|, |B2| above are the sizes before x leaves
      if (ghost == b1) {
        p_ = std::min(static_cast<double>(c_), p_ + std::max(w2 / w1, 1.0));
        pending_t2_ = true;
      } else if (ghost == b2) {
        p_ = std::max(0.0, p_ - std::max(w1 / w2, 1.0));
        pending_t2_ = true;
        pending_from_b2_ = true;
      } else if (lists_.weight(t1) + ghosts_.weight(b1) >= c_) {
        if (ghosts_.empty(b1)) {
          evict_t1_plain_ = true;
        } else {
          while (!ghosts_.empty(b1) && lists_.weight(t1) + ghosts_.weight(b1) >= c_) {
            ghosts_.pop(b1);
          }
        }
      } else {
        while (!ghosts_.empty(b2) &&
               lists_.weight(t1) + lists_.weight(t2) + ghosts_.weight(b1) + ghosts_.weight(b2) >=
                   2 * c_) {
          ghosts_.pop(b2);
        }
      }
    }
    /// Complexity: O(1) + O(pinned nodes passed over).
    template <class Pred>
    Node* evict(Pred&& pred) noexcept {
      if (evict_t1_plain_) {
        Node* v = detail::first_evictable(lists_[t1], pred);
        if (v == nullptr) v = detail::first_evictable(lists_[t2], pred);
        if (v) lists_.erase(*v);
        return v;
      }
      const auto t1w = static_cast<double>(lists_.weight(t1));
      const bool from_t1 = !lists_[t1].empty() && (t1w > p_ || (pending_from_b2_ && t1w == p_));
      Node* v = detail::first_evictable(lists_[from_t1 ? t1 : t2], pred);
      if (v == nullptr) v = detail::first_evictable(lists_[from_t1 ? t2 : t1], pred);
      if (v == nullptr) return nullptr;
      lists_.erase(*v);
      ghosts_.push(v->segment == t2 ? b2 : b1, v->key, v->size);
      return v;
    }
    void on_erase(Node& n) noexcept { lists_.erase(n); }
    [[nodiscard]] std::size_t size() const noexcept { return lists_.size(); }

    /// The adaptive target for T1, in capacity units.
    [[nodiscard]] double target_t1() const noexcept { return p_; }

    template <class F>
    void for_each(F&& f) const {
      lists_.for_each(f);
    }
    [[nodiscard]] const char* audit() const noexcept {
      if (!lists_.consistent()) return "arc: T1/T2 membership or weights out of sync";
      if (p_ < 0.0 || p_ > static_cast<double>(c_)) return "arc: p outside [0, c]";
      return "";
    }

   private:
    std::uint64_t c_;
    double p_ = 0.0;
    static constexpr unsigned t1 = 0, t2 = 1;  // segments
    detail::segmented_list<Node, arc, 2> lists_;
    static constexpr int b1 = 0, b2 = 1;  // ghost list ids
    detail::ghost_lists<2> ghosts_;       // B1 and B2 share one table: one probe per miss
    bool pending_t2_ = false, pending_from_b2_ = false, evict_t1_plain_ = false;
  };
};

static_assert(eviction_policy<arc>);

}  // namespace kvtk
