// kvtk/tier/radix_tier_hierarchy.hpp — a tier hierarchy whose top tier is a radix tree
// (prefix_tree: leaf-only eviction) over flat block-cache tiers, and its prefix-replay index.
//
// Design
// ------
// Tier 0 is a prefix_tree<Leaf> of tiers[0].capacity_blocks blocks (tiers[0].policy names the
// leaf order, or is empty); tiers 1.. are block_caches of their core policies, held as in
// tier_hierarchy (a variant over Policies, eviction callback = demotion). Every tree node carries
// its block's depth in its request as payload, so a demoted block keeps its depth hint below.
// Exclusive only: a block lives in one tier at most.
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
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "kvtk/cache/block_cache.hpp"
#include "kvtk/detail/engaged_variant.hpp"
#include "kvtk/prefix/prefix_tree.hpp"
#include "kvtk/registry.hpp"
#include "kvtk/tier/admission_filter.hpp"
#include "kvtk/tier/tier_hierarchy.hpp"
#include "kvtk/tier/tier_index.hpp"
#include "kvtk/tier/tier_spec.hpp"

namespace kvtk::tier {

template <prefix::leaf_policy Leaf, class Policies = all_policies>
class radix_tier_hierarchy;

/// Thread safety: as block_cache; the tiers' eviction callbacks run inside process().
/// Thread safety: as tier_hierarchy — distinct hierarchies are independent; one needs external
/// synchronisation for every call.
template <prefix::leaf_policy Leaf, class... Ps>
class radix_tier_hierarchy<Leaf, type_list<Ps...>> {
  struct on_evict {
    radix_tier_hierarchy* h;
    std::uint32_t tier;
    void operator()(block_key key, std::uint32_t slot) const noexcept {
      h->evicted(tier, key, h->depth_[tier][slot]);
    }
  };
  template <class P>
  using cache_of = block_cache<P, on_evict>;
  using any_cache = std::variant<std::monostate, cache_of<Ps>...>;

 public:
  static constexpr std::size_t max_tiers = 8;
  /// The top tier: a radix tree whose payload is the block's depth in its request.
  using tree_type = prefix::prefix_tree<Leaf, std::uint32_t>;

  /// Requires: a valid config: as tier_hierarchy's, exclusive and write-back, tiers[0].policy
  /// empty or Leaf's name, an online leaf order.
  /// Effects: builds the tree, every lower tier's cache and filter (all allocation happens here).
  /// Throws: std::invalid_argument naming the problem (an inclusive or write-through hierarchy,
  /// a mismatched or offline leaf order, an unknown lower-tier policy, and tier_hierarchy's
  /// checks); std::bad_alloc.
  explicit radix_tier_hierarchy(hierarchy_config cfg) : cfg_(std::move(cfg)) {
    validate(cfg_);
    tree_ = std::make_unique<tree_type>(
        typename tree_type::config{static_cast<std::uint32_t>(cfg_.tiers[0].capacity_blocks)});
    const std::size_t n = cfg_.tiers.size();
    flat_.resize(n);  // flat_[0] stays empty: tier 0 is the tree
    depth_.resize(n);
    for (std::size_t t = 1; t < n; ++t) {
      const tier_spec& s = cfg_.tiers[t];
      flat_[t] = std::make_unique<any_cache>();
      bool found = false;
      ((Ps::name == s.policy ? (emplace<Ps>(t, s), found = true) : false), ...);
      if (!found) {
        throw std::invalid_argument("tier " + s.name + ": unknown policy '" + s.policy + "'");
      }
      depth_[t].assign(s.capacity_blocks, 0);
      any_filter_ |= s.admit.kind != admission::always;
    }
    for (std::size_t t = 0; t < n; ++t) {
      filters_.emplace_back(t == 0 ? admission{} : cfg_.tiers[t].admit);
    }
    counters_.assign(n, {});
    links_.assign(n, {});
  }
  radix_tier_hierarchy(const radix_tier_hierarchy&) = delete;
  radix_tier_hierarchy& operator=(const radix_tier_hierarchy&) = delete;

  [[nodiscard]] std::size_t tiers() const noexcept { return cfg_.tiers.size(); }
  [[nodiscard]] const hierarchy_config& config() const noexcept { return cfg_; }
  [[nodiscard]] const tier_counters& counters(std::size_t t) const noexcept { return counters_[t]; }
  [[nodiscard]] const link_counters& link(std::size_t l) const noexcept { return links_[l]; }
  [[nodiscard]] const tree_type& tree() const noexcept { return *tree_; }

  /// Whether tier t holds `key` (tier 0: anywhere in the tree).
  [[nodiscard]] bool holds(std::size_t t, block_key key) const noexcept {
    if (t == 0) return tree_->find(key) != tree_type::root;
    return with(t, [&](const auto& c) { return c.contains(key); });
  }
  /// The tier holding `key`, or tiers() when none does.  Complexity: O(tiers).
  [[nodiscard]] std::size_t tier_of(block_key key) const noexcept {
    return holds(0, key) ? 0 : lower_tier_of(key);
  }
  /// Blocks resident in tier t.
  [[nodiscard]] std::size_t resident(std::size_t t) const noexcept {
    if (t == 0) return tree_->size();
    return with(t, [](const auto& c) { return c.size(); });
  }

  /// Processes one request's blocks (the semantics above). `served` receives, for each block of
  /// the hit run, the tier that served it; `token_of(i)` gives block i's tokens (for hit
  /// tokens). Returns the hit length.  Requires: served.size() >= keys.size().
  /// Complexity: O(tiers) probes per block plus the tree's and the policies' costs.
  /// Throws: std::bad_alloc (the path buffer grows to the longest request).
  template <class TokensOf>
  std::uint32_t process(std::span<const block_key> keys, std::span<std::uint8_t> served,
                        const access_hint& base, TokensOf&& token_of) {
    ++now_;
    if (path_.size() < keys.size()) {
      path_.resize(keys.size());
      from_.resize(keys.size());
    }
    if (any_filter_) {
      for (const block_key k : keys) {
        for (std::size_t t = 1; t < filters_.size(); ++t) filters_[t].record(k, now_);
      }
    }
    const std::span<std::uint32_t> path(path_.data(), keys.size());
    const auto m = tree_->match(keys, path);
    // 1. The hit run.
    std::uint32_t h = 0;
    for (; h < keys.size(); ++h) {
      const std::size_t t = h < m.length ? 0 : lower_tier_of(keys[h]);
      if (t == tiers()) break;
      served[h] = static_cast<std::uint8_t>(t);
      ++counters_[t].hits;
      counters_[t].hit_tokens += token_of(h);
    }
    // 2. Stage the blocks to promote.
    for (std::uint32_t i = m.length; i < h; ++i) {
      // A key repeated in the hit run is taken once (the repeat has nothing to give back).
      const bool taken =
          with(served[i], [&](auto& c) { return c.erase(keys[i]); }) == erase_result::erased;
      from_[i] = taken ? served[i] : static_cast<std::uint8_t>(tiers());
    }
    // 3. The tree, as radix_index updates it.
    access_hint hint = base;
    auto hint_for = [&](std::size_t i) -> const access_hint& {
      hint.depth = static_cast<std::uint32_t>(i);
      return hint;
    };
    if constexpr (requires { tree_->leaf_state().begin_request(path.first(m.length)); }) {
      tree_->leaf_state().begin_request(path.first(m.length));
    }
    tree_->lock_and_touch_path(path.first(m.length), hint_for);
    auto demote = [this](block_key k, std::uint32_t, const std::uint32_t& depth) {
      tree_evicted(k, depth);
    };
    typename tree_type::handle at = m.node;
    std::uint32_t i = m.length;
    for (; i < keys.size(); ++i) {
      const block_key k = keys[i];
      if (i >= h) {
        from_[i] = static_cast<std::uint8_t>(lower_tier_of(k));
        if (from_[i] < tiers()) {
          with(from_[i], [&](auto& c) { c.erase(k); });
          ++counters_[from_[i]].superseded;
        }
      }
      const auto ins = tree_->insert(
          at, keys.subspan(i, 1), demote,
          [&](std::uint32_t) -> const access_hint& { return hint_for(i); },
          [&](std::uint32_t) { return i; }, path.subspan(i, 1));
      if (ins.inserted == 0) break;
      at = ins.node;
      if (i < h && from_[i] < tiers()) {
        ++counters_[from_[i]].promotions;
        for (std::size_t l = from_[i]; l >= 1; --l) ++links_[l].blocks_up;
      }
    }
    if (i < keys.size()) {
      // 5. The insert failed: the block and the staged ones after it go back.
      ++counters_[0].no_room_rejects;
      for (std::uint32_t j = i; j < std::max(h, i + 1); ++j) {
        if (from_[j] < tiers()) put_back(from_[j], keys[j], j);
      }
    }
    tree_->unlock_path(path.first(i));
    return h;
  }

  /// Checks the invariants (header comment). Returns an empty string when sound.
  [[nodiscard]] std::string audit() const {
    if (std::string e = tree_->audit(); !e.empty()) return "tree: " + e;
    if (tree_->size() > tree_->capacity()) return "tree over capacity";
    std::string err;
    tree_->for_each([&](std::uint32_t, const auto& n) {
      if (err.empty() && lower_tier_of(n.key) != tiers()) {
        err = "exclusive: a block is in the tree and in " + cfg_.tiers[lower_tier_of(n.key)].name;
      }
    });
    for (std::size_t t = 1; t < tiers() && err.empty(); ++t) {
      with(t, [&](const auto& c) {
        if (c.used() > c.capacity()) err = "tier " + cfg_.tiers[t].name + " over capacity";
        c.for_each_slot([&](block_key k, std::uint32_t) {
          for (std::size_t u = t + 1; u < tiers() && err.empty(); ++u) {
            if (holds(u, k)) {
              err = "exclusive: a block is in tiers " + cfg_.tiers[t].name + " and " +
                    cfg_.tiers[u].name;
            }
          }
        });
      });
    }
    if (!err.empty()) return err;
    for (std::size_t t = 0; t < tiers(); ++t) {
      const tier_counters& c = counters_[t];
      if (c.evictions != c.demotions + c.drops) {
        return "tier " + cfg_.tiers[t].name + ": evictions != demotions + drops";
      }
    }
    return {};
  }

 private:
  static constexpr std::uint32_t npos = ~std::uint32_t{0};

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
    tier_hierarchy<type_list<Ps...>>::validate(cfg);
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

  template <class P>
  void emplace(std::size_t t, const tier_spec& s) {
    typename cache_of<P>::config c{};
    c.capacity = s.capacity_blocks;
    flat_[t]->template emplace<cache_of<P>>(c, on_evict{this, static_cast<std::uint32_t>(t)});
  }

  template <class F>
  decltype(auto) with(std::size_t t, F&& f) noexcept {
    return kvtk::detail::visit_engaged(*flat_[t], f);  // every lower tier is emplaced
  }
  template <class F>
  decltype(auto) with(std::size_t t, F&& f) const noexcept {
    return const_cast<radix_tier_hierarchy*>(this)->with(
        t, [&](auto& c) -> decltype(auto) { return f(std::as_const(c)); });
  }

  std::size_t lower_tier_of(block_key k) const noexcept {
    for (std::size_t t = 1; t < tiers(); ++t) {
      if (holds(t, k)) return t;
    }
    return tiers();
  }

  // Writes k into lower tier u from above (admission and room permitting). Returns whether it
  // landed there.
  bool write_into(std::size_t u, block_key k, std::uint32_t depth) noexcept {
    if (!filters_[u].admit(k, now_)) {
      ++counters_[u].admission_rejects;
      return false;
    }
    return insert_into(u, k, depth, true);
  }
  bool insert_into(std::size_t u, block_key k, std::uint32_t depth, bool count_write) noexcept {
    access_hint hint;
    hint.depth = depth;
    const access_outcome o = with(u, [&](auto& c) { return c.insert(k, hint); });
    if (o.result == access_result::rejected) {
      ++counters_[u].no_room_rejects;
      return false;
    }
    depth_[u][o.slot] = depth;
    if (count_write && o.result == access_result::inserted) {
      ++counters_[u].writes;
      ++links_[u].blocks_down;
    }
    return true;
  }
  // 5.: a block taken from tier s goes back there.
  void put_back(std::size_t s, block_key k, std::uint32_t depth) noexcept {
    insert_into(s, k, depth, false);
  }

  // Tier t (0 = the tree) evicted `key`: demote it into t+1 or drop it. A block_cache calls this
  // from inside an operation (it must not be re-entered: only tiers below are touched).
  void evicted(std::size_t t, block_key key, std::uint32_t depth) noexcept {
    ++counters_[t].evictions;
    if (t + 1 < tiers() && write_into(t + 1, key, depth)) {
      ++counters_[t].demotions;
    } else {
      ++counters_[t].drops;
    }
  }
  void tree_evicted(block_key key, std::uint32_t depth) noexcept { evicted(0, key, depth); }

  hierarchy_config cfg_;
  std::unique_ptr<tree_type> tree_;
  std::vector<std::unique_ptr<any_cache>> flat_;   // [tier]; tier 0's is empty
  std::vector<std::vector<std::uint32_t>> depth_;  // [tier][slot]: the block's request position
  std::vector<admission_filter> filters_;          // [tier]; tier 0's admits everything
  std::vector<tier_counters> counters_;
  std::vector<link_counters> links_;
  std::vector<std::uint32_t> path_;  // the request's tree slots
  std::vector<std::uint8_t> from_;   // the request's blocks' source tiers
  std::uint64_t now_ = 0;
  bool any_filter_ = false;
};

/// A radix tier hierarchy as a prefix-replay index (kvtk::prefix::replay), with the per-request
/// load time each lower tier adds (tier_index.hpp's model).
/// Thread safety: as block_cache (one index per thread; the trace may be shared).
template <prefix::leaf_policy Leaf, class Policies = all_policies>
class radix_tier_index {
 public:
  static constexpr bool offline = false;
  /// Throws: as radix_tier_hierarchy's constructor.
  explicit radix_tier_index(hierarchy_config cfg) : h_(std::move(cfg)) {}

  /// Called by prefix::replay before process(): the request's input length and block size.
  void begin_request(std::uint64_t input_length, std::uint32_t block_tokens) noexcept {
    input_length_ = input_length;
    block_tokens_ = block_tokens;
  }

  std::uint32_t process(std::span<const block_key> blocks, std::span<const std::uint64_t>,
                        const access_hint& base) {
    if (served_.size() < blocks.size()) served_.resize(blocks.size());  // grows to the longest
    const std::uint64_t L = input_length_, bt = block_tokens_;
    auto tokens_of = [&](std::size_t i) {
      return std::min<std::uint64_t>((i + 1) * bt, L) - std::min<std::uint64_t>(i * bt, L);
    };
    const std::uint32_t hit = h_.process(blocks, served_, base, tokens_of);
    std::array<std::uint64_t, max_tiers> from{};
    for (std::uint32_t i = 0; i < hit; ++i) ++from[served_[i]];
    load_.add(lower_tier_wait(h_.config(), from), hit > from[0]);
    return hit;
  }

  /// Blocks that left the hierarchy (drops of every tier).
  [[nodiscard]] std::uint64_t evictions() const noexcept {
    std::uint64_t e = 0;
    for (std::size_t t = 0; t < h_.tiers(); ++t) e += h_.counters(t).drops;
    return e;
  }
  [[nodiscard]] const radix_tier_hierarchy<Leaf, Policies>& hierarchy() const noexcept {
    return h_;
  }
  [[nodiscard]] radix_tier_hierarchy<Leaf, Policies>& hierarchy() noexcept { return h_; }
  [[nodiscard]] const load_time_counters& load_time() const noexcept { return load_; }

 private:
  static constexpr std::size_t max_tiers = radix_tier_hierarchy<Leaf, Policies>::max_tiers;
  radix_tier_hierarchy<Leaf, Policies> h_;
  std::vector<std::uint8_t> served_;
  load_time_counters load_;
  std::uint64_t input_length_ = 0;
  std::uint32_t block_tokens_ = 1;
};

}  // namespace kvtk::tier
