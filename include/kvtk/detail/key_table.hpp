// kvtk/detail/key_table.hpp — fixed-capacity open-addressing index: 64-bit key -> 32-bit index.
//
// Design
// ------
// * The keys themselves live in the caller's pool (a node or ghost array); the table stores only
//   8-byte slots {index, tag}, and a KeyOf functor maps an index back to its key. Half the bytes of
//   a {key, value} slot means twice the entries per cache line: on replay workloads the table is
//   the hottest memory and this is what keeps it in L2.
// * h = (key ^ key>>29) * 2^64/phi (Fibonacci hashing; spreads sequential ids, which flat traces
//   are full of). tag = the top 32 bits of h; home slot = the top log2(slots) bits of h, i.e. a
//   monotone function of the tag (tag * slots >> 32, "fastrange"), so any table size works. A probe
//   compares tags and confirms a tag match with KeyOf, so the pool is touched only on a (likely)
//   hit; erase recomputes home slots from tags alone.
// * Size: exactly slots_per_entry * max_entries slots of 8 bytes, so the memory per entry is
//   known in advance (block_cache: 4 -> 32 bytes, load <= 1/4; prefix_tree: 2 -> 16 bytes,
//   load <= 1/2). Linear probing. Measured: at load <= 1/2 LRU replay at 1000 blocks ran at 46 M/s
//   instead of 76 M/s at <= 1/4 (bench/RESULTS.md); longer probe runs, each ending in a
//   hard-to-predict branch, are the likely cause.
// * Deletion is backward-shift (Knuth 6.4 algorithm R): no tombstones, so a table that sees
//   billions of insert/erase pairs never degrades and never needs a rehash.
// * All memory is allocated in the constructor; find/insert/erase never allocate.
//
// Invariant: for every stored entry at slot s, every slot between its home and s (cyclically) is
// occupied. Backward-shift deletion preserves it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

namespace kvtk::detail {

template <class KeyOf>
class key_table {
 public:
  static constexpr std::uint32_t npos = std::numeric_limits<std::uint32_t>::max();

  /// Requires: 0 < max_entries < 2^31; 2 <= slots_per_entry <= 8; key_of(i) returns the key
  /// stored under index i.  Effects: allocates slots_per_entry * max_entries slots.
  /// Throws: std::invalid_argument on a bad size, std::bad_alloc.
  key_table(std::uint32_t max_entries, KeyOf key_of, unsigned slots_per_entry = 4)
      : key_of_(key_of), max_entries_(max_entries) {
    if (max_entries == 0 || max_entries >= (1u << 31)) {
      throw std::invalid_argument("key_table: max_entries must be in [1, 2^31)");
    }
    if (slots_per_entry < 2 || slots_per_entry > 8) {
      throw std::invalid_argument("key_table: slots_per_entry must be in [2, 8]");
    }
    slots_.assign(std::uint64_t{max_entries} * slots_per_entry, slot{npos, 0});
    size_slots_ = slots_.size();
  }

  /// Effects: the index stored for key, or npos.  Complexity: O(1) expected.
  [[nodiscard]] std::uint32_t find(std::uint64_t key) const noexcept {
    const std::uint32_t tag = tag_of(key);
    for (std::uint64_t i = home(tag);; i = next(i)) {
      const slot s = slots_[i];
      if (s.index == npos) return npos;
      if (s.tag == tag && key_of_(s.index) == key) return s.index;
    }
  }

  /// Effects: hints the CPU to fetch key's home slot (lets a caller that knows its next keys, such
  /// as a request's block list, overlap the table's cache misses).  Throws: nothing.
  void prefetch(std::uint64_t key) const noexcept {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(&slots_[home(tag_of(key))]);
#else
    (void)key;
#endif
  }

  /// Requires: key absent, size() < max_entries(), index != npos, key_of(index) == key.
  /// Effects: stores key -> index.  Complexity: O(1) expected.
  void insert(std::uint64_t key, std::uint32_t index) noexcept {
    const std::uint32_t tag = tag_of(key);
    std::uint64_t i = home(tag);
    while (slots_[i].index != npos) i = next(i);
    slots_[i] = slot{index, tag};
    ++size_;
  }

  /// Effects: removes key if present and returns its index, else npos. One probe sequence.
  /// Complexity: O(1) expected.
  std::uint32_t take(std::uint64_t key) noexcept {
    const std::uint32_t tag = tag_of(key);
    for (std::uint64_t i = home(tag);; i = next(i)) {
      const slot s = slots_[i];
      if (s.index == npos) return npos;
      if (s.tag == tag && key_of_(s.index) == key) {
        erase_at(i);
        return s.index;
      }
    }
  }

  /// Effects: removes key if present; returns whether it was.
  bool erase(std::uint64_t key) noexcept { return take(key) != npos; }

  void clear() noexcept {
    for (slot& s : slots_) s.index = npos;
    size_ = 0;
  }

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::uint32_t max_entries() const noexcept { return max_entries_; }
  [[nodiscard]] std::size_t slot_count() const noexcept { return slots_.size(); }
  [[nodiscard]] std::size_t memory_bytes() const noexcept { return slots_.size() * sizeof(slot); }

 private:
  struct slot {
    std::uint32_t index;
    std::uint32_t tag;
  };

  static std::uint32_t tag_of(std::uint64_t key) noexcept {
    return static_cast<std::uint32_t>(((key ^ (key >> 29)) * 0x9E3779B97F4A7C15ull) >> 32);
  }
  [[nodiscard]] std::uint64_t home(std::uint32_t tag) const noexcept {
    return (std::uint64_t{tag} * size_slots_) >> 32;
  }
  [[nodiscard]] std::uint64_t next(std::uint64_t i) const noexcept {
    return i + 1 == size_slots_ ? 0 : i + 1;
  }
  // Cyclic distance from a to b going forward.
  [[nodiscard]] std::uint64_t distance(std::uint64_t a, std::uint64_t b) const noexcept {
    return b >= a ? b - a : b + size_slots_ - a;
  }

  void erase_at(std::uint64_t i) noexcept {
    // Backward shift: pull later members of the cluster into the hole unless their home lies
    // cyclically in (hole, j].
    std::uint64_t hole = i;
    for (std::uint64_t j = next(i); slots_[j].index != npos; j = next(j)) {
      const std::uint64_t h = home(slots_[j].tag);
      if (distance(h, j) >= distance(hole, j)) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole].index = npos;
    --size_;
  }

  std::vector<slot> slots_;
  [[no_unique_address]] KeyOf key_of_;
  std::uint64_t size_slots_ = 0;
  std::size_t size_ = 0;
  std::uint32_t max_entries_ = 0;
};

/// KeyOf for a pool whose elements have a `key` member.
template <class T>
struct key_member {
  const T* pool;
  std::uint64_t operator()(std::uint32_t i) const noexcept { return pool[i].key; }
};

}  // namespace kvtk::detail
