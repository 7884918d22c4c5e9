// kvtk/cache/cache_types.hpp — the small value types of the cache interfaces (results, counters,
// the default eviction callback), apart from the templates so that light headers
// (any_block_cache_decl.hpp, the C ABI) can name them.
/// Thread safety: plain values.
#pragma once

#include <cstdint>

#include "kvtk/concepts.hpp"

namespace kvtk {

/// Default eviction callback: does nothing.
struct ignore_evictions {
  constexpr void operator()(block_key, std::uint32_t) const noexcept {}
};

enum class access_result : std::uint8_t {
  hit,       ///< the key was resident
  inserted,  ///< the key was missing and is now resident
  rejected,  ///< the key was missing and could not be admitted (see block_cache::insert)
};

enum class erase_result : std::uint8_t { erased, not_found, pinned };

struct access_outcome {
  access_result result;
  /// Slot of the entry when hit or inserted; block_cache<>::npos when rejected.
  std::uint32_t slot;
};

/// Counters kept by every block_cache (cheap: plain increments).
struct cache_stats {
  std::uint64_t hits = 0, misses = 0, insertions = 0, evictions = 0, rejections = 0;
};

}  // namespace kvtk
