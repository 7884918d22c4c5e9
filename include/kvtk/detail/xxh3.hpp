// kvtk/detail/xxh3.hpp — XXH3-128 with seed 0 and the default secret (xxHash 0.8), one shot.
//
// Written from the algorithm description in xxHash's doc/xxhash_spec.md (small 0-16, medium
// 17-240 and large 241+ byte inputs). vLLM's "xxhash" / "xxhash_cbor" prefix-caching hashes are
// xxhash.xxh3_128_digest(bytes), i.e. this function's result in canonical (big-endian) form.
// Portable: 64x64->128 products are formed from 32-bit halves. Checked against the xxhash Python
// package on every length class in tests/data/engine_hash_vectors.json.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace kvtk::detail {

/// An XXH3-128 result; canonical() gives the 16 bytes xxh3_128_digest returns.
struct xxh3_128_hash {
  std::uint64_t low = 0, high = 0;
  /// high then low, each big-endian (xxHash's canonical form).
  [[nodiscard]] constexpr std::array<std::uint8_t, 16> canonical() const noexcept {
    std::array<std::uint8_t, 16> out{};
    for (int i = 0; i < 8; ++i) {
      out[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(high >> (56 - 8 * i));
      out[static_cast<std::size_t>(8 + i)] = static_cast<std::uint8_t>(low >> (56 - 8 * i));
    }
    return out;
  }
};

namespace xxh3_impl {

inline constexpr std::uint64_t p32_1 = 0x9E3779B1u, p32_2 = 0x85EBCA77u, p32_3 = 0xC2B2AE3Du;
inline constexpr std::uint64_t p64_1 = 0x9E3779B185EBCA87ull, p64_2 = 0xC2B2AE3D27D4EB4Full,
                               p64_3 = 0x165667B19E3779F9ull, p64_4 = 0x85EBCA77C2B2AE63ull,
                               p64_5 = 0x27D4EB2F165667C5ull;
inline constexpr std::uint64_t mx1 = 0x165667919E3779F9ull, mx2 = 0x9FB21C651E98DF25ull;

inline constexpr std::array<std::uint8_t, 192> secret = {
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
    0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
    0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e};

struct u128 {
  std::uint64_t lo, hi;
};
constexpr u128 mul128(std::uint64_t a, std::uint64_t b) noexcept {
  const std::uint64_t al = a & 0xffffffffu, ah = a >> 32, bl = b & 0xffffffffu, bh = b >> 32;
  const std::uint64_t ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
  const std::uint64_t cross = (ll >> 32) + (lh & 0xffffffffu) + (hl & 0xffffffffu);
  return {(cross << 32) | (ll & 0xffffffffu), hh + (lh >> 32) + (hl >> 32) + (cross >> 32)};
}
constexpr std::uint64_t fold(std::uint64_t a, std::uint64_t b) noexcept {
  const u128 m = mul128(a, b);
  return m.lo ^ m.hi;
}
constexpr std::uint64_t rd64(const std::uint8_t* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
constexpr std::uint32_t rd32(const std::uint8_t* p) noexcept {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}
constexpr std::uint64_t sec64(std::size_t off) noexcept { return rd64(secret.data() + off); }
constexpr std::uint32_t sec32(std::size_t off) noexcept { return rd32(secret.data() + off); }
constexpr std::uint64_t rotl64(std::uint64_t x, int r) noexcept {
  return (x << r) | (x >> (64 - r));
}
constexpr std::uint32_t rotl32(std::uint32_t x, int r) noexcept {
  return (x << r) | (x >> (32 - r));
}
constexpr std::uint32_t bswap32(std::uint32_t x) noexcept {
  return (x >> 24) | ((x >> 8) & 0xff00u) | ((x << 8) & 0xff0000u) | (x << 24);
}
constexpr std::uint64_t bswap64(std::uint64_t x) noexcept {
  return (std::uint64_t{bswap32(static_cast<std::uint32_t>(x))} << 32) |
         bswap32(static_cast<std::uint32_t>(x >> 32));
}
constexpr std::uint64_t avalanche(std::uint64_t x) noexcept {
  x ^= x >> 37;
  x *= mx1;
  return x ^ (x >> 32);
}
constexpr std::uint64_t avalanche_xxh64(std::uint64_t x) noexcept {
  x ^= x >> 33;
  x *= p64_2;
  x ^= x >> 29;
  x *= p64_3;
  return x ^ (x >> 32);
}
constexpr std::uint64_t mix16(const std::uint8_t* d, std::size_t s) noexcept {
  return fold(rd64(d) ^ sec64(s), rd64(d + 8) ^ sec64(s + 8));
}
// Seed 0 throughout, so the spec's "+ seed" / "- seed" terms vanish.
constexpr void mix32(std::uint64_t acc[2], const std::uint8_t* a, const std::uint8_t* b,
                     std::size_t s) noexcept {
  acc[0] += mix16(a, s);
  acc[1] += mix16(b, s + 16);
  acc[0] ^= rd64(b) + rd64(b + 8);
  acc[1] ^= rd64(a) + rd64(a + 8);
}

constexpr xxh3_128_hash small(const std::uint8_t* p, std::size_t n) noexcept {
  if (n == 0) {
    return {avalanche_xxh64(sec64(64) ^ sec64(72)), avalanche_xxh64(sec64(80) ^ sec64(88))};
  }
  if (n <= 3) {
    const std::uint32_t c =
        static_cast<std::uint32_t>(p[n - 1]) | (static_cast<std::uint32_t>(n) << 8) |
        (static_cast<std::uint32_t>(p[0]) << 16) | (static_cast<std::uint32_t>(p[n >> 1]) << 24);
    const std::uint64_t lo = std::uint64_t{sec32(0) ^ sec32(4)} ^ c;
    const std::uint64_t hi = std::uint64_t{sec32(8) ^ sec32(12)} ^ rotl32(bswap32(c), 13);
    return {avalanche_xxh64(lo), avalanche_xxh64(hi)};
  }
  if (n <= 8) {
    const std::uint64_t first = rd32(p), last = rd32(p + n - 4);
    const std::uint64_t v = (sec64(16) ^ sec64(24)) ^ (first | (last << 32));
    const u128 m = mul128(v, p64_1 + (static_cast<std::uint64_t>(n) << 2));
    std::uint64_t hi = m.hi + (m.lo << 1);
    std::uint64_t lo = m.lo ^ (hi >> 3);
    lo ^= lo >> 35;
    lo *= mx2;
    lo ^= lo >> 28;
    hi = avalanche(hi);
    return {lo, hi};
  }
  const std::uint64_t first = rd64(p), last = rd64(p + n - 8);
  const std::uint64_t v1 = (sec64(32) ^ sec64(40)) ^ first ^ last;
  const std::uint64_t v2 = (sec64(48) ^ sec64(56)) ^ last;
  const u128 m = mul128(v1, p64_1);
  std::uint64_t lo = m.lo + (static_cast<std::uint64_t>(n - 1) << 54);
  std::uint64_t hi = m.hi + v2 + (v2 & 0xffffffffu) * (p32_2 - 1);
  lo ^= bswap64(hi);
  const u128 m2 = mul128(lo, p64_2);
  return {avalanche(m2.lo), avalanche(m2.hi + hi * p64_2)};
}

constexpr xxh3_128_hash medium(const std::uint8_t* p, std::size_t n) noexcept {
  std::uint64_t acc[2] = {static_cast<std::uint64_t>(n) * p64_1, 0};
  if (n <= 128) {
    const std::size_t rounds = ((n - 1) >> 5) + 1;
    for (std::size_t i = rounds; i-- > 0;) {
      mix32(acc, p + i * 16, p + n - i * 16 - 16, i * 32);
    }
  } else {
    const std::size_t chunks = n >> 5;
    for (std::size_t i = 0; i < 4; ++i) mix32(acc, p + i * 32, p + i * 32 + 16, i * 32);
    acc[0] = avalanche(acc[0]);
    acc[1] = avalanche(acc[1]);
    for (std::size_t i = 4; i < chunks; ++i) {
      mix32(acc, p + i * 32, p + i * 32 + 16, (i - 4) * 32 + 3);
    }
    mix32(acc, p + n - 16, p + n - 32, 103);
  }
  const std::uint64_t lo = acc[0] + acc[1];
  const std::uint64_t hi = acc[0] * p64_1 + acc[1] * p64_4 + static_cast<std::uint64_t>(n) * p64_2;
  return {avalanche(lo), 0 - avalanche(hi)};
}

constexpr void accumulate(std::uint64_t acc[8], const std::uint8_t* stripe,
                          std::size_t s) noexcept {
  for (std::size_t i = 0; i < 8; ++i) {
    const std::uint64_t d = rd64(stripe + 8 * i);
    const std::uint64_t v = d ^ sec64(s + 8 * i);
    acc[i ^ 1] += d;
    acc[i] += (v & 0xffffffffu) * (v >> 32);
  }
}

constexpr std::uint64_t merge(const std::uint64_t acc[8], std::uint64_t init,
                              std::size_t s) noexcept {
  std::uint64_t r = init;
  for (std::size_t i = 0; i < 4; ++i) {
    r += fold(acc[2 * i] ^ sec64(s + 16 * i), acc[2 * i + 1] ^ sec64(s + 16 * i + 8));
  }
  return avalanche(r);
}

constexpr xxh3_128_hash large(const std::uint8_t* p, std::size_t n) noexcept {
  constexpr std::size_t secret_len = secret.size();
  constexpr std::size_t stripes = (secret_len - 64) / 8;  // 16
  constexpr std::size_t block = 64 * stripes;             // 1024
  std::uint64_t acc[8] = {p32_3, p64_1, p64_2, p64_3, p64_4, p32_2, p64_5, p32_1};
  std::size_t off = 0;
  while (n - off > block) {
    for (std::size_t s = 0; s < stripes; ++s) accumulate(acc, p + off + 64 * s, 8 * s);
    for (std::size_t i = 0; i < 8; ++i) {
      acc[i] ^= acc[i] >> 47;
      acc[i] ^= sec64(secret_len - 64 + 8 * i);
      acc[i] *= p32_1;
    }
    off += block;
  }
  const std::size_t last = n - off;  // 1..block
  const std::size_t full = (last - 1) / 64;
  for (std::size_t s = 0; s < full; ++s) accumulate(acc, p + off + 64 * s, 8 * s);
  accumulate(acc, p + n - 64, secret_len - 71);
  return {merge(acc, static_cast<std::uint64_t>(n) * p64_1, 11),
          merge(acc, ~(static_cast<std::uint64_t>(n) * p64_2), secret_len - 75)};
}

}  // namespace xxh3_impl

/// XXH3-128 of the bytes, seed 0, default secret.  Complexity: O(bytes.size()).
constexpr xxh3_128_hash xxh3_128(std::span<const std::uint8_t> bytes) noexcept {
  const std::uint8_t* p = bytes.data();
  const std::size_t n = bytes.size();
  if (n <= 16) return xxh3_impl::small(p, n);
  if (n <= 240) return xxh3_impl::medium(p, n);
  return xxh3_impl::large(p, n);
}

}  // namespace kvtk::detail
