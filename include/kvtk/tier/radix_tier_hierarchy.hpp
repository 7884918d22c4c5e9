// kvtk/tier/radix_tier_hierarchy.hpp — a tier hierarchy whose top tier is a radix tree
// (prefix_tree: leaf-only eviction) over flat block-cache tiers, and its prefix-replay index.
//
// Design
// ------
// Tier 0 is a prefix_tree<Leaf> of tiers[0].capacity_blocks blocks (tiers[0].policy names the
// leaf order, or is empty); tiers 1.. are block_caches of their core policies, held as in
// tier_hierarchy (a variant over Policies, eviction callback = demotion). Every tree node carries
// its block's depth in its request as payload, so a demoted block keeps its depth hint below.
// Exclusive only: a block lives in one tier at most. Tiers 1.. are the shared core lower_tiers
// (lower_tiers.hpp, with first() == 1), the one tier_hierarchy uses too: the tree's evictions
// enter its demotion cascade at tier 0.
//
// Semantics (pinned; tests depend on them). For a request with blocks k_0..k_{n-1}:
//  0. Every key is recorded in every lower tier's admission filter.
//  1. Before any update: m = the tree's match length (leading keys resident as a path from the
//     root). The hit length h >= m continues the match with the leading run of k_m, k_m+1, ...
//     each resident in some lower tier. Block i < m is served by tier 0, block m <= i < h by the
//     lower tier holding it; each counts as a hit (and its tokens) of the tier serving it.
//  2. The blocks k_m..k_h-1 are staged: erased from their lower tiers (no eviction), before
//     anything else changes (a key repeated in the run is taken once).
//  3. The tree is updated as radix_index (prefix/replay.hpp) updates it: begin_request(matched
//     path) when the leaf order's state has it; the matched path locked and touched in forward
//     order (access hint depth i); then k_m, k_m+1, ... inserted one by one as a chain below the
//     matched node (hint depth i; each new node locked); all locks released after the request.
//     Just before block i >= h is inserted, a lower-tier copy of it is erased (it was recomputed:
//     counted as superseded in that tier). A staged block that lands in the tree is a promotion
//     of the tier it came from (promotions there, blocks_up on every link from it to tier 1).
//  4. Inserting into a full tree evicts the evictable (unlocked, childless) leaf of smallest rank.
//     It is demoted: written into tier 1 when its admission filter admits it and it can make
//     room (a write of tier 1, blocks_down of link 1, a demotion of tier 0), else dropped; with
//     no lower tier it is dropped. A write into a full flat tier t evicts t's policy victim,
//     which goes to tier t+1 the same way, or is dropped from the last tier.
//  5. When an insert fails (no evictable leaf: the tree is full of locked nodes; or the key is
//     resident elsewhere in the tree), the request's insertion stops there. The block that failed
//     and the staged blocks after it go back, in request order, to the tier each was taken from:
//     a plain insertion there (as its policy's newest, no admission check, not a write; it may
//     evict, as in 4). They are not promotions. Tier 0 counts the failure as a no-room reject.
// With one tier, h = m and the updates are radix_index<Leaf>'s exactly: a one-tier radix
// hierarchy replays as radix_index<Leaf> does (the same hits per request, the same evictions).
//
// Invariants (audit()): the tree's own audit; every tier within capacity; no block in two tiers;
// per tier, evictions == demotions + drops.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvtk/prefix/prefix_tree.hpp"
#include "kvtk/registry.hpp"
#include "kvtk/tier/lower_tiers.hpp"
#include "kvtk/tier/tier_index.hpp"
#include "kvtk/tier/tier_spec.hpp"

namespace kvtk::tier {

template <prefix::leaf_policy Leaf, class Policies = all_policies>
class radix_tier_hierarchy;

/// Thread safety: as tier_hierarchy — distinct hierarchies are independent; one needs external
/// synchronisation for every call. The tiers' eviction callbacks run inside process().
template <prefix::leaf_policy Leaf, class... Ps>
class radix_tier_hierarchy<Leaf, type_list<Ps...>> {
 public:
  /// Tiers 1..: the core shared with tier_hierarchy (and every other leaf order).
  using lower_type = lower_tiers<type_list<Ps...>>;
  static constexpr std::size_t max_tiers = lower_type::max_tiers;
  /// The top tier: a radix tree whose payload is the block's depth in its request.
  using tree_type = prefix::prefix_tree<Leaf, std::uint32_t>;

  /// Requires: a valid config: as tier_hierarchy's, exclusive and write-back, tiers[0].policy
  /// empty or Leaf's name, an online leaf order.
  /// Effects: builds the tree, every lower tier's cache and filter (all allocation happens here).
  /// Throws: std::invalid_argument naming the problem (an inclusive or write-through hierarchy,
  /// a mismatched or offline leaf order, an unknown lower-tier policy, and tier_hierarchy's
  /// checks); std::bad_alloc.
  explicit radix_tier_hierarchy(hierarchy_config cfg)
      : tree_(make_tree(cfg)), core_(std::move(cfg), 1, false) {}
  radix_tier_hierarchy(const radix_tier_hierarchy&) = delete;
  radix_tier_hierarchy& operator=(const radix_tier_hierarchy&) = delete;

  /// The number of tiers, the config, tier t's counters, link l's traffic (t, l < tiers()) and
  /// the tree.  Complexity: O(1).  Throws: nothing.
  [[nodiscard]] std::size_t tiers() const noexcept { return core_.tiers(); }
  [[nodiscard]] const hierarchy_config& config() const noexcept { return core_.config(); }
  [[nodiscard]] const tier_counters& counters(std::size_t t) const noexcept {
    return core_.counters(t);
  }
  [[nodiscard]] const link_counters& link(std::size_t l) const noexcept { return core_.link(l); }
  [[nodiscard]] const tree_type& tree() const noexcept { return *tree_; }

  /// Requires: t < tiers().  Effects: whether tier t holds `key` (tier 0: anywhere in the tree).
  /// Complexity: O(1) expected.  Throws: nothing.
  [[nodiscard]] bool holds(std::size_t t, block_key key) const noexcept {
    if (t == 0) return tree_->find(key) != tree_type::root;
    return core_.holds(t, key);
  }
  /// Effects: the tier holding `key`, or tiers() when none does.
  /// Complexity: O(tiers).  Throws: nothing.
  [[nodiscard]] std::size_t tier_of(block_key key) const noexcept {
    return holds(0, key) ? 0 : core_.lower_tier_of(key);
  }
  /// Requires: t < tiers().  Effects: blocks resident in tier t.  Complexity: O(1).
  [[nodiscard]] std::size_t resident(std::size_t t) const noexcept {
    if (t == 0) return tree_->size();
    return core_.resident(t);
  }
  /// Requires: t < tiers().  Effects: 0: the hierarchy is exclusive (a block evicted from a tier
  /// never leaves a copy below); here so that both tops answer the same calls.
  [[nodiscard]] std::uint64_t kept_copies(std::size_t t) const noexcept {
    return core_.kept_copies(t);
  }

  /// Processes one request's blocks (the semantics above). `served` receives, for each block of
  /// the hit run, the tier that served it; `token_of(i)` gives block i's tokens (for hit
  /// tokens). Returns the hit length.  Requires: served.size() >= keys.size().
  /// Complexity: O(tiers) probes per block plus the tree's and the policies' costs.
  /// Throws: std::bad_alloc (the path buffer grows to the longest request).
  template <class TokensOf>
  std::uint32_t process(std::span<const block_key> keys, std::span<std::uint8_t> served,
                        const access_hint& base, TokensOf&& token_of) {
    if (path_.size() < keys.size()) {
      path_.resize(keys.size());
      from_.resize(keys.size());
    }
    core_.begin_request(keys);
    // Session-aware leaf orders hear every request first, as in radix_index::process.
    if constexpr (requires { tree_->leaf_state().on_request(base); }) tree_->leaf_state().on_request(base);
    const std::span<std::uint32_t> path(path_.data(), keys.size());
    const auto m = tree_->match(keys, path);
    // 1. The hit run.
    std::uint32_t h = 0;
    for (; h < keys.size(); ++h) {
      const std::size_t t = h < m.length ? 0 : core_.lower_tier_of(keys[h]);
      if (t == tiers()) break;
      served[h] = static_cast<std::uint8_t>(t);
      core_.count_hit(t, token_of(h));
    }
    // 2. Stage the blocks to promote.
    for (std::uint32_t i = m.length; i < h; ++i) {
      // A key repeated in the hit run is taken once (the repeat has nothing to give back).
      const bool taken = core_.take(served[i], keys[i]) == erase_result::erased;
      from_[i] = taken ? served[i] : static_cast<std::uint8_t>(tiers());
    }
    const std::uint32_t i = update_tree(keys, path, m.length, m.node, h, base);
    if (i < keys.size()) {
      // 5. The insert failed: the block and the staged ones after it go back.
      core_.count_no_room(0);
      for (std::uint32_t j = i; j < std::max(h, i + 1); ++j) {
        if (from_[j] < tiers()) core_.put_back(from_[j], keys[j], j);
      }
    }
    tree_->unlock_path(path.first(i));
    return h;
  }

  /// Effects: checks the invariants (header comment); returns the first problem, or an empty
  /// string when sound.  Complexity: O(resident blocks x tiers).  Throws: std::bad_alloc.
  [[nodiscard]] std::string audit() const {
    if (std::string e = tree_->audit(); !e.empty()) return "tree: " + e;
    if (tree_->size() > tree_->capacity()) return "tree over capacity";
    std::string err;
    tree_->for_each([&](std::uint32_t, const auto& n) {
      if (const std::size_t u = core_.lower_tier_of(n.key); err.empty() && u != tiers()) {
        err = "exclusive: a block is in the tree and in " + config().tiers[u].name;
      }
    });
    if (err.empty()) err = core_.audit();
    if (err.empty() && !core_.balanced(0)) {
      err = "tier " + config().tiers[0].name + ": evictions != demotions + drops";
    }
    return err;
  }

 private:
  // Effects: the constructor's checks, then the tree (before the lower tiers, as their policy
  // names are checked last).
  static std::unique_ptr<tree_type> make_tree(const hierarchy_config& cfg) {
    validate(cfg);
    return std::make_unique<tree_type>(
        typename tree_type::config{static_cast<std::uint32_t>(cfg.tiers[0].capacity_blocks)});
  }

  static void validate(const hierarchy_config& cfg) {
    if (cfg.mode != inclusion::exclusive) {
      throw std::invalid_argument(
          "radix tier hierarchy: only exclusive hierarchies (inclusive is not supported: a tree "
          "leaf evicted is moved down, never copied)");
    }
    if (cfg.write.kind != write_policy::write_back) {
      throw std::invalid_argument(
          "radix tier hierarchy: only write-back (an exclusive hierarchy moves blocks down on "
          "eviction; write-through is not supported)");
    }
    validate_hierarchy(cfg);
    if (!cfg.tiers[0].policy.empty() && cfg.tiers[0].policy != Leaf::name) {
      throw std::invalid_argument("tier " + cfg.tiers[0].name + ": the radix tier's policy '" +
                                  cfg.tiers[0].policy + "' is not its leaf order '" +
                                  std::string(Leaf::name) + "'");
    }
    if constexpr (requires { Leaf::offline; }) {
      throw std::invalid_argument("radix tier hierarchy: the offline leaf order '" +
                                  std::string(Leaf::name) + "' needs next uses it does not have");
    }
  }

  // 3. (and 4. through the demotion callback): updates the tree as radix_index does, from the
  // matched node `at` (m = the match length; h = the hit length). Returns the position where
  // the insertion stopped (keys.size() when every block went in); the path up to it is locked.
  std::uint32_t update_tree(std::span<const block_key> keys, std::span<std::uint32_t> path,
                            std::uint32_t m, typename tree_type::handle at, std::uint32_t h,
                            const access_hint& base) {
    access_hint hint = base;
    auto hint_for = [&](std::size_t i) -> const access_hint& {
      hint.depth = static_cast<std::uint32_t>(i);
      return hint;
    };
    if constexpr (requires { tree_->leaf_state().begin_request(path.first(m)); }) {
      tree_->leaf_state().begin_request(path.first(m));
    }
    tree_->lock_and_touch_path(path.first(m), hint_for);
    auto demote = [this](block_key k, std::uint32_t slot, const std::uint32_t& depth) {
      core_.evicted(0, k, depth, slot);
    };
    std::uint32_t i = m;
    for (; i < keys.size(); ++i) {
      const block_key k = keys[i];
      if (i >= h) {
        from_[i] = static_cast<std::uint8_t>(core_.lower_tier_of(k));
        if (from_[i] < tiers()) {
          core_.take(from_[i], k);
          core_.count_superseded(from_[i]);
        }
      }
      const auto ins = tree_->insert(
          at, keys.subspan(i, 1), demote,
          [&](std::uint32_t) -> const access_hint& { return hint_for(i); },
          [&](std::uint32_t) { return i; }, path.subspan(i, 1));
      if (ins.inserted == 0) break;
      at = ins.node;
      if (i < h && from_[i] < tiers()) core_.count_promotion(from_[i]);
    }
    return i;
  }

  std::unique_ptr<tree_type> tree_;
  lower_type core_;                  // tiers 1..; tier 0's counters
  std::vector<std::uint32_t> path_;  // the request's tree slots
  std::vector<std::uint8_t> from_;   // the request's blocks' source tiers
};

/// A radix tier hierarchy as a prefix-replay index (kvtk::prefix::replay), with the per-request
/// load time each lower tier adds (tier_index.hpp's model).
/// Thread safety: as block_cache (one index per thread; the trace may be shared).
template <prefix::leaf_policy Leaf, class Policies = all_policies>
using radix_tier_index = hierarchy_index<radix_tier_hierarchy<Leaf, Policies>>;

}  // namespace kvtk::tier
