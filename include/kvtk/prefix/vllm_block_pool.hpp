// kvtk/prefix/vllm_block_pool.hpp — vLLM's own prefix-cache accounting (`--engine vllm`):
// KVCacheManager + BlockPool of vLLM 0.33.0 with one full-attention KV cache group, prefix
// caching on, as its v1 scheduler drives them for one request (match, allocate, cache, free).
//
// Why a second pool next to hash_chain_pool: that one is the "ideal" accounting (every cacheable
// block may hit, a cached key is reused wherever it sits). vLLM differs in four ways, and each
// changes hit counts (docs/prefix.md "Engine accounting", checked against vLLM's real code by
// tools/engine-check/engine_accounting.py):
//  1. The hit is capped at prompt length - 1 tokens (get_computed_blocks' max_cache_hit_length),
//     in whole blocks: at most floor((L - 1) / B) blocks, so a fully cached prompt whose length is
//     a multiple of B recomputes its last block.
//  2. Every block after the hit gets a *new* physical block, even when its hash is still cached
//     (a block whose prefix was evicted, or the capped last block). When it is cached the hash
//     then maps to two blocks (BlockHashToBlockMap keeps duplicates; a lookup returns the oldest
//     remaining), and both stay resident until evicted: duplicates cost capacity.
//  3. The partial last block (L not a multiple of B) takes a physical block while the request
//     runs and is never cached; freed, it goes to the *front* of the free queue (reused first),
//     while freed cached blocks go to the back.
//  4. A request's blocks are freed last block first (its tail is evicted before its head).
//
// Design
// ------
// `capacity` physical blocks in an array (vLLM's null block is not counted: capacity C means C
// usable blocks, num_gpu_blocks = C + 1 in vLLM). A free queue (intrusive list, front = next to
// be reused) holds every block with no reference, cached or not. A key table maps a hash to the
// oldest block cached under it; further blocks with the same hash hang off it in insertion order
// through `next_same`, so duplicates cost nothing extra. Evicting a block unlinks it from its
// chain (chains longer than one are rare and short). Nothing allocates after construction.
// Memory: 36 bytes per block + 16 of hash table (+ 16 with the eviction log).
#pragma once

#include <cassert>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/intrusive.hpp"
#include "kvtk/detail/key_table.hpp"

namespace kvtk::prefix {

/// Thread safety: as block_cache (ref counts model vLLM's, they are not thread locks).
class vllm_block_pool {
  struct block_tag {};
  struct block : detail::list_hook<block_tag> {
    block_key key = 0;
    std::uint32_t refs = 0;
    std::uint32_t next_same = 0;  ///< next block cached under the same key (npos = none)
    std::uint32_t depth = 0;      ///< its position in the request that cached it (set_depth)
    bool cached = false;
  };
  struct key_of {
    const block* pool;
    std::uint64_t operator()(std::uint32_t i) const noexcept { return pool[i].key; }
  };

 public:
  static constexpr std::uint32_t npos = std::numeric_limits<std::uint32_t>::max();
  /// The vLLM release whose accounting this reproduces.
  static constexpr const char* engine_version = "vLLM 0.33.0";

  /// What one request did.
  struct request_result {
    std::uint32_t hit_blocks = 0;  ///< the engine's computed (reused) blocks
    bool scheduled = true;         ///< false: more blocks than the pool has; nothing changed
  };

  /// Requires: 0 < capacity < 2^31 (usable blocks).  Throws: std::invalid_argument,
  /// std::bad_alloc.
  explicit vllm_block_pool(std::uint32_t capacity)
      : blocks_(check(capacity)), table_(capacity, key_of{blocks_.data()}, 2) {
    for (block& b : blocks_) {
      b.next_same = npos;
      free_.push_back(b);
    }
  }
  vllm_block_pool(const vllm_block_pool&) = delete;
  vllm_block_pool& operator=(const vllm_block_pool&) = delete;

  /// Effects: one request of `input_tokens` tokens in blocks of `block_tokens` whose full blocks
  /// have the chained keys `full_keys` (at most floor(input_tokens / block_tokens) of them are
  /// read), run to completion: hit = leading keys cached, capped at floor((L-1)/B) blocks; the
  /// hit blocks are touched in order, ceil(L/B) - hit new blocks are taken from the free queue's
  /// front (evicting the hashes they held), the new full blocks are cached under their keys,
  /// and all the request's blocks are freed, last first. A request needing more than capacity()
  /// blocks is not scheduled (vLLM would never admit it): nothing changes and it hits nothing.
  /// `held` is scratch space for the request's block slots.
  /// Requires: held.size() >= ceil(L/B); block_tokens > 0.  Complexity: O(ceil(L/B)) expected.
  /// Throws: nothing.
  request_result run_request(std::span<const block_key> full_keys, std::uint64_t input_tokens,
                             std::uint32_t block_tokens, std::span<std::uint32_t> held) noexcept {
    request_result out;
    if (input_tokens == 0) return out;
    const std::uint64_t full = std::min<std::uint64_t>(input_tokens / block_tokens, full_keys.size());
    const std::uint64_t n = (input_tokens + block_tokens - 1) / block_tokens;
    if (n > blocks_.size()) {
      out.scheduled = false;
      return out;
    }
    const std::uint32_t h = find_hit(full_keys, hit_cap(input_tokens, block_tokens, full), held);
    touch(held.first(h));
    for (std::uint64_t i = h; i < n; ++i) held[i] = take_free();
    for (std::uint64_t i = h; i < full; ++i) cache(held[i], full_keys[i]);
    release(held.first(n));
    out.hit_blocks = h;
    return out;
  }

  // The steps of run_request, for a scheduler that holds several requests' blocks at once
  // (kvtk simulate's vLLM schedulers).

  /// The most blocks a request of `tokens` tokens with `full` keyed full blocks may hit.
  [[nodiscard]] static std::uint32_t hit_cap(std::uint64_t tokens, std::uint32_t block_tokens,
                                             std::uint64_t full) noexcept {
    if (tokens == 0) return 0;
    return static_cast<std::uint32_t>(std::min<std::uint64_t>((tokens - 1) / block_tokens, full));
  }
  /// Effects: none. The leading keys (at most `cap`) cached, their blocks (the oldest of
  /// duplicates) written to out.  Requires: out.size() >= cap.  Complexity: O(result + 1).
  std::uint32_t find_hit(std::span<const block_key> keys, std::uint32_t cap,
                         std::span<std::uint32_t> out) const noexcept {
    std::uint32_t h = 0;
    for (; h < std::min<std::size_t>(cap, keys.size()); ++h) {
      const std::uint32_t s = table_.find(keys[h]);
      if (s == npos) break;
      out[h] = s;
    }
    return h;
  }
  /// The oldest block cached under k, or npos.
  [[nodiscard]] std::uint32_t find(block_key k) const noexcept { return table_.find(k); }
  /// True when `hits` can be touched and `fresh` new blocks taken (vLLM's admission check:
  /// new blocks + hit blocks now in the free queue <= free blocks).
  [[nodiscard]] bool can_allocate(std::span<const std::uint32_t> hits,
                                  std::uint64_t fresh) const noexcept {
    std::uint64_t need = fresh;
    for (const std::uint32_t s : hits) need += blocks_[s].refs == 0 ? 1 : 0;
    return need <= free_.size();
  }
  /// Effects: one more reference on each block; a block leaves the free queue at its first.
  void touch(std::span<const std::uint32_t> hits) noexcept {
    for (const std::uint32_t s : hits) {
      block& b = blocks_[s];
      if (b.refs++ == 0) free_.erase(free_.iterator_to(b));
    }
  }
  /// get_new_blocks: the free queue's front block, its cached key evicted; one reference.
  /// Requires: free_blocks() > 0.
  std::uint32_t take_free() noexcept {
    block& b = free_.front();
    free_.pop_front();
    const auto s = static_cast<std::uint32_t>(&b - blocks_.data());
    if (b.cached) uncache(s);
    b.refs = 1;
    return s;
  }
  /// BlockHashToBlockMap.insert: block s is cached under k (after any blocks already under k).
  /// Requires: s is held and not cached.
  void cache(std::uint32_t s, block_key k) noexcept {
    block& b = blocks_[s];
    b.key = k;
    b.cached = true;
    b.next_same = npos;
    ++cached_blocks_;
    std::uint32_t head = table_.find(k);
    if (head == npos) {
      table_.insert(k, s);
      return;
    }
    while (blocks_[head].next_same != npos) head = blocks_[head].next_same;
    blocks_[head].next_same = s;
  }
  /// free(request): one reference less on each, last block first; blocks left unreferenced go
  /// to the free queue: uncached ones to its front in that order (prepend_n), cached ones to its
  /// back (append_n).
  void release(std::span<const std::uint32_t> held) noexcept {
    const bool was_empty = free_.empty();
    auto front = free_.begin();  // inserting before the old front keeps the prepended order
    for (std::size_t i = held.size(); i-- > 0;) {
      block& b = blocks_[held[i]];
      if (--b.refs == 0 && b.cached) free_.push_back(b);
    }
    if (was_empty) front = free_.begin();
    for (std::size_t i = held.size(); i-- > 0;) {
      block& b = blocks_[held[i]];
      if (b.refs == 0 && !b.cached) free_.insert(front, b);
    }
  }

  [[nodiscard]] std::uint32_t capacity() const noexcept {
    return static_cast<std::uint32_t>(blocks_.size());
  }
  /// Blocks holding a cached hash (duplicates counted).
  [[nodiscard]] std::uint64_t cached_blocks() const noexcept { return cached_blocks_; }
  /// Distinct hashes cached.
  [[nodiscard]] std::size_t distinct_keys() const noexcept { return table_.size(); }
  [[nodiscard]] std::uint64_t evictions() const noexcept { return evictions_; }

  /// Effects: from now on, every evicted block is logged (its key and its depth in the request
  /// that cached it) until drain_evictions(); a top over lower tiers demotes them
  /// (tier/engine_tier_hierarchy.hpp). Complexity: O(capacity) once.  Throws: std::bad_alloc.
  void log_evictions() { evicted_log_.reserve(blocks_.size()); logging_ = true; }
  /// Effects: calls f(key, depth) for every block evicted since the last call, in eviction
  /// order, and forgets them.  Complexity: O(logged).  Throws: nothing (f must not throw).
  template <class F>
  void drain_evictions(F&& f) noexcept {
    for (const evicted_block& e : evicted_log_) f(e.key, e.depth);
    evicted_log_.clear();
  }
  /// Requires: s is cached.  Effects: records block s's depth in its request (for the log).
  void set_depth(std::uint32_t s, std::uint32_t depth) noexcept { blocks_[s].depth = depth; }
  [[nodiscard]] std::size_t free_blocks() const noexcept { return free_.size(); }
  [[nodiscard]] bool contains(block_key k) const noexcept { return table_.find(k) != npos; }

  /// Checks the invariants (tests): every block is referenced or free, the cached count and
  /// every chain are consistent. Returns an empty string or the first violation.
  [[nodiscard]] const char* audit() const noexcept {
    std::uint64_t cached = 0, chained = 0;
    for (const block& b : blocks_) {
      if (b.refs != 0) return "a block is still referenced between requests";
      cached += b.cached ? 1 : 0;
    }
    if (free_.size() != blocks_.size()) return "the free queue lost a block";
    if (cached != cached_blocks_) return "cached block count";
    for (std::uint32_t i = 0; i < blocks_.size(); ++i) {
      if (!blocks_[i].cached || table_.find(blocks_[i].key) != i) continue;
      for (std::uint32_t s = i; s != npos; s = blocks_[s].next_same) {
        if (!blocks_[s].cached || blocks_[s].key != blocks_[i].key) return "a broken chain";
        ++chained;
      }
    }
    return chained == cached ? "" : "a cached block is in no chain";
  }

 private:
  static std::size_t check(std::uint32_t n) {
    if (n == 0 || n >= (1u << 31)) {
      throw std::invalid_argument("vllm_block_pool: capacity must be in [1, 2^31) blocks");
    }
    return n;
  }

  // BlockHashToBlockMap.pop(key, block_id): the others with the key keep their order.
  void uncache(std::uint32_t s) noexcept {
    block& b = blocks_[s];
    const std::uint32_t head = table_.find(b.key);
    if (head == s) {
      table_.erase(b.key);
      if (b.next_same != npos) table_.insert(b.key, b.next_same);
    } else {
      std::uint32_t p = head;
      while (blocks_[p].next_same != s) p = blocks_[p].next_same;
      blocks_[p].next_same = b.next_same;
    }
    // Each eviction reuses a block for a request that holds it until it ends, so between drains
    // of a request run alone at most capacity blocks are evicted: the log never reallocates.
    assert(!logging_ || evicted_log_.size() < evicted_log_.capacity());
    if (logging_ && evicted_log_.size() < evicted_log_.capacity()) {
      evicted_log_.push_back({b.key, b.depth});
    }
    b.cached = false;
    b.next_same = npos;
    --cached_blocks_;
    ++evictions_;
  }

  struct evicted_block {
    block_key key;
    std::uint32_t depth;
  };
  std::vector<block> blocks_;
  std::vector<evicted_block> evicted_log_;  // log_evictions(): the evictions since the last drain
  bool logging_ = false;
  detail::key_table<key_of> table_;
  detail::intrusive_list<block, block_tag> free_;
  std::uint64_t cached_blocks_ = 0, evictions_ = 0;
};

}  // namespace kvtk::prefix
