// kvtk/tier/engine_tier_hierarchy.hpp — a tier hierarchy whose top tier is a serving engine's
// own GPU cache (vLLM's block pool or SGLang's radix cache, counted exactly as `--engine` counts
// them: prefix/engine_index.hpp) over the shared flat lower tiers (lower_tiers.hpp, first() == 1),
// and its prefix-replay index.
//
// Design
// ------
// The third top over the one core, beside tier_hierarchy (flat) and radix_tier_hierarchy. The
// engine's cache keeps its own rules (its hit cap, its duplicates, its eviction order); the
// lower tiers are kvtk's generic exclusive write-back tiers. The engine does not call back into
// the core while it runs a request: it logs what it evicts (log_evictions), and the top demotes
// the log afterwards, in eviction order. That keeps the engine caches free of any tier type and
// their hot paths unchanged (one predictable branch per eviction). The engines' own offload
// semantics (what vLLM's OffloadingConnector, SGLang's HiCache store and when) are not these.
//
// Semantics (pinned; tests depend on them). A request of L tokens in blocks of B whose full
// blocks have keys k_0..k_{f-1}; cap = min(floor((L - 1) / B), f), the engines' hit cap:
//  0. Every key is recorded in every lower tier's admission filter.
//  1. Before any update: g = the engine's GPU hit (vLLM: the leading cached keys; SGLang: the
//     radix match), at most cap. The hit continues with the leading run of k_g, k_g+1, ...
//     (below cap) each resident in some lower tier: the hit length h. Block i < g is served by
//     tier 0, g <= i < h by the lower tier holding it; each is a hit (and its tokens) there. A
//     block past g that only the GPU holds (vLLM: a block whose prefix it evicted) ends the run:
//     the engine recomputes every block after its own hit.
//  2. Blocks g..h-1 are staged: erased from their lower tiers (no eviction) before anything
//     else changes, each a promotion of its tier (blocks_up on every link from it to tier 1).
//  3. Blocks h..f-1 still in a lower tier are recomputed: that copy is erased (superseded),
//     before anything can evict it.
//  4. The engine runs the request as `--engine` does. A loaded block takes a new GPU block as a
//     computed one does (vLLM: both are the request's computed tokens; SGLang: both are
//     inserted), so the engine's own state is what it would be had the loads been prefills.
//  5. Every block the engine evicted in 4, in its order, is demoted: written into tier 1 when
//     its admission filter admits it and it can make room (a write of tier 1, blocks_down of
//     link 1, a demotion of tier 0), else dropped. It is dropped as well when the GPU cache
//     still holds its key after the request (vLLM: a duplicate, or the request cached the key
//     again) or a lower tier already holds it (vLLM evicted two copies of it in this request):
//     exclusive tiers keep one copy. A write into a full flat tier cascades as lower_tiers does.
// A request the engine cannot schedule (more blocks than the GPU cache) changes nothing and hits
// nothing. With one tier, every request hits exactly what `--engine` gives it.
//
// Invariants (audit()): the engine cache's own audit; every flat tier within capacity; no block
// in the GPU cache and a lower tier, nor in two lower tiers; per tier, evictions == demotions +
// drops.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kvtk/prefix/sglang_radix_cache.hpp"
#include "kvtk/prefix/vllm_block_pool.hpp"
#include "kvtk/registry.hpp"
#include "kvtk/tier/lower_tiers.hpp"
#include "kvtk/tier/tier_index.hpp"
#include "kvtk/tier/tier_spec.hpp"

namespace kvtk::tier {

/// The engine side of an engine_tier_hierarchy: one adapter per engine cache, with the same
/// calls (name, gpu_hit, run, holds, resident, evictions, audit, drain_evictions).
template <class Cache>
struct engine_top;

template <>
struct engine_top<prefix::vllm_block_pool> {
  static constexpr const char* name = "vllm";
  explicit engine_top(std::uint32_t capacity) : cache(capacity) { cache.log_evictions(); }

  /// The leading cached keys, at most cap (vLLM's find_hit).
  std::uint32_t gpu_hit(std::span<const block_key> keys, std::uint32_t cap) {
    grow(cap);
    return cache.find_hit(keys, cap, held);
  }
  /// Runs the request (vllm_block_pool::run_request) and records each new cached block's depth.
  prefix::vllm_block_pool::request_result run(std::span<const block_key> keys, std::uint64_t L,
                                              std::uint32_t B) {
    const std::uint64_t n = (L + B - 1) / B;
    grow(n);
    const auto r = cache.run_request(keys, L, B, held);
    const std::uint64_t full = std::min<std::uint64_t>(L / B, keys.size());
    if (r.scheduled) {
      for (std::uint64_t i = r.hit_blocks; i < full; ++i) {
        cache.set_depth(held[i], static_cast<std::uint32_t>(i));
      }
    }
    return r;
  }
  [[nodiscard]] bool holds(block_key k) const noexcept { return cache.contains(k); }
  [[nodiscard]] std::uint64_t resident() const noexcept { return cache.cached_blocks(); }
  [[nodiscard]] std::string audit() const { return cache.audit(); }

  prefix::vllm_block_pool cache;

 private:
  void grow(std::uint64_t n) {
    if (held.size() < n) held.resize(n);  // grows to the longest request
  }
  std::vector<std::uint32_t> held;
};

template <>
struct engine_top<prefix::sglang_radix_cache> {
  static constexpr const char* name = "sglang";
  explicit engine_top(std::uint32_t capacity) : cache(capacity) { cache.log_evictions(); }

  /// The radix match, at most cap pages, without touching anything.
  std::uint32_t gpu_hit(std::span<const block_key> keys, std::uint32_t cap) const noexcept {
    return cache.peek(keys.first(std::min<std::size_t>(cap, keys.size())));
  }
  prefix::sglang_radix_cache::request_result run(std::span<const block_key> keys,
                                                 std::uint64_t L, std::uint32_t B) noexcept {
    return cache.run_request(keys, L, B);
  }
  [[nodiscard]] bool holds(block_key k) const noexcept { return cache.contains(k); }
  [[nodiscard]] std::uint64_t resident() const noexcept { return cache.cached_blocks(); }
  [[nodiscard]] std::string audit() const { return cache.audit(); }

  prefix::sglang_radix_cache cache;
};

template <class Cache, class Policies = all_policies>
class engine_tier_hierarchy;

/// Thread safety: as tier_hierarchy — distinct hierarchies are independent; one needs external
/// synchronisation for every call.
template <class Cache, class... Ps>
class engine_tier_hierarchy<Cache, type_list<Ps...>> {
 public:
  using lower_type = lower_tiers<type_list<Ps...>>;
  static constexpr std::size_t max_tiers = lower_type::max_tiers;
  static constexpr const char* engine_name = engine_top<Cache>::name;

  /// Requires: a config as tier_hierarchy's, exclusive and write-back; tiers[0].policy empty or
  /// the engine's name (vllm, sglang); tiers[0].capacity_blocks the GPU cache's blocks.
  /// Effects: builds the engine cache and every lower tier (all allocation happens here but the
  /// vLLM scratch, which grows to the longest request).
  /// Throws: std::invalid_argument naming the problem; std::bad_alloc.
  explicit engine_tier_hierarchy(hierarchy_config cfg)
      : top_(checked_capacity(cfg)), core_(std::move(cfg), 1, false) {}
  engine_tier_hierarchy(const engine_tier_hierarchy&) = delete;
  engine_tier_hierarchy& operator=(const engine_tier_hierarchy&) = delete;

  /// As tier_hierarchy's.  Complexity: O(1).  Throws: nothing.
  [[nodiscard]] std::size_t tiers() const noexcept { return core_.tiers(); }
  [[nodiscard]] const hierarchy_config& config() const noexcept { return core_.config(); }
  [[nodiscard]] const tier_counters& counters(std::size_t t) const noexcept {
    return core_.counters(t);
  }
  [[nodiscard]] const link_counters& link(std::size_t l) const noexcept { return core_.link(l); }
  [[nodiscard]] std::size_t resident(std::size_t t) const noexcept {
    return t == 0 ? top_.resident() : core_.resident(t);
  }
  /// 0: the hierarchy is exclusive (here so that every top answers the same calls).
  [[nodiscard]] std::uint64_t kept_copies(std::size_t t) const noexcept {
    return core_.kept_copies(t);
  }
  [[nodiscard]] const Cache& engine_cache() const noexcept { return top_.cache; }
  /// Requests the engine could not schedule (more blocks than the GPU cache).
  [[nodiscard]] std::uint64_t unscheduled() const noexcept { return unscheduled_; }

  /// Effects: the tier holding `key` (0: the GPU cache), or tiers() when none does.
  [[nodiscard]] std::size_t tier_of(block_key key) const noexcept {
    return top_.holds(key) ? 0 : core_.lower_tier_of(key);
  }

  /// Called before process(): the request's prompt length and block size (the engine's hit cap
  /// and allocation depend on them).
  void begin_request(std::uint64_t input_tokens, std::uint32_t block_tokens) noexcept {
    L_ = input_tokens;
    B_ = block_tokens;
  }

  /// Requires: begin_request() for this request; keys = its full blocks' keys;
  /// served.size() >= keys.size().
  /// Effects: the semantics above; served[i] = the tier that served block i of the hit run.
  /// Returns the hit length.  Complexity: O(blocks x tiers) probes plus the engine's and the
  /// policies' costs.  Throws: std::bad_alloc (the vLLM scratch grows to the longest request).
  template <class TokensOf>
  std::uint32_t process(std::span<const block_key> keys, std::span<std::uint8_t> served,
                        const access_hint&, TokensOf&& token_of) {
    if (L_ == 0) return 0;
    const std::uint64_t n = (L_ + B_ - 1) / B_;
    if (n > top_.cache.capacity()) {
      ++unscheduled_;  // the engine never admits it: nothing changes
      return 0;
    }
    const std::uint64_t f = std::min<std::uint64_t>(L_ / B_, keys.size());
    const auto cap = static_cast<std::uint32_t>(std::min<std::uint64_t>((L_ - 1) / B_, f));
    core_.begin_request(keys.first(f));
    // 1. The hit run, 2. staged.
    const std::uint32_t g = top_.gpu_hit(keys, cap);
    std::uint32_t h = 0;
    for (; h < cap; ++h) {
      const std::size_t t = h < g ? 0 : core_.lower_tier_of(keys[h]);
      if (t == tiers()) break;
      served[h] = static_cast<std::uint8_t>(t);
      core_.count_hit(t, token_of(h));
    }
    for (std::uint32_t i = g; i < h; ++i) {
      // A key repeated in the run is taken (and promoted) once.
      if (core_.take(served[i], keys[i]) == erase_result::erased) {
        core_.count_promotion(served[i]);
      }
    }
    // 3. Stale copies of the blocks the request recomputes, discarded before anything can evict
    // them (as the radix top does).
    for (std::uint64_t i = h; i < f; ++i) {
      const std::size_t t = core_.lower_tier_of(keys[i]);
      if (t == tiers()) continue;
      core_.take(t, keys[i]);
      core_.count_superseded(t);
    }
    // 4. The engine's run, 5. its evictions demoted. A key still held after the run (the GPU
    // keeps or re-cached it) or already demoted by this drain (vLLM evicted two copies) is
    // dropped: exclusive tiers hold one copy.
    [[maybe_unused]] const auto r = top_.run(keys.first(f), L_, B_);
    assert(r.scheduled && r.hit_blocks == g);
    top_.cache.drain_evictions([this](block_key k, std::uint32_t depth) {
      if (top_.holds(k) || core_.lower_tier_of(k) != tiers()) {
        core_.count_eviction_dropped(0);
      } else {
        core_.evicted(0, k, depth, 0);
      }
    });
    return h;
  }

  /// Effects: checks the invariants (header comment); returns the first problem, or an empty
  /// string when sound.  Complexity: O(resident blocks x tiers).  Throws: std::bad_alloc.
  [[nodiscard]] std::string audit() const {
    if (std::string e = top_.audit(); !e.empty()) return "engine cache: " + e;
    for (std::size_t t = 1; t < tiers(); ++t) {
      std::string err;
      core_.with(t, [&](const auto& c) {
        c.for_each([&](const auto& node) {
          if (err.empty() && top_.holds(node.key)) {
            err = "exclusive: a block is in the GPU cache and in " + config().tiers[t].name;
          }
        });
      });
      if (!err.empty()) return err;
    }
    if (std::string e = core_.audit(); !e.empty()) return e;
    if (!core_.balanced(0)) {
      return "tier " + config().tiers[0].name + ": evictions != demotions + drops";
    }
    return {};
  }

 private:
  static std::uint32_t checked_capacity(const hierarchy_config& cfg) {
    if (cfg.mode != inclusion::exclusive || cfg.write.kind != write_policy::write_back) {
      throw std::invalid_argument(std::string("engine tier hierarchy (") + engine_name +
                                  "): only exclusive write-back lower tiers");
    }
    validate_hierarchy(cfg);
    const std::string& top = cfg.tiers[0].policy;
    if (!top.empty() && top != engine_name) {
      throw std::invalid_argument("tier " + cfg.tiers[0].name + ": the engine tier's policy '" +
                                  top + "' is not its engine '" + engine_name + "'");
    }
    return static_cast<std::uint32_t>(cfg.tiers[0].capacity_blocks);
  }

  engine_top<Cache> top_;
  lower_type core_;  // tiers 1..; tier 0's counters
  std::uint64_t L_ = 0, unscheduled_ = 0;
  std::uint32_t B_ = 1;
};

/// vLLM's block pool / SGLang's radix cache over lower tiers, as prefix-replay indexes.
template <class Policies = all_policies>
using vllm_tier_index = hierarchy_index<engine_tier_hierarchy<prefix::vllm_block_pool, Policies>>;
template <class Policies = all_policies>
using sglang_tier_index =
    hierarchy_index<engine_tier_hierarchy<prefix::sglang_radix_cache, Policies>>;

}  // namespace kvtk::tier
