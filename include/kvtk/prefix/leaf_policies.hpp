// kvtk/prefix/leaf_policies.hpp — orders for the evictable leaves of a prefix_tree.
//
// In a prefix cache only leaves can go (a block is useless without its parent), and leaves appear
// and disappear as children are added and evicted, so the tree keeps its evictable leaves in one
// indexed min-heap keyed by a 64-bit *rank* per node; the smallest rank is the next victim (ties:
// the smaller key). A leaf policy is just the rule that computes ranks:
//
//   on_insert(stamp, hint)        rank of a new node
//   on_touch(rank, stamp, hint)   rank of a node accessed again
//
// `stamp` is the tree's global counter, incremented per block touch or insert in forward order, so
// a parent's stamp is always older than that of the child the same request touched next.
/// Thread safety: stateless orders are pure functions; a stateful order's state is its tree's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/ghost_list.hpp"

namespace kvtk::prefix {

/// A leaf order given by two pure functions of a node's own state.
template <class L>
concept stateless_leaf_policy = requires(std::uint64_t r, std::uint64_t s, const access_hint& h) {
  { L::name } -> std::convertible_to<std::string_view>;
  { L::on_insert(s, h) }
  noexcept->std::same_as<std::uint64_t>;
  { L::on_touch(r, s, h) }
  noexcept->std::same_as<std::uint64_t>;
};

/// A leaf order that keeps state across nodes (segments). L::state is built from the tree's
/// capacity and gets, with the node's slot and the tree (for tree.rerank(slot, rank) of *other*
/// nodes):
///   on_insert(slot, stamp, hint, tree) -> rank
///   on_touch(slot, rank, stamp, hint, tree) -> rank     (called in forward path order)
///   on_evict(slot, rank, key)
/// and may define L::segments = 2 (the rank's top bit picks one of two heaps of evictable leaves)
/// and state::pick_victim(tree) -> slot (or tree.root) to choose victims itself, using
/// tree.top(g), tree.evictable(g), tree.rerank(slot, rank) and tree.next_stamp().
template <class L>
concept stateful_leaf_policy = requires {
  { L::name } -> std::convertible_to<std::string_view>;
  typename L::state;
}
&&std::constructible_from<typename L::state, std::uint32_t>;

template <class L>
concept leaf_policy = stateless_leaf_policy<L> || stateful_leaf_policy<L>;

/// Least recently used leaf first.
struct leaf_lru {
  static constexpr std::string_view name = "lru";
  static std::uint64_t on_insert(std::uint64_t stamp, const access_hint&) noexcept { return stamp; }
  static std::uint64_t on_touch(std::uint64_t, std::uint64_t stamp, const access_hint&) noexcept {
    return stamp;
  }
};

/// Oldest inserted leaf first; accesses do not matter.
struct leaf_fifo {
  static constexpr std::string_view name = "fifo";
  static std::uint64_t on_insert(std::uint64_t stamp, const access_hint&) noexcept { return stamp; }
  static std::uint64_t on_touch(std::uint64_t rank, std::uint64_t, const access_hint&) noexcept {
    return rank;
  }
};

/// Least frequently used leaf first (accesses since insertion, insertion = 1, saturating at
/// 2^24-1), ties by least recent access. Rank = frequency << 40 | (stamp mod 2^40): the tie-break
/// is exact for the first 2^40 (about 10^12) touches of a tree's life.
struct leaf_lfu {
  static constexpr std::string_view name = "lfu";
  static constexpr std::uint64_t stamp_mask = (std::uint64_t{1} << 40) - 1;
  static constexpr std::uint64_t max_freq = (std::uint64_t{1} << 24) - 1;
  static std::uint64_t on_insert(std::uint64_t stamp, const access_hint&) noexcept {
    return (std::uint64_t{1} << 40) | (stamp & stamp_mask);
  }
  static std::uint64_t on_touch(std::uint64_t rank, std::uint64_t stamp,
                                const access_hint&) noexcept {
    const std::uint64_t f = std::min((rank >> 40) + 1, max_freq);
    return (f << 40) | (stamp & stamp_mask);
  }
};

/// Lower priority leaves first (hint.priority, clamped to 0..255, taken from the latest access),
/// least recently used within a priority. Rank = priority << 56 | (stamp mod 2^56).
struct leaf_priority_lru {
  static constexpr std::string_view name = "priority-lru";
  static constexpr unsigned hints_read = hint_fields::priority;
  static constexpr std::uint64_t stamp_mask = (std::uint64_t{1} << 56) - 1;
  static std::uint64_t on_insert(std::uint64_t stamp, const access_hint& h) noexcept {
    return (std::uint64_t{std::min<std::uint32_t>(h.priority, 255)} << 56) | (stamp & stamp_mask);
  }
  static std::uint64_t on_touch(std::uint64_t, std::uint64_t stamp, const access_hint& h) noexcept {
    return on_insert(stamp, h);
  }
};

/// Offline optimum for prefix caches (Belady with leaf-only eviction): the evictable leaf whose
/// next use (hint.next_use, a position in the block-reference stream) is furthest away goes first.
struct leaf_belady {
  static constexpr std::string_view name = "belady";
  static constexpr unsigned hints_read = hint_fields::next_use;
  static constexpr bool offline = true;
  static std::uint64_t on_insert(std::uint64_t, const access_hint& h) noexcept {
    return ~h.next_use;
  }
  static std::uint64_t on_touch(std::uint64_t, std::uint64_t, const access_hint& h) noexcept {
    return ~h.next_use;
  }
};

/// Segmented LRU restricted to leaves. A node starts in the probationary segment; an access while
/// in probation moves it to the protected segment (at most protected_percent of capacity, at least
/// one node); when protected overflows, its least recently used node — leaf or not — is demoted to
/// the most recent end of probation. Victims: the least recently used evictable leaf of probation,
/// then of protected. Rank = protected << 63 | stamp; a demoted node takes the stamp of the access
/// that demoted it. The protected segment's LRU order over all nodes is an index-linked list in the
/// state (8 bytes per block of capacity).
struct leaf_slru {
  static constexpr std::string_view name = "slru";
  static constexpr std::uint32_t protected_percent = 80;
  static constexpr std::uint64_t protected_bit = std::uint64_t{1} << 63;

  class state {
   public:
    explicit state(std::uint32_t capacity)
        : prev_(capacity),
          next_(capacity),
          cap_(std::max<std::uint64_t>(std::uint64_t{capacity} * protected_percent / 100, 1)) {}

    template <class Tree>
    std::uint64_t on_insert(std::uint32_t, std::uint64_t stamp, const access_hint&,
                            Tree&) noexcept {
      return stamp & ~protected_bit;
    }
    template <class Tree>
    std::uint64_t on_touch(std::uint32_t s, std::uint64_t rank, std::uint64_t stamp,
                           const access_hint&, Tree& tree) noexcept {
      if (rank & protected_bit) {
        unlink(s);
        push_back(s);
        return protected_bit | stamp;
      }
      push_back(s);
      if (++count_ > cap_) {  // count_ >= 2 here, so the LRU node is not s
        const std::uint32_t d = head_;
        unlink(d);
        --count_;
        tree.rerank(d, stamp & ~protected_bit);
      }
      return protected_bit | stamp;
    }
    void on_evict(std::uint32_t s, std::uint64_t rank, block_key) noexcept {
      if (rank & protected_bit) {
        unlink(s);
        --count_;
      }
    }
    [[nodiscard]] std::uint64_t protected_count() const noexcept { return count_; }

   private:
    static constexpr std::uint32_t none = ~std::uint32_t{0};
    void push_back(std::uint32_t s) noexcept {
      prev_[s] = tail_;
      next_[s] = none;
      if (tail_ != none)
        next_[tail_] = s;
      else
        head_ = s;
      tail_ = s;
    }
    void unlink(std::uint32_t s) noexcept {
      if (prev_[s] != none)
        next_[prev_[s]] = next_[s];
      else
        head_ = next_[s];
      if (next_[s] != none)
        prev_[next_[s]] = prev_[s];
      else
        tail_ = prev_[s];
    }
    std::vector<std::uint32_t> prev_, next_;
    std::uint32_t head_ = none, tail_ = none;  // head = least recently used
    std::uint64_t count_ = 0, cap_;
  };
};

/// S3-FIFO restricted to leaves (Yang et al., SOSP'23, adapted to a prefix tree). Nodes are in a
/// small FIFO S (new nodes) or a main FIFO M (nodes whose key was recently evicted from S — a
/// ghost hit — or that were accessed while in S). Each node has a 2-bit access counter (an access
/// adds 1, up to 3; no reordering). Victim choice, over evictable leaves only:
///   if |S| >= small_percent of capacity (|S| counts all S nodes) or M has no evictable leaf:
///     S's oldest evictable leaf t: counter > 0 -> t moves to M's newest end, counter 0, again;
///                                  else t is the victim and its key joins the ghost FIFO
///   else M's oldest evictable leaf t: counter > 0 -> counter - 1, t to M's newest end, again;
///                                     else t is the victim.
/// Ranks: S = stamp, M = 1 << 63 | stamp (two heaps). The ghost holds at most ghost_percent of
/// capacity keys. Memory on top of the tree: 16 bytes of heap and 1 counter byte per block, and
/// the ghost (about 56 bytes per ghost entry).
struct leaf_s3fifo {
  static constexpr std::string_view name = "s3fifo";
  static constexpr unsigned segments = 2;
  static constexpr std::uint32_t small_percent = 10;
  static constexpr std::uint32_t ghost_percent = 90;
  static constexpr std::uint64_t main_bit = std::uint64_t{1} << 63;

  class state {
   public:
    explicit state(std::uint32_t capacity)
        : freq_(capacity, 0),
          small_target_(std::max<std::uint64_t>(std::uint64_t{capacity} * small_percent / 100, 1)),
          ghost_cap_(std::max<std::uint32_t>(
              static_cast<std::uint32_t>(std::uint64_t{capacity} * ghost_percent / 100), 1)),
          ghost_(ghost_cap_) {}

    template <class Tree>
    std::uint64_t on_insert(std::uint32_t s, std::uint64_t stamp, const access_hint&,
                            Tree& tree) noexcept {
      freq_[s] = 0;
      if (ghost_.take(tree.at(s).key) != detail::ghost_list::none) {
        ++main_;
        return main_bit | stamp;
      }
      ++small_;
      return stamp & ~main_bit;
    }
    template <class Tree>
    std::uint64_t on_touch(std::uint32_t s, std::uint64_t rank, std::uint64_t, const access_hint&,
                           Tree&) noexcept {
      if (freq_[s] < 3) ++freq_[s];
      return rank;
    }
    void on_evict(std::uint32_t, std::uint64_t rank, block_key key) noexcept {
      if (rank & main_bit) {
        --main_;
      } else {
        --small_;
        if (ghost_.size(0) >= ghost_cap_) ghost_.pop(0);
        ghost_.push(0, key, 1);
      }
    }
    template <class Tree>
    std::uint32_t pick_victim(Tree& tree) noexcept {
      for (;;) {
        const bool from_small =
            tree.evictable(0) > 0 && (small_ >= small_target_ || tree.evictable(1) == 0);
        if (from_small) {
          const std::uint32_t t = tree.top(0);
          if (freq_[t] == 0) return t;
          freq_[t] = 0;
          --small_;
          ++main_;
          tree.rerank(t, main_bit | tree.next_stamp());
          continue;
        }
        if (tree.evictable(1) == 0) return Tree::root;
        const std::uint32_t t = tree.top(1);
        if (freq_[t] == 0) return t;
        --freq_[t];
        tree.rerank(t, main_bit | tree.next_stamp());
      }
    }

   private:
    std::vector<std::uint8_t> freq_;
    std::uint64_t small_ = 0, main_ = 0, small_target_;
    std::uint32_t ghost_cap_;
    detail::ghost_list ghost_;
  };
};

static_assert(leaf_policy<leaf_lru> && leaf_policy<leaf_fifo> && leaf_policy<leaf_lfu> &&
              leaf_policy<leaf_priority_lru> && leaf_policy<leaf_belady> && leaf_policy<leaf_slru>);

}  // namespace kvtk::prefix
