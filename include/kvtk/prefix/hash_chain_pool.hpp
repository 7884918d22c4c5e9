// kvtk/prefix/hash_chain_pool.hpp — vLLM v1's prefix-caching block pool (the "hash chain" index).
//
// Design
// ------
// A fixed pool of `num_blocks` physical blocks. A block that holds KV for a prefix is registered
// under its chained key in a hash table (vLLM's cached_block_hash_to_block). Blocks not referenced
// by any running request sit in a free queue (front = reused first) whether or not they still hold
// cached KV: allocating takes the front block and, if it was cached, evicts its key. A hit
// *touches* a block: its reference count goes up and it leaves the free queue. When a request
// finishes its blocks are released in reverse order — the deepest block is appended to the free
// queue first, so a request's tail is reused before its head (vLLM's free order).
//
// Differences from a radix tree worth comparing on a trace: eviction is by release order, not by
// access order, and any free block can be evicted, including one whose descendants stay cached
// (they become unreachable until their prefix is recomputed).
//
// Memory: 32-byte blocks + 16 bytes of hash table per block. No allocation after construction.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/intrusive.hpp"
#include "kvtk/detail/key_table.hpp"

namespace kvtk::prefix {

/// Thread safety: as block_cache (its reference counts model vLLM's, they are not thread locks).
class hash_chain_pool {
  struct block_tag {};
  struct block : detail::list_hook<block_tag> {
    block_key key = 0;
    std::uint32_t refs = 0;
    bool cached = false;
  };
  struct key_of {
    const block* pool;
    std::uint64_t operator()(std::uint32_t i) const noexcept { return pool[i].key; }
  };

 public:
  static constexpr std::uint32_t npos = std::numeric_limits<std::uint32_t>::max();

  /// Requires: 0 < num_blocks < 2^31.  Throws: std::invalid_argument, std::bad_alloc.
  explicit hash_chain_pool(std::uint32_t num_blocks)
      : blocks_(check(num_blocks)), table_(num_blocks, key_of{blocks_.data()}, 2) {
    for (block& b : blocks_) free_.push_back(b);
  }
  hash_chain_pool(const hash_chain_pool&) = delete;
  hash_chain_pool& operator=(const hash_chain_pool&) = delete;

  /// Effects: the number of leading keys cached. No state change.  Complexity: O(result + 1).
  [[nodiscard]] std::uint32_t match(std::span<const block_key> keys) const noexcept {
    std::uint32_t n = 0;
    while (n < keys.size() && table_.find(keys[n]) != npos) ++n;
    return n;
  }

  /// Effects: acquires one block per key, in order, writing its slot to held[i]: a cached key's
  /// block is touched (reference count + 1, out of the free queue); a missing key gets the free
  /// queue's front block (evicting the key it held, on_evict(key, slot)) and is registered.
  /// Stops when the free queue is empty. Returns the number of blocks acquired.
  /// Requires: held.size() >= keys.size().  Complexity: O(keys).  Throws: nothing.
  template <class OnEvict>
  std::uint32_t acquire(std::span<const block_key> keys, std::span<std::uint32_t> held,
                        OnEvict&& on_evict) noexcept {
    std::uint32_t i = 0;
    for (; i < keys.size(); ++i) {
      std::uint32_t s = table_.find(keys[i]);
      if (s != npos) {
        block& b = blocks_[s];
        if (b.refs++ == 0) free_.erase(free_.iterator_to(b));
      } else {
        if (free_.empty()) break;
        block& b = free_.front();
        free_.pop_front();
        s = static_cast<std::uint32_t>(&b - blocks_.data());
        if (b.cached) {
          table_.erase(b.key);
          ++evictions_;
          on_evict(b.key, s);
        }
        b.key = keys[i];
        b.cached = true;
        b.refs = 1;
        table_.insert(keys[i], s);
      }
      held[i] = s;
    }
    return i;
  }

  /// Effects: releases blocks acquired by one request, last first: each loses a reference and,
  /// at zero, is appended to the free queue (still cached).  Requires: slots from acquire().
  void release(std::span<const std::uint32_t> held) noexcept {
    for (std::size_t i = held.size(); i-- > 0;) {
      block& b = blocks_[held[i]];
      if (b.refs > 0 && --b.refs == 0) free_.push_back(b);
    }
  }

  [[nodiscard]] std::uint32_t capacity() const noexcept {
    return static_cast<std::uint32_t>(blocks_.size());
  }
  [[nodiscard]] std::size_t cached() const noexcept { return table_.size(); }
  [[nodiscard]] std::size_t free_blocks() const noexcept { return free_.size(); }
  [[nodiscard]] std::uint64_t evictions() const noexcept { return evictions_; }
  [[nodiscard]] bool contains(block_key k) const noexcept { return table_.find(k) != npos; }

 private:
  static std::size_t check(std::uint32_t n) {
    if (n == 0 || n >= (1u << 31)) {
      throw std::invalid_argument("hash_chain_pool: num_blocks must be in [1, 2^31)");
    }
    return n;
  }

  std::vector<block> blocks_;
  detail::key_table<key_of> table_;
  detail::intrusive_list<block, block_tag> free_;
  std::uint64_t evictions_ = 0;
};

}  // namespace kvtk::prefix
