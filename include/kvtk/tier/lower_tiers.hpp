// kvtk/tier/lower_tiers.hpp — the flat tiers of a hierarchy: the one core under both tops
// (tier_hierarchy: a flat top tier; radix_tier_hierarchy: a radix tree on top).
//
// Design
// ------
// lower_tiers<Policies> owns the hierarchy's flat tiers [first(), tiers()): first() is 0 when the
// top tier is flat too (tier_hierarchy) and 1 when the top is something else (the radix tree of
// radix_tier_hierarchy). Per tier it keeps a block_cache of that tier's policy (a std::variant
// over Policies, emplaced by name at construction), its admission filter and the depth of every
// resident block in its request ([tier][slot]); per tier of the whole hierarchy, the counters,
// the link into it and the inclusive "kept copies". The top tier's own state (the tree, the flat
// top's per-slot hit counts) stays in the top.
//
// Why one core: the eviction callback (on_evict) names only lower_tiers<Policies>, never the top,
// so block_cache<P, on_evict> is one type per (P, Policies) shared by the flat top, every radix
// leaf order and every observer (lower_type::cache_of<P> is the same type everywhere). The
// reaction to an eviction depends on the hierarchy's mode, which is data (the config), not a
// type: exclusive demotes or drops; inclusive keeps an existing lower copy (unhiding it) or
// writes back or drops. Both tops get the same code from the same instantiation.
//
// Observers: a callback cannot reach the top's Observer without naming its type, so a copy down
// made inside the core (a demotion, a write-through copy) is recorded, in the order it happened,
// in a buffer of at most max_tiers entries that the top hands to its Observer (drain()) before it
// tells the Observer anything else. An Observer therefore sees the same calls in the same order
// as when it was called from inside the cascade; no virtual or indirect call is involved. Tops
// without an observer turn recording off.
//
// Invariants (audit()): every flat tier within capacity; exclusive: no block in two flat tiers;
// inclusive: every lower copy of a block held in a higher flat tier is hidden from its policy;
// per tier, evictions == demotions + drops (+ kept copies, inclusive). Between two top-level
// operations at most max_tiers - 1 copies are pending: one insert evicts at most one block per
// tier (blocks are one unit), a cascade visits each tier once, and a write-through copy never
// cascades (its evictions write nothing back).
// No operation allocates after construction.
#pragma once

#include <array>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "kvtk/cache/block_cache.hpp"
#include "kvtk/detail/engaged_variant.hpp"
#include "kvtk/registry.hpp"
#include "kvtk/tier/admission_filter.hpp"
#include "kvtk/tier/tier_spec.hpp"

namespace kvtk::tier {

/// Counters of one tier. Blocks unless named otherwise.
struct tier_counters {
  std::uint64_t hits = 0;        ///< request-prefix blocks served by this tier
  std::uint64_t hit_tokens = 0;  ///< their tokens
  std::uint64_t promotions = 0;  ///< blocks read up from this tier (lower tiers)
  std::uint64_t writes = 0;      ///< blocks written into this tier from above (demotions, copies)
  std::uint64_t evictions = 0;   ///< blocks this tier's policy evicted
  std::uint64_t demotions = 0;   ///< evicted blocks written to the tier below
  std::uint64_t drops = 0;       ///< evicted blocks that left the hierarchy
  std::uint64_t admission_rejects = 0;  ///< writes into this tier its filter refused
  std::uint64_t no_room_rejects = 0;    ///< writes into this tier refused because all was pinned
  std::uint64_t superseded = 0;  ///< exclusive: copies discarded because the block was recomputed
};

/// Traffic on the link between tier l-1 and tier l (index l; link 0 is unused).
struct link_counters {
  std::uint64_t blocks_up = 0, blocks_down = 0;
};

/// What a hierarchy tells an executor that moves real bytes (the default does nothing and costs
/// nothing). Slots are the tiers' block_cache slots, stable while a block is resident.
struct no_tier_observer {
  /// A request begins (its promotions are staged afresh).
  void request_started() noexcept {}
  /// A promotion is about to happen: the block's bytes at (tier, slot) must be read now (the slot
  /// may be reused before the block lands in tier 0).
  void staged(std::size_t, std::uint32_t, block_key) noexcept {}
  /// The block now occupies (tier, slot): from what was staged, or freshly computed.
  void placed(std::size_t, std::uint32_t, block_key, bool /*from_staging*/) noexcept {}
  /// A copy down: the block's bytes at (from_tier, from_slot) go to (to_tier, to_slot). Called
  /// before from_slot can be reused.
  void copied(std::size_t, std::uint32_t, std::size_t, std::uint32_t, block_key) noexcept {}
};

/// A copy down the hierarchy made inside the core, waiting for the top's observer.
struct tier_copy {
  std::uint32_t from = 0, from_slot = 0, to = 0, to_slot = 0;
  block_key key = 0;
};

/// Requires: nothing.  Effects: checks a hierarchy config (everything but the policy names).
/// Complexity: O(tiers).
/// Throws: std::invalid_argument naming the tier and the problem: no tiers or more than 8,
/// capacity 0 or >= 2^31, exclusive with a write-through policy, write_through_selective with
/// selective_hits 0, inclusive with a tier smaller than the one above it (its copies of the
/// blocks above would fill it), a negative or non-finite link, price or endurance figure, a bad
/// admission threshold or half-life.
inline void validate_hierarchy(const hierarchy_config& cfg) {
  if (cfg.tiers.empty() || cfg.tiers.size() > 8) {
    throw std::invalid_argument("tier hierarchy: 1 to 8 tiers");
  }
  if (cfg.mode == inclusion::exclusive && cfg.write.kind != write_policy::write_back) {
    throw std::invalid_argument(
        "tier hierarchy: an exclusive hierarchy moves blocks down on eviction (write-back); "
        "write-through needs --inclusive");
  }
  if (cfg.write.kind == write_policy::write_through_selective && cfg.write.selective_hits == 0) {
    throw std::invalid_argument("tier hierarchy: write_through_selective needs >= 1 hit");
  }
  for (std::size_t t = 0; t < cfg.tiers.size(); ++t) {
    const tier_spec& s = cfg.tiers[t];
    if (s.capacity_blocks == 0 || s.capacity_blocks >= (1ull << 31)) {
      throw std::invalid_argument("tier " + s.name + ": capacity must be in [1, 2^31) blocks");
    }
    for (double v : {s.read_bytes_per_s, s.write_bytes_per_s, s.latency_s, s.read_per_block_s,
                     s.write_per_block_s, s.write_latency_s, s.usd_per_gb_month, s.endurance_tbw}) {
      if (!(v >= 0) || !std::isfinite(v)) {
        throw std::invalid_argument("tier " + s.name + ": link, price and endurance figures must "
                                    "be finite and >= 0");
      }
    }
    if (!(s.admit.threshold >= 0) || !(s.admit.half_life_requests > 0)) {
      throw std::invalid_argument("tier " + s.name + ": admission threshold >= 0, half-life > 0");
    }
    if (cfg.mode == inclusion::inclusive && t > 0 &&
        s.capacity_blocks < cfg.tiers[t - 1].capacity_blocks) {
      throw std::invalid_argument("tier " + s.name + ": an inclusive tier must be at least as "
                                  "large as the tier above it");
    }
  }
}

template <class Policies = all_policies>
class lower_tiers;

/// Thread safety: as block_cache: distinct cores are independent; one needs external
/// synchronisation for every call. Tier numbers are the hierarchy's (0 = the top).
template <class... Ps>
class lower_tiers<type_list<Ps...>> {
 public:
  /// A flat tier's eviction callback: names the core and the tier, nothing of the top.
  struct on_evict {
    lower_tiers* owner;
    std::uint32_t tier;
    void operator()(block_key key, std::uint32_t slot) const noexcept {
      owner->evicted(tier, key, owner->depth_[tier][slot], slot);
    }
  };
  /// The cache type of a flat tier of policy P: the same for every top over these Policies.
  template <class P>
  using cache_of = block_cache<P, on_evict>;
  using any_cache = std::variant<std::monostate, cache_of<Ps>...>;

  static constexpr std::size_t max_tiers = 8;
  static constexpr std::uint32_t npos = ~std::uint32_t{0};

  /// Requires: first <= 1 (the top is flat, or one non-flat tier sits above).
  /// Effects: builds every tier's cache from tier `first` on, and every tier's filter and side
  /// arrays (all allocation happens here). record_copies: keep copies down for drain().
  /// Throws: as validate_hierarchy; std::invalid_argument "tier X: unknown policy 'Y' (known:
  /// ...)" for a flat tier whose policy is not in Policies; std::bad_alloc.
  lower_tiers(hierarchy_config cfg, std::size_t first, bool record_copies)
      : cfg_(std::move(cfg)), first_(first), record_copies_(record_copies) {
    validate_hierarchy(cfg_);
    const std::size_t n = cfg_.tiers.size();
    tiers_.resize(n);  // tiers below first_ stay empty
    depth_.resize(n);
    for (std::size_t t = first_; t < n; ++t) {
      const tier_spec& s = cfg_.tiers[t];
      tiers_[t] = std::make_unique<any_cache>();
      try {  // the one name -> type lookup (kvtk/detail/visit_named.hpp), over this list
        kvtk::detail::visit_named<type_list<Ps...>, unknown_policy>(
            s.policy, "policy", [&]<class P>() { emplace<P>(t, s); });
      } catch (const unknown_policy& e) {
        throw std::invalid_argument("tier " + s.name + ": " + e.what());
      }
      depth_[t].assign(s.capacity_blocks, 0);
    }
    for (std::size_t t = 0; t < n; ++t) {
      // Tier 0's filter is never asked: nothing is written into the top from above.
      filters_.emplace_back(t == 0 ? admission{} : cfg_.tiers[t].admit);
      any_filter_ |= t > 0 && cfg_.tiers[t].admit.kind != admission::always;
    }
    counters_.assign(n, {});
    links_.assign(n, {});
  }
  // The callbacks hold `this`: the core never moves.
  lower_tiers(const lower_tiers&) = delete;
  lower_tiers& operator=(const lower_tiers&) = delete;

  [[nodiscard]] std::size_t tiers() const noexcept { return cfg_.tiers.size(); }
  /// The first flat tier (0 or 1).
  [[nodiscard]] std::size_t first() const noexcept { return first_; }
  [[nodiscard]] const hierarchy_config& config() const noexcept { return cfg_; }
  [[nodiscard]] const tier_counters& counters(std::size_t t) const noexcept { return counters_[t]; }
  [[nodiscard]] const link_counters& link(std::size_t l) const noexcept { return links_[l]; }
  /// Evicted blocks of tier t that left it while a lower copy already existed (inclusive only).
  [[nodiscard]] std::uint64_t kept_copies(std::size_t t) const noexcept { return kept_[t]; }

  /// Requires: first() <= t < tiers().  Effects: returns f(c) for tier t's block_cache c.
  /// Complexity: one variant dispatch plus f.  Throws: nothing (f must not throw).
  template <class F>
  decltype(auto) with(std::size_t t, F&& f) noexcept {
    return kvtk::detail::visit_engaged(*tiers_[t], f);  // every flat tier is emplaced
  }
  template <class F>
  decltype(auto) with(std::size_t t, F&& f) const noexcept {
    return const_cast<lower_tiers*>(this)->with(
        t, [&](auto& c) -> decltype(auto) { return f(std::as_const(c)); });
  }

  /// Requires: first() <= t < tiers().  Effects: whether tier t holds `key` (hidden or not).
  /// Complexity: O(1) expected.  Throws: nothing.
  [[nodiscard]] bool holds(std::size_t t, block_key key) const noexcept {
    return with(t, [&](const auto& c) { return c.contains(key); });
  }
  /// Requires: first() <= t < tiers().  Effects: `key`'s slot in tier t, or npos.
  [[nodiscard]] std::uint32_t find(std::size_t t, block_key key) const noexcept {
    return with(t, [&](const auto& c) { return c.find(key); });
  }
  /// Effects: the first tier >= 1 holding `key`, or tiers() when none does.
  /// Complexity: O(tiers).  Throws: nothing.
  [[nodiscard]] std::size_t lower_tier_of(block_key key) const noexcept {
    for (std::size_t t = 1; t < tiers(); ++t) {
      if (holds(t, key)) return t;
    }
    return tiers();
  }
  /// Requires: first() <= t < tiers().  Effects: blocks resident in tier t.
  [[nodiscard]] std::size_t resident(std::size_t t) const noexcept {
    return with(t, [](const auto& c) { return c.size(); });
  }

  /// Effects: starts a request: advances the filters' clock and records every key in every
  /// lower tier's admission filter.  Complexity: O(keys x tiers) with a filter, else O(1).
  void begin_request(std::span<const block_key> keys) noexcept {
    ++now_;
    if (!any_filter_) return;
    for (const block_key k : keys) {
      for (std::size_t t = 1; t < filters_.size(); ++t) filters_[t].record(k, now_);
    }
  }
  /// Effects: starts every flat tier's table misses for the request's keys (a hint only).
  void prefetch(std::span<const block_key> keys) const noexcept {
    for (std::size_t t = first_; t < tiers(); ++t) {
      with(t, [&](const auto& c) {
        for (const block_key k : keys) c.prefetch(k);
      });
    }
  }

  /// Effects: counts a hit of `tokens` tokens served by tier t (any tier, the top included).
  void count_hit(std::size_t t, std::uint64_t tokens) noexcept {
    ++counters_[t].hits;
    counters_[t].hit_tokens += tokens;
  }
  /// Effects: counts a promotion from tier s >= 1: a read up every link from s to tier 1.
  void count_promotion(std::size_t s) noexcept {
    ++counters_[s].promotions;
    for (std::size_t l = s; l >= 1; --l) ++links_[l].blocks_up;
  }
  /// Effects: counts an eviction of tier t that writes nothing down because tier t still holds
  /// the block in another slot (an engine top's duplicate): an eviction and a drop.
  void count_eviction_dropped(std::size_t t) noexcept {
    ++counters_[t].evictions;
    ++counters_[t].drops;
  }
  /// Effects: counts a stale copy discarded from tier s (its block was recomputed).
  void count_superseded(std::size_t s) noexcept { ++counters_[s].superseded; }
  /// Effects: counts a write into tier t refused for room (the top's own refusals).
  void count_no_room(std::size_t t) noexcept { ++counters_[t].no_room_rejects; }

  /// Requires: first() <= s < tiers().  Effects: erases `key` from tier s (no eviction, nothing
  /// counted).  Complexity: the policy's erase.  Throws: nothing.
  erase_result take(std::size_t s, block_key key) noexcept {
    return with(s, [&](auto& c) { return c.erase(key); });
  }
  /// Requires: first() <= t < tiers(), slot resident in t.  Effects: records the block's depth.
  void set_depth(std::size_t t, std::uint32_t slot, std::uint32_t depth) noexcept {
    depth_[t][slot] = depth;
  }

  /// Requires: first() <= u < tiers().
  /// Effects: writes `key` into tier u from above, admission permitting (admission_rejects
  /// otherwise); no room (all pinned) counts no_room_rejects. count_write: a newly inserted block
  /// counts as a write of u and a block down link u. May evict in u and cascade below.
  /// Returns: its slot in u, or npos when refused.
  /// Complexity: O(1) plus the policies' costs, per tier of the cascade.  Throws: nothing.
  std::uint32_t insert_into(std::size_t u, block_key key, std::uint32_t depth,
                            bool count_write) noexcept {
    if (!filters_[u].admit(key, now_)) {
      ++counters_[u].admission_rejects;
      return npos;
    }
    return place(u, key, depth, count_write);
  }
  /// Requires: first() <= u < tiers().
  /// Effects: puts `key` back into tier u, where it was taken from: no admission check, not a
  /// write (as its policy's newest; may evict and cascade). Returns whether it landed.
  bool put_back(std::size_t u, block_key key, std::uint32_t depth) noexcept {
    return place(u, key, depth, false) != npos;
  }

  /// Requires: t < tiers(); t >= first() - 1 (a flat tier, or the non-flat top).
  /// Effects: tier t evicted `key` (request depth `depth`, from `slot`): exclusive: demoted into
  /// t+1 (admission and room permitting) or dropped; inclusive: an existing lower copy is kept
  /// (and unhidden), else written back (write_back) or dropped. Tier t must not be re-entered:
  /// only tiers below it are touched.
  /// Complexity: O(tiers) probes plus the cascade's inserts.  Throws: nothing.
  void evicted(std::size_t t, block_key key, std::uint32_t depth, std::uint32_t slot) noexcept {
    ++counters_[t].evictions;
    const std::size_t below = t + 1;
    if (cfg_.mode == inclusion::inclusive) {
      // The first lower copy loses its protection: nothing above it holds the block any more
      // (a block held above t is hidden in t, so never evicted from t).
      for (std::size_t u = below; u < tiers(); ++u) {
        if (!holds(u, key)) continue;
        with(u, [&](auto& c) {
          access_hint hint;
          hint.depth = depth_[u][c.find(key)];
          c.unhide(key, hint);
        });
        ++kept_[t];
        return;
      }
      if (cfg_.write.kind != write_policy::write_back) {
        ++counters_[t].drops;
        return;
      }
    }
    if (below == tiers()) {
      ++counters_[t].drops;
      return;
    }
    if (const std::uint32_t to = insert_into(below, key, depth, true); to != npos) {
      record({static_cast<std::uint32_t>(t), slot, static_cast<std::uint32_t>(below), to, key});
      ++counters_[t].demotions;
    } else {
      ++counters_[t].drops;
    }
  }

  /// Requires: t < tiers().  Effects: inclusive: hides every visible copy of `key` below tier t
  /// (it is held in t). Complexity: O(tiers).  Throws: nothing.
  void hide_below(std::size_t t, block_key key) noexcept {
    for (std::size_t u = t + 1; u < tiers(); ++u) {
      with(u, [&](auto& c) { c.hide(key); });  // no-op when absent or already hidden
    }
  }
  /// Requires: first() == 0; tier 0 holds `key`; inclusive.
  /// Effects: write-through: copies `key` into tiers 1, 2, ... until one refuses (each copy a
  /// write, hidden: held above). Complexity: O(tiers) inserts.  Throws: nothing.
  void copy_down(block_key key, std::uint32_t depth) noexcept {
    for (std::size_t u = 1; u < tiers(); ++u) {
      if (holds(u, key)) continue;
      const std::uint32_t slot = insert_into(u, key, depth, true);
      if (slot == npos) return;
      // The bytes come from the tier above (which holds key: tier 0, or a copy made just now).
      record({static_cast<std::uint32_t>(u - 1), find(u - 1, key), static_cast<std::uint32_t>(u),
              slot, key});
      with(u, [&](auto& c) { c.hide(key); });
    }
  }

  /// Effects: calls obs.copied for every copy made since the last drain, in order, and forgets
  /// them. A top calls it after each core call that can evict, before any other observer call.
  /// Complexity: O(copies).  Throws: nothing.
  template <class Observer>
  void drain(Observer& obs) noexcept {
    for (std::uint32_t i = 0; i < pending_; ++i) {
      const tier_copy& c = copies_[i];
      obs.copied(c.from, c.from_slot, c.to, c.to_slot, c.key);
    }
    pending_ = 0;
  }

  /// Effects: checks the invariants (header comment) of tiers first()..; returns the first
  /// problem, or an empty string.  Complexity: O(resident blocks x tiers).  Throws: bad_alloc.
  [[nodiscard]] std::string audit() const {
    for (std::size_t t = first_; t < tiers(); ++t) {
      if (std::string err = audit_tier(t); !err.empty()) return err;
      if (!balanced(t)) {
        return "tier " + cfg_.tiers[t].name + ": evictions != demotions + drops (+ kept copies)";
      }
    }
    return {};
  }
  /// Effects: whether tier t's evictions == demotions + drops (+ kept copies).
  [[nodiscard]] bool balanced(std::size_t t) const noexcept {
    const tier_counters& c = counters_[t];
    return c.evictions == c.demotions + c.drops + kept_[t];  // kept_ is 0 unless inclusive
  }

 private:
  template <class P>
  void emplace(std::size_t t, const tier_spec& s) {
    typename cache_of<P>::config c{};
    c.capacity = s.capacity_blocks;
    tiers_[t]->template emplace<cache_of<P>>(c, on_evict{this, static_cast<std::uint32_t>(t)});
  }

  // insert_into without the admission check.
  std::uint32_t place(std::size_t u, block_key key, std::uint32_t depth,
                      bool count_write) noexcept {
    access_hint hint;
    hint.depth = depth;
    const access_outcome o = with(u, [&](auto& c) { return c.insert(key, hint); });
    if (o.result == access_result::rejected) {
      ++counters_[u].no_room_rejects;
      return npos;
    }
    depth_[u][o.slot] = depth;
    if (count_write && o.result == access_result::inserted) {
      ++counters_[u].writes;
      ++links_[u].blocks_down;
    }
    return o.slot;
  }

  void record(const tier_copy& c) noexcept {
    if (!record_copies_) return;
    assert(pending_ < copies_.size());  // bounded (header comment)
    if (pending_ < copies_.size()) copies_[pending_++] = c;
  }

  // Tier t's structure: within capacity; no block also in a lower tier (exclusive), or every
  // lower copy hidden (inclusive).
  [[nodiscard]] std::string audit_tier(std::size_t t) const {
    std::string err;
    with(t, [&](const auto& c) {
      if (c.used() > c.capacity()) err = "tier " + cfg_.tiers[t].name + " over capacity";
      c.for_each([&](const auto& n) {
        for (std::size_t u = t + 1; u < tiers() && err.empty(); ++u) {
          if (!holds(u, n.key)) continue;
          if (cfg_.mode == inclusion::exclusive) {
            err = "exclusive: a block is in tiers " + cfg_.tiers[t].name + " and " +
                  cfg_.tiers[u].name;
          } else if (!with(u, [&](const auto& lower) { return lower.hidden(n.key); })) {
            err = "inclusive: a copy in " + cfg_.tiers[u].name + " of a block held in " +
                  cfg_.tiers[t].name + " is not protected";
          }
        }
      });
    });
    return err;
  }

  hierarchy_config cfg_;
  std::vector<std::unique_ptr<any_cache>> tiers_;  // [tier]; null below first_
  std::vector<std::vector<std::uint32_t>> depth_;  // [tier][slot]: the block's request position
  std::vector<admission_filter> filters_;          // [tier]; tier 0's admits everything
  std::vector<tier_counters> counters_;            // [tier], the top's included
  std::vector<link_counters> links_;               // [tier]
  std::array<std::uint64_t, max_tiers> kept_{};    // [tier]
  std::array<tier_copy, max_tiers> copies_{};      // pending copies, for drain()
  std::uint32_t pending_ = 0;
  std::uint64_t now_ = 0;  // requests begun: the admission filters' clock
  std::size_t first_;
  bool record_copies_;
  bool any_filter_ = false;
};

}  // namespace kvtk::tier
