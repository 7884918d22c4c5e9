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
#include <unordered_set>
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
  bool secondary_fs = false;  ///< TieringOffloadingSpec with an fs secondary tier (lru only)
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
  // The fs secondary tier (secondary_fs): chunks promoted from it into the CPU (one CPU slot
  // each), the CPU chunks those promotions evicted (not in chunks_evicted), promotions refused
  // (no evictable CPU chunk), chunks written through to it, scheduler steps requests waited for
  // promotions, and requests whose promotions never settled (vLLM would retry forever).
  std::uint64_t fs_promoted_chunks = 0, fs_promotion_evictions = 0, fs_promotion_refusals = 0;
  std::uint64_t fs_written_chunks = 0, lookup_retries = 0, lookup_stalls = 0;
};

/// Requires (throws std::invalid_argument naming the knob otherwise): cpu_chunks in [1, 2^31)
/// (vLLM's arc: [1, 2^29 - 1)), blocks_per_chunk >= 1, max_tracker_size >= 1 when
/// store_threshold >= 2. The CPU side only: gpu_blocks is the pool's (validate()).
inline void validate_cpu(const vllm_offload_config& c) {
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
  if (c.secondary_fs && c.policy != "lru") {
    throw std::invalid_argument("vllm offload: a secondary fs tier is modelled with vLLM's lru "
                                "only (its promotions' effect on arc and the adapter's policies "
                                "is not)");
  }
  if (c.secondary_fs && c.store_threshold >= 2) {
    throw std::invalid_argument("vllm offload: vLLM's TieringOffloadingSpec refuses "
                                "store_threshold >= 2");
  }
  if (c.policy == "arc" && c.cpu_chunks + 1 >= (1u << 29)) {
    throw std::invalid_argument("vllm offload: vLLM's arc holds at most 2^29 - 2 offloaded blocks here");
  }
}

/// Requires: as validate_cpu, and gpu_blocks in [1, 2^31).
inline void validate(const vllm_offload_config& c) {
  if (c.gpu_blocks == 0 || c.gpu_blocks >= (1u << 31)) {
    throw std::invalid_argument("vllm offload: the GPU pool must have [1, 2^31) blocks");
  }
  validate_cpu(c);
}

/// One request's side of the connector across scheduler steps (vLLM keeps it per request id):
/// its chunk keys as far as its full blocks go, what it loaded and offered, and per chunk
/// whether a store found it resident (reused) or stored it. Reused across requests: clear()
/// keeps the capacity.
struct vllm_offload_state {
  std::vector<block_key> chunk_keys;  ///< chunk c's key: the hash of its last GPU block
  std::vector<std::uint8_t> flags;    ///< [chunk]: reused_flag | stored_flag
  std::uint64_t loaded_first = 0, loaded_end = 0;  ///< chunks loaded: [first, end)
  std::uint64_t offered_from = 0, offered_end = 0;  ///< chunks offered for store: [from, end)
  static constexpr std::uint8_t reused_flag = 1, stored_flag = 2;
  void clear() noexcept {
    chunk_keys.clear();
    flags.clear();
    loaded_first = loaded_end = offered_from = offered_end = 0;
  }
  /// Chunk c's key is known (its last GPU block is full).
  void add_chunk(block_key key) {
    chunk_keys.push_back(key);
    flags.push_back(0);
  }
};

template <class Policies = all_policies>
class vllm_cpu_offload;

/// vLLM's CPUOffloadingManager with the OffloadingConnector's scheduler-side decisions, without
/// the GPU pool: what a live scheduler (kvtk simulate) calls step by step, and what vllm_offload
/// calls once per request. The rules are the header comment's.
/// Thread safety: as block_cache: one per thread.
template <class... Ps>
class vllm_cpu_offload<type_list<Ps...>> {
  using core_type = lower_tiers<type_list<Ps...>>;

 public:
  /// Throws: as validate_cpu(); "unknown policy" naming the kvtk policies; std::bad_alloc.
  explicit vllm_cpu_offload(const vllm_offload_config& c)
      : cfg_(checked(c)), cpu_(core_config(c), 1, false), vllm_lru_(c.policy == "lru") {
    if (c.policy == "arc") arc_ = std::make_unique<vllm_arc>(c.cpu_chunks);
    if (cfg_.store_threshold >= 2) {
      typename lru_tracker::config t{};
      t.capacity = cfg_.max_tracker_size;
      tracker_ = std::make_unique<lru_tracker>(t);
      counts_.assign(cfg_.max_tracker_size, 0);
    }
  }
  vllm_cpu_offload(const vllm_cpu_offload&) = delete;
  vllm_cpu_offload& operator=(const vllm_cpu_offload&) = delete;

  [[nodiscard]] const vllm_offload_config& config() const noexcept { return cfg_; }
  [[nodiscard]] const vllm_offload_counters& counters() const noexcept { return totals_; }
  [[nodiscard]] vllm_offload_counters& counters() noexcept { return totals_; }
  /// Chunks resident in the CPU tier.
  [[nodiscard]] std::size_t cpu_resident() const noexcept {
    return arc_ ? arc_->size() : cpu_.resident(1);
  }
  [[nodiscard]] bool cpu_holds(block_key chunk_key) const noexcept {
    return arc_ ? arc_->contains(chunk_key) : cpu_.holds(1, chunk_key);
  }

  /// get_num_new_matched_tokens: H, the tokens the lookup finds past a GPU hit of `computed`
  /// tokens for a request of L tokens whose chunks are s.chunk_keys; 0 when none. Changes nothing.
  /// Complexity: O(chunks looked up).  Throws: nothing.
  [[nodiscard]] std::uint64_t lookup(const vllm_offload_state& s, std::uint64_t L,
                                     std::uint64_t computed, std::uint64_t B) const noexcept {
    const std::uint64_t tpc = cfg_.blocks_per_chunk * B;
    std::uint64_t max = std::min<std::uint64_t>(L, s.chunk_keys.size() * tpc);
    if (max < computed + tpc) return 0;
    const std::uint64_t start = computed / tpc;
    const std::uint64_t end = std::min<std::uint64_t>((max + tpc - 1) / tpc, s.chunk_keys.size());
    std::uint64_t hits = 0;
    while (start + hits < end && cpu_holds(s.chunk_keys[start + hits])) ++hits;
    if (hits == 0) return 0;
    max = std::min(max, tpc * (start + hits));
    return max < computed + tpc ? 0 : max - computed;
  }

  /// update_state_after_alloc + prepare_load of H tokens past a GPU hit of g blocks (B tokens
  /// each): the chunks read, most recent under vLLM's LRU (head last); the request's stores
  /// start after them (or at chunk 0 when nothing loads). Returns the chunks read.
  /// Requires: H from lookup() on this state, nothing stored since.  Throws: nothing.
  std::uint32_t load(vllm_offload_state& s, std::uint64_t g, std::uint64_t H,
                     std::uint64_t B) noexcept {
    const std::uint64_t k = cfg_.blocks_per_chunk, tpc = k * B;
    s.loaded_first = s.loaded_end = 0;
    s.offered_from = s.offered_end = 0;
    if (H == 0) return 0;
    s.loaded_first = g / k;
    s.loaded_end = s.offered_from = s.offered_end = (g * B + H + tpc - 1) / tpc;
    if (vllm_lru_) touch_tail_first(s, s.loaded_first, s.loaded_end);
    const auto n = static_cast<std::uint32_t>(s.loaded_end - s.loaded_first);
    totals_.chunks_loaded += n;
    totals_.loaded_tokens += H;
    totals_.cpu_hit_blocks += H / B;
    return n;
  }

  /// A load in flight holds its chunks (prepare_load's reference): no store evicts them until
  /// release_load(). Only a live scheduler, whose loads take time, needs it.
  /// Requires: load() on this state; release_load() once for each call.  Throws: std::bad_alloc.
  void hold_load(const vllm_offload_state& s) {
    for (std::uint64_t i = s.loaded_first; i < s.loaded_end; ++i) {
      const block_key key = s.chunk_keys[i];
      if (!cpu_holds(key)) continue;
      if (arc_) {
        held_.push_back(key);
      } else {
        cpu_.with(1, [&](auto& c) { (void)c.pin(key); });
      }
    }
  }
  void release_load(const vllm_offload_state& s) noexcept {
    for (std::uint64_t i = s.loaded_first; i < s.loaded_end; ++i) {
      const block_key key = s.chunk_keys[i];
      if (arc_) {
        if (auto it = std::find(held_.begin(), held_.end(), key); it != held_.end()) held_.erase(it);
      } else {
        cpu_.with(1, [&](auto& c) { (void)c.unpin(key); });
      }
    }
  }

  /// The fs secondary tier before a lookup (TieringOffloadingManager.lookup over scheduler
  /// steps, each step's promotions finished by the next): the lookup's scan from the chunk
  /// holding the GPU hit's end (`computed` tokens) to the last it would read goes key by key: a
  /// CPU hit goes on; a CPU miss the fs tier holds is promoted (a CPU slot allocated, evicting
  /// the policy's victim among idle chunks: this step's promotions are pending, the request's
  /// earlier hits are not protected) and the scan goes on; a miss in both, or a promotion with
  /// nothing to evict, ends it. A step that promoted anything is followed by another (vLLM's
  /// lookup returns None); fs existence checks cost one step first. Returns the steps waited.
  /// Requires: secondary_fs.  Complexity: O(chunks x steps).  Throws: std::bad_alloc.
  std::uint32_t promote(vllm_offload_state& s, std::uint64_t L, std::uint64_t computed,
                        std::uint64_t B) {
    const std::uint64_t tpc = cfg_.blocks_per_chunk * B;
    const std::uint64_t max = std::min<std::uint64_t>(L, s.chunk_keys.size() * tpc);
    if (max < computed + tpc) return 0;
    const std::uint64_t start = computed / tpc;
    const std::uint64_t end = std::min<std::uint64_t>((max + tpc - 1) / tpc, s.chunk_keys.size());
    std::uint32_t steps = 0;
    asked_.clear();  // the fs tier's first answer for a key is RETRY (its existence check)
    for (std::uint64_t round = 0;; ++round) {
      pending_.clear();
      bool retry = false;
      for (std::uint64_t i = start; i < end; ++i) {
        const block_key key = s.chunk_keys[i];
        if (cpu_holds(key)) continue;
        if (asked_.insert(key).second) {
          retry = true;  // RETRY does not stop the scan: every later key is asked too
          continue;
        }
        if (!fs_.contains(key)) break;
        if (!promote_one(key)) break;
        pending_.push_back(key);
      }
      cpu_.with(1, [&](auto& c) {
        for (const block_key key : pending_) (void)c.unpin(key);  // complete_store: ready
      });
      if (!retry && pending_.empty()) break;
      ++steps;
      if (round > 2 * (end - start) + 4) {  // promotions evict the request's own chunks: no end
        ++totals_.lookup_stalls;
        break;
      }
    }
    totals_.lookup_retries += steps;
    return steps;
  }
  [[nodiscard]] std::size_t fs_resident() const noexcept { return fs_.size(); }

  /// prepare_store + complete_store of the request's chunks [s.offered_end, to) in one call
  /// (one scheduler step's new full chunks); s.offered_end becomes `to`. out.stored_chunks and
  /// out.store_refused say what it did. Requires: to <= s.chunk_keys.size().
  /// Complexity: O(offered) plus the policy's evictions.  Throws: std::bad_alloc (scratch).
  void store(vllm_offload_state& s, std::uint64_t to, vllm_offload_request& out) {
    offered_.clear();
    for (std::uint64_t i = s.offered_end; i < to; ++i) offered_.push_back(i);
    if (to > s.offered_end) s.offered_end = to;
    if (offered_.empty()) return;
    if (tracker_) record_offers(s);
    missing_.clear();
    for (const std::uint64_t i : offered_) {
      const block_key key = s.chunk_keys[i];
      if (cpu_holds(key)) {
        ++totals_.reused_chunks;
        s.flags[i] |= vllm_offload_state::reused_flag;
      } else if (!tracker_ || offers_of(key) >= cfg_.store_threshold) {
        missing_.push_back(i);
      } else {
        ++totals_.threshold_skips;
      }
    }
    if (missing_.empty()) return;
    if (arc_) {
      missing_keys_.clear();
      for (const std::uint64_t i : missing_) missing_keys_.push_back(s.chunk_keys[i]);
      arc_->on_store_miss(missing_keys_);
    }
    const std::size_t free = cfg_.cpu_chunks - cpu_resident();
    const std::size_t need = missing_.size() > free ? missing_.size() - free : 0;
    bool ok = true;
    if (need > 0 && arc_) {
      std::span<const block_key> protect = std::span<const block_key>(s.chunk_keys).subspan(offered_.front(), offered_.size());
      if (!held_.empty()) {  // chunks other requests are loading are protected too
        protect_.assign(protect.begin(), protect.end());
        protect_.insert(protect_.end(), held_.begin(), held_.end());
        protect = protect_;
      }
      ok = arc_->evict(need, protect);
    } else if (need > 0) {
      cpu_.with(1, [&](auto& c) {
        for (const std::uint64_t i : offered_) c.pin(s.chunk_keys[i]);
        ok = c.evict(need);
        for (const std::uint64_t i : offered_) c.unpin(s.chunk_keys[i]);
      });
    }
    totals_.chunks_evicted = (arc_ ? arc_->evictions() : cpu_.counters(1).evictions) -
                             totals_.fs_promotion_evictions;
    if (!ok) {
      out.store_refused = true;
      ++totals_.store_refusals;
      return;
    }
    for (const std::uint64_t i : missing_) {
      if (arc_) {
        arc_->insert(s.chunk_keys[i]);
      } else {
        // No hint, as kvtk.integrations.vllm inserts (a depth-reading policy sees depth 0).
        (void)cpu_.insert_into(1, s.chunk_keys[i], 0, true);
      }
      s.flags[i] |= vllm_offload_state::stored_flag;
    }
    out.stored_chunks += static_cast<std::uint32_t>(missing_.size());
    totals_.chunks_stored += missing_.size();
    if (cfg_.secondary_fs) {  // complete_store copies the newly stored chunks to the fs tier
      for (const std::uint64_t i : missing_) fs_.insert(s.chunk_keys[i]);
      totals_.fs_written_chunks += missing_.size();
    }
  }

  /// The request's end (CPUOffloadingManager.on_request_finished): vLLM's LRU touches every
  /// resident chunk the request loaded or offered for store (stored or reused), tail first; a
  /// kvtk policy (the adapter) accesses only the reused ones (loaded, or offered and resident);
  /// vLLM's arc as vllm_arc::on_request_finished. Throws: nothing.
  void finish(const vllm_offload_state& s) noexcept {
    const std::size_t chunks = s.chunk_keys.size();
    auto loaded = [&](std::size_t i) { return i >= s.loaded_first && i < s.loaded_end; };
    auto reused = [&](std::size_t i) { return (s.flags[i] & vllm_offload_state::reused_flag) != 0; };
    if (arc_) {
      // Tail first over the chunks it saw: loaded, reused, or a store candidate (stored or not).
      arc_->on_request_finished(
          std::span<const block_key>(s.chunk_keys).first(chunks),
          [&](std::size_t i) {
            return (s.flags[i] & vllm_offload_state::stored_flag) != 0 && !(loaded(i) || reused(i));
          },
          [&](std::size_t i) { return loaded(i) || reused(i); });
      return;
    }
    cpu_.with(1, [&](auto& c) {
      for (std::size_t i = chunks; i-- > 0;) {
        const bool touched = vllm_lru_ ? loaded(i) || (i >= s.offered_from && i < s.offered_end)
                                       : loaded(i) || reused(i);
        if (!touched) continue;
        const std::uint32_t slot = c.find(s.chunk_keys[i]);
        if (slot != core_type::npos) c.touch(slot);
      }
    });
  }

 private:
  using lru_tracker = block_cache<lru>;

  // _initiate_promotion: one CPU slot for `key` (prepare_write: the policy evicts an idle chunk
  // when the tier is full; this step's pending promotions are not idle), inserted most recent
  // and pinned until the step ends. False when nothing can be evicted.
  bool promote_one(block_key key) {
    bool ok = true;
    if (cpu_resident() >= cfg_.cpu_chunks) {
      const std::uint64_t before = cpu_.counters(1).evictions;
      cpu_.with(1, [&](auto& c) { ok = c.evict(1); });
      totals_.fs_promotion_evictions += cpu_.counters(1).evictions - before;
    }
    if (!ok) {
      ++totals_.fs_promotion_refusals;
      return false;
    }
    (void)cpu_.insert_into(1, key, 0, true);
    cpu_.with(1, [&](auto& c) { (void)c.pin(key); });
    ++totals_.fs_promoted_chunks;
    return true;
  }

  static vllm_offload_config checked(const vllm_offload_config& c) {
    validate_cpu(c);
    return c;
  }
  // The CPU tier as the core's tier 1 (tier 0 is the pool, which the core does not hold).
  static hierarchy_config core_config(const vllm_offload_config& c) {
    hierarchy_config h;
    h.tiers.resize(2);
    h.tiers[0].name = "gpu";
    h.tiers[0].capacity_blocks = std::max<std::uint32_t>(c.gpu_blocks, 1);
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

  // Chunks [from, to) accessed tail first (their head ends most recent); absent ones skipped.
  void touch_tail_first(const vllm_offload_state& s, std::uint64_t from, std::uint64_t to) noexcept {
    cpu_.with(1, [&](auto& c) {
      for (std::uint64_t i = to; i-- > from;) {
        const std::uint32_t slot = c.find(s.chunk_keys[i]);
        if (slot != core_type::npos) c.touch(slot);
      }
    });
  }

  // The tracker's count of `key` (0 when untracked: vLLM's counts.get(key, 0)).
  [[nodiscard]] std::uint32_t offers_of(block_key key) const noexcept {
    const std::uint32_t slot = tracker_->find(key);
    return slot == lru_tracker::npos ? 0 : counts_[slot];
  }

  // The store-threshold tracker (CPUOffloadingManager._record_accesses): offered keys already
  // tracked count once more and move to the end; new keys enter with 1, each pushing out the
  // oldest key this call did not offer, or are not tracked when no such key is left.
  void record_offers(const vllm_offload_state& s) {
    std::size_t offered_tracked = 0;
    for (const std::uint64_t i : offered_) {
      const std::uint32_t slot = tracker_->find(s.chunk_keys[i]);
      if (slot == lru_tracker::npos) continue;
      tracker_->touch(slot);
      ++counts_[slot];
      ++offered_tracked;
    }
    std::size_t unprotected = tracker_->size() - offered_tracked;
    for (const std::uint64_t i : offered_) {
      const block_key key = s.chunk_keys[i];
      if (tracker_->contains(key)) continue;
      if (tracker_->size() >= cfg_.max_tracker_size) {
        if (unprotected == 0) continue;
        --unprotected;  // the insert below evicts the oldest, an unoffered key
      }
      const access_outcome o = tracker_->insert(key);
      counts_[o.slot] = 1;
    }
  }

  vllm_offload_config cfg_;
  core_type cpu_;
  bool vllm_lru_;
  std::unique_ptr<lru_tracker> tracker_;  // store_threshold >= 2
  std::vector<std::uint32_t> counts_;      // [tracker slot]: offers counted
  std::vector<std::uint64_t> offered_, missing_;  // store()'s scratch
  std::vector<block_key> missing_keys_;    // vLLM's arc: the store misses
  std::vector<block_key> held_, protect_;  // vLLM's arc: chunks loads hold; evict()'s protection
  std::unordered_set<block_key> fs_;       // the fs secondary tier: unbounded, never evicts
  std::vector<block_key> pending_;         // promote()'s step: promotions in flight
  std::unordered_set<block_key> asked_;    // promote(): keys whose fs answer is known
  std::unique_ptr<vllm_arc> arc_;          // policy "arc": vLLM's own ARC
  vllm_offload_counters totals_;
};

template <class Policies = all_policies>
class vllm_offload;

/// The GPU pool over vllm_cpu_offload, one request at a time, run to completion.
/// Thread safety: as block_cache: one per thread.
template <class... Ps>
class vllm_offload<type_list<Ps...>> {
 public:
  static constexpr const char* engine_version = prefix::vllm_block_pool::engine_version;

  /// Throws: as validate(); "unknown policy" naming the kvtk policies; std::bad_alloc.
  explicit vllm_offload(const vllm_offload_config& c)
      : pool_((validate(c), c.gpu_blocks)), cpu_(c) {}
  vllm_offload(const vllm_offload&) = delete;
  vllm_offload& operator=(const vllm_offload&) = delete;

  [[nodiscard]] const vllm_offload_config& config() const noexcept { return cpu_.config(); }
  [[nodiscard]] const vllm_offload_counters& counters() const noexcept { return cpu_.counters(); }
  [[nodiscard]] const prefix::vllm_block_pool& pool() const noexcept { return pool_; }
  [[nodiscard]] std::size_t cpu_resident() const noexcept { return cpu_.cpu_resident(); }
  [[nodiscard]] bool cpu_holds(block_key chunk_key) const noexcept { return cpu_.cpu_holds(chunk_key); }

  /// Effects: one request of L tokens in GPU blocks of B tokens whose full blocks have the keys
  /// `keys` (at most floor(L / B) read), run to completion (the header comment).
  /// Complexity: O(blocks) expected plus the policy's costs.  Throws: std::bad_alloc (scratch).
  vllm_offload_request run_request(std::span<const block_key> keys, std::uint64_t L,
                                   std::uint32_t B) {
    vllm_offload_request out;
    if (L == 0) return out;
    auto& totals = cpu_.counters();
    ++totals.requests;
    const std::uint64_t n = (L + B - 1) / B;
    if (n > pool_.capacity()) {
      out.scheduled = false;
      ++totals.unscheduled;
      return out;
    }
    const std::uint64_t f = std::min<std::uint64_t>(L / B, keys.size());
    const std::uint64_t k = cpu_.config().blocks_per_chunk;
    state_.clear();
    for (std::uint64_t c = 0; c < f / k; ++c) state_.add_chunk(keys[(c + 1) * k - 1]);
    if (held_.size() < n) held_.resize(n);
    // The GPU hit, the lookup, the load.
    out.gpu_hit_blocks = pool_.find_hit(keys, prefix::vllm_block_pool::hit_cap(L, B, f), held_);
    if (cpu_.config().secondary_fs) (void)cpu_.promote(state_, L, std::uint64_t{out.gpu_hit_blocks} * B, B);
    out.loaded_tokens = cpu_.lookup(state_, L, std::uint64_t{out.gpu_hit_blocks} * B, B);
    out.loaded_chunks = cpu_.load(state_, out.gpu_hit_blocks, out.loaded_tokens, B);
    // The GPU pool runs the request (loads take new blocks as prefills do).
    (void)pool_.run_request(keys, L, B, held_);
    // The store (every full chunk past the load, in one call), then the request's end.
    cpu_.store(state_, state_.chunk_keys.size(), out);
    cpu_.finish(state_);
    totals.gpu_hit_blocks += out.gpu_hit_blocks;
    return out;
  }

 private:
  prefix::vllm_block_pool pool_;
  vllm_cpu_offload<type_list<Ps...>> cpu_;
  std::vector<std::uint32_t> held_;  // the pool's scratch
  vllm_offload_state state_;         // the request's
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
