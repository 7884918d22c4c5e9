// kvtk/tier/lmcache_offload.hpp — LMCache 0.5.6's local CPU backend behind vLLM 0.33's block pool
// (vLLM's `LMCacheConnectorV1`), request by request as vLLM's scheduler and LMCache's connector
// drive them with nothing else running: `kvtk replay --engine vllm --offload
// lmcache-cpu:SIZE:POLICY[,chunk_size=N]`.
//
// What it reproduces (checked against vLLM's Scheduler with LMCache's own connector, storage
// manager and cache policies by tools/engine-check/lmcache_connector.py; one full-attention group,
// prompt only, the whole prompt in one step, every load and store finished within it; the rules
// with LMCache's file:line references are in docs/engines/lmcache-0.5.6.md):
//  * Chunks of c = k GPU blocks (chunk_size, default 256 tokens). A prompt of L tokens has
//    floor(L / c) keyed chunks (the partial tail is neither looked up nor stored:
//    save_unfull_chunk is off by default); chunk i is keyed by its whole token prefix, here the
//    key of GPU block (i + 1)k - 1.
//  * Lookup (get_num_new_matched_tokens, once per request): the leading run of chunks resident
//    in the CPU tier, h of them, H = h c tokens, from chunk 0 whatever the GPU hit; the hit
//    chunks are touched (the policy's hit) in reverse order, so chunk 0 ends most recent.
//  * Load: with G = the GPU hit in tokens (vLLM's, capped at L - 1), need = H - G, one less when
//    H = L; nothing when need <= 0. The chunks floor(G / c) .. h - 1 are read (a chunk partly on
//    the GPU is read whole). The GPU pool then runs the request as `--engine vllm` does.
//  * Store (wait_for_save): the chunks h .. floor(L / c) - 1, whatever the GPU held. First one
//    slot each is allocated in order, a full tier evicting one policy victim per chunk, the store
//    cut short when nothing is left to evict; then each allocated chunk is put in order, a chunk
//    already resident dropping its copy without touching the entry. So a store can evict a chunk
//    of its own request that sits behind the first miss, and put it back as new.
//  * Policies (cache_policy): LRU (a hit moves to the MRU end; evict the LRU end), MRU (the same
//    order; evict the MRU end), FIFO (hits ignored; evict the oldest put), LFU (a put starts at
//    frequency 1, a hit adds 1; evict the lowest frequency, the first to reach it). Only lookups
//    count as hits; reads and re-puts do not.
//
// Design: the GPU pool (prefix/vllm_block_pool.hpp) is the top; the CPU tier is a fixed array of
// chunk slots, a key table and one indexed min-heap on each policy's eviction rank, so every
// policy is O(log chunks) per operation; nothing allocates per request but the scratch, which
// grows to the longest request.
//
// Not modelled: a prompt stored over several steps (chunked prefill, where a long prompt's later
// chunks can evict its earlier ones), the disk backend, save_unfull_chunk, save_decode_cache, and
// tensor parallelism (each rank has its own CPU backend of the configured size).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/indexed_heap.hpp"
#include "kvtk/detail/key_table.hpp"
#include "kvtk/prefix/vllm_block_pool.hpp"

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

/// What `--offload lmcache-cpu:SIZE:POLICY[,chunk_size=N]` configures.
struct lmcache_offload_config {
  std::uint32_t gpu_blocks = 0;        ///< the GPU pool (blocks; vLLM's num_gpu_blocks - 1)
  std::uint32_t cpu_chunks = 0;        ///< the CPU tier (chunks: max_local_cpu_size / chunk bytes)
  std::uint32_t blocks_per_chunk = 1;  ///< chunk_size / the GPU block size (>= 1)
  lmcache_policy policy = lmcache_policy::lru;  ///< LMCache's default
};

/// What one request did.
struct lmcache_offload_request {
  std::uint32_t gpu_hit_blocks = 0;  ///< vLLM's own hit (blocks)
  std::uint32_t lookup_chunks = 0;   ///< h: chunks the lookup found
  std::uint64_t loaded_tokens = 0;   ///< need: tokens vLLM takes from LMCache
  std::uint32_t loaded_chunks = 0;   ///< chunks read
  std::uint32_t stored_chunks = 0;   ///< chunks put (new entries)
  bool scheduled = true;             ///< false: more blocks than the GPU pool has
};

/// Totals over a replay.
struct lmcache_offload_counters {
  std::uint64_t requests = 0, unscheduled = 0;
  std::uint64_t gpu_hit_blocks = 0, cpu_hit_blocks = 0;  ///< cpu: floor(loaded tokens / B) per request
  std::uint64_t lookup_hit_tokens = 0, loaded_tokens = 0;
  std::uint64_t chunks_loaded = 0, chunks_stored = 0, chunks_evicted = 0;
  std::uint64_t cut_stores = 0;  ///< stores cut short: more chunks than the tier can free
};

/// Thread safety: as block_cache: one per thread.
class lmcache_offload {
  static constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
  struct slot {
    block_key key = 0;
    std::uint64_t rank_hi = 0, rank_lo = 0;  // eviction rank: smallest goes first
    std::uint32_t freq = 0, heap_pos = none;
  };
  struct key_of {
    const slot* slots;
    std::uint64_t operator()(std::uint32_t i) const noexcept { return slots[i].key; }
  };

  // The eviction heap's callables (detail/indexed_heap.hpp): rank order, and a slot's place.
  struct by_rank {
    const lmcache_offload* o;
    bool operator()(std::uint32_t a, std::uint32_t b) const noexcept { return o->before(a, b); }
  };
  struct heap_pos {
    slot* slots;
    std::uint32_t& operator()(std::uint32_t s) const noexcept { return slots[s].heap_pos; }
  };

 public:
  static constexpr const char* engine_version = "vLLM 0.33.0 + LMCache 0.5.6";

  /// Requires: gpu_blocks and cpu_chunks in [1, 2^31), blocks_per_chunk >= 1.
  /// Throws: std::invalid_argument naming the knob; std::bad_alloc.
  explicit lmcache_offload(const lmcache_offload_config& c)
      : cfg_(checked(c)), pool_(c.gpu_blocks), slots_(c.cpu_chunks),
        table_(c.cpu_chunks, key_of{slots_.data()}, 2) {
    heap_.reserve(c.cpu_chunks);
    free_.reserve(c.cpu_chunks);
    for (std::uint32_t i = c.cpu_chunks; i-- > 0;) free_.push_back(i);
  }
  lmcache_offload(const lmcache_offload&) = delete;
  lmcache_offload& operator=(const lmcache_offload&) = delete;

  [[nodiscard]] const lmcache_offload_config& config() const noexcept { return cfg_; }
  [[nodiscard]] const lmcache_offload_counters& counters() const noexcept { return totals_; }
  [[nodiscard]] const prefix::vllm_block_pool& pool() const noexcept { return pool_; }
  [[nodiscard]] std::size_t cpu_resident() const noexcept { return table_.size(); }
  [[nodiscard]] bool cpu_holds(block_key chunk_key) const noexcept {
    return table_.find(chunk_key) != none;
  }

  /// Effects: one request of L tokens in GPU blocks of B tokens whose full blocks have the keys
  /// `keys` (at most floor(L / B) read), run to completion (the header comment).
  /// Complexity: O(blocks + chunks x log chunks) expected.  Throws: std::bad_alloc (scratch).
  lmcache_offload_request run_request(std::span<const block_key> keys, std::uint64_t L,
                                      std::uint32_t B) {
    lmcache_offload_request out;
    if (L == 0) return out;
    ++totals_.requests;
    const std::uint64_t n = (L + B - 1) / B;
    if (n > pool_.capacity()) {
      out.scheduled = false;
      ++totals_.unscheduled;
      return out;
    }
    const std::uint64_t f = std::min<std::uint64_t>(L / B, keys.size());
    const std::uint64_t k = cfg_.blocks_per_chunk, c = k * B;
    const std::uint64_t chunks = std::min<std::uint64_t>(L / c, f / k);
    chunk_keys_.clear();
    for (std::uint64_t i = 0; i < chunks; ++i) chunk_keys_.push_back(keys[(i + 1) * k - 1]);
    if (held_.size() < n) held_.resize(n);
    out.gpu_hit_blocks = pool_.find_hit(keys, prefix::vllm_block_pool::hit_cap(L, B, f), held_);
    const std::uint64_t G = std::uint64_t{out.gpu_hit_blocks} * B;
    // The lookup, and its touches (reverse order).
    std::uint64_t h = 0;
    while (h < chunks && cpu_holds(chunk_keys_[h])) ++h;
    for (std::uint64_t i = h; i-- > 0;) hit(table_.find(chunk_keys_[i]));
    out.lookup_chunks = static_cast<std::uint32_t>(h);
    const std::uint64_t H = h * c;
    std::uint64_t need = H > G ? H - G : 0;
    if (H == L && need > 0) --need;
    if (need > 0) {
      out.loaded_tokens = need;
      out.loaded_chunks = static_cast<std::uint32_t>(h - G / c);
    }
    (void)pool_.run_request(keys, L, B, held_);
    out.stored_chunks = store(h, chunks);
    totals_.gpu_hit_blocks += out.gpu_hit_blocks;
    totals_.cpu_hit_blocks += out.loaded_tokens / B;
    totals_.lookup_hit_tokens += H;
    totals_.loaded_tokens += out.loaded_tokens;
    totals_.chunks_loaded += out.loaded_chunks;
    totals_.chunks_stored += out.stored_chunks;
    return out;
  }

  /// Checks the invariants (tests): slots add up, heap membership and order. "" or a violation.
  [[nodiscard]] const char* audit() const noexcept {
    if (table_.size() + free_.size() != slots_.size()) return "slots do not add up";
    if (heap_.size() != table_.size()) return "heap size";
    for (const std::uint32_t s : heap_.ids()) {
      if (table_.find(slots_[s].key) != s) return "a heap entry not in the table";
    }
    if (const char* e = heap_.check(by_rank{this}, [this](std::uint32_t s) { return slots_[s].heap_pos; }); *e != 0) return e;
    return "";
  }

 private:
  static lmcache_offload_config checked(const lmcache_offload_config& c) {
    if (c.gpu_blocks == 0 || c.gpu_blocks >= (1u << 31)) {
      throw std::invalid_argument("lmcache offload: the GPU pool must have [1, 2^31) blocks");
    }
    if (c.cpu_chunks == 0 || c.cpu_chunks >= (1u << 31)) {
      throw std::invalid_argument("lmcache offload: the CPU tier must hold [1, 2^31) chunks "
                                  "(a size below one chunk is none)");
    }
    if (c.blocks_per_chunk == 0) {
      throw std::invalid_argument("lmcache offload: chunk_size must be a positive multiple of "
                                  "the GPU block size");
    }
    return c;
  }

  // Chunks [from, to): allocate, then put (the header comment). Returns the chunks put.
  std::uint32_t store(std::uint64_t from, std::uint64_t to) noexcept {
    std::uint64_t allocated = 0;
    for (std::uint64_t i = from; i < to; ++i, ++allocated) {
      if (reserved_ + table_.size() < slots_.size()) {
        ++reserved_;
      } else if (!heap_.empty()) {
        evict_one();
        ++reserved_;
      } else {
        ++totals_.cut_stores;
        break;
      }
    }
    std::uint32_t put = 0;
    for (std::uint64_t i = from; i < from + allocated; ++i) {
      --reserved_;
      if (cpu_holds(chunk_keys_[i])) continue;  // the copy is dropped; the entry is untouched
      const std::uint32_t s = free_.back();
      free_.pop_back();
      slots_[s].key = chunk_keys_[i];
      slots_[s].freq = 1;
      set_rank(s, ++clock_);
      table_.insert(chunk_keys_[i], s);
      heap_.push(s, by_rank{this}, heap_pos{slots_.data()});
      ++put;
    }
    return put;
  }

  void evict_one() noexcept {
    const std::uint32_t s = heap_.top();
    heap_.erase(s, by_rank{this}, heap_pos{slots_.data()});
    (void)table_.take(slots_[s].key);
    free_.push_back(s);
    ++totals_.chunks_evicted;
  }

  // A lookup's hit on slot s (update_on_hit).
  void hit(std::uint32_t s) noexcept {
    switch (cfg_.policy) {
      case lmcache_policy::fifo: return;
      case lmcache_policy::lfu: ++slots_[s].freq; break;
      default: break;
    }
    set_rank(s, ++clock_);
    if (slots_[s].heap_pos != none) {
      heap_.fix(s, by_rank{this}, heap_pos{slots_.data()});
    }
  }

  // The eviction rank of slot s at event time t: LRU and FIFO the oldest first, MRU the newest
  // first, LFU the lowest frequency and then the first to reach it.
  void set_rank(std::uint32_t s, std::uint64_t t) noexcept {
    slot& x = slots_[s];
    switch (cfg_.policy) {
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
  lmcache_offload_config cfg_;
  prefix::vllm_block_pool pool_;
  std::vector<slot> slots_;
  detail::key_table<key_of> table_;
  detail::indexed_heap heap_;
  std::vector<std::uint32_t> free_;
  std::uint64_t reserved_ = 0, clock_ = 0;
  std::vector<block_key> chunk_keys_;  // the request's chunk keys
  std::vector<std::uint32_t> held_;    // the pool's scratch
  lmcache_offload_counters totals_;
};

/// lmcache_offload as a prefix-replay index: a request's hit is its GPU hit plus the whole GPU
/// blocks it loaded.
class lmcache_offload_index {
 public:
  static constexpr bool offline = false;
  explicit lmcache_offload_index(const lmcache_offload_config& c) : o_(c) {}
  void begin_request(std::uint64_t input_tokens, std::uint32_t block_tokens) noexcept {
    L_ = input_tokens;
    B_ = block_tokens;
  }
  std::uint32_t process(std::span<const block_key> blocks, std::span<const std::uint64_t>,
                        const access_hint&) {
    const auto r = o_.run_request(blocks, L_, B_);
    return r.gpu_hit_blocks + static_cast<std::uint32_t>(r.loaded_tokens / B_);
  }
  [[nodiscard]] const lmcache_offload& offload() const noexcept { return o_; }
  [[nodiscard]] std::uint64_t evictions() const noexcept { return o_.pool().evictions(); }
  [[nodiscard]] const lmcache_offload_counters& counters() const noexcept { return o_.counters(); }

 private:
  lmcache_offload o_;
  std::uint64_t L_ = 0;
  std::uint32_t B_ = 1;
};

}  // namespace kvtk::tier
