// kvtk/cache/sharded_block_cache.hpp — a block cache that many threads share: N independent
// block_cache shards, chosen by key hash, each behind its own mutex.
//
// Semantics
// ---------
// A sharded cache is N independent caches, not one cache with N locks. A key lives in exactly one
// shard (shard_of(key), below), and every operation on a key is that shard's block_cache operation
// (block_cache.hpp: miss protocol, pins, rejections). Each shard has its own capacity and its own
// policy state and evicts only its own entries: a miss in shard s evicts s's victim even when
// another shard holds colder blocks. The hit ratio therefore differs from one block_cache of the
// same total capacity: shards fill unevenly (the keys' spread over shards is random), and policies
// that learn (ghost lists, frequency sketches, ARC's target) learn per shard. With 1 shard the
// cache is exactly block_cache (same outcomes, victims and slots). Use one block_cache when hit
// ratio must match a single-cache simulation; use this when several threads need the cache.
//
// Shard function (pinned; tests route keys by it)
// ------------------------------------------------
//   shard_of(key) = ((fmix64(key) >> 32) * shards) >> 32
// fmix64 is MurmurHash3's 64-bit finalizer (a bijection with full avalanche), so every bit of
// the key decides the shard: prefix hashes (already random) and sequential ids (flat traces)
// spread evenly alike. The top 32 bits of the mix are mapped to [0, shards) by a multiply-shift
// ("fastrange"), so any shard count works. The mix is deliberately different from the one
// key_table uses for home slots (top bits of (key ^ key >> 29) * 2^64/phi): had the shard come from
// those bits, every key of a shard would share the top bits of its home slot and crowd into one
// part of the shard's table.
//
// Capacity and slots
// ------------------
// * config.capacity (size units, as block_cache) is split exactly: shard i gets
//   floor(capacity / shards) + (i < capacity % shards ? 1 : 0), so the shards' capacities sum to
//   capacity and differ by at most 1 unit. capacity >= shards is required (no empty shard).
// * config.max_entries is per shard (0 = the shard's capacity, as block_cache).
// * Slots are global: slot = shard * slots_per_shard() + the shard's block_cache slot, where
//   slots_per_shard() is the largest shard's node pool (shard 0's). Slots are unique across the
//   cache and stable while the entry is resident, so a caller's payload array of slot_count() =
//   shards * slots_per_shard() entries is indexed by them (at most shards - 1 of those entries
//   are never used when the split is uneven). locate(slot) splits a slot into {shard, local slot}.
//
// Layout
// ------
// shards_ is one array of `shards` entries, each alignas(64): a std::mutex and the shard's
// block_cache (its node pool, key table and policy state are separate allocations made by the
// constructor). So no two shards share a cache line, and a thread holding shard s's lock writes
// only s's lines (no false sharing between shards). Nothing allocates after construction; no
// operation makes a virtual call.
//
// Concurrency
// -----------
// Thread safety: every member function may be called concurrently from any threads on one object
// (each takes the lock of the shard it touches; whole-cache figures take the shards' locks one
// at a time). Construction and destruction need exclusive access, as for any object.
// * An operation on one key is atomic (linearizable): it runs entirely under its shard's lock.
// * Whole-cache figures (size, used, stats, pinned_entries) sum the shards one lock at a time:
//   each shard's part is exact, but while other threads mutate, the sum is not a snapshot of one
//   instant. They are exact when no other thread is mutating (e.g. after joining the workers).
// * A slot or find() result describes the entry at the time of the call; another thread may
//   evict the entry right after. Pin the entry (pin, access_and_pin) to keep it and its slot.
// * The batched access is not atomic as a whole: it is a sequence of per-shard runs.
// * OnEvict(key, slot) gets the global slot. It is called under the lock of the shard that
//   evicts, so it must not call back into this cache (the same shard would deadlock; another
//   shard could deadlock against a thread locking in the other order). Each shard has its own
//   copy of OnEvict; calls from different shards can run at the same time on different threads,
//   so whatever the copies share must tolerate that (calls of one shard are serialised). It must
//   not throw (block_cache.hpp).
// * Lock order: at most one shard lock is held at a time by this class, so its operations cannot
//   deadlock with each other.
// * The operations are noexcept like block_cache's. std::mutex::lock throws only for system
//   errors (e.g. resource_deadlock_would_occur: relocking a held shard from OnEvict or from
//   with_shard's f, which the rules above forbid); inside a noexcept function that terminates.
//
// Invariants (per shard, as block_cache): used <= capacity; pinned entries are never evicted.
// Every resident key k is in shard shard_of(k) and nowhere else.
#pragma once

#include <algorithm>
#include <cstddef>
#include <concepts>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <utility>

#include "kvtk/cache/block_cache.hpp"

namespace kvtk {

/// Thread safety: internally synchronised (one mutex per shard); see "Concurrency" above.
template <eviction_policy Policy, class OnEvict = ignore_evictions>
class sharded_block_cache {
 public:
  /// The most shards a cache may have (the batched access keeps its per-shard counts in
  /// fixed-size stack arrays of this many entries).
  static constexpr std::uint32_t max_shards = 64;
  /// The batched access sorts keys by shard in stack buffers of this many keys; a longer batch is
  /// processed in consecutive chunks of this size (each touched shard locked once per chunk).
  static constexpr std::size_t batch_chunk = 1024;
  /// "No slot" (a rejected access, a missing key).
  static constexpr std::uint32_t npos = block_cache<Policy>::npos;

  /// Eviction callback of a shard: the user's OnEvict with the shard's slot offset applied.
  struct shard_callback {
    OnEvict fn;
    std::uint32_t base = 0;
    void operator()(block_key key, std::uint32_t slot) noexcept { fn(key, base + slot); }
  };
  /// The block_cache each shard is (with_shard() hands it out under the shard's lock).
  using shard_type = block_cache<Policy, shard_callback>;

  struct config {
    /// Total capacity in size units (blocks when every entry has size 1), split across the
    /// shards as described at the top. Must be >= shards.
    std::uint64_t capacity = 0;
    /// Number of shards, in [1, max_shards].
    std::uint32_t shards = 16;
    /// Maximum resident entries *per shard* (its node pool). 0 = the shard's capacity (then that
    /// must be < 2^31).
    std::uint32_t max_entries = 0;
    /// Policy parameters, given to every shard; see the policy header.
    typename Policy::config policy{};
  };

  /// Where a global slot lives.
  struct slot_location {
    std::uint32_t shard;  ///< the shard index
    std::uint32_t slot;   ///< the slot in that shard's block_cache
  };

  /// Requires: OnEvict copy-constructible (each shard gets a copy).
  /// Effects: builds the shards (all allocation happens here).
  /// Complexity: O(capacity) (or O(shards * max_entries)).
  /// Throws: std::invalid_argument for shards outside [1, max_shards], capacity < shards, a
  /// shard's max_entries >= 2^31, slot_count() >= 2^32, or a bad policy config; std::bad_alloc.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
  // As block_cache: GCC 12 flags an empty policy config copied from cfg as "maybe uninitialized".
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
  explicit sharded_block_cache(const config& cfg, const OnEvict& on_evict = {})
      : n_(checked_shards(cfg)), capacity_(cfg.capacity), shards_(std::make_unique<shard[]>(n_)) {
    const std::uint64_t each = cfg.capacity / n_, extra = cfg.capacity % n_;
    // Shard 0 is the largest: its node pool is the slot stride.
    const std::uint64_t largest_pool = cfg.max_entries != 0 ? cfg.max_entries : each + (extra > 0);
    if (largest_pool >= (std::uint64_t{1} << 31)) {
      throw std::invalid_argument(
          "sharded_block_cache: a shard's max_entries must be < 2^31 (set max_entries when "
          "capacity is in bytes)");
    }
    if (largest_pool * n_ > npos) {
      throw std::invalid_argument("sharded_block_cache: shards * max_entries must be < 2^32");
    }
    stride_ = static_cast<std::uint32_t>(largest_pool);
    for (std::uint32_t i = 0; i < n_; ++i) {
      typename shard_type::config c;
      c.capacity = each + (i < extra ? 1 : 0);
      c.max_entries = cfg.max_entries;
      c.policy = cfg.policy;
      shards_[i].cache.emplace(c, shard_callback{on_evict, i * stride_});
    }
  }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  sharded_block_cache(const sharded_block_cache&) = delete;
  sharded_block_cache& operator=(const sharded_block_cache&) = delete;

  /// The shard function (see the top): ((fmix64(key) >> 32) * shards) >> 32.
  /// Requires: shards in [1, max_shards].  Complexity: O(1).  Throws: nothing.
  [[nodiscard]] static constexpr std::uint32_t shard_of(block_key key,
                                                        std::uint32_t shards) noexcept {
    std::uint64_t h = key;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return static_cast<std::uint32_t>(((h >> 32) * shards) >> 32);
  }
  /// The shard holding (or that would hold) key.  Complexity: O(1).  Throws: nothing.
  [[nodiscard]] std::uint32_t shard_of(block_key key) const noexcept { return shard_of(key, n_); }

  /// Requires: nothing (any key, hint and size).
  /// Effects: block_cache::access on key's shard, under its lock: a hit updates the policy; a
  /// miss admits the key, evicting (and calling OnEvict for) victims of that shard only. The
  /// slot returned is global (npos when rejected); a size larger than the shard's capacity is
  /// rejected even when it is below capacity().
  /// Complexity: one lock + block_cache::access.  Throws: nothing.
  access_outcome access(block_key key, const access_hint& hint = {},
                        std::uint32_t size = 1) noexcept {
    const std::uint32_t s = shard_of(key);
    shard& sh = shards_[s];
    const std::lock_guard<std::mutex> hold(sh.lock);
    return global(s, sh.cache->access(key, hint, size));
  }

  /// access() with the size first (block_cache's and any_block_cache's other order).
  template <std::integral Size>
  access_outcome access(block_key key, Size size, const access_hint& hint = {}) noexcept {
    return access(key, hint, static_cast<std::uint32_t>(size));
  }

  /// Requires: nothing.
  /// Effects: access(key, hint, size) and, unless rejected, one pin on the entry, both under one
  /// lock hold: the entry cannot be evicted between the access and the pin (a separate pin()
  /// call could find it gone). Returns the access outcome; unless it is rejected the entry is
  /// resident and pinned (undo with unpin), except in the one case pin() refuses: a pin count
  /// already at its maximum of 2^31 - 1.  Complexity: one lock + access + O(1).  Throws: nothing.
  access_outcome access_and_pin(block_key key, const access_hint& hint = {},
                                std::uint32_t size = 1) noexcept {
    const std::uint32_t s = shard_of(key);
    shard& sh = shards_[s];
    const std::lock_guard<std::mutex> hold(sh.lock);
    const access_outcome r = sh.cache->access(key, hint, size);
    if (r.result != access_result::rejected) sh.cache->pin(key);
    return global(s, r);
  }

  /// Batched access: out[i] = access(keys[i], hint with depth = i).result for every i.
  /// Requires: out.size() >= keys.size().
  /// Effects: groups the keys by shard with a stable counting sort in stack buffers (no heap
  /// allocation) and locks each touched shard once per batch_chunk keys (once per call for
  /// batches of up to batch_chunk keys), accessing that shard's keys in their order in `keys`.
  /// Per-shard order is what defines the result: shards are independent, so interleaving the
  /// shards differently cannot change any outcome (and the same key always maps to one shard,
  /// so repeated keys keep their order). The batch is not atomic: other threads may operate
  /// between the shard runs.
  /// Complexity: keys.size() accesses + O(keys.size() + max_shards) per chunk, one lock per
  /// touched shard per chunk.  Throws: nothing.
  void access(std::span<const block_key> keys, std::span<access_result> out,
              access_hint hint = {}) noexcept {
    batch(keys, hint,
          [&](std::size_t i, std::uint32_t, const access_outcome& r) { out[i] = r.result; });
  }
  /// As above, with each outcome's global slot: out[i] = access(keys[i], hint with depth i).
  /// Requires: out.size() >= keys.size().  Complexity and Throws: as above.
  void access(std::span<const block_key> keys, std::span<access_outcome> out,
              access_hint hint = {}) noexcept {
    batch(keys, hint,
          [&](std::size_t i, std::uint32_t s, const access_outcome& r) { out[i] = global(s, r); });
  }

  /// Requires: nothing.
  /// Effects: block_cache::insert on key's shard under its lock: admits a missing key without
  /// counting a miss; a resident key is untouched and reported as hit. Slot global.
  /// Complexity: as access().  Throws: nothing.
  access_outcome insert(block_key key, const access_hint& hint = {},
                        std::uint32_t size = 1) noexcept {
    const std::uint32_t s = shard_of(key);
    shard& sh = shards_[s];
    const std::lock_guard<std::mutex> hold(sh.lock);
    return global(s, sh.cache->insert(key, hint, size));
  }

  /// insert() with the size first.
  template <std::integral Size>
  access_outcome insert(block_key key, Size size, const access_hint& hint = {}) noexcept {
    return insert(key, hint, static_cast<std::uint32_t>(size));
  }

  /// Effects: the global slot of a resident key, or npos; no policy update, no counters. The
  /// answer may be stale as soon as the lock is released (pin to keep the entry).
  /// Complexity: one lock + O(1) expected.  Throws: nothing.
  [[nodiscard]] std::uint32_t find(block_key key) const noexcept {
    const std::uint32_t s = shard_of(key);
    shard& sh = shards_[s];
    const std::lock_guard<std::mutex> hold(sh.lock);
    const std::uint32_t local = sh.cache->find(key);
    return local == npos ? npos : s * stride_ + local;
  }
  /// Effects: whether key is resident (at the time of the call).
  /// Complexity: one lock + O(1) expected.  Throws: nothing.
  [[nodiscard]] bool contains(block_key key) const noexcept { return find(key) != npos; }

  /// Effects: block_cache::pin under the shard's lock: one more pin on a resident key (never
  /// evicted while pinned). Returns false, changing nothing, if absent or at the maximum count.
  /// Complexity: one lock + O(1) expected.  Throws: nothing.
  bool pin(block_key key) noexcept {
    return with_key(key, [&](shard_type& c) { return c.pin(key); });
  }
  /// Effects: block_cache::unpin under the shard's lock. Returns false, changing nothing, if the
  /// key is absent or not pinned.  Complexity: one lock + O(1) expected.  Throws: nothing.
  bool unpin(block_key key) noexcept {
    return with_key(key, [&](shard_type& c) { return c.unpin(key); });
  }
  /// Effects: the pin count of key (0 when absent), at the time of the call.
  /// Complexity: one lock + O(1) expected.  Throws: nothing.
  [[nodiscard]] std::uint32_t pins(block_key key) const noexcept {
    return with_key(key, [&](const shard_type& c) { return c.pins(key); });
  }
  /// Effects: block_cache::erase under the shard's lock: removes a resident, unpinned key
  /// without calling OnEvict. Returns not_found or pinned (no-ops) otherwise.
  /// Complexity: one lock + O(1) expected + the policy's on_erase.  Throws: nothing.
  erase_result erase(block_key key) noexcept {
    return with_key(key, [&](shard_type& c) { return c.erase(key); });
  }

  /// Requires: shard < shards().
  /// Effects: calls f(block_cache&) with shard `shard`'s cache under its lock and returns what
  /// f returns: for what the per-key operations do not cover (for_each_slot audits, evict(n) of
  /// one shard, hide/unhide). f's slots are the shard's own (add shard * slots_per_shard() for
  /// global ones). f must not call back into this cache (the lock is held; see Concurrency).
  /// Complexity: one lock + f.  Throws: what f throws (the lock is released).
  template <class F>
  decltype(auto) with_shard(std::uint32_t shard, F&& f) {
    const std::lock_guard<std::mutex> hold(shards_[shard].lock);
    return f(*shards_[shard].cache);
  }
  /// As above, for a const cache: f gets a const block_cache&.
  template <class F>
  decltype(auto) with_shard(std::uint32_t shard, F&& f) const {
    const std::lock_guard<std::mutex> hold(shards_[shard].lock);
    return f(std::as_const(*shards_[shard].cache));
  }

  /// Effects: splits a global slot (slot < slot_count()) into its shard and local slot.
  /// Complexity: O(1) (one division).  Throws: nothing.  Needs no lock (the layout is fixed).
  [[nodiscard]] slot_location locate(std::uint32_t slot) const noexcept {
    return {slot / stride_, slot % stride_};
  }
  /// Effects: the global slot of a shard's local slot.  Requires: shard < shards(), slot <
  /// slots_per_shard().  Complexity: O(1).  Throws: nothing.
  [[nodiscard]] std::uint32_t global_slot(std::uint32_t shard, std::uint32_t slot) const noexcept {
    return shard * stride_ + slot;
  }

  // ---- fixed at construction: no lock ----
  [[nodiscard]] std::uint32_t shards() const noexcept { return n_; }
  /// Total capacity (the shards' capacities sum to it).
  [[nodiscard]] std::uint64_t capacity() const noexcept { return capacity_; }
  /// Requires: shard < shards().  The shard's capacity (see the split at the top).
  [[nodiscard]] std::uint64_t shard_capacity(std::uint32_t shard) const noexcept {
    return capacity_ / n_ + (shard < capacity_ % n_ ? 1 : 0);
  }
  /// The slot stride: the largest shard's node pool (shard 0's max_entries()).
  [[nodiscard]] std::uint32_t slots_per_shard() const noexcept { return stride_; }
  /// The size of a payload array indexed by global slots: shards() * slots_per_shard().
  [[nodiscard]] std::size_t slot_count() const noexcept { return std::size_t{n_} * stride_; }

  // ---- whole-cache figures: the shards' locks one at a time (see Concurrency) ----
  /// Size units in use, summed over the shards.  Complexity: shards() locks.  Throws: nothing.
  [[nodiscard]] std::uint64_t used() const noexcept {
    return sum([](const shard_type& c) -> std::uint64_t { return c.used(); });
  }
  /// Resident entries, summed.  Complexity: shards() locks.  Throws: nothing.
  [[nodiscard]] std::size_t size() const noexcept {
    return sum([](const shard_type& c) -> std::size_t { return c.size(); });
  }
  /// Entries with pins > 0, summed.  Complexity: shards() locks.  Throws: nothing.
  [[nodiscard]] std::size_t pinned_entries() const noexcept {
    return sum([](const shard_type& c) -> std::size_t { return c.pinned_entries(); });
  }
  /// The counters of every shard, summed field by field.  Complexity: shards() locks.
  /// Throws: nothing.
  [[nodiscard]] cache_stats stats() const noexcept {
    cache_stats total;
    for (std::uint32_t i = 0; i < n_; ++i) {
      const cache_stats s = shard_stats(i);
      total.hits += s.hits;
      total.misses += s.misses;
      total.insertions += s.insertions;
      total.evictions += s.evictions;
      total.rejections += s.rejections;
    }
    return total;
  }
  /// Requires: shard < shards().  One shard's counters (a copy taken under its lock).
  [[nodiscard]] cache_stats shard_stats(std::uint32_t shard) const noexcept {
    const std::lock_guard<std::mutex> hold(shards_[shard].lock);
    return shards_[shard].cache->stats();
  }

 private:
  // One shard per 64-byte-aligned element: its lock and its cache never share a line with
  // another shard's. (std::optional only because block_cache has no default constructor; it is
  // engaged for the object's whole life after construction.)
  struct alignas(64) shard {
    std::mutex lock;
    std::optional<shard_type> cache;
  };

  static std::uint32_t checked_shards(const config& cfg) {
    if (cfg.shards == 0 || cfg.shards > max_shards) {
      throw std::invalid_argument("sharded_block_cache: shards must be in [1, 64]");
    }
    if (cfg.capacity < cfg.shards) {
      throw std::invalid_argument("sharded_block_cache: capacity must be >= shards");
    }
    return cfg.shards;
  }

  access_outcome global(std::uint32_t s, access_outcome r) const noexcept {
    if (r.slot != npos) r.slot += s * stride_;
    return r;
  }

  template <class F>
  decltype(auto) with_key(block_key key, F&& f) const noexcept {
    shard& sh = shards_[shard_of(key)];
    const std::lock_guard<std::mutex> hold(sh.lock);
    return f(*sh.cache);
  }

  template <class F>
  auto sum(F&& f) const noexcept {
    decltype(f(std::declval<const shard_type&>())) total = 0;
    for (std::uint32_t i = 0; i < n_; ++i) {
      const std::lock_guard<std::mutex> hold(shards_[i].lock);
      total += f(std::as_const(*shards_[i].cache));
    }
    return total;
  }

  // The batched access: per chunk, a stable counting sort of key indices by shard, then one
  // lock per touched shard. emit(i, shard, local outcome) stores the result of keys[i].
  template <class Emit>
  void batch(std::span<const block_key> keys, access_hint hint, Emit&& emit) noexcept {
    std::uint8_t shard_at[batch_chunk];
    std::uint16_t order[batch_chunk];
    std::uint16_t start[max_shards + 1];
    for (std::size_t base = 0; base < keys.size(); base += batch_chunk) {
      const std::size_t n = std::min(batch_chunk, keys.size() - base);
      std::uint16_t count[max_shards] = {};
      for (std::size_t j = 0; j < n; ++j) {
        const std::uint32_t s = shard_of(keys[base + j]);
        shard_at[j] = static_cast<std::uint8_t>(s);
        ++count[s];
      }
      start[0] = 0;
      for (std::uint32_t s = 0; s < n_; ++s) {
        start[s + 1] = static_cast<std::uint16_t>(start[s] + count[s]);
      }
      // Stable: indices of one shard keep their order in keys. count[] becomes the write cursor.
      for (std::uint32_t s = 0; s < n_; ++s) count[s] = start[s];
      for (std::size_t j = 0; j < n; ++j) {
        order[count[shard_at[j]]++] = static_cast<std::uint16_t>(j);
      }
      for (std::uint32_t s = 0; s < n_; ++s) {
        if (start[s] == start[s + 1]) continue;
        shard& sh = shards_[s];
        shard_type& c = *sh.cache;
        const std::lock_guard<std::mutex> hold(sh.lock);
        for (std::uint32_t k = start[s]; k < start[s + 1]; ++k) c.prefetch(keys[base + order[k]]);
        for (std::uint32_t k = start[s]; k < start[s + 1]; ++k) {
          const std::size_t i = base + order[k];
          hint.depth = static_cast<std::uint32_t>(i);
          emit(i, s, c.access(keys[i], hint));
        }
      }
    }
  }

  std::uint32_t n_;
  std::uint32_t stride_ = 0;
  std::uint64_t capacity_;
  std::unique_ptr<shard[]> shards_;
};

}  // namespace kvtk
