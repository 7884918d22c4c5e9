// kvtk/tier/vllm_offload.hpp — vLLM 0.33's CPU offloading (the OffloadingConnector with the CPU
// spec, `--kv-transfer-config '{"kv_connector": "OffloadingConnector", ...}'`) under its block
// pool, request by request as its scheduler drives them with nothing else running: `kvtk replay
// --engine vllm --offload cpu:SIZE:POLICY`.
//
// What it reproduces (checked against vLLM's own Scheduler, connector scheduler and CPU manager by
// tools/engine-check/vllm_offload_connector.py; one full-attention KV cache group, prompt tokens
// only, every transfer finished before the next request, the whole prompt in one step):
//  * Chunks. An offloaded block ("chunk") is k = block_size / GPU block size GPU blocks; chunk c
//    of a request is keyed by the hash of its last GPU block, (c+1)k - 1, and a request has
//    floor(f / k) chunks (f = its full GPU blocks). tpc = k x B tokens per chunk.
//  * Lookup (OffloadingConnectorScheduler._lookup_complete_chunks). g = the GPU hit (the pool's
//    find_hit, capped at floor((L - 1) / B) blocks); computed = g x B. max = min(L, chunks x tpc);
//    nothing loads when max - computed < tpc. Else the leading run of resident chunks from chunk
//    floor(computed / tpc), n of them (none: nothing loads), gives max = min(max, tpc x (start +
//    n)) and H = max - computed tokens to load, nothing when H < tpc. A lookup changes no state.
//  * Load (update_state_after_alloc, CPUOffloadingManager.prepare_load/complete_load). The
//    chunks floor(g / k) .. ceil((computed + H) / tpc) - 1 are read; they are the request's
//    "reused" chunks. The GPU pool then runs the request as `--engine vllm` does (a loaded block
//    takes a new GPU block as a computed one does: vllm_block_pool::run_request).
//  * Store (_build_store_jobs, CHUNK_LEVEL). The chunks from ceil((computed + H) / tpc) when
//    anything loaded, else from 0, up to floor(L / tpc) are offered to prepare_store in one call:
//    with store_threshold >= 2 every offered key is first counted in an LRU tracker of
//    max_tracker_size keys (a key already tracked moves to its end; a new key evicts the
//    tracker's oldest key that this call did not offer, or is not tracked when none is left).
//    Offered chunks already resident are reused; the missing ones (those counted at least
//    store_threshold times, with a threshold) are stored, all or nothing: the policy evicts
//    (missing - free) chunks, never an offered one; when it cannot, nothing is stored.
//  * Policies. `lru` is vLLM's LRUCachePolicy: a request's loaded chunks become the most recent
//    (its head last) when loaded, and when it finishes every chunk it loaded, reused or stored
//    that is still resident is touched tail first, so its head ends most recent. Any kvtk policy
//    is run as kvtk.integrations.vllm runs it inside vLLM (`kvtk-NAME`, or a kvtk name vLLM does
//    not have): stored chunks are inserted in order, evictions are the kvtk policy's victim order
//    with the offered chunks protected, and a finished request accesses the chunks it reused,
//    tail first. `arc` is vLLM's ARCCachePolicy (tier/vllm_arc.hpp): new chunks enter T1, the
//    missing chunks of a store are its store misses (ghost hits adapt the target, tail first),
//    and a finished request moves its reused chunks to T2 and its inserted ones to their list's
//    MRU end, tail first.
//
// Design: the GPU pool (prefix/vllm_block_pool.hpp) is the top; the CPU tier is the shared
// lower-tier core (tier/lower_tiers.hpp, first() == 1, one flat tier), which gives the policy by
// name, the counters (hits, writes, evictions, drops) and the links; this file adds vLLM's
// decisions. Nothing allocates per request but the scratch, which grows to the longest request.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvtk/cache/block_cache.hpp"
#include "kvtk/policy/lru.hpp"
#include "kvtk/prefix/vllm_block_pool.hpp"
#include "kvtk/registry.hpp"
#include "kvtk/tier/lower_tiers.hpp"
#include "kvtk/tier/tier_spec.hpp"
#include "kvtk/tier/vllm_arc.hpp"

namespace kvtk::tier {

/// What `--offload cpu:SIZE:POLICY[,key=value...]` configures (vLLM's kv_connector_extra_config).
struct vllm_offload_config {
  std::uint32_t gpu_blocks = 0;        ///< the GPU pool (blocks; vLLM's num_gpu_blocks - 1)
  std::uint32_t cpu_chunks = 0;        ///< the CPU tier (chunks; vLLM's num_chunks)
  std::uint32_t blocks_per_chunk = 1;  ///< block_size / the GPU block size (>= 1)
  std::string policy = "lru";          ///< vLLM's `lru` or `arc`, or a kvtk policy (kvtk-NAME)
  std::uint32_t store_threshold = 0;   ///< offers before a chunk is stored (< 2: no filter)
  std::uint32_t max_tracker_size = 64000;  ///< keys the store-threshold tracker keeps
};

/// What one request did.
struct vllm_offload_request {
  std::uint32_t gpu_hit_blocks = 0;  ///< the pool's hit (blocks)
  std::uint64_t loaded_tokens = 0;   ///< H: tokens loaded from the CPU tier
  std::uint32_t loaded_chunks = 0;   ///< chunks read (prepare_load)
  std::uint32_t stored_chunks = 0;   ///< chunks written (prepare_store)
  bool store_refused = false;        ///< prepare_store returned None (could not evict)
  bool scheduled = true;             ///< false: more blocks than the GPU pool has
};

/// Totals over a replay.
struct vllm_offload_counters {
  std::uint64_t requests = 0, unscheduled = 0;
  std::uint64_t gpu_hit_blocks = 0, cpu_hit_blocks = 0;  ///< GPU blocks served by each tier
  std::uint64_t loaded_tokens = 0;
  std::uint64_t chunks_loaded = 0, chunks_stored = 0, chunks_evicted = 0;
  std::uint64_t store_refusals = 0;   ///< prepare_store calls that stored nothing for want of room
  std::uint64_t threshold_skips = 0;  ///< missing chunks not stored below store_threshold
  std::uint64_t reused_chunks = 0;    ///< offered chunks already resident
};

/// Requires (throws std::invalid_argument naming the knob otherwise): gpu_blocks and cpu_chunks
/// in [1, 2^31) (vLLM's arc: [1, 2^29 - 1)), blocks_per_chunk >= 1, a policy vLLM or kvtk has,
/// max_tracker_size >= 1 when store_threshold >= 2.
inline void validate(const vllm_offload_config& c) {
  if (c.gpu_blocks == 0 || c.gpu_blocks >= (1u << 31)) {
    throw std::invalid_argument("vllm offload: the GPU pool must have [1, 2^31) blocks");
  }
  if (c.cpu_chunks == 0 || c.cpu_chunks >= (1u << 31)) {
    throw std::invalid_argument("vllm offload: the CPU tier must hold [1, 2^31) offloaded blocks "
                                "(a size below one offloaded block is none)");
  }
  if (c.blocks_per_chunk == 0) {
    throw std::invalid_argument("vllm offload: block_size must be a positive multiple of the "
                                "GPU block size");
  }
  if (c.store_threshold >= 2 && c.max_tracker_size == 0) {
    throw std::invalid_argument("vllm offload: max_tracker_size must be >= 1 with a store_threshold");
  }
  if (c.policy == "arc" && c.cpu_chunks + 1 >= (1u << 29)) {
    throw std::invalid_argument("vllm offload: vLLM's arc holds at most 2^29 - 2 offloaded blocks here");
  }
}

template <class Policies = all_policies>
class vllm_offload;

/// Thread safety: as block_cache: one per thread.
template <class... Ps>
class vllm_offload<type_list<Ps...>> {
  using core_type = lower_tiers<type_list<Ps...>>;

 public:
  static constexpr const char* engine_version = prefix::vllm_block_pool::engine_version;

  /// Throws: as validate(); "unknown policy" naming the kvtk policies; std::bad_alloc.
  explicit vllm_offload(const vllm_offload_config& c)
      : cfg_(checked(c)), pool_(c.gpu_blocks), cpu_(core_config(c), 1, false),
        vllm_lru_(c.policy == "lru") {
    if (c.policy == "arc") arc_ = std::make_unique<vllm_arc>(c.cpu_chunks);
    if (cfg_.store_threshold >= 2) {
      typename lru_tracker::config t{};
      t.capacity = cfg_.max_tracker_size;
      tracker_ = std::make_unique<lru_tracker>(t);
      counts_.assign(cfg_.max_tracker_size, 0);
    }
  }
  vllm_offload(const vllm_offload&) = delete;
  vllm_offload& operator=(const vllm_offload&) = delete;

  [[nodiscard]] const vllm_offload_config& config() const noexcept { return cfg_; }
  [[nodiscard]] const vllm_offload_counters& counters() const noexcept { return totals_; }
  [[nodiscard]] const prefix::vllm_block_pool& pool() const noexcept { return pool_; }
  /// Chunks resident in the CPU tier.
  [[nodiscard]] std::size_t cpu_resident() const noexcept {
    return arc_ ? arc_->size() : cpu_.resident(1);
  }
  [[nodiscard]] bool cpu_holds(block_key chunk_key) const noexcept {
    return arc_ ? arc_->contains(chunk_key) : cpu_.holds(1, chunk_key);
  }

  /// Effects: one request of L tokens in GPU blocks of B tokens whose full blocks have the keys
  /// `keys` (at most floor(L / B) read), run to completion (the header comment).
  /// Complexity: O(blocks) expected plus the policy's costs.  Throws: std::bad_alloc (scratch).
  vllm_offload_request run_request(std::span<const block_key> keys, std::uint64_t L,
                                   std::uint32_t B) {
    vllm_offload_request out;
    if (L == 0) return out;
    ++totals_.requests;
    const std::uint64_t n = (L + B - 1) / B;
    if (n > pool_.capacity()) {
      out.scheduled = false;
      ++totals_.unscheduled;
      return out;
    }
    const std::uint64_t f = std::min<std::uint64_t>(L / B, keys.size());
    const std::uint64_t k = cfg_.blocks_per_chunk, tpc = k * B;
    const std::uint64_t chunks = f / k;
    chunk_keys_.clear();
    for (std::uint64_t c = 0; c < chunks; ++c) chunk_keys_.push_back(keys[(c + 1) * k - 1]);
    reused_.assign(chunks, 0);
    stored_.assign(chunks, 0);
    if (held_.size() < n) held_.resize(n);
    // The GPU hit, then the lookup.
    out.gpu_hit_blocks = pool_.find_hit(keys, prefix::vllm_block_pool::hit_cap(L, B, f), held_);
    const std::uint64_t computed = std::uint64_t{out.gpu_hit_blocks} * B;
    out.loaded_tokens = lookup(L, computed, tpc);
    // The load: the reused chunks, most recent under vLLM's LRU (head last).
    std::uint64_t store_from = 0;
    if (out.loaded_tokens > 0) {
      const std::uint64_t first = out.gpu_hit_blocks / k;
      store_from = (computed + out.loaded_tokens + tpc - 1) / tpc;
      out.loaded_chunks = static_cast<std::uint32_t>(store_from - first);
      loaded_ = {first, store_from};
      if (vllm_lru_) touch_tail_first(first, store_from);
    } else {
      loaded_ = {0, 0};
    }
    // The GPU pool runs the request (loads take new blocks as prefills do).
    (void)pool_.run_request(keys, L, B, held_);
    // The store, then the request's end.
    store(store_from, chunks, out);
    finish(store_from, chunks);
    totals_.gpu_hit_blocks += out.gpu_hit_blocks;
    totals_.cpu_hit_blocks += out.loaded_tokens / B;
    totals_.loaded_tokens += out.loaded_tokens;
    totals_.chunks_loaded += out.loaded_chunks;
    totals_.chunks_stored += out.stored_chunks;
    totals_.store_refusals += out.store_refused ? 1 : 0;
    totals_.chunks_evicted = arc_ ? arc_->evictions() : cpu_.counters(1).evictions;
    return out;
  }

 private:
  using lru_tracker = block_cache<lru>;

  static vllm_offload_config checked(const vllm_offload_config& c) {
    validate(c);
    return c;
  }
  // The CPU tier as the core's tier 1 (tier 0 is the pool, which the core does not hold).
  static hierarchy_config core_config(const vllm_offload_config& c) {
    hierarchy_config h;
    h.tiers.resize(2);
    h.tiers[0].name = "gpu";
    h.tiers[0].capacity_blocks = c.gpu_blocks;
    h.tiers[1].name = "cpu";
    // vLLM's arc keeps its own lists (vllm_arc): the core's tier is then a placeholder.
    const bool arc = c.policy == "arc";
    h.tiers[1].capacity_blocks = arc ? 1 : c.cpu_chunks;
    h.tiers[1].policy = arc ? "lru" : kvtk_policy_of(c.policy);
    return h;
  }
  /// `lru` is vLLM's LRU, kept in kvtk's LRU with vLLM's touches; `kvtk-NAME` and any other name
  /// is the kvtk policy NAME.
  static std::string kvtk_policy_of(const std::string& name) {
    if (name == "lru") return "lru";
    if (name.rfind("kvtk-", 0) == 0) return name.substr(5);
    return name;
  }

  // H: the tokens the lookup finds past the GPU hit (header comment), 0 when none.
  std::uint64_t lookup(std::uint64_t L, std::uint64_t computed, std::uint64_t tpc) const noexcept {
    std::uint64_t max = std::min<std::uint64_t>(L, chunk_keys_.size() * tpc);
    if (max < computed + tpc) return 0;
    const std::uint64_t start = computed / tpc;
    const std::uint64_t end = std::min<std::uint64_t>((max + tpc - 1) / tpc, chunk_keys_.size());
    std::uint64_t hits = 0;
    while (start + hits < end && cpu_holds(chunk_keys_[start + hits])) ++hits;
    if (hits == 0) return 0;
    max = std::min(max, tpc * (start + hits));
    return max < computed + tpc ? 0 : max - computed;
  }

  // Chunks [from, to) accessed tail first (their head ends most recent); absent ones skipped.
  void touch_tail_first(std::uint64_t from, std::uint64_t to) noexcept {
    cpu_.with(1, [&](auto& c) {
      for (std::uint64_t i = to; i-- > from;) {
        const std::uint32_t s = c.find(chunk_keys_[i]);
        if (s != core_type::npos) c.touch(s);
      }
    });
  }

  // prepare_store of chunks [from, to) in one call, then complete_store.
  void store(std::uint64_t from, std::uint64_t to, vllm_offload_request& out) {
    offered_.clear();
    for (std::uint64_t i = from; i < to; ++i) offered_.push_back(i);
    if (tracker_) record_offers();
    missing_.clear();
    for (const std::uint64_t i : offered_) {
      const block_key key = chunk_keys_[i];
      if (cpu_holds(key)) {
        ++totals_.reused_chunks;
        reused_[i] = 1;
      } else if (!tracker_ || offers_of(key) >= cfg_.store_threshold) {
        missing_.push_back(i);
      } else {
        ++totals_.threshold_skips;
      }
    }
    if (missing_.empty()) return;
    if (arc_) {
      missing_keys_.clear();
      for (const std::uint64_t i : missing_) missing_keys_.push_back(chunk_keys_[i]);
      arc_->on_store_miss(missing_keys_);
    }
    const std::size_t free = cfg_.cpu_chunks - cpu_resident();
    const std::size_t need = missing_.size() > free ? missing_.size() - free : 0;
    bool ok = true;
    if (need > 0 && arc_) {
      ok = arc_->evict(need, std::span<const block_key>(chunk_keys_).subspan(offered_.empty() ? 0 : offered_.front(), offered_.size()));
    } else if (need > 0) {
      cpu_.with(1, [&](auto& c) {
        for (const std::uint64_t i : offered_) c.pin(chunk_keys_[i]);
        ok = c.evict(need);
        for (const std::uint64_t i : offered_) c.unpin(chunk_keys_[i]);
      });
    }
    if (!ok) {
      out.store_refused = true;
      return;
    }
    for (const std::uint64_t i : missing_) {
      if (arc_) {
        arc_->insert(chunk_keys_[i]);
      } else {
        // No hint, as kvtk.integrations.vllm inserts (a depth-reading policy sees depth 0).
        (void)cpu_.insert_into(1, chunk_keys_[i], 0, true);
      }
      stored_[i] = 1;
    }
    out.stored_chunks = static_cast<std::uint32_t>(missing_.size());
  }

  // The tracker's count of `key` (0 when untracked: vLLM's counts.get(key, 0)).
  [[nodiscard]] std::uint32_t offers_of(block_key key) const noexcept {
    const std::uint32_t s = tracker_->find(key);
    return s == lru_tracker::npos ? 0 : counts_[s];
  }

  // The store-threshold tracker (CPUOffloadingManager._record_accesses): offered keys already
  // tracked count once more and move to the end; new keys enter with 1, each pushing out the
  // oldest key this call did not offer, or are not tracked when no such key is left.
  void record_offers() {
    std::size_t offered_tracked = 0;
    for (const std::uint64_t i : offered_) {
      const std::uint32_t s = tracker_->find(chunk_keys_[i]);
      if (s == lru_tracker::npos) continue;
      tracker_->touch(s);
      ++counts_[s];
      ++offered_tracked;
    }
    std::size_t unprotected = tracker_->size() - offered_tracked;
    for (const std::uint64_t i : offered_) {
      const block_key key = chunk_keys_[i];
      if (tracker_->contains(key)) continue;
      if (tracker_->size() >= cfg_.max_tracker_size) {
        if (unprotected == 0) continue;
        --unprotected;  // the insert below evicts the oldest, an unoffered key
      }
      const access_outcome o = tracker_->insert(key);
      counts_[o.slot] = 1;
    }
  }

  // The request's end (CPUOffloadingManager.on_request_finished): vLLM's LRU touches every
  // resident chunk the request loaded or offered for store (stored or reused), tail first; a
  // kvtk policy (the adapter) accesses only the reused ones (loaded, or offered and resident).
  void finish(std::uint64_t offered_from, std::uint64_t chunks) noexcept {
    if (arc_) {
      // Tail first over the chunks it saw: loaded, reused, or a store candidate (stored or not).
      auto loaded = [&](std::size_t i) { return i >= loaded_.first && i < loaded_.second; };
      arc_->on_request_finished(
          std::span<const block_key>(chunk_keys_).first(chunks),
          [&](std::size_t i) { return stored_[i] != 0 && !(loaded(i) || reused_[i] != 0); },
          [&](std::size_t i) { return loaded(i) || reused_[i] != 0; });
      (void)offered_from;
      return;
    }
    cpu_.with(1, [&](auto& c) {
      for (std::uint64_t i = chunks; i-- > 0;) {
        const bool loaded = i >= loaded_.first && i < loaded_.second;
        const bool touched = vllm_lru_ ? loaded || i >= offered_from : loaded || reused_[i] != 0;
        if (!touched) continue;
        const std::uint32_t s = c.find(chunk_keys_[i]);
        if (s != core_type::npos) c.touch(s);
      }
    });
  }

  vllm_offload_config cfg_;
  prefix::vllm_block_pool pool_;
  core_type cpu_;
  bool vllm_lru_;
  std::unique_ptr<lru_tracker> tracker_;  // store_threshold >= 2
  std::vector<std::uint32_t> counts_;      // [tracker slot]: offers counted
  std::vector<block_key> chunk_keys_;      // the request's chunk keys
  std::vector<std::uint32_t> held_;        // the pool's scratch
  std::vector<std::uint64_t> offered_, missing_;
  std::vector<std::uint8_t> reused_;       // [chunk]: offered and resident
  std::vector<std::uint8_t> stored_;       // [chunk]: stored by this request
  std::vector<block_key> missing_keys_;    // vLLM's arc: the store misses
  std::unique_ptr<vllm_arc> arc_;          // policy "arc": vLLM's own ARC
  std::pair<std::uint64_t, std::uint64_t> loaded_{0, 0};  // the chunks loaded
  vllm_offload_counters totals_;
};

/// vllm_offload as a prefix-replay index (`replay --engine vllm --offload ...`): a request's hit
/// is its GPU hit plus the GPU blocks it loaded.
/// Thread safety: as block_cache: one index per thread.
template <class Policies = all_policies>
class vllm_offload_index {
 public:
  static constexpr bool offline = false;
  /// Throws: as vllm_offload's constructor.
  explicit vllm_offload_index(const vllm_offload_config& c) : o_(c) {}
  void begin_request(std::uint64_t input_tokens, std::uint32_t block_tokens) noexcept {
    L_ = input_tokens;
    B_ = block_tokens;
  }
  /// Requires: begin_request() for this request; `blocks` its full blocks' keys.
  std::uint32_t process(std::span<const block_key> blocks, std::span<const std::uint64_t>,
                        const access_hint&) {
    const auto r = o_.run_request(blocks, L_, B_);
    return r.gpu_hit_blocks + static_cast<std::uint32_t>(r.loaded_tokens / B_);
  }
  [[nodiscard]] const vllm_offload<Policies>& offload() const noexcept { return o_; }
  /// GPU blocks the pool evicted (the CPU tier's evictions are in counters()).
  [[nodiscard]] std::uint64_t evictions() const noexcept { return o_.pool().evictions(); }
  [[nodiscard]] const vllm_offload_counters& counters() const noexcept { return o_.counters(); }

 private:
  vllm_offload<Policies> o_;
  std::uint64_t L_ = 0;
  std::uint32_t B_ = 1;
};

}  // namespace kvtk::tier
