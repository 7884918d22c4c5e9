// kvtk/tier/tier_hierarchy.hpp — N tiers of block caches (HBM -> DRAM -> SSD -> remote) with
// inclusion, write policies, admission filters and promotion.
//
// Design
// ------
// Each tier is a block_cache of its own core policy (any registered policy, chosen at run time:
// the tier holds a std::variant over Policies, so a hierarchy over a one-policy list dispatches
// at compile time). The tier's eviction callback drives demotion, so a demotion cascade is a
// chain of inserts, one per tier, with no queue. Per tier and slot the hierarchy keeps the
// block's depth in its request (for cost-aware tiers below) and its hits in the top tier (for
// write_through_selective). The tiers, their filters, counters and cascade are the shared core
// lower_tiers (lower_tiers.hpp, with first() == 0); this class adds tier 0's processing, its hit
// counts, pins and the Observer.
//
// Semantics (pinned; tests and `kvtk replay --tiers` depend on them). For a request with blocks
// k_0..k_{n-1}:
//  1. Before any update: the hit length h = the longest leading run of blocks each resident in
//     *any* tier; block i < h is served by the fastest (lowest-numbered) tier holding it, and
//     counted as that tier's hit.
//  2. Then, forward, block i (access hint depth = i):
//     * in tier 0: a hit there (policy update). write_through_selective: its top-tier hit count
//       reaches selective_hits -> copy down (as write-through).
//     * else held in a lower tier s, i < h (a promotion): read up from s and inserted into tier
//       0. Exclusive: it leaves s (erased before the insert, so LRU-over-LRU behaves as one LRU of
//       the summed capacity). Inclusive: the copy in s stays.
//     * else (missing, or held below but past the hit run, so recomputed): inserted into tier 0;
//       exclusive: a stale lower copy is discarded (counted as superseded).
//     * inclusive + write_through: a block entering tier 0 is copied into tier 1, 2, ... down to
//       the first tier that refuses it (admission or no room).
//  3. Eviction from tier t of block v (the policy's victim while making room):
//     * exclusive: v is demoted into tier t+1 (admission permitting), or dropped from the last
//       tier.
//     * inclusive: if a lower tier holds a copy, nothing moves (the copy is unprotected if no
//       tier above it still holds v). Otherwise write_back writes v into tier t+1 (admission
//       permitting); write_through(_selective) drops it.
//     A demotion can evict in the tier below, and so on down: each tier's eviction is handled the
//     same way.
//  Inclusive protection: while tier t holds v, every lower copy of v is hidden from its tier's
//  policy (block_cache::hide: resident, never a victim), so lower tiers never evict a block held
//  above (the inclusion property, audited) and choosing a victim never walks over such copies.
//  When no tier above holds v any more, its highest lower copy re-enters that tier's policy as a
//  fresh insertion (its recency restarts when the block leaves the tier above). Pins the engine
//  places in tier 0 keep blocks there (never demoted).
//
// Invariants (audit()): every tier within capacity; exclusive: no block in two tiers;
// inclusive: every lower copy of a block held above is hidden; per-tier counters consistent.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kvtk/registry.hpp"
#include "kvtk/tier/lower_tiers.hpp"
#include "kvtk/tier/tier_spec.hpp"

namespace kvtk::tier {

template <class Policies = all_policies, class Observer = no_tier_observer>
class tier_hierarchy;

/// Thread safety: as block_cache; the tiers' callbacks and Observer run inside process().
template <class... Ps, class Observer>
class tier_hierarchy<type_list<Ps...>, Observer> {
 public:
  /// Every tier, tier 0 included: the core shared with radix_tier_hierarchy.
  using lower_type = lower_tiers<type_list<Ps...>>;
  static constexpr std::size_t max_tiers = lower_type::max_tiers;

  /// Requires: a valid config (below).
  /// Effects: builds every tier's cache, filter and side arrays (all allocation happens here).
  /// Throws: std::invalid_argument naming the tier and the problem: no tiers or more than 8,
  /// capacity 0 or >= 2^31, an unknown policy, exclusive with a write-through policy,
  /// write_through_selective with selective_hits 0, inclusive with a tier smaller than the one
  /// above it (its copies of the blocks above would fill it), a negative or non-finite link
  /// figure; std::bad_alloc.
  explicit tier_hierarchy(hierarchy_config cfg, Observer observer = {})
      : core_(std::move(cfg), 0, observed), obs_(std::move(observer)) {
    top_hits_.assign(core_.config().tiers[0].capacity_blocks, 0);
  }
  tier_hierarchy(const tier_hierarchy&) = delete;
  tier_hierarchy& operator=(const tier_hierarchy&) = delete;

  /// The number of tiers, the config, tier t's counters and link l's traffic (t, l < tiers()).
  /// Complexity: O(1).  Throws: nothing.
  [[nodiscard]] std::size_t tiers() const noexcept { return core_.tiers(); }
  [[nodiscard]] const hierarchy_config& config() const noexcept { return core_.config(); }
  [[nodiscard]] const tier_counters& counters(std::size_t t) const noexcept {
    return core_.counters(t);
  }
  [[nodiscard]] const link_counters& link(std::size_t l) const noexcept { return core_.link(l); }

  /// Effects: the fastest tier holding `key`, or tiers() when none does.
  /// Complexity: O(tiers).  Throws: nothing.
  [[nodiscard]] std::size_t tier_of(block_key key) const noexcept {
    return core_.holds(0, key) ? 0 : core_.lower_tier_of(key);
  }
  /// Requires: t < tiers().  Effects: whether tier t holds `key` (a hidden copy too).
  /// Complexity: O(1) expected.  Throws: nothing.
  [[nodiscard]] bool holds(std::size_t t, block_key key) const noexcept {
    return core_.holds(t, key);
  }
  /// Requires: t < tiers().
  /// Effects: calls f(key, slot) for every block resident in tier t (protected copies included).
  /// Complexity: O(tier t's capacity).  Throws: what f throws.
  template <class F>
  void for_each_resident(std::size_t t, F&& f) const {
    core_.with(t, [&](const auto& c) { c.for_each_slot(f); });
  }
  /// Requires: t < tiers().  Effects: blocks resident in tier t.  Complexity: O(1).
  [[nodiscard]] std::size_t resident(std::size_t t) const noexcept { return core_.resident(t); }

  /// Processes one request's blocks (the semantics above). `served` receives, for each block of
  /// the hit run, the tier that served it. `token_of(i)` gives block i's tokens (for hit tokens).
  /// Returns the hit length.  Requires: served.size() >= keys.size().
  /// Complexity: O(tiers) probes per block plus the policies' costs.  Throws: nothing.
  template <class TokensOf>
  std::uint32_t process(std::span<const block_key> keys, std::span<std::uint8_t> served,
                        const access_hint& base, TokensOf&& token_of) noexcept {
    if constexpr (requires { obs_.request_started(); }) obs_.request_started();
    core_.begin_request(keys);
    // The request's keys are known up front: start every tier's table misses now.
    core_.prefetch(keys);
    // One dispatch on tier 0's policy per request, not one per probe (the simulator's hot path).
    return core_.with(0, [&](auto& top) {
      std::uint32_t h = 0;
      for (; h < keys.size(); ++h) {
        const std::size_t t = top.contains(keys[h]) ? 0 : core_.lower_tier_of(keys[h]);
        if (t == tiers()) break;
        served[h] = static_cast<std::uint8_t>(t);
        core_.count_hit(t, token_of(h));
      }
      access_hint hint = base;
      for (std::uint32_t i = 0; i < keys.size(); ++i) {
        hint.depth = i;
        update(top, keys[i], i, i < h, hint);
      }
      return h;
    });
  }

  /// Requires: f does not throw.
  /// Effects: returns f(c) for tier 0's block_cache c (its concrete policy type), so that a
  /// caller making many lookups, pins or unpins dispatches on the policy once, not per call. f
  /// may read c and pin, unpin or touch through it; it must not insert or erase (the hierarchy's
  /// cascade would be bypassed).  Complexity: one variant dispatch plus f.  Throws: nothing.
  template <class F>
  decltype(auto) with_top(F&& f) noexcept {
    return core_.with(0, f);
  }

  /// Effects: engine pins in the top tier (a pinned block is never evicted, hence never
  /// demoted); block_cache::pin / unpin's results.  Complexity: O(1).  Throws: nothing.
  bool pin(block_key key) noexcept {
    return core_.with(0, [&](auto& c) { return c.pin(key); });
  }
  bool unpin(block_key key) noexcept {
    return core_.with(0, [&](auto& c) { return c.unpin(key); });
  }

  /// Effects: checks the invariants (header comment); returns the first problem, or an empty
  /// string when sound.  Complexity: O(resident blocks x tiers).  Throws: std::bad_alloc.
  [[nodiscard]] std::string audit() const { return core_.audit(); }

  /// Requires: t < tiers().  Effects: evicted blocks of tier t that left it while a lower copy
  /// already existed (inclusive; 0 when exclusive).  Complexity: O(1).
  [[nodiscard]] std::uint64_t kept_copies(std::size_t t) const noexcept {
    return core_.kept_copies(t);
  }

  /// Effects: the constructor's checks of a config, apart from the policy names.  Throws: as the
  /// constructor.  (validate_hierarchy, lower_tiers.hpp.)
  static void validate(const hierarchy_config& cfg) { validate_hierarchy(cfg); }

 private:
  static constexpr std::uint32_t npos = lower_type::npos;
  // The default observer ignores copies: the core need not keep them.
  static constexpr bool observed = !std::is_same_v<Observer, no_tier_observer>;

  // Copies the core made go to the observer before anything else is said (lower_tiers.hpp).
  void drain() noexcept {
    if constexpr (observed) core_.drain(obs_);
  }

  // Step 2 of the semantics for block i, key k; in_run: i < the hit length. c: tier 0's cache.
  template <class TopCache>
  void update(TopCache& c, block_key k, std::uint32_t i, bool in_run,
              const access_hint& hint) noexcept {
    const hierarchy_config& cfg = core_.config();
    const bool inclusive = cfg.mode == inclusion::inclusive;
    const std::uint32_t top = c.find(k);
    if (top != npos) {
      c.touch(top, hint);
      if (inclusive && cfg.write.kind == write_policy::write_through_selective &&
          ++top_hits_[top] == cfg.write.selective_hits) {
        core_.copy_down(k, i);
        drain();
      }
      return;
    }
    const std::size_t s = core_.lower_tier_of(k);
    const bool below = s < tiers();
    const bool promote = below && in_run;
    if (promote) {
      core_.count_promotion(s);
      obs_.staged(s, core_.find(s, k), k);
    }
    if (below && !inclusive) {
      core_.take(s, k);
      if (!promote) core_.count_superseded(s);
    }
    const access_outcome o = c.access(k, hint);
    drain();
    if (o.result == access_result::rejected) {
      // Everything in tier 0 is pinned by the engine: the block stays where it was.
      if (below && !inclusive) {
        const std::uint32_t back = core_.insert_into(s, k, i, false);
        drain();
        if (back != npos) obs_.placed(s, back, k, promote);
      }
      return;
    }
    if (o.result == access_result::inserted) obs_.placed(0, o.slot, k, promote);
    core_.set_depth(0, o.slot, i);
    top_hits_[o.slot] = 0;
    if (inclusive) {
      core_.hide_below(0, k);
      if (cfg.write.kind == write_policy::write_through) {
        core_.copy_down(k, i);
        drain();
      }
    }
  }

  lower_type core_;
  std::vector<std::uint32_t> top_hits_;  // [tier-0 slot]: hits while in tier 0
  [[no_unique_address]] Observer obs_;
};

}  // namespace kvtk::tier
