// kvtk/offline.hpp — helpers for offline policies and whole-trace replays of flat key streams.
/// Thread safety: functions with local state only; the key spans are only read.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "kvtk/cache/block_cache.hpp"
#include "kvtk/concepts.hpp"
#include "kvtk/detail/key_map.hpp"

namespace kvtk {

/// True for policies that need the future (hint.next_use), i.e. Belady.
template <class P>
inline constexpr bool is_offline_policy = requires {
  requires P::offline;
};

/// Effects: records, for an offline P, the caller's promise to pass hint.next_use with every
/// access (belady::config::next_use_hints); nothing for online policies.  Throws: nothing.
template <class P>
constexpr void promise_next_use(typename P::config& c) noexcept {
  if constexpr (is_offline_policy<P>) c.next_use_hints = true;
}

/// Effects: next[i] = the smallest j > i with keys[j] == keys[i], or access_hint::never.
/// Complexity: one backward sweep, O(n) expected, with lookups prefetched ahead; allocates the
/// result and a detail::key_map of 16 bytes per slot (load <= 1/2) over the distinct keys.
/// Throws: std::bad_alloc.
inline std::vector<std::uint64_t> next_use_positions(std::span<const block_key> keys) {
  std::vector<std::uint64_t> next(keys.size());
  detail::key_map<std::uint64_t> seen(
      detail::key_map<std::uint64_t>::expected_for_refs(keys.size()));
  constexpr std::size_t ahead = detail::key_map<std::uint64_t>::prefetch_distance;
  for (std::size_t i = keys.size(); i-- > 0;) {
    if (i >= ahead) seen.prefetch(keys[i - ahead]);
    auto [pos, fresh] = seen.try_emplace(keys[i], i);
    if (fresh) {
      next[i] = access_hint::never;
    } else {
      next[i] = *pos;
      *pos = i;
    }
  }
  return next;
}

/// Counters of a flat (one block per request) replay.
struct flat_replay_counts {
  std::uint64_t requests = 0, hits = 0, misses = 0, evictions = 0;
  [[nodiscard]] double miss_ratio() const noexcept {
    return requests == 0 ? 0.0 : static_cast<double>(misses) / static_cast<double>(requests);
  }
};

/// Replays keys (each a unit-size request) through a block_cache<P> built from cfg.
/// Requires: next_use.size() == keys.size() for offline policies (else it is ignored).
/// Throws: std::invalid_argument for a bad cfg or a missing next_use; std::bad_alloc.
template <eviction_policy P>
flat_replay_counts replay_flat(std::span<const block_key> keys,
                               const typename block_cache<P>::config& cfg,
                               std::span<const std::uint64_t> next_use = {}) {
  if constexpr (is_offline_policy<P>) {
    if (next_use.size() != keys.size()) {
      throw std::invalid_argument("replay_flat: an offline policy needs next_use for every key");
    }
  }
  typename block_cache<P>::config with_promise = cfg;
  promise_next_use<P>(with_promise.policy);
  block_cache<P> cache(with_promise);
  access_hint hint;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if constexpr (is_offline_policy<P>) hint.next_use = next_use[i];
    cache.access(keys[i], hint);
  }
  const cache_stats& s = cache.stats();
  return {keys.size(), s.hits, s.misses, s.evictions};
}

}  // namespace kvtk
