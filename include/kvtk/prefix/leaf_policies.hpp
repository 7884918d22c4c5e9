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
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "kvtk/concepts.hpp"

namespace kvtk::prefix {

template <class L>
concept leaf_policy = requires(std::uint64_t r, std::uint64_t s, const access_hint& h) {
  { L::name } -> std::convertible_to<std::string_view>;
  { L::on_insert(s, h) }
  noexcept->std::same_as<std::uint64_t>;
  { L::on_touch(r, s, h) }
  noexcept->std::same_as<std::uint64_t>;
};

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
  static constexpr bool offline = true;
  static std::uint64_t on_insert(std::uint64_t, const access_hint& h) noexcept {
    return ~h.next_use;
  }
  static std::uint64_t on_touch(std::uint64_t, std::uint64_t, const access_hint& h) noexcept {
    return ~h.next_use;
  }
};

static_assert(leaf_policy<leaf_lru> && leaf_policy<leaf_fifo> && leaf_policy<leaf_lfu> &&
              leaf_policy<leaf_priority_lru> && leaf_policy<leaf_belady>);

}  // namespace kvtk::prefix
