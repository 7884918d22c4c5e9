// kvtk/tier/vllm_arc.hpp — vLLM 0.33's own ARC for its CPU offloading tier
// (vllm/v1/kv_offload/cpu/policies/arc.py, ARCCachePolicy), as its CPUOffloadingManager drives it
// when every transfer finishes before the next request (no chunk is ever pinned): the
// `eviction_policy: arc` of `kvtk replay --engine vllm --offload cpu:SIZE:arc`.
//
// Why not kvtk's ARC: vLLM's differs in what it learns from and when. New chunks always enter
// T1 (a ghost hit does not place them in T2); ghost hits adapt the target only on a store miss
// (once per request per key, tail first) or when a touched key is a ghost; a request's reuse is
// applied when it finishes (reused chunks T1 -> T2 or to T2's MRU end, chunks it only inserted to
// their list's MRU end, tail first); evict(n, protected) picks all n victims first, walking T1
// and T2 each once in LRU order (T1 while its virtual size >= int(target), else T2, else T1),
// all or nothing, then trims each ghost list to the capacity.
//
// Design: 4C + 4 nodes (C = capacity; T1 + T2 <= C, each ghost list <= C after a trim, and one
// eviction adds at most C ghosts before it) in four index-linked lists (front = LRU), one key
// table key -> node. No allocation after construction.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/key_table.hpp"

namespace kvtk::tier {

/// Thread safety: as block_cache: one per thread.
class vllm_arc {
  static constexpr std::uint32_t none = ~std::uint32_t{0};
  enum list_id : std::uint8_t { t1, t2, b1, b2, free_list };
  struct node {
    block_key key = 0;
    std::uint32_t prev = none, next = none;
    list_id list = free_list;
    bool guarded = false;  // protected during one evict()
  };
  struct key_of {
    const node* nodes;
    std::uint64_t operator()(std::uint32_t i) const noexcept { return nodes[i].key; }
  };
  struct list {
    std::uint32_t head = none, tail = none, size = 0;
  };

 public:
  /// Requires: 0 < capacity < 2^29 - 1 (4 capacity + 4 nodes stay below the key table's 2^31).
  /// Throws: std::invalid_argument, std::bad_alloc.
  explicit vllm_arc(std::uint32_t capacity)
      : capacity_(check(capacity)), nodes_(4ull * capacity + 4),
        table_(static_cast<std::uint32_t>(nodes_.size()), key_of{nodes_.data()}, 2) {
    for (std::uint32_t i = 0; i < nodes_.size(); ++i) push_back(free_list, i);
    victims_.reserve(capacity);
  }
  vllm_arc(const vllm_arc&) = delete;
  vllm_arc& operator=(const vllm_arc&) = delete;

  /// Whether `key` is resident (in T1 or T2).
  [[nodiscard]] bool contains(block_key key) const noexcept {
    const std::uint32_t i = table_.find(key);
    return i != none && nodes_[i].list <= t2;
  }
  [[nodiscard]] std::size_t size() const noexcept { return lists_[t1].size + lists_[t2].size; }
  [[nodiscard]] double target_t1() const noexcept { return target_; }

  /// insert: a new chunk enters T1's MRU end and leaves the ghost lists.
  /// Requires: !contains(key) and room (size() < capacity).
  void insert(block_key key) noexcept {
    std::uint32_t i = table_.find(key);
    if (i != none) {
      unlink(i);  // a ghost
    } else {
      i = lists_[free_list].head;
      unlink(i);
      nodes_[i].key = key;
      table_.insert(key, i);
    }
    push_back(t1, i);
  }

  /// on_store_miss: each key, tail first, adapts the target when it is a ghost (and moves to its
  /// ghost list's MRU end).
  void on_store_miss(std::span<const block_key> keys_head_first) noexcept {
    for (std::size_t k = keys_head_first.size(); k-- > 0;) adapt_to_ghost_hit(keys_head_first[k]);
  }

  /// evict(n, protected): n victims or none (false); the `protect` keys stay. Each victim
  /// becomes a ghost (T1 -> B1, T2 -> B2); the ghost lists are then trimmed to the capacity,
  /// oldest first.
  bool evict(std::size_t n, std::span<const block_key> protect) {
    if (n == 0) return true;
    for (const block_key k : protect) {
      if (const std::uint32_t i = table_.find(k); i != none) nodes_[i].guarded = true;
    }
    const bool ok = pick_victims(n);
    for (const block_key k : protect) {
      if (const std::uint32_t i = table_.find(k); i != none) nodes_[i].guarded = false;
    }
    if (!ok) return false;
    for (const std::uint32_t v : victims_) {
      const list_id to = nodes_[v].list == t1 ? b1 : b2;
      unlink(v);
      push_back(to, v);
      ++evictions_;
    }
    for (const list_id g : {b1, b2}) {
      while (lists_[g].size > capacity_) drop(lists_[g].head);
    }
    return true;
  }

 private:
  // The n victims, chosen before any moves (T1 and T2 each walked once, LRU first).
  bool pick_victims(std::size_t n) {
    victims_.clear();
    std::int64_t virtual_t1 = lists_[t1].size;
    std::uint32_t c1 = lists_[t1].head, c2 = lists_[t2].head;
    auto next_candidate = [&](std::uint32_t& cur) {
      while (cur != none) {
        const std::uint32_t i = cur;
        cur = nodes_[i].next;
        if (!nodes_[i].guarded) return i;
      }
      return none;
    };
    for (std::size_t k = 0; k < n; ++k) {
      std::uint32_t v = none;
      if (virtual_t1 >= static_cast<std::int64_t>(target_)) {
        v = next_candidate(c1);
        if (v != none) --virtual_t1;
      }
      if (v == none) v = next_candidate(c2);
      if (v == none) {
        v = next_candidate(c1);
        if (v == none) return false;
        --virtual_t1;
      }
      victims_.push_back(v);
    }
    return true;
  }

 public:
  /// on_request_finished, for one request's keys in head-to-tail order: tail first, a key it
  /// only inserted moves to its list's MRU end; a key it reused moves from T1 to T2, or to T2's
  /// MRU end. `inserted_only(i)` and `reused(i)` classify key i.
  template <class InsertedOnly, class Reused>
  void on_request_finished(std::span<const block_key> keys_head_first, InsertedOnly&& inserted_only,
                           Reused&& reused) noexcept {
    for (std::size_t k = keys_head_first.size(); k-- > 0;) {
      const std::uint32_t i = table_.find(keys_head_first[k]);
      if (i == none || nodes_[i].list > t2) continue;
      if (inserted_only(k)) {
        const list_id l = nodes_[i].list;
        unlink(i);
        push_back(l, i);
      } else if (reused(k)) {
        unlink(i);
        push_back(t2, i);
      }
    }
  }

  [[nodiscard]] std::uint64_t evictions() const noexcept { return evictions_; }

 private:
  static std::uint32_t check(std::uint32_t c) {
    if (c == 0 || c + 1 >= (1u << 29)) {
      throw std::invalid_argument("vllm arc: capacity must be in [1, 2^29 - 1) chunks");
    }
    return c;
  }

  void adapt_to_ghost_hit(block_key key) noexcept {
    const std::uint32_t i = table_.find(key);
    if (i == none) return;
    const double n1 = lists_[b1].size, n2 = lists_[b2].size;
    if (nodes_[i].list == b1) {
      target_ = std::min(target_ + std::max(1.0, n2 / n1), static_cast<double>(capacity_));
    } else if (nodes_[i].list == b2) {
      target_ = std::max(target_ - std::max(1.0, n1 / n2), 0.0);
    } else {
      return;
    }
    const list_id l = nodes_[i].list;
    unlink(i);
    push_back(l, i);
  }

  void drop(std::uint32_t i) noexcept {
    table_.take(nodes_[i].key);
    unlink(i);
    push_back(free_list, i);
  }
  void unlink(std::uint32_t i) noexcept {
    node& n = nodes_[i];
    list& l = lists_[n.list];
    (n.prev == none ? l.head : nodes_[n.prev].next) = n.next;
    (n.next == none ? l.tail : nodes_[n.next].prev) = n.prev;
    n.prev = n.next = none;
    --l.size;
  }
  void push_back(list_id id, std::uint32_t i) noexcept {
    list& l = lists_[id];
    node& n = nodes_[i];
    n.list = id;
    n.prev = l.tail;
    n.next = none;
    (l.tail == none ? l.head : nodes_[l.tail].next) = i;
    l.tail = i;
    ++l.size;
  }

  std::uint32_t capacity_;
  std::vector<node> nodes_;
  detail::key_table<key_of> table_;
  list lists_[5]{};
  double target_ = 0;
  std::vector<std::uint32_t> victims_;
  std::uint64_t evictions_ = 0;
};

}  // namespace kvtk::tier
