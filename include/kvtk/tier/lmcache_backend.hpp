// kvtk/tier/lmcache_backend.hpp — one LMCache 0.5.6 storage backend's resident chunks and its
// cache policy (LocalCPUBackend's hot cache, or LocalDiskBackend's dict), in fixed-size chunks.
//
// Design: a fixed array of chunk slots, a key table, and one indexed min-heap on each policy's
// eviction rank (LRU and FIFO the oldest event first, MRU the newest, LFU the lowest frequency
// and then the first to reach it), so every operation is O(log chunks). A slot is resident (in
// the table and, unless hidden, in the heap), reserved (an allocation not yet put: counted, not
// keyed) or free.
//
// Invariants: resident + free = capacity, reserved <= free (a reservation takes its slot from
// the free list only when put); the heap holds the resident slots that are not hidden. Hiding takes a slot out of the heap without changing its rank, so a pinned or
// in-use chunk (LMCache's can_evict false) is skipped by eviction and, once shown again, sits
// where its rank puts it.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/indexed_heap.hpp"
#include "kvtk/detail/key_table.hpp"

namespace kvtk::tier {

enum class lmcache_policy : std::uint8_t { lru, mru, fifo, lfu };

/// LMCache's cache_policy name of p.
inline const char* name_of(lmcache_policy p) noexcept {
  switch (p) {
    case lmcache_policy::lru: return "LRU";
    case lmcache_policy::mru: return "MRU";
    case lmcache_policy::fifo: return "FIFO";
    case lmcache_policy::lfu: return "LFU";
  }
  return "?";
}

/// Thread safety: one per thread.
class lmcache_backend {
 public:
  static constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();

 private:
  struct slot {
    block_key key = 0;
    std::uint64_t rank_hi = 0, rank_lo = 0;  // eviction rank: smallest goes first
    std::uint32_t freq = 0, heap_pos = none;
  };
  struct key_of {
    const slot* slots;
    std::uint64_t operator()(std::uint32_t i) const noexcept { return slots[i].key; }
  };
  struct by_rank {
    const lmcache_backend* b;
    bool operator()(std::uint32_t x, std::uint32_t y) const noexcept { return b->before(x, y); }
  };
  struct heap_pos {
    slot* slots;
    std::uint32_t& operator()(std::uint32_t s) const noexcept { return slots[s].heap_pos; }
  };

 public:
  /// Requires: chunks in [1, 2^31).  Throws: std::bad_alloc.
  lmcache_backend(std::uint32_t chunks, lmcache_policy p)
      : policy_(p), slots_(chunks), table_(chunks, key_of{slots_.data()}, 2) {
    heap_.reserve(chunks);
    free_.reserve(chunks);
    for (std::uint32_t i = chunks; i-- > 0;) free_.push_back(i);
  }
  lmcache_backend(const lmcache_backend&) = delete;
  lmcache_backend& operator=(const lmcache_backend&) = delete;

  [[nodiscard]] std::size_t capacity() const noexcept { return slots_.size(); }
  [[nodiscard]] std::size_t resident() const noexcept { return table_.size(); }
  /// The slot holding key, or none.  Complexity: O(1) expected.
  [[nodiscard]] std::uint32_t find(block_key key) const noexcept { return table_.find(key); }
  [[nodiscard]] bool holds(block_key key) const noexcept { return find(key) != none; }
  [[nodiscard]] std::uint64_t evictions() const noexcept { return evictions_; }

  /// Effects: the policy's update_on_hit on slot s (FIFO ignores hits).  Complexity: O(log n).
  void hit(std::uint32_t s) noexcept {
    if (policy_ == lmcache_policy::fifo) return;
    if (policy_ == lmcache_policy::lfu) ++slots_[s].freq;
    set_rank(s, ++clock_);
    if (slots_[s].heap_pos != none) heap_.fix(s, by_rank{this}, heap_pos{slots_.data()});
  }

  /// Effects: allocates room for one chunk, evicting one victim at a time while full (LMCache's
  /// allocate); false, with nothing changed, when full and nothing is evictable.
  /// Complexity: O(log n).
  bool reserve() noexcept {
    if (reserved_ + table_.size() >= slots_.size()) {
      if (heap_.empty()) return false;
      evict_one();
    }
    ++reserved_;
    return true;
  }
  /// Effects: returns a reservation unused.
  void release() noexcept { --reserved_; }

  /// Requires: a reservation.  Effects: turns it into key's entry (update_on_put: frequency 1,
  /// the newest), or drops it when key is already resident, whose entry is untouched. Returns
  /// whether key was put.  Complexity: O(log n).
  bool put(block_key key) noexcept {
    --reserved_;
    if (holds(key)) return false;
    const std::uint32_t s = free_.back();
    free_.pop_back();
    slots_[s].key = key;
    slots_[s].freq = 1;
    set_rank(s, ++clock_);
    table_.insert(key, s);
    heap_.push(s, by_rank{this}, heap_pos{slots_.data()});
    return true;
  }

  /// Effects: hides (pins) or shows resident slot s for eviction, its rank unchanged.
  void hide(std::uint32_t s) noexcept {
    if (slots_[s].heap_pos != none) heap_.erase(s, by_rank{this}, heap_pos{slots_.data()});
  }
  void show(std::uint32_t s) noexcept {
    if (slots_[s].heap_pos == none) heap_.push(s, by_rank{this}, heap_pos{slots_.data()});
  }

  /// Effects: a hidden slot whose disk write has finished joins the eviction order: LRU, MRU
  /// and FIFO order by LMCache's dict, which takes a key when its write finishes (the newest
  /// now); LFU ranked it when the write was submitted (update_on_put).
  void land(std::uint32_t s) noexcept {
    if (policy_ != lmcache_policy::lfu) set_rank(s, ++clock_);
    show(s);
  }

  /// Whether resident slot s is hidden (pinned, or its write in flight).
  [[nodiscard]] bool hidden(std::uint32_t s) const noexcept { return slots_[s].heap_pos == none; }
  /// Whether the next reserve() must evict.
  [[nodiscard]] bool full() const noexcept { return reserved_ + table_.size() >= slots_.size(); }
  /// Whether some slot is evictable.
  [[nodiscard]] bool any_evictable() const noexcept { return !heap_.empty(); }
  /// The next victim's frequency (LFU; 1 for the other policies). Requires: any_evictable().
  [[nodiscard]] std::uint32_t victim_frequency() const noexcept { return slots_[heap_.top()].freq; }

  /// Checks the invariants (tests): "" or a violation.
  [[nodiscard]] const char* audit() const noexcept {
    if (table_.size() + free_.size() != slots_.size()) return "slots do not add up";
    if (reserved_ > free_.size()) return "more reservations than free slots";
    if (heap_.size() != table_.size()) return "heap size (a slot left hidden?)";
    for (const std::uint32_t s : heap_.ids()) {
      if (table_.find(slots_[s].key) != s) return "a heap entry not in the table";
    }
    return heap_.check(by_rank{this}, [this](std::uint32_t s) { return slots_[s].heap_pos; });
  }

 private:
  void evict_one() noexcept {
    const std::uint32_t s = heap_.top();
    heap_.erase(s, by_rank{this}, heap_pos{slots_.data()});
    (void)table_.take(slots_[s].key);
    free_.push_back(s);
    ++evictions_;
  }
  void set_rank(std::uint32_t s, std::uint64_t t) noexcept {
    slot& x = slots_[s];
    switch (policy_) {
      case lmcache_policy::mru: x.rank_hi = 0; x.rank_lo = ~t; break;
      case lmcache_policy::lfu: x.rank_hi = x.freq; x.rank_lo = t; break;
      default: x.rank_hi = 0; x.rank_lo = t; break;
    }
  }
  bool before(std::uint32_t a, std::uint32_t b) const noexcept {
    const slot& x = slots_[a];
    const slot& y = slots_[b];
    return x.rank_hi != y.rank_hi ? x.rank_hi < y.rank_hi : x.rank_lo < y.rank_lo;
  }

  lmcache_policy policy_;
  std::vector<slot> slots_;
  detail::key_table<key_of> table_;
  detail::indexed_heap heap_;
  std::vector<std::uint32_t> free_;
  std::uint64_t reserved_ = 0, clock_ = 0, evictions_ = 0;
};

}  // namespace kvtk::tier
