// kvtk/detail/key_map.hpp — a growable open-addressing map from 64-bit block keys to a small
// value (or a set, with V = key_map_no_value), for whole-trace passes: unique blocks, the ideal
// (infinite-cache) hit ratio, next-use positions, reuse times.
//
// Design
// ------
// * Why not std::unordered_map: one heap node per key. On the 11.5 M-reference traces the
//   end-to-end benchmark replays, the node map's allocations and pointer chasing cost more than
//   the cache replay itself (bench/RESULTS.md, "End to end"). Here a key costs one slot of
//   sizeof(slot) bytes (8 for a set, 16 with a 64-bit value) at load <= 1/2, and no allocation
//   except when the table doubles.
// * Slots hold the key itself; 0 marks an empty slot, and the real key 0 is kept beside the
//   table (zero_key_*), so every 64-bit key is allowed. Empty = all-zero bytes means a fresh
//   table needs no initialising pass: the kernel's zero pages are already empty slots.
// * Tables of 2 MiB and more are mmap'd with MADV_HUGEPAGE (Linux): a pass over a trace hits a
//   random slot per reference, and with 4 KiB pages nearly every one of those is also a TLB
//   miss and, the first time, a page fault. Measured (11.5 M inserts, 7.3 M distinct keys, the
//   end-to-end benchmark's trace): 0.21 s with 4 KiB pages and an initialised std::vector,
//   0.12 s this way.
// * initial_slots_for(n) sizes a table for a pass over n references: room for n/2 keys, at most
//   2^22 before the first doubling, so a long trace of few distinct keys does not pay for a
//   table it never fills.
// * h = (key ^ key>>29) * 2^64/phi (Fibonacci hashing, as key_table), home = top bits of h;
//   linear probing. No erase: these passes only ever add keys.
// * prefetch(key) touches the home slot's cache line. A pass over a trace calls it some 32 keys
//   ahead of the key it works on, so that the random accesses of a table larger than the caches
//   overlap instead of being paid one after another (about 3x on the benchmark traces).
//
// Invariant: size_ < slots/2 after every insertion (the table doubles before it would reach 1/2).
// References returned by try_emplace and find are invalidated by the next insertion.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace kvtk::detail {

/// The value type of a key_map used as a set.
struct key_map_no_value {};

template <class V>
class key_map {
 public:
  /// The `expected` to give for a pass over n key references (see the design notes).
  static std::size_t expected_for_refs(std::size_t n) noexcept {
    return std::min<std::size_t>(n / 2, std::size_t{1} << 22);
  }
  /// How far ahead of the current reference a pass should prefetch (keys).
  static constexpr std::size_t prefetch_distance = 32;

  /// Effects: an empty map with room for about `expected` keys before its first doubling.
  /// Throws: std::bad_alloc.
  explicit key_map(std::size_t expected = 0) { rehash(slots_for(expected)); }
  key_map(const key_map&) = delete;
  key_map& operator=(const key_map&) = delete;
  ~key_map() { release(slots_, n_slots_); }

  /// Effects: inserts key -> value when key is absent.  Returns: the stored value and whether it
  /// was inserted.  Complexity: O(1) expected, amortised over doublings.  Throws: std::bad_alloc
  /// (when the table doubles).
  std::pair<V*, bool> try_emplace(std::uint64_t key, V value = V{}) {
    if (key == empty_key) [[unlikely]] {
      const bool fresh = !has_zero_key_;
      if (fresh) {
        has_zero_key_ = true;
        zero_key_value_ = value;
        ++size_;
      }
      return {&zero_key_value_, fresh};
    }
    for (std::size_t i = home(key);; i = (i + 1) & mask_) {
      slot& s = slots_[i];
      if (s.key == key) return {&s.value, false};
      if (s.key == empty_key) {
        if ((size_ + 1) * 2 > n_slots_) {  // keep the load below 1/2
          rehash(n_slots_ * 2);
          return try_emplace(key, value);
        }
        s.key = key;
        s.value = value;
        ++size_;
        return {&s.value, true};
      }
    }
  }

  /// Returns: the value stored for key, or nullptr.  Complexity: O(1) expected.  Throws: nothing.
  [[nodiscard]] const V* find(std::uint64_t key) const noexcept {
    if (key == empty_key) [[unlikely]]
      return has_zero_key_ ? &zero_key_value_ : nullptr;
    for (std::size_t i = home(key);; i = (i + 1) & mask_) {
      const slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == empty_key) return nullptr;
    }
  }
  [[nodiscard]] V* find(std::uint64_t key) noexcept {
    return const_cast<V*>(std::as_const(*this).find(key));
  }
  [[nodiscard]] bool contains(std::uint64_t key) const noexcept { return find(key) != nullptr; }

  /// Effects: a hint that key will be looked up soon (loads its home slot's cache line).
  void prefetch(std::uint64_t key) const noexcept { __builtin_prefetch(&slots_[home(key)]); }

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// Bytes held by the table (for memory accounting in reports and tests).
  [[nodiscard]] std::size_t memory_bytes() const noexcept { return n_slots_ * sizeof(slot); }

 private:
  static constexpr std::uint64_t empty_key = 0;
  struct slot {
    std::uint64_t key;
    [[no_unique_address]] V value;
  };
  static_assert(std::is_trivially_copyable_v<V>);

  static std::size_t slots_for(std::size_t expected) noexcept {
    return std::bit_ceil(std::max<std::size_t>(16, expected * 2 + 2));
  }
  [[nodiscard]] std::size_t home(std::uint64_t key) const noexcept {
    return static_cast<std::size_t>(((key ^ (key >> 29)) * 0x9E3779B97F4A7C15ull) >> shift_);
  }

  // n zeroed slots (all empty).
  static slot* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(slot);
#if defined(__linux__)
    if (bytes >= huge_threshold) {
      void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      ::madvise(p, bytes, MADV_HUGEPAGE);  // a hint: failure only costs speed
      return static_cast<slot*>(p);
    }
#endif
    return static_cast<slot*>(::operator new (bytes, std::align_val_t{alignof(slot)}));
  }
  static void release(slot* p, std::size_t n) noexcept {
    if (p == nullptr) return;
#if defined(__linux__)
    if (n * sizeof(slot) >= huge_threshold) {
      ::munmap(p, n * sizeof(slot));
      return;
    }
#endif
    ::operator delete (p, std::align_val_t{alignof(slot)});
  }
  static constexpr std::size_t huge_threshold = std::size_t{2} << 20;

  void rehash(std::size_t n) {
    slot* fresh = allocate(n);
    if (n * sizeof(slot) < huge_threshold)
      std::memset(static_cast<void*>(fresh), 0, n * sizeof(slot));
    slot* old = std::exchange(slots_, fresh);
    const std::size_t old_n = std::exchange(n_slots_, n);
    mask_ = n - 1;
    shift_ = 64 - static_cast<unsigned>(std::countr_zero(n));
    // Moving keys to random homes would pay one cache miss each; prefetching the home of a key
    // some slots ahead overlaps them (as the callers' passes do).
    constexpr std::size_t ahead = 32;
    for (std::size_t j = 0; j < old_n; ++j) {
      if (j + ahead < old_n && old[j + ahead].key != empty_key) prefetch(old[j + ahead].key);
      const slot& s = old[j];
      if (s.key == empty_key) continue;
      std::size_t i = home(s.key);
      while (slots_[i].key != empty_key) i = (i + 1) & mask_;
      slots_[i] = s;
    }
    release(old, old_n);
  }

  slot* slots_ = nullptr;
  std::size_t n_slots_ = 0, mask_ = 0, size_ = 0;
  unsigned shift_ = 64;
  bool has_zero_key_ = false;
  V zero_key_value_{};
};

/// A set of 64-bit keys (8 bytes a slot).
using key_set = key_map<key_map_no_value>;

}  // namespace kvtk::detail
