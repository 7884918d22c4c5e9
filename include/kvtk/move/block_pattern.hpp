// kvtk/move/block_pattern.hpp — the deterministic contents every moved block carries, so that
// each arrival can be verified byte for byte (host and CUDA backends share it).
//
// Piece p of the block with key k holds 8-byte words from a splitmix64 stream seeded by
// (k, p); a tail shorter than 8 bytes takes the low bytes of the next word (little-endian).
/// Thread safety: pure functions (they write only the caller's buffer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kvtk/detail/mix.hpp"

namespace kvtk::move {

/// Calls f(byte_offset, word, bytes) for each word of the pattern of (key, piece).
template <class F>
void for_pattern(std::uint64_t key, std::uint64_t piece, std::size_t bytes, F&& f) {
  std::uint64_t s = key * 0x100000001B3ull ^ (piece + 1) * 0xC2B2AE3D27D4EB4Full;
  kvtk::detail::splitmix64 stream{s};
  auto next = [&stream] { return stream.next(); };
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) f(i, next(), std::size_t{8});
  if (i < bytes) f(i, next(), bytes - i);
}

/// Writes the pattern of (key, piece) into `bytes` bytes at `dst`.
inline void fill_pattern(void* dst, std::uint64_t key, std::uint64_t piece, std::size_t bytes) {
  auto* d = static_cast<unsigned char*>(dst);
  for_pattern(key, piece, bytes,
              [&](std::size_t at, std::uint64_t w, std::size_t n) { std::memcpy(d + at, &w, n); });
}

/// Whether `bytes` bytes at `src` hold the pattern of (key, piece).
inline bool check_pattern(const void* src, std::uint64_t key, std::uint64_t piece,
                          std::size_t bytes) {
  const auto* d = static_cast<const unsigned char*>(src);
  bool ok = true;
  for_pattern(key, piece, bytes, [&](std::size_t at, std::uint64_t w, std::size_t n) {
    ok = ok && std::memcmp(d + at, &w, n) == 0;
  });
  return ok;
}

}  // namespace kvtk::move
