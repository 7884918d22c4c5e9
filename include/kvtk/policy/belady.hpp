// kvtk/policy/belady.hpp — Belady's MIN / OPT (offline; Belady 1966).
//
// The caller supplies, with every access, the position of the key's next access (hint.next_use;
// access_hint::never if it is never used again; kvtk::next_use_positions computes them for a
// trace). The victim is the resident node whose next use is furthest in the future: the optimal
// demand-paging choice for unit sizes (the missing block is always admitted; the victim is chosen
// among the blocks resident before it). Ties, including several nodes that are never used again,
// go to the least recently accessed node.
//
// Design
// ------
// * Nodes never used again sit in an intrusive list in access order (front = least recent):
//   O(1) insert, O(1) victim. On real traces most victims come from here.
// * The others are in a binary max-heap of {next_use, access stamp, node, generation} entries in a
//   preallocated array. A node's entry is invalidated by bumping the node's generation (a hit gives
//   it a new next use), not by searching the heap; stale entries are skipped when they surface and
//   the array is compacted (O(n), no allocation) when it fills, which amortizes to O(1) per
//   operation. Heap entries of pinned nodes met while looking for a victim are set aside in a
//   preallocated buffer and pushed back.
// Complexity: O(log n) amortized per operation; no allocation after construction.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/intrusive.hpp"

namespace kvtk {

/// Thread safety: the family is stateless; a container belongs to one block_cache and follows it.
struct belady {
  static constexpr std::string_view name = "belady";
  /// Offline: every access must carry hint.next_use (see kvtk/offline.hpp).
  static constexpr bool offline = true;
  static constexpr unsigned hints_read = hint_fields::next_use;
  struct config {
    /// The caller's promise to pass hint.next_use with every access and insert. Default false,
    /// and a cache built without it is refused: without next uses Belady would silently act as
    /// LRU. kvtk::next_use_positions computes them for a key stream; replays set this.
    bool next_use_hints = false;
  };
  struct hook : detail::list_hook<belady> {
    std::uint64_t next_use = access_hint::never;
    std::uint64_t stamp = 0;  // access order, for ties
    std::uint32_t gen = 0;    // bumped whenever the node's heap entry becomes stale
    bool dead = false;        // never used again: in the dead list, not the heap
  };

  template <class Node>
  class container {
    struct entry {
      std::uint64_t next_use;
      std::uint64_t stamp;
      Node* node;
      std::uint32_t gen;
    };
    // std::*_heap keep the "largest" on top: largest next use, then the smallest stamp.
    struct before {
      bool operator()(const entry& a, const entry& b) const noexcept {
        return a.next_use != b.next_use ? a.next_use < b.next_use : a.stamp > b.stamp;
      }
    };

   public:
    using config_type = config;
    /// Throws: std::invalid_argument unless cfg.next_use_hints (an online caller has no next
    /// uses to give); std::bad_alloc.
    container(const policy_params& p, const config& cfg)
        : heap_(checked(cfg, std::size_t{p.max_entries} * 2 + 1)), stash_(p.max_entries) {}

    /// Complexity: O(log n) amortized.
    void on_insert(Node& n, const access_hint& h) noexcept {
      ++size_;
      place(n, h.next_use);
    }
    /// Complexity: O(log n) amortized.
    void on_hit(Node& n, const access_hint& h) noexcept {
      detach(n);
      place(n, h.next_use);
    }
    void on_miss(block_key, const access_hint&) noexcept {}
    /// Effects: unlinks the unpinned node with the furthest next use.
    /// Complexity: O(log n) amortized + O(pinned nodes passed over * log n).
    template <class Pred>
    Node* evict(Pred&& pred) noexcept {
      if (Node* v = detail::first_evictable(dead_, pred)) {
        dead_.erase(dead_.iterator_to(*v));
        --size_;
        return v;
      }
      Node* victim = nullptr;
      std::size_t stashed = 0;
      while (heap_size_ > 0) {
        std::pop_heap(heap_.begin(), heap_.begin() + static_cast<std::ptrdiff_t>(heap_size_),
                      before{});
        const entry top = heap_[--heap_size_];
        if (top.node->gen != top.gen) continue;  // stale
        if (!pred(*top.node)) {
          stash_[stashed++] = top;
          continue;
        }
        victim = top.node;
        ++victim->gen;
        --size_;
        break;
      }
      for (std::size_t i = 0; i < stashed; ++i) push(stash_[i]);
      return victim;
    }
    void on_erase(Node& n) noexcept {
      detach(n);
      --size_;
    }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }

    template <class F>
    void for_each(F&& f) const {
      for (const Node& n : dead_) f(n);
      for (std::size_t i = 0; i < heap_size_; ++i) {
        const entry& e = heap_[i];
        if (e.node->gen == e.gen) f(*e.node);
      }
    }
    [[nodiscard]] const char* audit() const noexcept {
      std::size_t live = dead_.size();
      for (std::size_t i = 0; i < heap_size_; ++i) {
        const entry& e = heap_[i];
        if (e.node->gen != e.gen) continue;
        if (e.node->dead) return "belady: dead node has a live heap entry";
        if (e.next_use != e.node->next_use) return "belady: heap entry out of date";
        ++live;
      }
      if (live != size_) return "belady: live entries != size";
      if (!std::is_heap(heap_.begin(), heap_.begin() + static_cast<std::ptrdiff_t>(heap_size_),
                        before{})) {
        return "belady: heap order broken";
      }
      return "";
    }

   private:
    static std::size_t checked(const config& cfg, std::size_t heap_entries) {
      if (!cfg.next_use_hints) {
        throw std::invalid_argument(
            "belady is offline: it needs every access's next use (hint.next_use). Set "
            "belady::config::next_use_hints = true when you pass them (kvtk::next_use_positions "
            "computes them), or choose an online policy");
      }
      return heap_entries;
    }
    void place(Node& n, std::uint64_t next_use) noexcept {
      n.next_use = next_use;
      n.stamp = ++clock_;
      n.dead = next_use == access_hint::never;
      if (n.dead) {
        dead_.push_back(n);
      } else {
        push(entry{next_use, n.stamp, &n, ++n.gen});
      }
    }
    void detach(Node& n) noexcept {
      if (n.dead) {
        dead_.erase(dead_.iterator_to(n));
      } else {
        ++n.gen;
      }
    }
    void push(const entry& e) noexcept {
      if (heap_size_ == heap_.size()) compact();
      heap_[heap_size_++] = e;
      std::push_heap(heap_.begin(), heap_.begin() + static_cast<std::ptrdiff_t>(heap_size_),
                     before{});
    }
    // Drops stale entries (at most max_entries stay live, so this frees over half the array).
    void compact() noexcept {
      std::size_t out = 0;
      for (std::size_t i = 0; i < heap_size_; ++i) {
        if (heap_[i].node->gen == heap_[i].gen) heap_[out++] = heap_[i];
      }
      heap_size_ = out;
      std::make_heap(heap_.begin(), heap_.begin() + static_cast<std::ptrdiff_t>(heap_size_),
                     before{});
    }

    detail::intrusive_list<Node, belady> dead_;
    std::vector<entry> heap_;
    std::size_t heap_size_ = 0;
    std::vector<entry> stash_;
    std::size_t size_ = 0;
    std::uint64_t clock_ = 0;
  };
};

static_assert(eviction_policy<belady>);

}  // namespace kvtk
