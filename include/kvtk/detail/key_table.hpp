// kvtk/detail/key_table.hpp — fixed-capacity open-addressing map: 64-bit key -> 32-bit index.
//
// Design
// ------
// * Layout: one array of {key, value} slots (16 bytes), size a power of two >= 2 * max_entries, so
//   the load factor never exceeds 1/2 and a probe sequence is short (expected < 2 slots on a hit).
// * Empty slots hold value == npos; every key (including 0 and ~0) is a valid key.
// * Linear probing from hash(key) = (key ^ key>>29) * 2^64/phi >> shift (Fibonacci hashing: one
//   multiply; spreads sequential ids, which flat traces are full of, across the table).
// * Deletion is backward-shift (Knuth 6.4 algorithm R): no tombstones, so a table that sees
//   billions of insert/erase pairs never degrades and never needs a rehash.
// * All memory is allocated in the constructor; find/insert/erase never allocate.
//
// Invariant: for every stored key k at slot s, every slot between home(k) and s (cyclically) is
// occupied. backward-shift deletion preserves it.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

namespace kvtk::detail {

class key_table {
 public:
  static constexpr std::uint32_t npos = std::numeric_limits<std::uint32_t>::max();

  /// Requires: 0 < max_entries < 2^31.  Effects: allocates 2*max_entries slots rounded up to a
  /// power of two.  Throws: std::invalid_argument on a bad size, std::bad_alloc.
  explicit key_table(std::uint32_t max_entries) : max_entries_(max_entries) {
    if (max_entries == 0 || max_entries >= (1u << 31)) {
      throw std::invalid_argument("key_table: max_entries must be in [1, 2^31)");
    }
    const std::uint64_t slots = std::bit_ceil(std::uint64_t{max_entries} * 2);
    slots_.assign(slots, slot{0, npos});
    mask_ = slots - 1;
    shift_ = 64 - static_cast<unsigned>(std::countr_zero(slots));
  }

  /// Effects: the index stored for key, or npos.  Complexity: O(1) expected.
  [[nodiscard]] std::uint32_t find(std::uint64_t key) const noexcept {
    for (std::uint64_t i = home(key);; i = (i + 1) & mask_) {
      const slot& s = slots_[i];
      if (s.value == npos) return npos;
      if (s.key == key) return s.value;
    }
  }

  /// Requires: key absent, size() < max_entries(), value != npos.
  /// Effects: stores key -> value.  Complexity: O(1) expected.
  void insert(std::uint64_t key, std::uint32_t value) noexcept {
    std::uint64_t i = home(key);
    while (slots_[i].value != npos) i = (i + 1) & mask_;
    slots_[i] = slot{key, value};
    ++size_;
  }

  /// Effects: removes key if present; returns whether it was.  Complexity: O(1) expected.
  bool erase(std::uint64_t key) noexcept {
    std::uint64_t i = home(key);
    for (;; i = (i + 1) & mask_) {
      if (slots_[i].value == npos) return false;
      if (slots_[i].key == key) break;
    }
    // Backward shift: pull later members of the cluster into the hole when their home position
    // does not lie cyclically in (hole, j].
    std::uint64_t hole = i;
    for (std::uint64_t j = (i + 1) & mask_; slots_[j].value != npos; j = (j + 1) & mask_) {
      const std::uint64_t h = home(slots_[j].key);
      const bool stays = ((j - h) & mask_) < ((j - hole) & mask_);
      if (!stays) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole].value = npos;
    --size_;
    return true;
  }

  /// Effects: replaces the value of a present key; returns false if absent.
  bool assign(std::uint64_t key, std::uint32_t value) noexcept {
    for (std::uint64_t i = home(key);; i = (i + 1) & mask_) {
      slot& s = slots_[i];
      if (s.value == npos) return false;
      if (s.key == key) {
        s.value = value;
        return true;
      }
    }
  }

  void clear() noexcept {
    for (slot& s : slots_) s.value = npos;
    size_ = 0;
  }

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::uint32_t max_entries() const noexcept { return max_entries_; }
  [[nodiscard]] std::size_t slot_count() const noexcept { return slots_.size(); }
  [[nodiscard]] std::size_t memory_bytes() const noexcept { return slots_.size() * sizeof(slot); }

 private:
  struct slot {
    std::uint64_t key;
    std::uint32_t value;
  };

  [[nodiscard]] std::uint64_t home(std::uint64_t key) const noexcept {
    return ((key ^ (key >> 29)) * 0x9E3779B97F4A7C15ull) >> shift_;
  }

  std::vector<slot> slots_;
  std::uint64_t mask_ = 0;
  unsigned shift_ = 0;
  std::size_t size_ = 0;
  std::uint32_t max_entries_ = 0;
};

}  // namespace kvtk::detail
