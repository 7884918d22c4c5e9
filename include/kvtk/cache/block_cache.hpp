// kvtk/cache/block_cache.hpp — the block cache engines embed: key table + node pool + policy +
// pins.
//
// Design
// ------
// * Nodes live in one array of max_entries `cache_node<Policy>` allocated by the constructor; a
//   node's index in it is its *slot*, stable while the block is resident, so a caller can keep its
//   own payload (e.g. a GPU block id) in a parallel array indexed by slot.
// * key_table maps a 64-bit block key to its slot (open addressing, load <= 1/4, 8-byte slots).
// * The policy container orders the nodes (Boost.Intrusive hooks inside the nodes).
// * Capacity is in size units: with the default size 1 per entry it counts blocks; give entries a
//   byte size to make it a byte capacity (then set max_entries to bound the node count).
// * Pins: a pinned entry (pins > 0) is never evicted. If the unpinned entries cannot make room the
//   insertion is rejected and nothing changes (no policy state is touched either).
// * Movable, not copyable: a move hands over the node pool (whose address the intrusive hooks and
//   the key table depend on) without touching it.
// * OnEvict(key, slot) is called for each victim after it has left the cache and before its slot
//   is reused, so the caller can release what it associated with the slot. It must not throw
//   (it runs inside noexcept operations) and must not call back into the cache.
//
// Miss protocol (fixes the update order results depend on): policy.on_miss(key) once, then
// policy.evict() until the new entry fits (count and units), then policy.on_insert(new node).
// After construction no operation allocates.
#pragma once

#include <concepts>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include "kvtk/cache/cache_types.hpp"
#include "kvtk/concepts.hpp"
#include "kvtk/detail/key_table.hpp"

namespace kvtk {

/// Thread safety: distinct caches are independent; one cache needs external synchronisation.
template <eviction_policy Policy, class OnEvict = ignore_evictions>
class block_cache {
 public:
  using policy_type = Policy;
  using node_type = cache_node<Policy>;
  using container_type = typename Policy::template container<node_type>;
  static constexpr std::uint32_t npos = std::numeric_limits<std::uint32_t>::max();
  /// node_base::pins of a hidden entry (hide()); pin counts stay below it.
  static constexpr std::uint32_t hidden_bit = std::uint32_t{1} << 31;

  struct config {
    /// Capacity in size units (blocks when every entry has size 1). Must be > 0.
    std::uint64_t capacity = 0;
    /// Maximum resident entries (node pool size). 0 = capacity (then capacity must be < 2^31).
    std::uint32_t max_entries = 0;
    /// Policy parameters; see the policy header for units and defaults.
    typename Policy::config policy{};
  };

  /// Effects: allocates the node pool, key table and policy state.
  /// Throws: std::invalid_argument for capacity 0, max_entries >= 2^31 (or 0 with capacity >=
  /// 2^31), or a bad policy config; std::bad_alloc.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
  // GCC 12 flags an empty policy config passed by const reference as "maybe uninitialized".
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
  explicit block_cache(const config& cfg, OnEvict on_evict = {})
      : capacity_(cfg.capacity),
        nodes_(checked_entries(cfg)),
        table_(static_cast<std::uint32_t>(nodes_.size()),
               detail::key_member<node_type>{nodes_.data()}),
        policy_(policy_params{cfg.capacity, static_cast<std::uint32_t>(nodes_.size())}, cfg.policy),
        on_evict_(std::move(on_evict)) {
    // Free slots as a stack; slot 0 on top so a fresh cache fills the pool front to back.
    free_.resize(nodes_.size());
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      free_[i] = static_cast<std::uint32_t>(nodes_.size() - 1 - i);
    }
    free_count_ = nodes_.size();
  }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  block_cache(const block_cache&) = delete;
  block_cache& operator=(const block_cache&) = delete;
  /// Effects: takes over other's nodes, table and policy state; slots stay valid (the node pool
  /// keeps its address). A moved-from cache may only be destroyed or assigned to.
  /// Complexity: O(1).  Throws: nothing.
  block_cache(block_cache&&) noexcept = default;
  /// Effects: destroys this cache's entries (without calling OnEvict), then as the move
  /// constructor.  Complexity: O(max_entries()) for the old state.  Throws: nothing.
  block_cache& operator=(block_cache&& other) noexcept {
    // Not member-wise: the policy's intrusive lists must let go of this cache's nodes before the
    // node pool that holds them is freed.
    if (this != &other) {
      std::destroy_at(this);
      std::construct_at(this, std::move(other));
    }
    return *this;
  }

  /// Requires: nothing (any key, hint and size).
  /// Effects: a resident key counts a hit and updates the policy (on_hit); a missing key counts a
  /// miss and is admitted as insert() does, evicting (and calling OnEvict for) victims as needed.
  /// Returns hit / inserted / rejected with the entry's slot.
  /// Complexity: O(1) expected + the policy's cost (see its header).  Throws: nothing.
  access_outcome access(block_key key, const access_hint& hint = {},
                        std::uint32_t size = 1) noexcept {
    if (const std::uint32_t s = table_.find(key); s != npos) {
      ++stats_.hits;
      policy_.on_hit(nodes_[s], hint);
      return {access_result::hit, s};
    }
    ++stats_.misses;
    return insert_missing(key, hint, size);
  }
  /// access() with the size first (the order of any_block_cache and the C ABI): a sized entry
  /// rarely needs a hint, so the hint can be left out.  Throws: nothing.
  /// (A template so that access(key, {}) stays the hint form: {} deduces no integer type.)
  template <std::integral Size>
  access_outcome access(block_key key, Size size, const access_hint& hint = {}) noexcept {
    return access(key, hint, static_cast<std::uint32_t>(size));
  }

  /// Requires: nothing.
  /// Effects: admits a missing key without counting a miss; a resident key is left untouched (no
  /// policy update, no hit counted) and reported as hit. Returns rejected, changing nothing, when
  /// size == 0, size > capacity, or the unpinned entries cannot make room (units or slots).
  /// Complexity: as access().  Throws: nothing.
  access_outcome insert(block_key key, const access_hint& hint = {},
                        std::uint32_t size = 1) noexcept {
    if (const std::uint32_t s = table_.find(key); s != npos) return {access_result::hit, s};
    return insert_missing(key, hint, size);
  }
  /// insert() with the size first.  Throws: nothing.
  template <std::integral Size>
  access_outcome insert(block_key key, Size size, const access_hint& hint = {}) noexcept {
    return insert(key, hint, static_cast<std::uint32_t>(size));
  }

  /// Effects: counts a hit on the resident entry in `slot` (from find()) and updates the policy,
  /// as access() does for a resident key, without looking the key up again.
  /// Requires: slot holds a resident entry.  Complexity: the policy's on_hit.  Throws: nothing.
  void touch(std::uint32_t slot, const access_hint& hint = {}) noexcept {
    ++stats_.hits;
    policy_.on_hit(nodes_[slot], hint);
  }
  /// Effects: starts loading the key table slot of `key` into cache (a lookup follows).
  void prefetch(block_key key) const noexcept { table_.prefetch(key); }

  /// Effects: the slot of a resident key, or npos; no policy update, no counters.
  /// Complexity: O(1) expected.  Throws: nothing.
  [[nodiscard]] std::uint32_t find(block_key key) const noexcept { return table_.find(key); }
  [[nodiscard]] bool contains(block_key key) const noexcept { return find(key) != npos; }

  /// Effects: increments the pin count of a resident key (a pinned entry is never evicted).
  /// Returns false, changing nothing, if the key is absent or the count would overflow.
  /// Complexity: O(1) expected.  Throws: nothing.
  bool pin(block_key key) noexcept {
    const std::uint32_t s = table_.find(key);
    return s != npos && pin_slot(s);
  }
  /// Effects: decrements the pin count. Returns false, changing nothing, if the key is absent or
  /// not pinned.  Complexity: O(1) expected.  Throws: nothing.
  bool unpin(block_key key) noexcept {
    const std::uint32_t s = table_.find(key);
    return s != npos && unpin_slot(s);
  }
  /// pin() and unpin() of the resident entry in `slot` (from find() or access()), without looking
  /// its key up again: a caller that pins a request's blocks while matching them and unpins them
  /// later keeps the slots (a pinned entry never moves).
  /// Requires: slot holds a resident entry.  Complexity: O(1).  Throws: nothing.
  bool pin_slot(std::uint32_t slot) noexcept {
    node_type& n = nodes_[slot];
    if (n.pins >= hidden_bit - 1) return false;  // at the maximum, or hidden
    if (n.pins++ == 0) {
      ++pinned_entries_;
      pinned_units_ += n.size;
    }
    return true;
  }
  bool unpin_slot(std::uint32_t slot) noexcept {
    node_type& n = nodes_[slot];
    if (n.pins == 0 || (n.pins & hidden_bit) != 0) return false;
    if (--n.pins == 0) {
      --pinned_entries_;
      pinned_units_ -= n.size;
    }
    return true;
  }
  /// The pin count of a key (0 when absent). A hidden entry (hide()) is held by the hierarchy,
  /// not pinned by a caller: its count is 0 here, and hidden() tells it apart. (The node keeps
  /// the hidden state as the top bit of its pin field.)
  /// Complexity: O(1) expected.  Throws: nothing.
  [[nodiscard]] std::uint32_t pins(block_key key) const noexcept {
    const std::uint32_t s = table_.find(key);
    return s == npos ? 0 : nodes_[s].pins & ~hidden_bit;
  }

  /// Effects: takes a resident, unpinned key out of the policy's order while it stays resident
  /// (counted as pinned: never a victim, never erased). A tier hierarchy hides the lower copies
  /// of blocks held above, so that choosing a victim never walks over them. Returns false,
  /// changing nothing, for a missing, pinned or hidden key.
  /// Complexity: O(1) expected + the policy's on_erase.  Throws: nothing.
  bool hide(block_key key) noexcept {
    const std::uint32_t s = table_.find(key);
    if (s == npos) return false;
    node_type& n = nodes_[s];
    if (n.pins != 0) return false;
    policy_.on_erase(n);
    n.pins = hidden_bit;
    ++pinned_entries_;
    ++hidden_entries_;
    pinned_units_ += n.size;
    return true;
  }
  /// Effects: puts a hidden key back into the policy's order as a fresh insertion (on_insert with
  /// `hint`). Returns false, changing nothing, for a missing or visible key.
  /// Complexity: O(1) expected + the policy's on_insert.  Throws: nothing.
  bool unhide(block_key key, const access_hint& hint = {}) noexcept {
    const std::uint32_t s = table_.find(key);
    if (s == npos) return false;
    node_type& n = nodes_[s];
    if (n.pins != hidden_bit) return false;
    n.pins = 0;
    --pinned_entries_;
    --hidden_entries_;
    pinned_units_ -= n.size;
    policy_.on_insert(n, hint);
    return true;
  }
  [[nodiscard]] bool hidden(block_key key) const noexcept {
    const std::uint32_t s = table_.find(key);
    return s != npos && nodes_[s].pins == hidden_bit;
  }
  /// Resident entries taken out of the policy's order by hide().
  [[nodiscard]] std::size_t hidden_entries() const noexcept { return hidden_entries_; }

  /// Effects: removes a resident, unpinned key without calling OnEvict (the caller asked for it).
  /// Returns not_found (no-op) for a missing key, pinned (no-op) for a pinned one.
  /// Complexity: O(1) expected + the policy's on_erase.  Throws: nothing.
  erase_result erase(block_key key) noexcept {
    const std::uint32_t s = table_.find(key);
    if (s == npos) return erase_result::not_found;
    node_type& n = nodes_[s];
    if (n.pins != 0) return erase_result::pinned;
    policy_.on_erase(n);
    release(n, s);
    return erase_result::erased;
  }

  /// Effects: evicts n resident, unpinned entries in the policy's victim order, calling OnEvict
  /// for each (as a capacity eviction would), and returns true; or, when fewer than n entries are
  /// unpinned (pinned and hidden entries are never victims), evicts nothing and returns false:
  /// all or nothing, as an engine freeing n blocks for a new request needs (vLLM's offloading
  /// manager asks exactly this of its eviction policy).
  /// Complexity: n times the policy's victim search.  Throws: nothing.
  bool evict(std::size_t n) noexcept {
    if (table_.size() - pinned_entries_ < n) return false;
    for (std::size_t i = 0; i < n; ++i) {
      node_type* v = pinned_entries_ == 0 ? policy_.evict(any_node{}) : policy_.evict(unpinned{});
      const auto s = static_cast<std::uint32_t>(v - nodes_.data());
      release(*v, s);
      ++stats_.evictions;
      on_evict_(v->key, s);
    }
    return true;
  }

  [[nodiscard]] std::uint64_t capacity() const noexcept { return capacity_; }
  /// Size units in use.
  [[nodiscard]] std::uint64_t used() const noexcept { return used_; }
  /// Resident entries.
  [[nodiscard]] std::size_t size() const noexcept { return table_.size(); }
  [[nodiscard]] std::uint32_t max_entries() const noexcept {
    return static_cast<std::uint32_t>(nodes_.size());
  }
  [[nodiscard]] std::size_t pinned_entries() const noexcept { return pinned_entries_; }
  [[nodiscard]] std::uint64_t pinned_units() const noexcept { return pinned_units_; }
  [[nodiscard]] const cache_stats& stats() const noexcept { return stats_; }
  [[nodiscard]] const container_type& policy() const noexcept { return policy_; }
  /// Requires: slot < max_entries(). The node of a free slot holds stale data.
  [[nodiscard]] const node_type& node(std::uint32_t slot) const noexcept { return nodes_[slot]; }
  [[nodiscard]] OnEvict& eviction_callback() noexcept { return on_evict_; }

  /// Visits every resident node but the hidden ones (in the policy's eviction order).
  template <class F>
  void for_each(F&& f) const {
    policy_.for_each(std::forward<F>(f));
  }
  /// Effects: calls f(key, slot) for every resident entry, hidden ones included, in slot order.
  /// Complexity: O(max_entries()) (audits and end-of-run sweeps, not hot paths).
  template <class F>
  void for_each_slot(F&& f) const {
    for (std::uint32_t s = 0; s < max_entries(); ++s) {
      if (table_.find(nodes_[s].key) == s) f(nodes_[s].key, s);
    }
  }

 private:
  struct unpinned {
    bool operator()(const node_base& n) const noexcept { return n.pins == 0; }
  };

  static std::size_t checked_entries(const config& cfg) {
    if (cfg.capacity == 0) throw std::invalid_argument("block_cache: capacity must be > 0");
    std::uint64_t n = cfg.max_entries != 0 ? cfg.max_entries : cfg.capacity;
    if (n >= (std::uint64_t{1} << 31)) {
      throw std::invalid_argument(
          "block_cache: max_entries must be < 2^31 (set max_entries when capacity is in bytes)");
    }
    return static_cast<std::size_t>(n);
  }

  access_outcome insert_missing(block_key key, const access_hint& hint,
                                std::uint32_t size) noexcept {
    // Reject before touching the policy, so a rejected insert leaves no trace.
    const std::uint64_t unpinned_units = used_ - pinned_units_;
    const bool units_short =
        size == 0 || size > capacity_ ||
        (used_ + size > capacity_ && used_ + size - capacity_ > unpinned_units);
    const bool slots_short = free_count_ == 0 && pinned_entries_ == table_.size();
    if (units_short || slots_short) {
      ++stats_.rejections;
      return {access_result::rejected, npos};
    }
    policy_.on_miss(key, hint);
    if (pinned_entries_ == 0) {
      make_room(size, any_node{});
    } else {
      make_room(size, unpinned{});
    }
    const std::uint32_t s = free_[--free_count_];
    node_type& n = nodes_[s];
    n.key = key;
    n.size = size;
    n.pins = 0;
    table_.insert(key, s);
    used_ += size;
    ++stats_.insertions;
    policy_.on_insert(n, hint);
    return {access_result::inserted, s};
  }

  template <class Pred>
  void make_room(std::uint32_t size, Pred pred) noexcept {
    if (used_ + size <= capacity_ && free_count_ != 0) return;  // not full: nothing to evict
    while (used_ + size > capacity_ || free_count_ == 0) {
      node_type* v = policy_.evict(pred);
      // Cannot be null: the checks in insert_missing guarantee enough unpinned entries.
      const auto s = static_cast<std::uint32_t>(v - nodes_.data());
      release(*v, s);
      ++stats_.evictions;
      on_evict_(v->key, s);
    }
    // A full cache evicts again at the next insert: start loading the next victim's table entry
    // and the node after it now (their misses were most of a simulated miss's cost).
    if constexpr (requires(const container_type& p) { p.next_victims(); }) {
      const auto [next, after] = policy_.next_victims();
      if (next) table_.prefetch(next->key);
      if (after) __builtin_prefetch(after);
    }
  }

  void release(node_type& n, std::uint32_t s) noexcept {
    table_.erase(n.key);
    used_ -= n.size;
    free_[free_count_++] = s;
  }

  std::uint64_t capacity_;
  std::uint64_t used_ = 0;
  std::vector<node_type> nodes_;
  std::vector<std::uint32_t> free_;  // stack of free slots, free_count_ deep
  std::size_t free_count_ = 0;
  detail::key_table<detail::key_member<node_type>> table_;
  container_type policy_;
  std::size_t pinned_entries_ = 0, hidden_entries_ = 0;
  std::uint64_t pinned_units_ = 0;
  cache_stats stats_;
  [[no_unique_address]] OnEvict on_evict_;
};

}  // namespace kvtk
