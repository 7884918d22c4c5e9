// kvtk/prefix/prefix_tree.hpp — a radix tree of KV blocks with leaf-only eviction (the structure of
// SGLang's RadixCache, one node per block).
//
// Design
// ------
// * Keys are chained prefix keys (block_keys.hpp): a key names a block *and* its whole prefix, so
//   a child is found by looking its key up in one hash table (key_table, 2 slots per node) instead
//   of searching per-node child maps. A node stores its parent slot and a child count; nothing
//   else of the tree shape is needed.
// * Nodes live in one preallocated array of `capacity` 32-byte nodes:
//     key (8) | rank (8) | parent slot (4) | children (4) | locks (4) | heap position (4)
//   plus 16 bytes of hash table and 16 of heap per node: 64 bytes per block of capacity, plus the
//   caller's Payload in a parallel array (nothing when Payload is empty). Free nodes are chained
//   through their `parent` field, so the free list costs nothing extra.
// * Evictable = no children and no locks. Evictable nodes sit in an indexed 4-ary min-heap of
//   {rank, slot} entries ordered by (rank, key); the leaf policy (leaf_policies.hpp) computes
//   ranks. Ranks are copied into the heap entries so that a sift compares neighbouring memory
//   instead of chasing nodes. A node enters the heap when it
//   becomes evictable (last child evicted, last lock released) and leaves it when it stops being
//   evictable; a rank change of a heap member is a sift. Every operation is O(log n) or O(path),
//   none allocates, none scans.
// * Locks are reference counts on a path: lock(h) / unlock(h) add / remove one on h and every
//   ancestor (SGLang's inc_lock_ref / dec_lock_ref). insert() under a locked node creates its new
//   nodes with one lock each, i.e. extends the caller's lock to the new deepest node, so a request
//   does lock(match) ... insert ... unlock(deepest).
//
// Invariants (checked by audit()): every resident node's parent is resident; children counts are
// exact; a node is in the heap iff it is evictable; heap order holds; size <= capacity.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/key_table.hpp"
#include "kvtk/prefix/leaf_policies.hpp"

namespace kvtk::prefix {

namespace detail_tree {
struct no_state {
  explicit no_state(std::uint32_t) noexcept {}
};
template <class L, bool = stateful_leaf_policy<L>>
struct leaf_state {
  using type = no_state;
};
template <class L>
struct leaf_state<L, true> {
  using type = typename L::state;
};
template <class L>
constexpr unsigned segments_of() {
  if constexpr (requires { L::segments; }) {
    static_assert(L::segments == 1 || L::segments == 2);
    return L::segments;
  } else {
    return 1;
  }
}
}  // namespace detail_tree

/// Payload type for a tree that stores nothing per block.
struct no_payload {};

/// Default eviction callback of a prefix_tree: does nothing.
struct ignore_tree_evictions {
  template <class Payload>
  constexpr void operator()(block_key, std::uint32_t, const Payload&) const noexcept {}
};

/// Thread safety: as block_cache — distinct trees are independent; one tree needs external
/// synchronisation for every call (match() included when another thread mutates it).
template <leaf_policy Leaf, class Payload = no_payload, class EvictFn = ignore_tree_evictions>
class prefix_tree {
 public:
  /// Configuration, the same shape as block_cache::config: the callback is the constructor's
  /// second argument, hints go with each call, payloads through set_payload().
  struct config {
    std::uint32_t capacity = 0;  ///< blocks (nodes), 0 < capacity < 2^31
  };

  using handle = std::uint32_t;
  /// Number of evictable-leaf heaps: Leaf::segments (1 or 2) when the policy declares it, else 1.
  static constexpr unsigned segments = detail_tree::segments_of<Leaf>();
  /// The handle of the (virtual) root, and "no node".
  static constexpr handle root = std::numeric_limits<std::uint32_t>::max();

  struct node {
    block_key key;
    std::uint64_t rank;
    std::uint32_t parent;
    std::uint32_t children;
    std::uint32_t locks;
    std::uint32_t heap_pos;
  };
  static_assert(sizeof(node) == 32);

  struct match_result {
    std::uint32_t length;  ///< number of leading keys resident as a path from the root
    handle node;           ///< the deepest matched node (root if none)
  };
  struct insert_result {
    std::uint32_t inserted;  ///< keys inserted (a prefix of the keys given)
    handle node;             ///< the deepest node of the path now (the given parent if none)
    bool complete;           ///< all keys inserted; false = no evictable leaf, or a key conflict
  };

  /// Effects: a tree of cfg.capacity blocks whose evictions call on_evict(key, slot, payload)
  /// (the stored callback of insert(parent, keys, hint) and evict(n)).
  /// Throws: std::invalid_argument unless 0 < capacity < 2^31; std::bad_alloc.
  explicit prefix_tree(const config& cfg, EvictFn on_evict = {})
      : nodes_(check(cfg.capacity)),
        table_(cfg.capacity, key_of{nodes_.data()}, 2),
        heap_(std::size_t{cfg.capacity} * segments),
        state_(cfg.capacity),
        on_evict_(std::move(on_evict)) {
    if constexpr (stateful) path_.reserve(cfg.capacity);  // a path is never longer than the tree
    if constexpr (!std::is_empty_v<Payload>) payloads_.resize(cfg.capacity);
    for (std::uint32_t i = 0; i < cfg.capacity; ++i) release_slot(cfg.capacity - 1 - i);
  }
  /// Requires: 0 < capacity < 2^31 (blocks).  The legacy form of prefix_tree({capacity}).
  /// Throws: std::invalid_argument, std::bad_alloc.
  explicit prefix_tree(std::uint32_t capacity) : prefix_tree(config{capacity}) {}
  prefix_tree(const prefix_tree&) = delete;
  prefix_tree& operator=(const prefix_tree&) = delete;

  /// Effects: the longest run of leading keys resident as a path root -> keys[0] -> keys[1] ...
  /// (a key resident under another parent ends the match). No state changes.
  /// Complexity: O(length + 1) table probes.  Throws: nothing.
  [[nodiscard]] match_result match(std::span<const block_key> keys) const noexcept {
    return match_into(keys, nullptr);
  }

  /// Like match(keys), and also writes the matched slots, root side first, to path[0, length).
  /// Requires: path.size() >= keys.size().
  match_result match(std::span<const block_key> keys, std::span<handle> path) const noexcept {
    return match_into(keys, path.data());
  }

  /// lock_and_touch for a path given as its slots, root side first (from match(keys, path)):
  /// the same effect without walking parent links, so the node accesses do not wait on each
  /// other.  Requires: path is a root-to-node path of resident nodes.
  template <class HintFor>
  void lock_and_touch_path(std::span<const handle> path, HintFor&& hint_for) noexcept {
    for (const handle n : path) {
      node& x = nodes_[n];
      if (x.locks++ == 0 && x.heap_pos != npos) heap_erase(n);
    }
    for (std::uint32_t i = 0; i < path.size(); ++i) {
      const handle n = path[i];
      const std::uint64_t stamp = clock_ + i + 1;
      if constexpr (stateful) {
        rerank(n, state_.on_touch(n, nodes_[n].rank, stamp, hint_for(i), *this));
      } else {
        nodes_[n].rank = Leaf::on_touch(nodes_[n].rank, stamp, hint_for(i));  // locked: no heap
      }
    }
    clock_ += path.size();
  }

  /// unlock for a path given as its slots (any order).  Returns false, stopping there, at the
  /// first node that is not locked.
  bool unlock_path(std::span<const handle> path) noexcept {
    for (const handle n : path) {
      node& x = nodes_[n];
      if (x.locks == 0) return false;
      if (--x.locks == 0 && x.children == 0) heap_push(n);
    }
    return true;
  }

  /// Requires: h is root or resident.  Effects: one more lock on h and each ancestor; locked
  /// nodes are never evicted.  Complexity: O(depth · log n).  Throws: nothing.
  void lock(handle h) noexcept {
    for (handle n = h; n != root; n = nodes_[n].parent) {
      if (nodes_[n].locks++ == 0 && nodes_[n].heap_pos != npos) heap_erase(n);
    }
  }
  /// lock(h) and touch(h, length, hint_for) in one walk up the path (what a request does first).
  template <class HintFor>
  void lock_and_touch(handle h, std::uint32_t length, HintFor&& hint_for) noexcept {
    if constexpr (stateful) {
      lock(h);
      touch(h, length, hint_for);
    } else {
      std::uint32_t i = length;
      for (handle n = h; n != root; n = nodes_[n].parent) {
        node& x = nodes_[n];
        if (x.locks++ == 0 && x.heap_pos != npos) heap_erase(n);
        if (i > 0) {
          --i;
          x.rank = Leaf::on_touch(x.rank, clock_ + i + 1, hint_for(i));
        }
      }
      clock_ += length;
    }
  }

  /// For stateful leaf policies: sets the rank of node h (which need not be a leaf) and restores
  /// the heap.  Complexity: O(log n).
  void rerank(handle h, std::uint64_t rank) noexcept {
    node& x = nodes_[h];
    if (x.heap_pos == npos) {
      x.rank = rank;
    } else if (segment_of(rank) != segment_of(x.rank)) {
      heap_erase(h);
      x.rank = rank;
      heap_push(h);
    } else {
      x.rank = rank;
      entry(segment_of(rank), x.heap_pos).rank = rank;
      heap_fix(h);
    }
  }

  /// Effects: one lock fewer on h and each ancestor; nodes that become evictable join the heap.
  /// Returns false, stopping there, at the first node on the path that is not locked.
  /// Complexity: O(depth · log n).  Throws: nothing.
  bool unlock(handle h) noexcept {
    for (handle n = h; n != root; n = nodes_[n].parent) {
      node& x = nodes_[n];
      if (x.locks == 0) return false;
      if (--x.locks == 0 && x.children == 0) heap_push(n);
    }
    return true;
  }

  /// Requires: h is resident at depth `length` (length nodes from the root to h, e.g. a
  /// match_result).  Effects: accesses the path in forward order: node i (0 = child of the root)
  /// gets stamp now+i+1 and rank Leaf::on_touch(rank, stamp, hint_for(i)).
  /// Complexity: O(length · log n).  Throws: nothing.
  template <class HintFor>
  void touch(handle h, std::uint32_t length, HintFor&& hint_for) noexcept {
    if constexpr (stateful) {
      // A stateful policy must see the accesses in forward order: collect the path first.
      path_.clear();
      for (handle n = h; n != root && path_.size() < length; n = nodes_[n].parent) {
        path_.push_back(n);
      }
      const std::uint32_t len = static_cast<std::uint32_t>(path_.size());
      for (std::uint32_t i = 0; i < len; ++i) {
        const handle n = path_[len - 1 - i];
        rerank(n, state_.on_touch(n, nodes_[n].rank, clock_ + i + 1, hint_for(i), *this));
      }
    } else {
      std::uint32_t i = length;
      for (handle n = h; n != root && i > 0; n = nodes_[n].parent) {
        --i;
        rerank(n, Leaf::on_touch(nodes_[n].rank, clock_ + i + 1, hint_for(i)));
      }
    }
    clock_ += length;
  }
  void touch(handle h, std::uint32_t length, const access_hint& hint = {}) noexcept {
    touch(h, length, [&](std::uint32_t) -> const access_hint& { return hint; });
  }

  /// Requires: parent is root or a node the caller holds locked (so it cannot be evicted).
  /// Effects: inserts keys as a chain below parent, in order; each new node gets one lock (the
  /// caller's path lock extends to it), a stamp and Leaf::on_insert(stamp, hint_for(i)). When the
  /// tree is full the evictable leaf of smallest rank is evicted first (on_evict(key, slot,
  /// payload) is called for it); when no leaf is evictable, or a key is already resident elsewhere,
  /// insertion stops. payload_for(i) gives the i-th new node's payload (ignored if Payload is
  /// empty).  Complexity: O(keys · log n).  Throws: nothing.
  template <class OnEvict, class HintFor, class PayloadFor>
  insert_result insert(handle parent, std::span<const block_key> keys, OnEvict&& on_evict,
                       HintFor&& hint_for, PayloadFor&& payload_for) noexcept {
    return insert(parent, keys, on_evict, hint_for, payload_for, std::span<handle>{});
  }
  /// As above, and writes the new slots to new_slots[0, inserted) when it is not empty.
  /// Requires: new_slots is empty or new_slots.size() >= keys.size().
  template <class OnEvict, class HintFor, class PayloadFor>
  insert_result insert(handle parent, std::span<const block_key> keys, OnEvict&& on_evict,
                       HintFor&& hint_for, PayloadFor&& payload_for,
                       std::span<handle> new_slots) noexcept {
    return insert(parent, keys, on_evict, hint_for, payload_for, new_slots,
                  [](std::uint32_t) noexcept { return true; });
  }
  /// As above, and asks admit(i) before the i-th key is inserted (after the check that it is not
  /// resident elsewhere, before any eviction for it): false stops the insertion there
  /// (complete = false), so that an admission rule can decline a request's new tail
  /// (admission.hpp). admit may call victim() (which may rerank, see there) and const members.
  template <class OnEvict, class HintFor, class PayloadFor, class Admit>
  insert_result insert(handle parent, std::span<const block_key> keys, OnEvict&& on_evict,
                       HintFor&& hint_for, PayloadFor&& payload_for, std::span<handle> new_slots,
                       Admit&& admit) noexcept {
    handle at = parent;
    std::uint32_t i = 0;
    for (; i < keys.size(); ++i) {
      if (table_.find(keys[i]) != npos) return {i, at, false};
      if (!admit(i)) return {i, at, false};
      if (free_head_ == npos && !evict_one(on_evict)) return {i, at, false};
      const std::uint32_t s = free_head_;
      node& x = nodes_[s];
      free_head_ = x.parent;
      --free_count_;
      x.key = keys[i];
      x.parent = at;
      x.children = 0;
      x.locks = 1;
      x.heap_pos = npos;
      if constexpr (stateful) {
        x.rank = state_.on_insert(s, ++clock_, hint_for(i), *this);
      } else {
        x.rank = Leaf::on_insert(++clock_, hint_for(i));
      }
      if constexpr (!std::is_empty_v<Payload>) payloads_[s] = payload_for(i);
      table_.insert(keys[i], s);
      if (at != root) add_child(at);
      if (!new_slots.empty()) new_slots[i] = s;
      at = s;
    }
    return {i, at, true};
  }
  template <class OnEvict>
    requires(!std::is_convertible_v<OnEvict, const access_hint&>)
  insert_result insert(handle parent, std::span<const block_key> keys, OnEvict&& on_evict,
                       const access_hint& hint = {}) noexcept {
    return insert(
        parent, keys, on_evict, [&](std::uint32_t) -> const access_hint& { return hint; },
        [](std::uint32_t) { return Payload{}; });
  }

  /// Requires: parent is root or a node the caller holds locked; new_slots is empty or
  /// new_slots.size() >= keys.size().
  /// Effects: insert(parent, keys, on_evict, hint_for, payload_for, new_slots) with the stored
  /// callback, the i-th new node's hint equal to `hint` with depth hint.depth + i (pass the
  /// matched length as hint.depth; the legacy insert(parent, keys, on_evict, hint) gives every
  /// new node hint.depth itself), and default payloads: set them with set_payload() on the
  /// handles written to new_slots[0, inserted).
  /// Complexity: O(keys · log n).  Throws: nothing.
  insert_result insert(handle parent, std::span<const block_key> keys,
                       const access_hint& hint = {}, std::span<handle> new_slots = {}) noexcept {
    access_hint h = hint;
    return insert(
        parent, keys, on_evict_,
        [&](std::uint32_t i) -> const access_hint& {
          h.depth = hint.depth + i;
          return h;
        },
        [](std::uint32_t) { return Payload{}; }, new_slots);
  }
  /// Requires: h resident (root is ignored: it has no payload).
  /// Effects: the payload of h becomes p (ignored if Payload is empty).
  /// Complexity: O(1).  Throws: whatever Payload's assignment throws.
  void set_payload(handle h, Payload p) {
    if constexpr (!std::is_empty_v<Payload>) {
      if (h != root) payloads_[h] = std::move(p);
    }
  }
  /// evict(n, on_evict) with the stored callback.  Throws: nothing.
  std::size_t evict(std::size_t n) noexcept { return evict(n, on_evict_); }

  /// Effects: evicts up to n evictable leaves in rank order (a parent left childless becomes a
  /// candidate in the same call), calling on_evict(key, slot, payload) for each. Returns how many.
  /// Complexity: O(n · log size).  Throws: nothing.
  template <class OnEvict>
  std::size_t evict(std::size_t n, OnEvict&& on_evict) noexcept {
    std::size_t done = 0;
    while (done < n && evict_one(on_evict)) ++done;
    return done;
  }

  [[nodiscard]] std::size_t size() const noexcept { return nodes_.size() - free_count_; }
  /// True when every node is in use, so that the next insertion must evict.
  [[nodiscard]] bool full() const noexcept { return free_head_ == npos; }
  /// The node the next eviction would take (the leaf order's choice), or root when no leaf is
  /// evictable. Nothing is evicted; a stateful order that chooses its victims itself (S3-FIFO's
  /// pick_victim) does the moves that choice makes (promotions, counter decrements), and they
  /// stay done if nothing is then evicted.  Complexity: O(1) for
  /// stateless orders; amortized O(log n) otherwise.  Throws: nothing.
  [[nodiscard]] handle victim() noexcept {
    if constexpr (requires { state_.pick_victim(*this); }) {
      return state_.pick_victim(*this);
    } else {
      return heap_size_[0] == 0 ? root : heap_[0].slot;
    }
  }
  [[nodiscard]] std::uint32_t capacity() const noexcept {
    return static_cast<std::uint32_t>(nodes_.size());
  }
  [[nodiscard]] std::size_t evictable() const noexcept {
    std::size_t n = 0;
    for (std::size_t g = 0; g < segments; ++g) n += heap_size_[g];
    return n;
  }

  // ---- for stateful leaf policies ----
  /// Evictable leaves of segment g (the rank's top bit when the policy has two segments).
  [[nodiscard]] std::size_t evictable(unsigned g) const noexcept { return heap_size_[g]; }
  /// The evictable leaf of smallest rank in segment g, or root if none.
  [[nodiscard]] handle top(unsigned g) const noexcept {
    return heap_size_[g] == 0 ? root : heap_[std::size_t{g} * capacity()].slot;
  }
  /// A fresh stamp (for a policy that re-inserts a node at the most recent end).
  std::uint64_t next_stamp() noexcept { return ++clock_; }
  [[nodiscard]] std::uint64_t evictions() const noexcept { return evictions_; }
  /// Slot of a resident key, or root.
  [[nodiscard]] handle find(block_key k) const noexcept { return table_.find(k); }
  /// Requires: h resident.
  [[nodiscard]] const node& at(handle h) const noexcept { return nodes_[h]; }
  [[nodiscard]] const Payload& payload(handle h) const noexcept {
    if constexpr (std::is_empty_v<Payload>) {
      static constexpr Payload none{};
      return none;
    } else {
      return payloads_[h];
    }
  }
  /// The leaf order's state (stateful orders only): for their own hooks, such as
  /// leaf_reuse::state::begin_request.
  [[nodiscard]] auto& leaf_state() noexcept
    requires stateful_leaf_policy<Leaf>
  {
    return state_;
  }
  [[nodiscard]] const auto& leaf_state() const noexcept
    requires stateful_leaf_policy<Leaf>
  {
    return state_;
  }

  /// Bytes allocated per block of capacity (nodes, hash table, heap, free stack, payloads).
  [[nodiscard]] double bytes_per_block() const noexcept {
    const double bytes =
        static_cast<double>(nodes_.size() * sizeof(node) + table_.memory_bytes() +
                            heap_.size() * sizeof(heap_entry) + payloads_.size() * sizeof(Payload));
    return bytes / static_cast<double>(nodes_.size());
  }

  /// Visits every resident slot (tests, audits).
  template <class F>
  void for_each(F&& f) const {
    std::vector<bool> is_free(nodes_.size(), false);
    for (std::uint32_t f = free_head_; f != npos; f = nodes_[f].parent) is_free[f] = true;
    for (std::uint32_t s = 0; s < nodes_.size(); ++s) {
      if (!is_free[s]) f(s, nodes_[s]);
    }
  }

  /// Full invariant check (O(n)); empty string when sound.
  [[nodiscard]] std::string audit() const {
    std::vector<std::uint32_t> kids(nodes_.size(), 0);
    std::size_t resident = 0, evictable = 0;
    std::string err;
    for_each([&](std::uint32_t s, const node& x) {
      ++resident;
      if (table_.find(x.key) != s) err = "table does not map a node's key to it";
      if (x.parent != root) {
        if (table_.find(nodes_[x.parent].key) != x.parent) err = "parent not resident";
        ++kids[x.parent];
      }
      const bool ev = x.children == 0 && x.locks == 0;
      evictable += ev;
      if (ev != (x.heap_pos != npos)) err = "heap membership != evictable";
      if (x.heap_pos != npos && (entry(segment_of(x.rank), x.heap_pos).slot != s ||
                                 entry(segment_of(x.rank), x.heap_pos).rank != x.rank)) {
        err = "heap entry wrong";
      }
    });
    if (!err.empty()) return err;
    for_each([&](std::uint32_t s, const node& x) {
      if (kids[s] != x.children) err = "child count wrong";
    });
    if (!err.empty()) return err;
    if (resident != table_.size()) return "table size != resident nodes";
    if (evictable != this->evictable()) return "heap size != evictable nodes";
    for (unsigned g = 0; g < segments; ++g) {
      for (std::size_t i = 1; i < heap_size_[g]; ++i) {
        if (before(entry(g, i), entry(g, (i - 1) / arity))) return "heap order broken";
        if (segment_of(entry(g, i).rank) != g) return "node in the wrong segment's heap";
      }
    }
    if (free_count_ + resident != nodes_.size()) return "free list length wrong";
    return {};
  }

 private:
  static constexpr std::uint32_t npos = std::numeric_limits<std::uint32_t>::max();
  struct key_of {
    const node* pool;
    std::uint64_t operator()(std::uint32_t i) const noexcept { return pool[i].key; }
  };

  static std::size_t check(std::uint32_t capacity) {
    if (capacity == 0 || capacity >= (1u << 31)) {
      throw std::invalid_argument("prefix_tree: capacity must be in [1, 2^31) blocks");
    }
    return capacity;
  }

  template <class OnEvict>
  bool evict_one(OnEvict& on_evict) noexcept {
    const std::uint32_t s = victim();
    if (s == root) return false;
    node& x = nodes_[s];
    if constexpr (stateful) state_.on_evict(s, x.rank, x.key);
    table_.erase(x.key);
    bool parent_replaces = false;
    if (x.parent != root) {
      node& p = nodes_[x.parent];
      // The parent becoming a leaf takes the victim's heap entry in place: in LRU-like orders the
      // parent is older than every other leaf, so the fix-up stops at once (one sift instead of a
      // pop and a push of log n levels each).
      if (--p.children == 0 && p.locks == 0 && segment_of(p.rank) == segment_of(x.rank)) {
        const unsigned g = segment_of(x.rank);
        const std::size_t pos = x.heap_pos;
        x.heap_pos = npos;
        place(g, pos, heap_entry{p.rank, x.parent});
        heap_fix(x.parent);
        parent_replaces = true;
      } else if (p.children == 0 && p.locks == 0) {
        heap_erase(s);
        heap_push(x.parent);
        parent_replaces = true;
      }
    }
    if (!parent_replaces) heap_erase(s);
    release_slot(s);
    ++evictions_;
    if constexpr (std::is_empty_v<Payload>) {
      on_evict(x.key, s, payload(s));
    } else {
      on_evict(x.key, s, payloads_[s]);
    }
    return true;
  }

  void add_child(std::uint32_t p) noexcept {
    if (nodes_[p].children++ == 0 && nodes_[p].heap_pos != npos) heap_erase(p);
  }

  // ---- indexed binary min-heap on (rank, slot) ----
  static constexpr bool stateful = stateful_leaf_policy<Leaf>;
  using state_type = typename detail_tree::leaf_state<Leaf>::type;

  match_result match_into(std::span<const block_key> keys, handle* path) const noexcept {
    // The keys are known up front: start every table miss of the request now.
    for (block_key k : keys) table_.prefetch(k);
    handle at = root;
    std::uint32_t n = 0;
    for (block_key k : keys) {
      const std::uint32_t s = table_.find(k);
      if (s == npos || nodes_[s].parent != at) break;
      at = s;
      if (path != nullptr) path[n] = s;
      ++n;
    }
    return {n, at};
  }

  void release_slot(std::uint32_t s) noexcept {
    nodes_[s].parent = free_head_;
    free_head_ = s;
    ++free_count_;
  }

  // 4-ary: half the levels of a binary heap, and a node's four children share a cache line.
  static constexpr std::size_t arity = 4;
  struct heap_entry {
    std::uint64_t rank;
    std::uint32_t slot;
  };
  [[nodiscard]] bool before(const heap_entry& a, const heap_entry& b) const noexcept {
    return a.rank != b.rank ? a.rank < b.rank : nodes_[a.slot].key < nodes_[b.slot].key;
  }
  // Segment g's heap occupies heap_[g * capacity, (g + 1) * capacity); heap_pos is relative.
  [[nodiscard]] static unsigned segment_of(std::uint64_t rank) noexcept {
    if constexpr (segments == 1) {
      return 0;
    } else {
      return static_cast<unsigned>(rank >> 63);
    }
  }
  [[nodiscard]] heap_entry& entry(unsigned g, std::size_t pos) noexcept {
    return heap_[std::size_t{g} * nodes_.size() + pos];
  }
  [[nodiscard]] const heap_entry& entry(unsigned g, std::size_t pos) const noexcept {
    return heap_[std::size_t{g} * nodes_.size() + pos];
  }
  void place(unsigned g, std::size_t pos, const heap_entry& e) noexcept {
    entry(g, pos) = e;
    nodes_[e.slot].heap_pos = static_cast<std::uint32_t>(pos);
  }
  void sift_up(unsigned g, std::size_t pos) noexcept {
    const heap_entry e = entry(g, pos);
    while (pos > 0) {
      const std::size_t up = (pos - 1) / arity;
      if (!before(e, entry(g, up))) break;
      place(g, pos, entry(g, up));
      pos = up;
    }
    place(g, pos, e);
  }
  void sift_down(unsigned g, std::size_t pos) noexcept {
    const heap_entry e = entry(g, pos);
    const std::size_t size = heap_size_[g];
    for (;;) {
      const std::size_t first = arity * pos + 1;
      if (first >= size) break;
      std::size_t c = first;
      const std::size_t end = std::min(first + arity, size);
      for (std::size_t k = first + 1; k < end; ++k) {
        if (before(entry(g, k), entry(g, c))) c = k;
      }
      if (!before(entry(g, c), e)) break;
      place(g, pos, entry(g, c));
      pos = c;
    }
    place(g, pos, e);
  }
  void heap_push(std::uint32_t s) noexcept {
    const unsigned g = segment_of(nodes_[s].rank);
    place(g, heap_size_[g]++, heap_entry{nodes_[s].rank, s});
    sift_up(g, heap_size_[g] - 1);
  }
  void heap_erase(std::uint32_t s) noexcept {
    const unsigned g = segment_of(nodes_[s].rank);
    const std::size_t pos = nodes_[s].heap_pos;
    nodes_[s].heap_pos = npos;
    const heap_entry last = entry(g, --heap_size_[g]);
    if (pos == heap_size_[g]) return;
    place(g, pos, last);
    heap_fix(last.slot);
  }
  void heap_fix(std::uint32_t s) noexcept {
    const unsigned g = segment_of(nodes_[s].rank);
    const std::size_t pos = nodes_[s].heap_pos;
    if (pos > 0 && before(entry(g, pos), entry(g, (pos - 1) / arity))) {
      sift_up(g, pos);
    } else {
      sift_down(g, pos);
    }
  }

  std::vector<node> nodes_;
  detail::key_table<key_of> table_;
  std::vector<heap_entry> heap_;
  std::size_t heap_size_[segments] = {};
  std::uint32_t free_head_ = npos;  // free nodes chained through `parent`
  [[no_unique_address]] state_type state_;
  std::vector<std::uint32_t> path_;  // stateful policies: the path being touched
  std::size_t free_count_ = 0;
  std::vector<Payload> payloads_;
  std::uint64_t clock_ = 0;
  std::uint64_t evictions_ = 0;
  [[no_unique_address]] EvictFn on_evict_;
};

}  // namespace kvtk::prefix
