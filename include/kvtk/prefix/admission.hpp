// kvtk/prefix/admission.hpp — admission rules for a radix index: which of a request's new blocks
// stay cached.
//
// A radix replay inserts a request's missing blocks below its matched path, evicting leaves in
// the leaf order's choice (leaf_policies.hpp). With a capacity of the order of one request, one
// long request that is never seen again flushes everything the cache held. An admission rule may
// decline a new block; then that block and every later block of the request are not inserted
// (a block is useless without its parent). In engine terms the rule decides which of the
// request's blocks stay cached once it finishes: while it runs the engine computes and holds
// them all, outside the cache's capacity. The engines kvtk models (SGLang's RadixCache, vLLM's
// block pool: `--engine`, `--index hashchain`) admit everything; these rules are a what-if beside
// them.
//
// A rule R names itself (R::name, the part after '+' in `--policy lru+ghost`) and has a state
// built from the tree's capacity with, each optional:
//   begin_request(blocks)          every cacheable block of the request, before the match
//   admit(tree, key, depth, hint)  -> bool, asked before each new block while the tree is full
//                                  (a block that fits in a free node is always admitted)
//   on_declined(rest)              the keys not inserted because admit said no (the declined
//                                  key first)
//   on_evict(key)                  a block the tree evicted
// Rules: admit_all (the default: the engines' behaviour), admit_ghost, admit_adaptive,
// admit_tinylfu, admit_depth, and the offline admit_belady (with leaf_belady only: Belady with bypass).
/// Thread safety: a rule's state belongs to one radix_index and follows it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/frequency_sketch.hpp"
#include "kvtk/detail/ghost_list.hpp"

namespace kvtk::prefix {

template <class A>
concept admission_rule = requires {
  { A::name } -> std::convertible_to<std::string_view>;
  typename A::state;
}
&&std::constructible_from<typename A::state, std::uint32_t>;

/// Admit every block: the engines' behaviour, and what a plain leaf-order name means.
struct admit_all {
  static constexpr std::string_view name = "all";
  struct state {
    explicit state(std::uint32_t) noexcept {}
  };
};

/// Admit on second sight. While the tree is full, a new block is admitted only when its key is
/// in the ghost: a FIFO of the keys of recently declined and recently evicted blocks, holding at
/// most `capacity` keys (one per node; the oldest goes first). A key admitted from the ghost
/// leaves it (also when the insertion then stops because no leaf is evictable); a key inserted
/// into a free node is not looked up, and stays there if it was. A declined request records its
/// remaining tail, at most `capacity` keys of it, deepest first, so that the declined block is
/// the newest ghost and the next sight admits the tail from its head. Memory: the ghost, about
/// 56 bytes per key of capacity.
struct admit_ghost {
  static constexpr std::string_view name = "ghost";
  class state {
   public:
    explicit state(std::uint32_t capacity) : cap_(std::max<std::uint32_t>(capacity, 1)), ghost_(cap_) {}
    template <class Tree>
    bool admit(Tree&, block_key key, std::uint32_t, const access_hint&) noexcept {
      return ghost_.take(key) != detail::ghost_list::none;
    }
    void on_declined(std::span<const block_key> rest) noexcept {
      for (std::size_t i = std::min<std::size_t>(rest.size(), cap_); i-- > 0;) remember(rest[i]);
    }
    void on_evict(block_key key) noexcept { remember(key); }
    [[nodiscard]] std::size_t ghosts() const noexcept { return ghost_.size(0); }

   private:
    void remember(block_key k) noexcept {
      if (ghost_.contains(k)) return;
      if (ghost_.size(0) >= cap_) ghost_.pop(0);
      ghost_.push(0, k, 1);
    }
    std::uint32_t cap_;
    detail::ghost_list ghost_;
  };
};

/// Adaptive admission: second-sight admission (admit_ghost) that lets first-sight blocks in while
/// declining them proves costly. Two ghost FIFOs of at most `capacity` keys each: D, keys
/// declined, and E, keys evicted. While the tree is full a new block is admitted when its key is
/// in D (second sight; declining it cost a miss, so the budget p grows by up_step) or in E (it was
/// cached, evicted, and came back: admitting too much cost a miss, so p shrinks by down_step);
/// a block seen for the first time is admitted while the request has admitted fewer than p such
/// blocks. p is in [0, capacity] and starts at 0. The steps were chosen on `trace gen` profiles of
/// seed 17 and are reported on other traces (docs/policy-quality.md). Memory: the ghosts, about
/// 56 bytes per key, 2 x capacity keys.
struct admit_adaptive {
  static constexpr std::string_view name = "adaptive";
  static constexpr std::uint64_t up_step = 1, down_step = 4;
  class state {
   public:
    explicit state(std::uint32_t capacity)
        : cap_(std::max<std::uint32_t>(capacity, 1)), ghosts_(2 * cap_) {}
    void begin_request(std::span<const block_key>) noexcept { admitted_ = 0; }
    template <class Tree>
    bool admit(Tree&, block_key key, std::uint32_t, const access_hint&) noexcept {
      switch (ghosts_.take(key)) {
        case 0:
          budget_ = std::min<std::uint64_t>(cap_, budget_ + up_step);
          return true;
        case 1:
          budget_ -= std::min(budget_, down_step);
          return true;
        default:
          if (admitted_ >= budget_) return false;
          ++admitted_;
          return true;
      }
    }
    // As admit_ghost: at most cap_ keys of the tail, deepest first.
    void on_declined(std::span<const block_key> rest) noexcept {
      for (std::size_t i = std::min<std::size_t>(rest.size(), cap_); i-- > 0;) remember(0, rest[i]);
    }
    void on_evict(block_key key) noexcept { remember(1, key); }
    /// The current budget p of first-sight blocks per request.
    [[nodiscard]] std::uint64_t budget() const noexcept { return budget_; }

   private:
    void remember(unsigned list, block_key k) noexcept {
      ghosts_.take(k);
      if (ghosts_.size(list) >= cap_) ghosts_.pop(list);
      ghosts_.push(list, k, 1);
    }
    std::uint32_t cap_;
    detail::ghost_lists<2> ghosts_;
    std::uint64_t budget_ = 0, admitted_ = 0;
  };
};

/// TinyLFU at the leaves (Einziger et al., 2017): every cacheable block reference is counted in a
/// count-min sketch (detail::frequency_sketch sized for max(capacity, 64) keys: 4-bit counters, a
/// doorkeeper, all counts halved every 10 x max(capacity, 64) increments);
/// while the tree is full a new block is admitted only when its estimated frequency is higher
/// than that of the leaf the leaf order would evict next (prefix_tree::victim(): with S3-FIFO's
/// order, the moves that choice makes stay done when the block is then declined). Memory: about
/// 8 bytes per block of capacity.
struct admit_tinylfu {
  static constexpr std::string_view name = "tinylfu";
  class state {
   public:
    explicit state(std::uint32_t capacity)
        : sketch_(std::max<std::uint32_t>(capacity, 64), std::uint64_t{10} * std::max<std::uint32_t>(capacity, 64), true) {}
    void begin_request(std::span<const block_key> blocks) noexcept {
      for (block_key k : blocks) sketch_.increment(k);
    }
    template <class Tree>
    bool admit(Tree& tree, block_key key, std::uint32_t, const access_hint&) noexcept {
      const auto v = tree.victim();
      if (v == Tree::root) return true;  // nothing evictable: the insertion stops anyway
      return sketch_.estimate(key) > sketch_.estimate(tree.at(v).key);
    }
    [[nodiscard]] const detail::frequency_sketch& sketch() const noexcept { return sketch_; }

   private:
    detail::frequency_sketch sketch_;
  };
};

/// Depth-limited admission: while the tree is full, a block at depth d (0 = the request's first
/// block) is admitted only when d < depth_percent % of the capacity (at least 1), so that no
/// single request can fill more than that share of a full cache with its tail. Stateless.
struct admit_depth {
  static constexpr std::string_view name = "depth";
  static constexpr std::uint32_t depth_percent = 50;
  class state {
   public:
    explicit state(std::uint32_t capacity) noexcept
        : limit_(std::max<std::uint64_t>(std::uint64_t{capacity} * depth_percent / 100, 1)) {}
    template <class Tree>
    bool admit(Tree&, block_key, std::uint32_t depth, const access_hint&) const noexcept {
      return depth < limit_;
    }

   private:
    std::uint64_t limit_;
  };
};

/// Belady with bypass at the leaves (offline; with leaf_belady only, whose rank is ~next_use):
/// while the tree is full, a new block is admitted only when its next use (hint.next_use) is
/// sooner than that of the evictable leaf used furthest in the future, the one leaf_belady would
/// evict. A block never used again is not admitted into a full tree. On traces of one block per
/// request this is flat MIN with bypass, the optimum (optimum.hpp).
struct admit_belady {
  static constexpr std::string_view name = "belady";
  static constexpr bool offline = true;
  static constexpr unsigned hints_read = hint_fields::next_use;
  static constexpr bool needs_belady_leaf = true;
  struct state {
    explicit state(std::uint32_t) noexcept {}
    template <class Tree>
    bool admit(Tree& tree, block_key, std::uint32_t, const access_hint& h) const noexcept {
      const auto v = tree.victim();
      if (v == Tree::root) return false;
      return h.next_use < ~tree.at(v).rank;
    }
  };
};

static_assert(admission_rule<admit_all> && admission_rule<admit_ghost> &&
              admission_rule<admit_adaptive> &&
              admission_rule<admit_tinylfu> && admission_rule<admit_depth> &&
              admission_rule<admit_belady>);

}  // namespace kvtk::prefix
