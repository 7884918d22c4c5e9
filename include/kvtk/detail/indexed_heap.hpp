// kvtk/detail/indexed_heap.hpp — a binary min-heap of ids (uint32) that knows where each id sits,
// so that an id can be erased or re-ranked in O(log n): the eviction order of the engines' radix
// trees and of LMCache's CPU tier (SGLang's leaves by last access, LMCache's chunks by policy
// rank).
//
// Design: the heap owns only the array of ids. The ranks and the positions live in the owner's
// records (a node's time, a slot's heap_pos), which every operation reaches through two callables
// given per call: `less(a, b)` on ids and `pos(id)`, a reference to the id's position (none when
// out of the heap). So the owner can move or copy freely, several heaps can share one record
// (SGLang's HiCache has a device-leaf and a host-leaf heap on one node), and nothing is stored
// twice.
//
// Invariants: for every i > 0, !less(ids[i], ids[(i - 1) / 2]); pos(ids[i]) == i. Ties keep the
// order the sifts leave them in, which is deterministic: the equality checks against the
// engines depend on it, so the sift rules (strict less; the first of two equal children) are
// part of the contract.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace kvtk::detail {

class indexed_heap {
 public:
  static constexpr std::uint32_t none = ~std::uint32_t{0};

  /// Effects: room for n ids, so that pushes never reallocate.  Throws: std::bad_alloc.
  void reserve(std::size_t n) { ids_.reserve(n); }
  [[nodiscard]] bool empty() const noexcept { return ids_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return ids_.size(); }
  /// Requires: !empty(). The least id.
  [[nodiscard]] std::uint32_t top() const noexcept { return ids_[0]; }
  /// The ids in heap order (invariant checks).
  [[nodiscard]] const std::vector<std::uint32_t>& ids() const noexcept { return ids_; }

  /// Requires: x not in the heap; size() < the reserved room (or an allocation may throw).
  /// Effects: x joins at its rank.  Complexity: O(log n).
  template <class Less, class Pos>
  void push(std::uint32_t x, const Less& less, const Pos& pos) {
    ids_.push_back(x);
    pos(x) = static_cast<std::uint32_t>(ids_.size() - 1);
    (void)sift_up(ids_.size() - 1, less, pos);
  }
  /// Requires: x in the heap. Effects: x leaves it; pos(x) = none.  Complexity: O(log n).
  template <class Less, class Pos>
  void erase(std::uint32_t x, const Less& less, const Pos& pos) noexcept {
    const std::size_t i = pos(x);
    pos(x) = none;
    if (i + 1 == ids_.size()) {
      ids_.pop_back();
      return;
    }
    ids_[i] = ids_.back();
    ids_.pop_back();
    pos(ids_[i]) = static_cast<std::uint32_t>(i);
    sift_down(sift_up(i, less, pos), less, pos);
  }
  /// Requires: x in the heap, its rank changed. Effects: x moves to its place.  O(log n).
  template <class Less, class Pos>
  void fix(std::uint32_t x, const Less& less, const Pos& pos) noexcept {
    sift_down(sift_up(pos(x), less, pos), less, pos);
  }
  /// "" when the invariants hold, else the first violation (tests).
  template <class Less, class Pos>
  [[nodiscard]] const char* check(const Less& less, const Pos& pos) const {
    for (std::size_t i = 0; i < ids_.size(); ++i) {
      if (pos(ids_[i]) != i) return "heap positions";
      if (i > 0 && less(ids_[i], ids_[(i - 1) / 2])) return "heap order";
    }
    return "";
  }

 private:
  template <class Less, class Pos>
  std::size_t sift_up(std::size_t i, const Less& less, const Pos& pos) noexcept {
    while (i > 0 && less(ids_[i], ids_[(i - 1) / 2])) {
      std::swap(ids_[i], ids_[(i - 1) / 2]);
      pos(ids_[i]) = static_cast<std::uint32_t>(i);
      i = (i - 1) / 2;
      pos(ids_[i]) = static_cast<std::uint32_t>(i);
    }
    return i;
  }
  template <class Less, class Pos>
  void sift_down(std::size_t i, const Less& less, const Pos& pos) noexcept {
    for (;;) {
      std::size_t m = i;
      for (std::size_t c = 2 * i + 1; c <= 2 * i + 2 && c < ids_.size(); ++c) {
        if (less(ids_[c], ids_[m])) m = c;
      }
      if (m == i) return;
      std::swap(ids_[i], ids_[m]);
      pos(ids_[i]) = static_cast<std::uint32_t>(i);
      pos(ids_[m]) = static_cast<std::uint32_t>(m);
      i = m;
    }
  }

  std::vector<std::uint32_t> ids_;
};

}  // namespace kvtk::detail
