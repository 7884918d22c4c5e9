// kvtk/detail/ghost_list.hpp — a bounded FIFO of evicted keys ("ghosts") with O(1) membership.
//
// Design
// ------
// ARC (B1/B2), 2Q (A1out) and S3-FIFO (G) remember recently evicted keys without their data.
// ghost_lists<N> holds N such FIFOs (ARC's B1 and B2 are two) over one preallocated pool of
// {key, weight, list} entries and one key_table, so a key is found in any of them with a single
// probe. push(l, ...) appends to list l's MRU end, pop(l) drops list l's oldest, take(key) removes
// a key wherever it is and says from which list. When the pool is full, push(l) first drops list
// l's oldest (or, if l is empty, the oldest of another list), so nothing ever allocates.
//
// Invariants: table.size() == sum of list sizes; weight(l) == sum of list l's entry weights; a key
// is in at most one list.
#pragma once

#include <cstdint>
#include <vector>

#include "kvtk/detail/intrusive.hpp"
#include "kvtk/detail/key_table.hpp"

namespace kvtk::detail {

template <unsigned N>
class ghost_lists {
  static_assert(N >= 1 && N <= 8);
  struct entry_tag {};
  struct entry : list_hook<entry_tag> {
    std::uint64_t key = 0;
    std::uint32_t weight = 0;
    std::uint32_t list = 0;
  };

 public:
  static constexpr int none = -1;

  /// Requires: 0 < max_entries < 2^31.  Throws: std::invalid_argument, std::bad_alloc.
  explicit ghost_lists(std::uint32_t max_entries)
      : pool_(max_entries), table_(max_entries, key_member<entry>{pool_.data()}) {
    free_.resize(max_entries);
    for (std::uint32_t i = 0; i < max_entries; ++i) free_[i] = max_entries - 1 - i;
    free_count_ = max_entries;
  }
  ghost_lists(const ghost_lists&) = delete;
  ghost_lists& operator=(const ghost_lists&) = delete;
  // A move keeps every pointer valid (the pool's buffer moves along). No move assignment: the
  // lists would have to let go of the old pool's entries before it is freed.
  ghost_lists(ghost_lists&&) noexcept = default;
  ghost_lists& operator=(ghost_lists&&) = delete;

  /// The list holding key, or none.  Complexity: O(1) expected.
  [[nodiscard]] int find(std::uint64_t key) const noexcept {
    const std::uint32_t i = table_.find(key);
    return i == table_.npos ? none : static_cast<int>(pool_[i].list);
  }
  [[nodiscard]] bool contains(std::uint64_t key) const noexcept { return find(key) != none; }

  /// Effects: appends key at list l's MRU end (first dropping an oldest ghost if the pool is full).
  /// Requires: l < N, key not present.  Complexity: O(1) expected.
  void push(unsigned l, std::uint64_t key, std::uint32_t weight) noexcept {
    if (free_count_ == 0) {
      unsigned victim = l;
      while (lists_[victim].empty()) victim = (victim + 1) % N;
      pop(victim);
    }
    const std::uint32_t i = free_[--free_count_];
    entry& e = pool_[i];
    e.key = key;
    e.weight = weight;
    e.list = l;
    lists_[l].push_back(e);
    table_.insert(key, i);
    weight_[l] += weight;
  }

  /// Effects: drops list l's oldest ghost, if any.  Complexity: O(1) expected.
  void pop(unsigned l) noexcept {
    if (lists_[l].empty()) return;
    entry& e = lists_[l].front();
    table_.erase(e.key);
    unlink(e);
  }

  /// Effects: removes key if present; returns the list it was in, or none.  One table probe.
  int take(std::uint64_t key) noexcept {
    const std::uint32_t i = table_.take(key);
    if (i == table_.npos) return none;
    entry& e = pool_[i];
    const int l = static_cast<int>(e.list);
    unlink(e);
    return l;
  }

  [[nodiscard]] std::size_t size(unsigned l) const noexcept { return lists_[l].size(); }
  [[nodiscard]] bool empty(unsigned l) const noexcept { return lists_[l].empty(); }
  /// Sum of the weights of list l's ghosts.
  [[nodiscard]] std::uint64_t weight(unsigned l) const noexcept { return weight_[l]; }
  [[nodiscard]] std::uint32_t max_entries() const noexcept { return table_.max_entries(); }

  /// Visits list l's keys from oldest to newest (tests and audits).
  template <class F>
  void for_each(unsigned l, F&& f) const {
    for (const entry& e : lists_[l]) f(e.key, e.weight);
  }

 private:
  void unlink(entry& e) noexcept {
    lists_[e.list].erase(lists_[e.list].iterator_to(e));
    weight_[e.list] -= e.weight;
    free_[free_count_++] = static_cast<std::uint32_t>(&e - pool_.data());
  }

  std::vector<entry> pool_;
  key_table<key_member<entry>> table_;
  std::vector<std::uint32_t> free_;  // stack of free pool indices, free_count_ deep
  std::size_t free_count_ = 0;
  intrusive_list<entry, entry_tag> lists_[N];
  std::uint64_t weight_[N] = {};
};

/// A single ghost FIFO.
using ghost_list = ghost_lists<1>;

}  // namespace kvtk::detail
