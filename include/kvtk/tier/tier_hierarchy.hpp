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
// write_through_selective).
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

#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
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
  /// A promotion is about to happen: the block's bytes at (tier, slot) must be read now (the slot
  /// may be reused before the block lands in tier 0).
  void staged(std::size_t, std::uint32_t, block_key) noexcept {}
  /// The block now occupies (tier, slot): from what was staged, or freshly computed.
  void placed(std::size_t, std::uint32_t, block_key, bool /*from_staging*/) noexcept {}
  /// A copy down: the block's bytes at (from_tier, from_slot) go to (to_tier, to_slot). Called
  /// before from_slot can be reused.
  void copied(std::size_t, std::uint32_t, std::size_t, std::uint32_t, block_key) noexcept {}
};

template <class Policies = all_policies, class Observer = no_tier_observer>
class tier_hierarchy;

/// Thread safety: as block_cache; the tiers' callbacks and Observer run inside process().
template <class... Ps, class Observer>
class tier_hierarchy<type_list<Ps...>, Observer> {
  struct on_evict {
    tier_hierarchy* h;
    std::uint32_t tier;
    void operator()(block_key key, std::uint32_t slot) const noexcept {
      h->evicted(tier, key, slot);
    }
  };
  template <class P>
  using cache_of = block_cache<P, on_evict>;
  using any_cache = std::variant<std::monostate, cache_of<Ps>...>;

 public:
  static constexpr std::size_t max_tiers = 8;

  /// Requires: a valid config (below).
  /// Effects: builds every tier's cache, filter and side arrays (all allocation happens here).
  /// Throws: std::invalid_argument naming the tier and the problem: no tiers or more than 8,
  /// capacity 0 or >= 2^31, an unknown policy, exclusive with a write-through policy,
  /// write_through_selective with selective_hits 0, inclusive with a tier smaller than the one
  /// above it (its copies of the blocks above would fill it), a negative or non-finite link
  /// figure; std::bad_alloc.
  explicit tier_hierarchy(hierarchy_config cfg, Observer observer = {})
      : cfg_(std::move(cfg)), obs_(std::move(observer)) {
    validate(cfg_);
    const std::size_t n = cfg_.tiers.size();
    tiers_ = std::vector<std::unique_ptr<any_cache>>(n);
    for (std::size_t t = 0; t < n; ++t) {
      const tier_spec& s = cfg_.tiers[t];
      tiers_[t] = std::make_unique<any_cache>();
      bool found = false;
      ((Ps::name == s.policy ? (emplace<Ps>(t, s), found = true) : false), ...);
      if (!found) throw std::invalid_argument("tier " + s.name + ": unknown policy '" + s.policy + "'");
      depth_.emplace_back(s.capacity_blocks, 0);
      filters_.emplace_back(t == 0 ? admission{} : s.admit);
      any_filter_ |= t > 0 && s.admit.kind != admission::always;
    }
    top_hits_.assign(cfg_.tiers[0].capacity_blocks, 0);
    counters_.assign(n, {});
    links_.assign(n, {});
  }
  tier_hierarchy(const tier_hierarchy&) = delete;
  tier_hierarchy& operator=(const tier_hierarchy&) = delete;

  [[nodiscard]] std::size_t tiers() const noexcept { return tiers_.size(); }
  [[nodiscard]] const hierarchy_config& config() const noexcept { return cfg_; }
  [[nodiscard]] const tier_counters& counters(std::size_t t) const noexcept { return counters_[t]; }
  [[nodiscard]] const link_counters& link(std::size_t l) const noexcept { return links_[l]; }

  /// The fastest tier holding `key`, or tiers() when none does.  Complexity: O(tiers).
  [[nodiscard]] std::size_t tier_of(block_key key) const noexcept {
    for (std::size_t t = 0; t < tiers_.size(); ++t) {
      if (with(t, [&](const auto& c) { return c.contains(key); })) return t;
    }
    return tiers_.size();
  }
  /// Whether tier t holds `key`.
  [[nodiscard]] bool holds(std::size_t t, block_key key) const noexcept {
    return with(t, [&](const auto& c) { return c.contains(key); });
  }
  /// Effects: calls f(key, slot) for every block resident in tier t (protected copies included).
  /// Complexity: O(tier t's capacity).
  template <class F>
  void for_each_resident(std::size_t t, F&& f) const {
    with(t, [&](const auto& c) { c.for_each_slot(f); });
  }
  /// Blocks resident in tier t.
  [[nodiscard]] std::size_t resident(std::size_t t) const noexcept {
    return with(t, [](const auto& c) { return c.size(); });
  }

  /// Processes one request's blocks (the semantics above). `served` receives, for each block of
  /// the hit run, the tier that served it. `token_of(i)` gives block i's tokens (for hit tokens).
  /// Returns the hit length.  Requires: served.size() >= keys.size().
  /// Complexity: O(tiers) probes per block plus the policies' costs.  Throws: nothing.
  template <class TokensOf>
  std::uint32_t process(std::span<const block_key> keys, std::span<std::uint8_t> served,
                        const access_hint& base, TokensOf&& token_of) noexcept {
    ++now_;
    // The request's keys are known up front: start every tier's table misses now.
    for (std::size_t t = 0; t < tiers_.size(); ++t) {
      with(t, [&](const auto& c) {
        for (const block_key k : keys) c.prefetch(k);
      });
    }
    if (any_filter_) {
      for (const block_key k : keys) {
        for (std::size_t t = 1; t < filters_.size(); ++t) filters_[t].record(k, now_);
      }
    }
    std::uint32_t h = 0;
    for (; h < keys.size(); ++h) {
      const std::size_t t = tier_of(keys[h]);
      if (t == tiers_.size()) break;
      served[h] = static_cast<std::uint8_t>(t);
      ++counters_[t].hits;
      counters_[t].hit_tokens += token_of(h);
    }
    access_hint hint = base;
    for (std::uint32_t i = 0; i < keys.size(); ++i) {
      hint.depth = i;
      const block_key k = keys[i];
      const auto top = with(0, [&](auto& c) { return c.find(k); });
      if (top != npos) {
        with(0, [&](auto& c) { c.touch(top, hint); });
        if (cfg_.mode == inclusion::inclusive &&
            cfg_.write.kind == write_policy::write_through_selective &&
            ++top_hits_[top] == cfg_.write.selective_hits) {
          copy_down(k, i);
        }
        continue;
      }
      const std::size_t s = lower_tier_of(k);
      const bool promote = s < tiers_.size() && i < h;
      if (promote) {
        ++counters_[s].promotions;
        for (std::size_t l = s; l >= 1; --l) ++links_[l].blocks_up;
        obs_.staged(s, with(s, [&](auto& c) { return c.find(k); }), k);
      }
      if (s < tiers_.size() && cfg_.mode == inclusion::exclusive) {
        with(s, [&](auto& c) { c.erase(k); });
        if (!promote) ++counters_[s].superseded;
      }
      const access_outcome o = with(0, [&](auto& c) { return c.access(k, hint); });
      if (o.result == access_result::rejected) {
        // Everything in tier 0 is pinned by the engine: the block stays where it was.
        if (s < tiers_.size() && cfg_.mode == inclusion::exclusive) {
          const std::uint32_t back = insert_into(s, k, i, false);
          if (back != npos) obs_.placed(s, back, k, promote);
        }
        continue;
      }
      if (o.result == access_result::inserted) obs_.placed(0, o.slot, k, promote);
      depth_[0][o.slot] = i;
      top_hits_[o.slot] = 0;
      if (cfg_.mode == inclusion::inclusive) {
        protect_below(0, k);
        if (cfg_.write.kind == write_policy::write_through) copy_down(k, i);
      }
    }
    return h;
  }

  /// Engine pins in the top tier (a pinned block is never evicted, hence never demoted).
  bool pin(block_key key) noexcept { return with(0, [&](auto& c) { return c.pin(key); }); }
  bool unpin(block_key key) noexcept { return with(0, [&](auto& c) { return c.unpin(key); }); }

  /// Checks the invariants (header comment). Returns an empty string when sound.
  [[nodiscard]] std::string audit() const {
    for (std::size_t t = 0; t < tiers_.size(); ++t) {
      std::string err;
      with(t, [&](const auto& c) {
        if (c.used() > c.capacity()) err = "tier " + cfg_.tiers[t].name + " over capacity";
        c.for_each([&](const auto& n) {
          for (std::size_t u = t + 1; u < tiers_.size() && err.empty(); ++u) {
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
      if (!err.empty()) return err;
      const tier_counters& c = counters_[t];
      if (c.evictions != c.demotions + c.drops + (cfg_.mode == inclusion::inclusive ? kept_[t] : 0)) {
        return "tier " + cfg_.tiers[t].name + ": evictions != demotions + drops (+ kept copies)";
      }
    }
    return {};
  }

  /// Evicted blocks of tier t that left it while a lower copy already existed (inclusive).
  [[nodiscard]] std::uint64_t kept_copies(std::size_t t) const noexcept { return kept_[t]; }

 private:
  static constexpr std::uint32_t npos = ~std::uint32_t{0};

  template <class P>
  void emplace(std::size_t t, const tier_spec& s) {
    typename cache_of<P>::config c{};
    c.capacity = s.capacity_blocks;
    tiers_[t]->template emplace<cache_of<P>>(c, on_evict{this, static_cast<std::uint32_t>(t)});
  }

 public:
  /// Effects: the constructor's checks of a config, apart from the policy names.  Throws: as the
  /// constructor.  (radix_tier_hierarchy validates its lower tiers with it.)
  static void validate(const hierarchy_config& cfg) {
    if (cfg.tiers.empty() || cfg.tiers.size() > max_tiers) {
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

 private:
  template <class F>
  decltype(auto) with(std::size_t t, F&& f) noexcept {
    return kvtk::detail::visit_engaged(*tiers_[t], f);  // every tier is emplaced at construction
  }
  template <class F>
  decltype(auto) with(std::size_t t, F&& f) const noexcept {
    return const_cast<tier_hierarchy*>(this)->with(t, [&](auto& c) -> decltype(auto) {
      return f(std::as_const(c));
    });
  }

  std::size_t lower_tier_of(block_key k) const noexcept {
    for (std::size_t t = 1; t < tiers_.size(); ++t) {
      if (holds(t, k)) return t;
    }
    return tiers_.size();
  }

  // Inclusive: hides every visible lower copy of a block now held in tier t.
  void protect_below(std::size_t t, block_key k) noexcept {
    for (std::size_t u = t + 1; u < tiers_.size(); ++u) {
      with(u, [&](auto& c) { c.hide(k); });  // no-op when absent or already hidden
    }
  }

  // Writes k into tier u (from the tier above). Returns its slot there, or npos when refused.
  std::uint32_t insert_into(std::size_t u, block_key k, std::uint32_t depth,
                            bool count_write) noexcept {
    if (!filters_[u].admit(k, now_)) {
      ++counters_[u].admission_rejects;
      return npos;
    }
    access_hint hint;
    hint.depth = depth;
    const access_outcome o = with(u, [&](auto& c) { return c.insert(k, hint); });
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

  // Inclusive write-through: copies k (held in tier 0) into tiers 1, 2, ... until one refuses.
  void copy_down(block_key k, std::uint32_t depth) noexcept {
    for (std::size_t u = 1; u < tiers_.size(); ++u) {
      if (holds(u, k)) continue;
      const std::uint32_t slot = insert_into(u, k, depth, true);
      if (slot == npos) return;
      // The bytes come from the tier above (which holds k: tier 0, or a copy made just now).
      obs_.copied(u - 1, with(u - 1, [&](auto& c) { return c.find(k); }), u, slot, k);
      with(u, [&](auto& c) { c.hide(k); });  // held above
    }
  }

  // Tier t's policy evicted `key` from `slot` (called by its block_cache, which must not be
  // re-entered: only other tiers are touched here).
  void evicted(std::uint32_t t, block_key key, std::uint32_t slot) noexcept {
    ++counters_[t].evictions;
    const std::uint32_t depth = depth_[t][slot];
    const std::size_t below = t + 1;
    if (cfg_.mode == inclusion::inclusive) {
      // A lower copy exists: it stays; the first one below loses its protection (nothing above
      // it holds the block any more: a block held above t is hidden in t, so never evicted).
      for (std::size_t u = below; u < tiers_.size(); ++u) {
        if (holds(u, key)) {
          with(u, [&](auto& c) {
            access_hint hint;
            hint.depth = depth_[u][c.find(key)];
            c.unhide(key, hint);
          });
          ++kept_[t];
          return;
        }
      }
      if (cfg_.write.kind != write_policy::write_back || below == tiers_.size()) {
        ++counters_[t].drops;
        return;
      }
    } else if (below == tiers_.size()) {
      ++counters_[t].drops;
      return;
    }
    if (const std::uint32_t to = insert_into(below, key, depth, true); to != npos) {
      obs_.copied(t, slot, below, to, key);  // t's slot is not reused before this returns
      ++counters_[t].demotions;
    } else {
      ++counters_[t].drops;
    }
  }

  hierarchy_config cfg_;
  std::vector<std::unique_ptr<any_cache>> tiers_;
  std::vector<std::vector<std::uint32_t>> depth_;  // [tier][slot]: the block's request position
  std::vector<std::uint32_t> top_hits_;            // [tier-0 slot]: hits while in tier 0
  std::vector<admission_filter> filters_;
  std::vector<tier_counters> counters_;
  std::vector<link_counters> links_;
  std::array<std::uint64_t, max_tiers> kept_{};
  std::uint64_t now_ = 0;
  bool any_filter_ = false;
  [[no_unique_address]] Observer obs_;
};

}  // namespace kvtk::tier
