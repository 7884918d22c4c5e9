// kvtk/tier/lmcache_offload.hpp — LMCache 0.5.6's local CPU backend, and optionally its local
// disk backend, behind vLLM 0.33's block pool (vLLM's `LMCacheConnectorV1`), request by request as
// vLLM's scheduler and LMCache's connector drive them with nothing else running: `kvtk replay
// --engine vllm --offload lmcache-cpu:SIZE:POLICY[,chunk_size=N][,disk=SIZE]`.
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
//    in the CPU tier, hc of them, from chunk 0 whatever the GPU hit, then the run resident on disk
//    from chunk hc on, hd of them: h = hc + hd, H = h c tokens. The hit chunks are touched (each
//    tier's policy hit) in reverse order, so chunk 0 ends most recent.
//  * Load: with G = the GPU hit in tokens (vLLM's, capped at L - 1), need = H - G, one less when
//    H = L; nothing when need <= 0. The chunks s = floor(G / c) .. h - 1 are read (a chunk partly
//    on the GPU is read whole). Which tier serves each (StorageManager's block mapping): the
//    lookup's tier when it hit in one; with both, the CPU run from s (which can reach past hc:
//    a chunk resident in the CPU behind the lookup's first CPU miss), then disk.
//  * Disk reads are staged in CPU memory: one allocation per chunk, in order, each evicting one
//    CPU victim while full; the lookup's CPU hits and the chunks being read from the CPU are
//    pinned (not evictable). When nothing is evictable LMCache waits forever (busy loop); kvtk
//    counts a stalled retrieval and stages no more. The read chunks are touched on disk in
//    forward order, then put into the CPU as new entries (promotion; an already resident chunk
//    drops its copy). The GPU pool then runs the request as `--engine vllm` does.
//  * Store (wait_for_save): the chunks h .. floor(L / c) - 1, whatever the GPU held. First one
//    slot each is allocated in order, a full tier evicting one policy victim per chunk, the store
//    cut short when nothing is left to evict; then each allocated chunk is put in order, a chunk
//    already resident dropping its copy without touching the entry. So a store can evict a chunk
//    of its own request that sits behind the first miss, and put it back as new. With a disk
//    tier the same allocated chunks then go to disk in order (write-through): a resident chunk is
//    touched, a new one evicts one disk victim while the disk is full, then is put; when nothing
//    is evictable the put is refused. All of one store's writes are submitted before any
//    finishes, so its chunks are neither hits nor victims for each other; they land (join the
//    disk's LRU/MRU/FIFO order, as LMCache's dict takes a key when its write finishes) in order,
//    before the next request. LFU ranks a chunk at submission, and LMCache 0.5.6's disk LFU
//    raises KeyError when an eviction reaches a chunk still being written (no resident chunk of
//    frequency 1 left): kvtk counts disk_lfu_key_errors and evicts the resident victim.
//  * Policies (cache_policy): LRU (a hit moves to the MRU end; evict the LRU end), MRU (the same
//    order; evict the MRU end), FIFO (hits ignored; evict the oldest put), LFU (a put starts at
//    frequency 1, a hit adds 1; evict the lowest frequency, the first to reach it). Only lookups
//    count as hits; reads and re-puts do not. On disk, reads and re-puts do count (as hits).
//    Both tiers use the one cache_policy, each with its own state.
//
// Design: the GPU pool (prefix/vllm_block_pool.hpp) is the top; the CPU and disk tiers are
// lmcache_backend's (fixed chunk slots, a key table, an indexed heap on the eviction rank), so
// every policy is O(log chunks) per operation; nothing allocates per request but the scratch,
// which grows to the longest request.
//
// Not modelled here: a prompt stored over several steps (chunked prefill, where a long prompt's
// later chunks can evict its earlier ones; kvtk simulate's vllm-v1 does it with the step API), local_cpu=False (the disk alone, the CPU only staging),
// save_unfull_chunk, save_decode_cache (a trace has no keys for generated tokens), disk writes
// still in flight when the next request looks up, and tensor parallelism (each rank has its own
// backends of the configured sizes), and requests that overlap: a disk write in flight holds its
// CPU chunk (ref_count 2), which LMCache then cannot evict, so back-to-back requests see more cut
// stores and stalls than this sequential model.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <vector>

#include "kvtk/concepts.hpp"
#include "kvtk/prefix/vllm_block_pool.hpp"
#include "kvtk/tier/lmcache_backend.hpp"

namespace kvtk::tier {

/// What `--offload lmcache-cpu:SIZE:POLICY[,chunk_size=N][,disk=SIZE]` configures.
struct lmcache_offload_config {
  std::uint32_t gpu_blocks = 0;        ///< the GPU pool (blocks; vLLM's num_gpu_blocks - 1)
  std::uint32_t cpu_chunks = 0;        ///< the CPU tier (chunks: max_local_cpu_size / chunk bytes)
  std::uint32_t disk_chunks = 0;       ///< the disk tier (chunks; 0: none, LMCache's default)
  std::uint32_t blocks_per_chunk = 1;  ///< chunk_size / the GPU block size (>= 1)
  lmcache_policy policy = lmcache_policy::lru;  ///< LMCache's default; both tiers
};

/// What one request did.
struct lmcache_offload_request {
  std::uint32_t gpu_hit_blocks = 0;  ///< vLLM's own hit (blocks)
  std::uint32_t lookup_chunks = 0;   ///< h: chunks the lookup found (CPU run + disk run)
  std::uint32_t disk_lookup_chunks = 0;  ///< hd: of them, on disk
  std::uint64_t loaded_tokens = 0;   ///< need: tokens vLLM takes from LMCache
  std::uint32_t loaded_chunks = 0;   ///< chunks read (CPU and disk)
  std::uint32_t disk_loaded_chunks = 0;  ///< of them, read from disk
  std::uint32_t disk_loaded_blocks = 0;  ///< GPU blocks of the loaded tokens that came from disk
  std::uint64_t disk_loaded_tokens = 0;  ///< of the loaded tokens, those from disk
  std::uint32_t stored_chunks = 0;   ///< chunks put into the CPU by the store (new entries)
  bool scheduled = true;             ///< false: more blocks than the GPU pool has
};

/// Totals over a replay.
struct lmcache_offload_counters {
  std::uint64_t requests = 0, unscheduled = 0;
  std::uint64_t gpu_hit_blocks = 0;
  std::uint64_t cpu_hit_blocks = 0;   ///< GPU blocks loaded from the CPU: floor(need / B) - disk's
  std::uint64_t disk_hit_blocks = 0;  ///< GPU blocks loaded from disk
  std::uint64_t lookup_hit_tokens = 0, loaded_tokens = 0, disk_loaded_tokens = 0;
  std::uint64_t disk_lookup_chunks = 0;
  std::uint64_t chunks_loaded = 0, chunks_stored = 0, chunks_evicted = 0;
  std::uint64_t cut_stores = 0;  ///< stores cut short: more chunks than the CPU tier can free
  std::uint64_t disk_chunks_loaded = 0, chunks_promoted = 0;  ///< disk reads; their CPU puts
  std::uint64_t disk_chunks_stored = 0, disk_chunks_evicted = 0;
  std::uint64_t stalled_retrievals = 0;  ///< LMCache would wait forever for CPU staging memory
  std::uint64_t disk_lfu_key_errors = 0;  ///< stores where LMCache 0.5.6's disk LFU raises KeyError
  /// The first request (0-based, in trace order, unscheduled ones counted) of each; ~0 if none.
  std::uint64_t first_stall_request = ~std::uint64_t{0}, first_key_error_request = ~std::uint64_t{0};
};

/// Thread safety: as block_cache: one per thread.
class lmcache_offload {
 public:
  static constexpr const char* engine_version = "vLLM 0.33.0 + LMCache 0.5.6";

  /// Requires: gpu_blocks and cpu_chunks in [1, 2^31), disk_chunks < 2^31, blocks_per_chunk >= 1.
  /// Throws: std::invalid_argument naming the knob; std::bad_alloc.
  explicit lmcache_offload(const lmcache_offload_config& c)
      : cfg_(checked(c)), pool_(c.gpu_blocks), cpu_(c.cpu_chunks, c.policy) {
    if (c.disk_chunks > 0) disk_ = std::make_unique<lmcache_backend>(c.disk_chunks, c.policy);
  }
  lmcache_offload(const lmcache_offload&) = delete;
  lmcache_offload& operator=(const lmcache_offload&) = delete;

  [[nodiscard]] const lmcache_offload_config& config() const noexcept { return cfg_; }
  [[nodiscard]] const lmcache_offload_counters& counters() const noexcept { return totals_; }
  [[nodiscard]] const prefix::vllm_block_pool& pool() const noexcept { return pool_; }
  [[nodiscard]] std::size_t cpu_resident() const noexcept { return cpu_.resident(); }
  [[nodiscard]] std::size_t disk_resident() const noexcept { return disk_ ? disk_->resident() : 0; }
  [[nodiscard]] bool cpu_holds(block_key chunk_key) const noexcept { return cpu_.holds(chunk_key); }
  [[nodiscard]] bool disk_holds(block_key chunk_key) const noexcept {
    return disk_ && disk_->holds(chunk_key);
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
    const auto [hc, h] = lookup(chunks);
    out.lookup_chunks = static_cast<std::uint32_t>(h);
    out.disk_lookup_chunks = static_cast<std::uint32_t>(h - hc);
    const std::uint64_t H = h * c;
    std::uint64_t need = H > G ? H - G : 0;
    if (H == L && need > 0) --need;
    if (need > 0) {
      out.loaded_tokens = need;
      out.loaded_chunks = static_cast<std::uint32_t>(h - G / c);
      const std::uint64_t e = retrieve(G / c, hc, h);  // disk serves chunks [e, h)
      out.disk_loaded_chunks = static_cast<std::uint32_t>(h - e);
      const std::uint64_t from = std::max(G, e * c);
      out.disk_loaded_tokens = G + need > from ? G + need - from : 0;
      const std::uint64_t end = (G + need) / B, first = from / B;
      out.disk_loaded_blocks = static_cast<std::uint32_t>(end > first ? end - first : 0);
    }
    (void)pool_.run_request(keys, L, B, held_);
    out.stored_chunks = store(h, chunks);
    totals_.gpu_hit_blocks += out.gpu_hit_blocks;
    totals_.cpu_hit_blocks += out.loaded_tokens / B - out.disk_loaded_blocks;
    totals_.disk_hit_blocks += out.disk_loaded_blocks;
    totals_.lookup_hit_tokens += H;
    totals_.disk_lookup_chunks += out.disk_lookup_chunks;
    totals_.loaded_tokens += out.loaded_tokens;
    totals_.disk_loaded_tokens += out.disk_loaded_tokens;
    totals_.chunks_loaded += out.loaded_chunks;
    totals_.disk_chunks_loaded += out.disk_loaded_chunks;
    totals_.chunks_stored += out.stored_chunks;
    totals_.chunks_evicted = cpu_.evictions();
    totals_.disk_chunks_evicted = disk_ ? disk_->evictions() : 0;
    return out;
  }

  // The steps of run_request without its GPU pool, for a scheduler that holds several requests
  // at once and keeps its own pool (kvtk simulate's vllm-v1): lookup_step at admission (vLLM
  // calls get_num_new_matched_tokens once per admission episode), retrieve_step when the
  // request is scheduled (start_load_kv), store_step as its prompt's chunks complete
  // (wait_for_save). Each takes the request's keys again: the chunk keys are scratch.

  /// What a request's lookup found: hc chunks in the CPU, h with the disk's run, and the tokens
  /// vLLM will take (need), given its GPU hit G (tokens).
  struct lookup_result {
    std::uint64_t hc = 0, h = 0, need = 0;
  };
  /// Effects: the lookup (touches the hit chunks), counted as one request.  Throws: std::bad_alloc.
  lookup_result lookup_step(std::span<const block_key> keys, std::uint64_t L, std::uint32_t B,
                            std::uint64_t G) {
    ++totals_.requests;  // here: lookups (a preempted request looks up again)
    const std::uint64_t chunks = set_chunks(keys, L, B);
    const auto [hc, h] = lookup(chunks);
    const std::uint64_t H = h * cfg_.blocks_per_chunk * B;
    std::uint64_t need = H > G ? H - G : 0;
    if (H == L && need > 0) --need;
    totals_.lookup_hit_tokens += H;
    totals_.disk_lookup_chunks += h - hc;
    return {hc, h, need};
  }
  /// Effects: reads the chunks a lookup's `need` tokens come from (GPU hit G), counting them
  /// (gpu_hit_blocks only for requests that load, unlike run_request).
  /// Returns the GPU blocks loaded from disk.  Throws: std::bad_alloc.
  std::uint64_t retrieve_step(std::span<const block_key> keys, std::uint64_t L, std::uint32_t B,
                              std::uint64_t G, const lookup_result& l) {
    if (l.need == 0) return 0;
    (void)set_chunks(keys, L, B);
    const std::uint64_t c = std::uint64_t{cfg_.blocks_per_chunk} * B;
    const std::uint64_t e = retrieve(G / c, l.hc, l.h);
    const std::uint64_t from = std::max(G, e * c);
    const std::uint64_t disk_tokens = G + l.need > from ? G + l.need - from : 0;
    const std::uint64_t end = (G + l.need) / B, first = from / B;
    const std::uint64_t disk_blocks = end > first ? end - first : 0;
    totals_.gpu_hit_blocks += G / B;
    totals_.cpu_hit_blocks += l.need / B - disk_blocks;
    totals_.disk_hit_blocks += disk_blocks;
    totals_.loaded_tokens += l.need;
    totals_.disk_loaded_tokens += disk_tokens;
    totals_.chunks_loaded += l.h - G / c;
    totals_.disk_chunks_loaded += l.h - e;
    return disk_blocks;
  }
  /// Effects: stores the request's chunks [from, to) (wait_for_save). Returns the chunks put
  /// into the CPU.  Throws: std::bad_alloc.
  std::uint32_t store_step(std::span<const block_key> keys, std::uint64_t L, std::uint32_t B,
                           std::uint64_t from, std::uint64_t to) {
    const std::uint64_t chunks = set_chunks(keys, L, B);
    to = std::min(to, chunks);
    if (from >= to) return 0;
    const std::uint32_t put = store(from, to);
    totals_.chunks_stored += put;
    totals_.chunks_evicted = cpu_.evictions();
    totals_.disk_chunks_evicted = disk_ ? disk_->evictions() : 0;
    return put;
  }

  /// Checks the invariants (tests): "" or a violation.
  [[nodiscard]] const char* audit() const noexcept {
    if (const char* e = cpu_.audit(); *e != 0) return e;
    if (disk_) return disk_->audit();
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
    if (c.disk_chunks >= (1u << 31)) {
      throw std::invalid_argument("lmcache offload: the disk tier must hold fewer than 2^31 chunks");
    }
    if (c.blocks_per_chunk == 0) {
      throw std::invalid_argument("lmcache offload: chunk_size must be a positive multiple of "
                                  "the GPU block size");
    }
    return c;
  }

  // The request's full chunks' keys into chunk_keys_; returns their number.
  std::uint64_t set_chunks(std::span<const block_key> keys, std::uint64_t L, std::uint32_t B) {
    const std::uint64_t f = std::min<std::uint64_t>(L / B, keys.size());
    const std::uint64_t k = cfg_.blocks_per_chunk;
    const std::uint64_t chunks = std::min<std::uint64_t>(L / (k * B), f / k);
    chunk_keys_.clear();
    for (std::uint64_t i = 0; i < chunks; ++i) chunk_keys_.push_back(keys[(i + 1) * k - 1]);
    return chunks;
  }

  // The lookup: the CPU run from chunk 0, then the disk run; touches in reverse order.
  // Returns {hc, h}.
  std::pair<std::uint64_t, std::uint64_t> lookup(std::uint64_t chunks) noexcept {
    std::uint64_t hc = 0, h = 0;
    while (hc < chunks && cpu_.holds(chunk_keys_[hc])) ++hc;
    h = hc;
    if (disk_) {
      while (h < chunks && disk_->holds(chunk_keys_[h])) ++h;
      for (std::uint64_t i = h; i-- > hc;) disk_->hit(disk_->find(chunk_keys_[i]));
    }
    for (std::uint64_t i = hc; i-- > 0;) cpu_.hit(cpu_.find(chunk_keys_[i]));
    return {hc, h};
  }

  // Reads chunks [s, h) (the header comment); returns e, the first chunk read from disk.
  std::uint64_t retrieve(std::uint64_t s, std::uint64_t hc, std::uint64_t h) noexcept {
    if (hc == h) return h;  // the CPU alone: reads touch nothing, allocate nothing
    std::uint64_t e = s;
    if (hc > 0) {
      while (e < h && cpu_.holds(chunk_keys_[e])) ++e;
    }
    // Pinned while staging: the lookup's CPU hits and the chunks read from the CPU. Under
    // simulate a lookup can be older than the state (kept while its request waits for GPU
    // blocks; LMCache's lookup pins are not modelled), so a chunk it found may be gone: it is
    // still read (LMCache would have pinned it) but neither pinned nor touched here.
    auto hide = [&](block_key k) {
      if (const std::uint32_t x = cpu_.find(k); x != lmcache_backend::none) cpu_.hide(x);
    };
    auto show = [&](block_key k) {
      if (const std::uint32_t x = cpu_.find(k); x != lmcache_backend::none) cpu_.show(x);
    };
    for (std::uint64_t i = 0; i < hc; ++i) hide(chunk_keys_[i]);
    for (std::uint64_t i = s; i < e; ++i) hide(chunk_keys_[i]);
    std::uint64_t staged = 0;
    while (e + staged < h && cpu_.reserve()) ++staged;
    if (e + staged < h) {
      ++totals_.stalled_retrievals;
      totals_.first_stall_request = std::min(totals_.first_stall_request, totals_.requests - 1);
    }
    for (std::uint64_t i = 0; i < hc; ++i) show(chunk_keys_[i]);
    for (std::uint64_t i = s; i < e; ++i) show(chunk_keys_[i]);
    for (std::uint64_t i = e; i < h; ++i) {
      if (const std::uint32_t x = disk_->find(chunk_keys_[i]); x != lmcache_backend::none) disk_->hit(x);
    }
    for (std::uint64_t i = e; i < e + staged; ++i) totals_.chunks_promoted += cpu_.put(chunk_keys_[i]);
    return e;
  }

  // Chunks [from, to): allocate in the CPU, put into the CPU, then write through to disk.
  // Returns the chunks put into the CPU.
  std::uint32_t store(std::uint64_t from, std::uint64_t to) noexcept {
    std::uint64_t allocated = 0;
    while (from + allocated < to && cpu_.reserve()) ++allocated;
    if (from + allocated < to) ++totals_.cut_stores;
    std::uint32_t put = 0;
    for (std::uint64_t i = from; i < from + allocated; ++i) put += cpu_.put(chunk_keys_[i]);
    if (disk_) write_through(from, from + allocated);
    return put;
  }

  // The disk's share of a store: every chunk's write is submitted before any finishes (a write
  // takes far longer than the submission loop), so a chunk of this store is neither a hit nor a
  // victim for the chunks after it; all land, in order, before the next request.
  void write_through(std::uint64_t from, std::uint64_t to) noexcept {
    landing_.clear();
    bool key_error = false;
    for (std::uint64_t i = from; i < to; ++i) {
      const std::uint32_t d = disk_->find(chunk_keys_[i]);
      if (d != lmcache_backend::none) {
        // A write of this store (a key repeated in one request) is skipped ("already in
        // progress"); a resident chunk is touched.
        if (!disk_->hidden(d)) disk_->hit(d);
        continue;
      }
      // LMCache 0.5.6's LFU keeps a submitted key in its frequency buckets before the key is in
      // the disk's dict: an eviction that reaches it (no resident key of frequency 1 left)
      // raises KeyError in wait_for_save. kvtk counts it and evicts the resident victim.
      if (cfg_.policy == lmcache_policy::lfu && !landing_.empty() && disk_->full() &&
          disk_->any_evictable() && disk_->victim_frequency() > 1) {
        key_error = true;
      }
      if (!disk_->reserve()) continue;  // nothing evictable: the put is refused
      if (disk_->put(chunk_keys_[i])) {
        ++totals_.disk_chunks_stored;
        const std::uint32_t s = disk_->find(chunk_keys_[i]);
        disk_->hide(s);
        landing_.push_back(s);
      }
    }
    for (const std::uint32_t s : landing_) disk_->land(s);
    if (key_error) {
      ++totals_.disk_lfu_key_errors;
      totals_.first_key_error_request = std::min(totals_.first_key_error_request, totals_.requests - 1);
    }
  }

  lmcache_offload_config cfg_;
  prefix::vllm_block_pool pool_;
  lmcache_backend cpu_;
  std::unique_ptr<lmcache_backend> disk_;
  std::vector<block_key> chunk_keys_;  // the request's chunk keys
  std::vector<std::uint32_t> held_;    // the pool's scratch
  std::vector<std::uint32_t> landing_;  // disk slots whose writes this store submitted
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
