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

namespace kvtk {

struct arc {
  static constexpr std::string_view name = "arc";
  /// ARC is self-tuning and has no parameters.
  struct config {};
  struct hook : detail::list_hook<arc> {
    bool in_t2 = false;
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
      n.in_t2 = pending_t2_;
      link(n);
      pending_t2_ = false;
      pending_from_b2_ = false;
      evict_t1_plain_ = false;
    }
    void on_hit(Node& n, const access_hint&) noexcept {
      unlink(n);
      n.in_t2 = true;
      link(n);
    }
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
      } else if (t1_weight_ + ghosts_.weight(b1) >= c_) {
        if (ghosts_.empty(b1)) {
          evict_t1_plain_ = true;
        } else {
          while (!ghosts_.empty(b1) && t1_weight_ + ghosts_.weight(b1) >= c_) ghosts_.pop(b1);
        }
      } else {
        while (!ghosts_.empty(b2) &&
               t1_weight_ + t2_weight_ + ghosts_.weight(b1) + ghosts_.weight(b2) >= 2 * c_) {
          ghosts_.pop(b2);
        }
      }
    }
    /// Complexity: O(1) + O(pinned nodes passed over).
    template <class Pred>
    Node* evict(Pred&& pred) noexcept {
      if (evict_t1_plain_) {
        Node* v = detail::first_evictable(t1_, pred);
        if (v == nullptr) v = detail::first_evictable(t2_, pred);
        if (v) unlink(*v);
        return v;
      }
      const auto t1w = static_cast<double>(t1_weight_);
      const bool from_t1 = !t1_.empty() && (t1w > p_ || (pending_from_b2_ && t1w == p_));
      Node* v = detail::first_evictable(from_t1 ? t1_ : t2_, pred);
      if (v == nullptr) v = detail::first_evictable(from_t1 ? t2_ : t1_, pred);
      if (v == nullptr) return nullptr;
      unlink(*v);
      ghosts_.push(v->in_t2 ? b2 : b1, v->key, v->size);
      return v;
    }
    void on_erase(Node& n) noexcept { unlink(n); }
    [[nodiscard]] std::size_t size() const noexcept { return t1_.size() + t2_.size(); }

    /// The adaptive target for T1, in capacity units.
    [[nodiscard]] double target_t1() const noexcept { return p_; }

    template <class F>
    void for_each(F&& f) const {
      for (const Node& n : t1_) f(n);
      for (const Node& n : t2_) f(n);
    }
    [[nodiscard]] const char* audit() const noexcept {
      std::uint64_t w1 = 0, w2 = 0;
      for (const Node& n : t1_) {
        if (n.in_t2) return "arc: T2 node in T1";
        w1 += n.size;
      }
      for (const Node& n : t2_) {
        if (!n.in_t2) return "arc: T1 node in T2";
        w2 += n.size;
      }
      if (w1 != t1_weight_ || w2 != t2_weight_) return "arc: list weights out of sync";
      if (p_ < 0.0 || p_ > static_cast<double>(c_)) return "arc: p outside [0, c]";
      return "";
    }

   private:
    void link(Node& n) noexcept {
      if (n.in_t2) {
        t2_.push_back(n);
        t2_weight_ += n.size;
      } else {
        t1_.push_back(n);
        t1_weight_ += n.size;
      }
    }
    void unlink(Node& n) noexcept {
      if (n.in_t2) {
        t2_.erase(t2_.iterator_to(n));
        t2_weight_ -= n.size;
      } else {
        t1_.erase(t1_.iterator_to(n));
        t1_weight_ -= n.size;
      }
    }

    std::uint64_t c_;
    double p_ = 0.0;
    detail::intrusive_list<Node, arc> t1_, t2_;
    std::uint64_t t1_weight_ = 0, t2_weight_ = 0;
    static constexpr int b1 = 0, b2 = 1;  // ghost list ids
    detail::ghost_lists<2> ghosts_;       // B1 and B2 share one table: one probe per miss
    bool pending_t2_ = false, pending_from_b2_ = false, evict_t1_plain_ = false;
  };
};

static_assert(eviction_policy<arc>);

}  // namespace kvtk
