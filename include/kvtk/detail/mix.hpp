// kvtk/detail/mix.hpp — the one 64-bit mixer of kvtk: splitmix64's finaliser (Steele, Lea &
// Flood 2014), a bijection with full avalanche, and the splitmix64 stream built on it. Hash
// tables (frequency sketches, sampled MRCs, next-use sidecars), generated patterns and seeds all
// use these two, so a change of mixer is made (and tested) in one place.
#pragma once

#include <cstdint>

namespace kvtk::detail {

/// splitmix64's finaliser.  Complexity: O(1).  Throws: nothing.
inline constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

/// splitmix64: a 64-bit stream (a seed expander): each next() adds the golden-ratio increment to
/// the state and returns its mix64.
struct splitmix64 {
  std::uint64_t state;
  constexpr std::uint64_t next() noexcept { return mix64(state += 0x9E3779B97F4A7C15ull); }
};

}  // namespace kvtk::detail
