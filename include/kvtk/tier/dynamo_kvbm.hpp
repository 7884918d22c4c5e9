// kvtk/tier/dynamo_kvbm.hpp — NVIDIA Dynamo's KV Block Manager (KVBM, the `kvbm` 1.6.1 wheel's
// DynamoConnector) under vLLM 0.33's block pool: G1 the GPU pool, G2 host blocks, G3 disk blocks,
// request by request with nothing else running: `kvtk replay --engine vllm --offload
// kvbm:HOST[,disk=SIZE][,disk_filter=on|off]`.
//
// Written from KVBM's Rust (ai-dynamo/dynamo lib/llm/src/block_manager and the vLLM connector
// leader in lib/bindings/kvbm, read at commit df888f6, whose log strings, filter constants and
// environment variables are the ones compiled into the kvbm 1.6.1 wheel; docs/engines/
// dynamo-kvbm-1.6.1.md cites each rule). Not run against KVBM itself: its leader needs the GPU
// workers. kvtk simulate runs the tiers below the GPU (kvbm_lower_tiers) under its vllm-v1
// scheduler, with chunked prefill, preemption and time (docs/simulate.md "Dynamo KVBM"). The
// rules, in KVBM's unit, the engine's block of B tokens (one hash per full block):
//  * Lookup (get_num_new_matched_tokens). g = vLLM's GPU hit (capped at floor((L - 1) / B)
//    blocks). From block g, the leading run of the prompt's full blocks held in G2, then from
//    where that stops the leading run held in G3 (a G3 hit is read straight to the GPU, not
//    staged through G2). If g + both runs cover the whole prompt (L a multiple of B), one block is
//    given up: the last disk block if any matched, else the last host block. Every matched block
//    is acquired and released again, which makes it its pool's most recent (host ones in order,
//    then disk ones); the loaded blocks count as computed.
//  * G1 -> G2, write-through of the prompt (apply_scheduler_output; generated tokens are not
//    offloaded in 1.6.1). The full prompt blocks past the computed ones, [g + loaded, floor(L /
//    B)), are one batch: n blocks are allocated in G2 (free ones first, then the least recently
//    released; the whole batch is dropped when G2 has fewer than n blocks), then registered in
//    order: a hash G2 already holds keeps its block (the new one is freed) and is released again
//    (most recent), a new hash takes a block. Every registered block is queued for G3.
//  * G2 -> G3 (the offload worker, in queue order): the block is acquired in G2 again (most
//    recent); a hash G3 holds is released there again (its presence check) and skipped; else the
//    FrequencyFilter decides (a hash's count starts at 1 and doubles at each later sight; it
//    passes at >= 2, so a block goes to disk at its second registration in G2 within the decay
//    window; every 600 s of trace time, from the first request, each count drops by 1 and counts
//    at 0 are forgotten, and more than 1,000,000 counts force decay rounds at once), then one G3
//    block is allocated (evicting G3's least recently released) and registered.
//    DYN_KVBM_DISABLE_DISK_OFFLOAD_FILTER (disk_filter=off) passes every block.
//  * No G2 (HOST 0, a disk given: KVBM's bypass): the batch goes G1 -> G3 directly, unfiltered,
//    allocated all or nothing in G3 as above; lookups read G3 only.
//  * Every asynchronous transfer and the offload queue finish before the next request.
//
// Not modelled: offload priorities (DYN_KVBM_HOST_OFFLOAD_PREFIX_MIN_PRIORITY: vLLM's path gives
// every block priority 0, so a threshold above 0 turns G1 -> G2 off), in replay a prompt
// offloaded over several steps (chunked prefill) and preemption (simulate has both), the KVBM v2 policies (pass_all, presence,
// presence_lfu: not in the 1.6.1 wheel), tensor and data parallelism.
//
// Design: the GPU pool (prefix/vllm_block_pool.hpp) is the top; G2 and G3 are kvtk LRU caches
// (block_cache<lru>), which is KVBM's inactive-pool order (free blocks first, then the oldest
// release); the filter is a hash map bounded by its own entry limit.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "kvtk/cache/block_cache.hpp"
#include "kvtk/policy/lru.hpp"
#include "kvtk/prefix/vllm_block_pool.hpp"

namespace kvtk::tier {

/// What `--offload kvbm:HOST[,disk=SIZE][,disk_filter=on|off]` configures (KVBM's environment).
struct dynamo_kvbm_config {
  std::uint32_t gpu_blocks = 0;   ///< G1: vLLM's pool (blocks; num_gpu_blocks - 1)
  std::uint32_t host_blocks = 0;  ///< G2 (DYN_KVBM_CPU_CACHE_GB / _OVERRIDE_NUM_BLOCKS); 0: none
  std::uint32_t disk_blocks = 0;  ///< G3 (DYN_KVBM_DISK_CACHE_GB / _OVERRIDE_NUM_BLOCKS); 0: none
  bool disk_filter = true;        ///< the FrequencyFilter on G2 -> G3 (off: DISABLE_DISK_OFFLOAD_FILTER)
  std::uint64_t min_offload_frequency = 2;     ///< the filter's threshold (KVBM's constant)
  double flush_interval_s = 600;               ///< the filter's decay period (seconds)
  std::uint64_t max_filter_entries = 1000000;  ///< counts kept before forced decay
};

/// Totals over a replay (blocks of B tokens).
struct dynamo_kvbm_counters {
  std::uint64_t requests = 0, unscheduled = 0;
  std::uint64_t gpu_hit_blocks = 0, host_hit_blocks = 0, disk_hit_blocks = 0;
  std::uint64_t offered_blocks = 0;        ///< G1 -> G2 (or G3 in bypass) candidates
  std::uint64_t host_stored_blocks = 0;    ///< new hashes registered in G2
  std::uint64_t host_duplicate_blocks = 0; ///< candidates G2 already held
  std::uint64_t host_dropped_batches = 0, host_dropped_blocks = 0;  ///< batches larger than G2
  std::uint64_t host_evictions = 0;
  std::uint64_t disk_stored_blocks = 0, disk_evictions = 0;
  std::uint64_t disk_present_skips = 0;  ///< queued blocks G3 already held
  std::uint64_t filter_skips = 0;        ///< queued blocks the FrequencyFilter held back
  std::uint64_t disk_dropped_batches = 0, disk_dropped_blocks = 0;  ///< bypass batches larger than G3
};

/// Requires (throws std::invalid_argument naming the knob otherwise): gpu_blocks, host_blocks and
/// disk_blocks below 2^31, gpu_blocks >= 1, host or disk >= 1 (KVBM's sanity check),
/// min_offload_frequency >= 1, flush_interval_s > 0, max_filter_entries >= 1.
inline void validate(const dynamo_kvbm_config& c) {
  if (c.gpu_blocks == 0 || c.gpu_blocks >= (1u << 31)) {
    throw std::invalid_argument("dynamo kvbm: the GPU pool must have [1, 2^31) blocks");
  }
  if (c.host_blocks >= (1u << 31) || c.disk_blocks >= (1u << 31)) {
    throw std::invalid_argument("dynamo kvbm: host and disk tiers must hold fewer than 2^31 blocks");
  }
  if (c.host_blocks == 0 && c.disk_blocks == 0) {
    throw std::invalid_argument("dynamo kvbm: give a host or a disk tier (KVBM needs one)");
  }
  if (c.min_offload_frequency == 0 || !(c.flush_interval_s > 0) || c.max_filter_entries == 0) {
    throw std::invalid_argument("dynamo kvbm: the filter needs a threshold >= 1, an interval > 0 "
                                "and room for one count");
  }
}

/// KVBM's G2 and G3 with the FrequencyFilter, below a GPU pool the caller keeps: dynamo_kvbm's
/// for replay, the engine scheduler's own in kvtk simulate (vllm-v1), which calls lookup at each
/// admission attempt (twice when nothing matches: vLLM asks again on the plain path, the same
/// touches in the same order), count_hits at each admission (the GPU hit and what it loads) and
/// offload after each step.
/// Thread safety: as block_cache: one per thread.
class kvbm_lower_tiers {
  using pool = block_cache<lru>;

 public:
  /// Throws: as validate() (gpu_blocks is not read: the caller keeps the GPU pool); std::bad_alloc.
  explicit kvbm_lower_tiers(const dynamo_kvbm_config& c)
      : cfg_(checked(c)), host_(make_pool(c.host_blocks)), disk_(make_pool(c.disk_blocks)) {}

  [[nodiscard]] const dynamo_kvbm_config& config() const noexcept { return cfg_; }
  [[nodiscard]] const dynamo_kvbm_counters& counters() const noexcept { return totals_; }
  [[nodiscard]] dynamo_kvbm_counters& counters() noexcept { return totals_; }
  [[nodiscard]] std::size_t host_resident() const noexcept { return host_ ? host_->size() : 0; }
  [[nodiscard]] std::size_t disk_resident() const noexcept { return disk_ ? disk_->size() : 0; }
  [[nodiscard]] bool host_holds(block_key k) const noexcept { return host_ && host_->contains(k); }
  [[nodiscard]] bool disk_holds(block_key k) const noexcept { return disk_ && disk_->contains(k); }

  /// Effects: the filter's clock is at `t` seconds (non-decreasing): the decay ticks due since
  /// the last call are applied, the first call starting the clock with one tick.
  void set_time(double t) {
    last_time_ = t;
    if (!clock_started_) {
      clock_started_ = true;
      next_tick_ = t;
    }
    if (next_tick_ > t) return;
    // d ticks at once: each takes 1 from every count and forgets those at 0, so d of them
    // take d and forget those at or below d.
    const double due = std::floor((t - next_tick_) / cfg_.flush_interval_s) + 1;
    decay(due >= 1.8e19 ? ~std::uint64_t{0} : static_cast<std::uint64_t>(due));
    next_tick_ += due * cfg_.flush_interval_s;
  }

  /// Blocks a lookup matched past the GPU hit: `host` from G2, then `disk` from G3.
  struct match {
    std::uint64_t host = 0, disk = 0;
  };
  /// The lookup of a request of `seq` tokens whose full prompt blocks are `keys`, from its GPU
  /// hit g (blocks): G2's leading run from g, then G3's from where it stops; a match to the
  /// request's end gives up its last block (the disk's if any). Effects: every matched block is
  /// acquired and released (its pool's most recent, host ones in order, then disk ones); nothing
  /// is counted (count_hits).  Complexity: O(matched) expected.  Throws: nothing.
  match lookup(std::span<const block_key> keys, std::uint64_t g, std::uint64_t seq,
               std::uint32_t B) noexcept {
    const std::uint64_t f = keys.size();
    std::uint64_t h2 = 0, h3 = 0;
    while (host_ && g + h2 < f && host_->contains(keys[g + h2])) ++h2;
    while (disk_ && g + h2 + h3 < f && disk_->contains(keys[g + h2 + h3])) ++h3;
    const std::uint64_t matched2 = h2, matched3 = h3;
    if ((g + h2 + h3) * B == seq && h2 + h3 > 0) (h3 > 0 ? h3 : h2) -= 1;  // the last block
    for (std::uint64_t i = g; i < g + matched2; ++i) host_->touch(host_->find(keys[i]));
    for (std::uint64_t i = g + matched2; i < g + matched2 + matched3; ++i) {
      disk_->touch(disk_->find(keys[i]));
    }
    return {h2, h3};
  }
  /// Effects: counts a load of m (and the GPU hit g beside it).
  void count_hits(std::uint64_t g, match m) noexcept {
    totals_.gpu_hit_blocks += g;
    totals_.host_hit_blocks += m.host;
    totals_.disk_hit_blocks += m.disk;
  }

  /// G1 -> G2 (or G3 without G2) of one step's batch, then the G2 -> G3 worker over it, in
  /// order (the header comment).  Complexity: O(batch) expected.  Throws: std::bad_alloc
  /// (filter entries).
  void offload(std::span<const block_key> batch) {
    if (batch.empty()) return;
    totals_.offered_blocks += batch.size();
    std::uint64_t duplicates = 0;
    if (!host_) {  // bypass: G1 -> G3, unfiltered
      if (!allocate_and_register(*disk_, batch, totals_.disk_stored_blocks, duplicates,
                                 totals_.disk_evictions)) {
        ++totals_.disk_dropped_batches;
        totals_.disk_dropped_blocks += batch.size();
      }
      return;
    }
    if (!allocate_and_register(*host_, batch, totals_.host_stored_blocks,
                               totals_.host_duplicate_blocks, totals_.host_evictions)) {
      ++totals_.host_dropped_batches;
      totals_.host_dropped_blocks += batch.size();
      return;
    }
    if (!disk_) return;
    for (const block_key k : batch) {  // the host -> disk worker, in queue order
      host_->touch(host_->find(k));
      const std::uint32_t s = disk_->find(k);
      if (s != pool::npos) {
        disk_->touch(s);
        ++totals_.disk_present_skips;
        continue;
      }
      if (cfg_.disk_filter && !frequent(k)) {
        ++totals_.filter_skips;
        continue;
      }
      if (disk_->size() == disk_->capacity()) {
        (void)disk_->evict(1);
        ++totals_.disk_evictions;
      }
      (void)disk_->insert(k);
      ++totals_.disk_stored_blocks;
    }
  }

 private:
  static dynamo_kvbm_config checked(dynamo_kvbm_config c) {
    const std::uint32_t gpu = c.gpu_blocks;
    c.gpu_blocks = 1;
    validate(c);
    c.gpu_blocks = gpu;
    return c;
  }
  static std::unique_ptr<pool> make_pool(std::uint32_t blocks) {
    if (blocks == 0) return nullptr;
    pool::config c{};
    c.capacity = blocks;
    return std::make_unique<pool>(c);
  }

  // allocate_blocks(n) then register_blocks: free blocks first, then the least recently released
  // (all or nothing); a hash already held keeps its block and is released again, a new one takes
  // a block. False when the pool is smaller than the batch.
  static bool allocate_and_register(pool& p, std::span<const block_key> batch,
                                    std::uint64_t& stored, std::uint64_t& duplicates,
                                    std::uint64_t& evictions) {
    if (batch.size() > p.capacity()) return false;
    const std::size_t free = p.capacity() - p.size();
    if (batch.size() > free) {
      (void)p.evict(batch.size() - free);  // nothing is pinned: never refused
      evictions += batch.size() - free;
    }
    for (const block_key k : batch) {
      const std::uint32_t s = p.find(k);
      if (s != pool::npos) {
        p.touch(s);
        ++duplicates;
      } else {
        (void)p.insert(k);
        ++stored;
      }
    }
    return true;
  }

  // FrequencyFilter::should_offload: 1 at the first sight, doubled (saturating) at each later.
  bool frequent(block_key k) {
    auto [it, fresh] = counts_.try_emplace(k, 1);
    if (!fresh) it->second = it->second > (~std::uint64_t{0} >> 1) ? ~std::uint64_t{0} : it->second * 2;
    const bool pass = it->second >= cfg_.min_offload_frequency;
    if (counts_.size() > cfg_.max_filter_entries) {
      while (counts_.size() > cfg_.max_filter_entries) decay(1);
      next_tick_ = last_time_ + cfg_.flush_interval_s;  // the interval restarts
    }
    return pass;
  }
  void decay(std::uint64_t ticks) {
    for (auto it = counts_.begin(); it != counts_.end();) {
      if (it->second <= ticks) {
        it = counts_.erase(it);
      } else {
        it->second -= ticks;
        ++it;
      }
    }
  }

  dynamo_kvbm_config cfg_;
  std::unique_ptr<pool> host_, disk_;
  std::unordered_map<block_key, std::uint64_t> counts_;  // the FrequencyFilter's map
  bool clock_started_ = false;
  double next_tick_ = 0, last_time_ = 0;
  dynamo_kvbm_counters totals_;
};

/// vLLM 0.33's block pool over kvbm_lower_tiers, one request at a time (replay).
/// Thread safety: as block_cache: one per thread.
class dynamo_kvbm {
 public:
  static constexpr const char* engine_version = "vLLM 0.33.0 + Dynamo KVBM 1.6.1";

  /// Throws: as validate(); std::bad_alloc.
  explicit dynamo_kvbm(const dynamo_kvbm_config& c) : lower_((validate(c), c)), gpu_(c.gpu_blocks) {}

  [[nodiscard]] const dynamo_kvbm_config& config() const noexcept { return lower_.config(); }
  [[nodiscard]] const dynamo_kvbm_counters& counters() const noexcept { return lower_.counters(); }
  [[nodiscard]] const prefix::vllm_block_pool& gpu() const noexcept { return gpu_; }
  [[nodiscard]] const kvbm_lower_tiers& lower() const noexcept { return lower_; }
  [[nodiscard]] std::size_t host_resident() const noexcept { return lower_.host_resident(); }
  [[nodiscard]] std::size_t disk_resident() const noexcept { return lower_.disk_resident(); }
  [[nodiscard]] bool host_holds(block_key k) const noexcept { return lower_.host_holds(k); }
  [[nodiscard]] bool disk_holds(block_key k) const noexcept { return lower_.disk_holds(k); }

  /// Effects: as kvbm_lower_tiers::set_time (the request's arrival).
  void set_time(double t) { lower_.set_time(t); }

  /// One request of L tokens in GPU blocks of B tokens whose full blocks have the keys `keys`
  /// (at most floor(L / B) read), run to completion (the header comment). Returns the blocks it
  /// did not compute: the GPU hit and the blocks loaded from G2 and G3.
  /// Complexity: O(blocks) expected.  Throws: std::bad_alloc (scratch, filter entries).
  std::uint32_t run_request(std::span<const block_key> keys, std::uint64_t L, std::uint32_t B) {
    if (L == 0) return 0;
    auto& totals = lower_.counters();
    ++totals.requests;
    const std::uint64_t n = (L + B - 1) / B;
    if (n > gpu_.capacity()) {
      ++totals.unscheduled;
      return 0;
    }
    const std::uint64_t f = std::min<std::uint64_t>(L / B, keys.size());
    if (held_.size() < n) held_.resize(n);
    const std::uint64_t g = gpu_.find_hit(keys, prefix::vllm_block_pool::hit_cap(L, B, f), held_);
    const auto m = lower_.lookup(keys.first(f), g, L, B);
    (void)gpu_.run_request(keys, L, B, held_);  // loads take new GPU blocks as prefills do
    lower_.count_hits(g, m);
    const std::uint64_t done = g + m.host + m.disk;
    lower_.offload(keys.subspan(done, f - done));
    return static_cast<std::uint32_t>(done);
  }

 private:
  kvbm_lower_tiers lower_;
  prefix::vllm_block_pool gpu_;
  std::vector<std::uint32_t> held_;  // the pool's scratch
};

/// dynamo_kvbm as a prefix-replay index (`replay --engine vllm --offload kvbm:...`).
class dynamo_kvbm_index {
 public:
  static constexpr bool offline = false;
  explicit dynamo_kvbm_index(const dynamo_kvbm_config& c) : k_(c) {}
  void begin_request(std::uint64_t input_tokens, std::uint32_t block_tokens) noexcept {
    L_ = input_tokens;
    B_ = block_tokens;
  }
  /// The request's arrival (the filter's decay clock).
  void set_time(double t) { k_.set_time(t); }
  std::uint32_t process(std::span<const block_key> blocks, std::span<const std::uint64_t>,
                        const access_hint&) {
    return k_.run_request(blocks, L_, B_);
  }
  [[nodiscard]] const dynamo_kvbm& kvbm() const noexcept { return k_; }
  [[nodiscard]] const dynamo_kvbm_counters& counters() const noexcept { return k_.counters(); }
  [[nodiscard]] std::uint64_t evictions() const noexcept { return k_.gpu().evictions(); }

 private:
  dynamo_kvbm k_;
  std::uint64_t L_ = 0;
  std::uint32_t B_ = 1;
};

}  // namespace kvtk::tier
