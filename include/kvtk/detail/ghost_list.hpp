// kvtk/detail/ghost_list.hpp — a bounded FIFO of evicted keys ("ghosts") with O(1) membership.
//
// Design
// ------
// ARC (B1/B2), 2Q (A1out) and S3-FIFO (G) remember recently evicted keys without their data.
// A ghost_list is a preallocated pool of {key, weight} entries threaded on an intrusive FIFO, plus
// a key_table for lookup. push() at the MRU end, pop() from the LRU end, take(key) removes a key
// wherever it is. When the pool is full, push() first drops the oldest ghost, so the list never
// allocates and never holds more than max_entries entries.
//
// Invariants: table.size() == fifo.size() == live entries; weight() == sum of entry weights.
#pragma once

#include <cstdint>
#include <vector>

#include "kvtk/detail/intrusive.hpp"
#include "kvtk/detail/key_table.hpp"

namespace kvtk::detail {

class ghost_list {
  struct entry_tag {};
  struct entry : list_hook<entry_tag> {
    std::uint64_t key = 0;
    std::uint64_t weight = 0;
  };

 public:
  /// Requires: max_entries > 0.  Throws: std::invalid_argument, std::bad_alloc.
  explicit ghost_list(std::uint32_t max_entries)
      : pool_(max_entries), free_(), table_(max_entries) {
    free_.reserve(max_entries);
    for (std::uint32_t i = max_entries; i-- > 0;) free_.push_back(i);
  }
  ghost_list(const ghost_list&) = delete;
  ghost_list& operator=(const ghost_list&) = delete;

  [[nodiscard]] bool contains(std::uint64_t key) const noexcept {
    return table_.find(key) != key_table::npos;
  }

  /// Effects: appends key at the MRU end (dropping the oldest ghost if the pool is full).
  /// Requires: key not present.  Complexity: O(1).
  void push(std::uint64_t key, std::uint64_t weight) noexcept {
    if (free_.empty()) pop();
    const std::uint32_t i = free_.back();
    free_.pop_back();
    entry& e = pool_[i];
    e.key = key;
    e.weight = weight;
    fifo_.push_back(e);
    table_.insert(key, i);
    weight_ += weight;
  }

  /// Effects: drops the oldest ghost, if any.  Complexity: O(1).
  void pop() noexcept {
    if (fifo_.empty()) return;
    release(fifo_.front());
  }

  /// Effects: removes key if present and returns true.  Complexity: O(1) expected.
  bool take(std::uint64_t key) noexcept {
    const std::uint32_t i = table_.find(key);
    if (i == key_table::npos) return false;
    release(pool_[i]);
    return true;
  }

  void clear() noexcept {
    while (!fifo_.empty()) pop();
  }

  [[nodiscard]] std::size_t size() const noexcept { return fifo_.size(); }
  [[nodiscard]] bool empty() const noexcept { return fifo_.empty(); }
  /// Sum of the weights of the ghosts held.
  [[nodiscard]] std::uint64_t weight() const noexcept { return weight_; }
  [[nodiscard]] std::uint32_t max_entries() const noexcept { return table_.max_entries(); }

  /// Visits keys from oldest to newest (tests and audits).
  template <class F>
  void for_each(F&& f) const {
    for (const entry& e : fifo_) f(e.key, e.weight);
  }

 private:
  void release(entry& e) noexcept {
    fifo_.erase(fifo_.iterator_to(e));
    table_.erase(e.key);
    weight_ -= e.weight;
    free_.push_back(static_cast<std::uint32_t>(&e - pool_.data()));
  }

  std::vector<entry> pool_;
  std::vector<std::uint32_t> free_;
  intrusive_list<entry, entry_tag> fifo_;
  key_table table_;
  std::uint64_t weight_ = 0;
};

}  // namespace kvtk::detail
