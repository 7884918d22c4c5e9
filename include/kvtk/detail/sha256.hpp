// kvtk/detail/sha256.hpp — SHA-256 (FIPS 180-4), incremental, header-only, no dependencies.
//
// Used by kvtk/prefix/block_hasher.hpp to reproduce the block hashes of serving engines, which are
// SHA-256 digests. Not a constant-time or hardened implementation: it hashes public token ids.
//
//   kvtk::detail::sha256 h;
//   h.update(bytes);            // any number of times
//   sha256_digest d = h.final();  // the object is spent afterwards (reset() to reuse it)
//
// Checked against the FIPS 180-2 examples ("abc", the empty message, the 448-bit message, one
// million 'a') in tests/test_block_hasher.cpp.
//
// Speed: on x86-64 CPUs with the SHA extensions (SHA-NI; checked once with cpuid), the
// compression runs on them (sha256_shani below, the Intel white paper's schedule), else in
// portable code; both give the same digests (the tests run whichever the machine has, and
// compare the two directly where it has both). Constant evaluation always takes the portable path.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define KVTK_SHA256_SHANI 1
#include <cpuid.h>
#include <cstdlib>
#include <immintrin.h>
#endif

namespace kvtk::detail {

inline constexpr std::array<std::uint32_t, 64> sha256_k = {
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u,
    0xab1c5ed5u, 0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu,
    0x9bdc06a7u, 0xc19bf174u, 0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu,
    0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau, 0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u,
    0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u, 0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu,
    0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u, 0xa2bfe8a1u, 0xa81a664bu,
    0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u, 0x19a4c116u,
    0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u,
    0xc67178f2u};

#ifdef KVTK_SHA256_SHANI
/// True when the CPU has the SHA extensions and SSSE3 / SSE4.1 (cpuid, asked once), unless the
/// environment has KVTK_NO_SHANI=1 (to measure the portable code on such a CPU).
inline bool sha256_has_shani() noexcept {
  static const bool has = [] {
    if (const char* off = std::getenv("KVTK_NO_SHANI"); off != nullptr && off[0] == '1') return false;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
    const bool sse = (c & (1u << 9)) != 0 && (c & (1u << 19)) != 0;  // SSSE3, SSE4.1
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
    return sse && (b & (1u << 29)) != 0;  // SHA
  }();
  return has;
}

/// Compresses `blocks` 64-byte blocks at p into state (FIPS order: a..h) with SHA-NI: four rounds
/// per group, the message schedule by sha256msg1 / sha256msg2 (Intel's SHA extensions paper).
/// Requires: sha256_has_shani().
__attribute__((target("sha,sse4.1,ssse3"))) inline void sha256_shani(
    std::uint32_t* state, const std::uint8_t* p, std::size_t blocks) noexcept {
  const __m128i mask = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  __m128i tmp = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state));
  __m128i s1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state + 4));
  tmp = _mm_shuffle_epi32(tmp, 0xB1);        // CDAB
  s1 = _mm_shuffle_epi32(s1, 0x1B);          // EFGH
  __m128i s0 = _mm_alignr_epi8(tmp, s1, 8);  // ABEF
  s1 = _mm_blend_epi16(s1, tmp, 0xF0);       // CDGH
  for (; blocks > 0; --blocks, p += 64) {
    const __m128i abef = s0, cdgh = s1;
    __m128i m[4];
    for (int g = 0; g < 16; ++g) {
      __m128i& cur = m[g & 3];
      if (g < 4) cur = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * g)), mask);
      __m128i msg = _mm_add_epi32(cur, _mm_loadu_si128(reinterpret_cast<const __m128i*>(sha256_k.data() + 4 * g)));
      s1 = _mm_sha256rnds2_epu32(s1, s0, msg);
      if (g >= 3 && g <= 14) {
        __m128i& next = m[(g + 1) & 3];
        next = _mm_add_epi32(next, _mm_alignr_epi8(cur, m[(g + 3) & 3], 4));
        next = _mm_sha256msg2_epu32(next, cur);
      }
      msg = _mm_shuffle_epi32(msg, 0x0E);
      s0 = _mm_sha256rnds2_epu32(s0, s1, msg);
      if (g >= 1 && g <= 12) m[(g + 3) & 3] = _mm_sha256msg1_epu32(m[(g + 3) & 3], cur);
    }
    s0 = _mm_add_epi32(s0, abef);
    s1 = _mm_add_epi32(s1, cdgh);
  }
  tmp = _mm_shuffle_epi32(s0, 0x1B);    // FEBA
  s1 = _mm_shuffle_epi32(s1, 0xB1);     // DCHG
  s0 = _mm_blend_epi16(tmp, s1, 0xF0);  // DCBA
  s1 = _mm_alignr_epi8(s1, tmp, 8);     // ABEF -> HGFE
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state), s0);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state + 4), s1);
}
#endif

/// A SHA-256 digest: 32 bytes in the order FIPS 180-4 defines (big-endian words).
using sha256_digest = std::array<std::uint8_t, 32>;

class sha256 {
 public:
  constexpr sha256() noexcept { reset(); }

  /// Effects: restarts the hash (as if newly constructed).  Complexity: O(1).
  constexpr void reset() noexcept {
    state_ = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
              0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
    total_ = 0;
    used_ = 0;
  }

  /// Effects: appends the bytes to the message.  Complexity: O(bytes.size()).
  constexpr void update(std::span<const std::uint8_t> bytes) noexcept {
    total_ += bytes.size();
    std::size_t i = 0;
    if (used_ != 0) {
      while (used_ < 64 && i < bytes.size()) buf_[used_++] = bytes[i++];
      if (used_ < 64) return;
      compress(buf_.data());
      used_ = 0;
    }
#ifdef KVTK_SHA256_SHANI
    if (!std::is_constant_evaluated() && i + 64 <= bytes.size() && sha256_has_shani() &&
        !force_portable_) {
      const std::size_t blocks = (bytes.size() - i) / 64;
      sha256_shani(state_.data(), bytes.data() + i, blocks);
      i += blocks * 64;
    }
#endif
    for (; i + 64 <= bytes.size(); i += 64) compress(bytes.data() + i);
    while (i < bytes.size()) buf_[used_++] = bytes[i++];
  }
  /// Effects: appends the characters' bytes (no terminator).
  constexpr void update(std::string_view s) noexcept {
    if (std::is_constant_evaluated()) {
      for (char c : s) update_byte(static_cast<std::uint8_t>(c));
    } else {
      update(
          std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()));
    }
  }
  /// Effects: appends one byte.
  constexpr void update_byte(std::uint8_t b) noexcept {
    update(std::span<const std::uint8_t>(&b, 1));
  }

  /// Returns: the digest of everything appended since construction or reset().
  /// Effects: pads the message; call reset() before appending again.  Complexity: O(1).
  constexpr sha256_digest final() noexcept {
    const std::uint64_t bits = total_ * 8;
    buf_[used_++] = 0x80;
    if (used_ > 56) {
      while (used_ < 64) buf_[used_++] = 0;
      compress(buf_.data());
      used_ = 0;
    }
    while (used_ < 56) buf_[used_++] = 0;
    for (int k = 7; k >= 0; --k) buf_[used_++] = static_cast<std::uint8_t>(bits >> (8 * k));
    compress(buf_.data());
    sha256_digest out{};
    for (std::size_t w = 0; w < 8; ++w) {
      for (std::size_t b = 0; b < 4; ++b) {
        out[w * 4 + b] = static_cast<std::uint8_t>(state_[w] >> (24 - 8 * b));
      }
    }
    return out;
  }

  /// The digest of one message.  Complexity: O(bytes.size()).
  static constexpr sha256_digest of(std::span<const std::uint8_t> bytes) noexcept {
    sha256 h;
    h.update(bytes);
    return h.final();
  }
  static constexpr sha256_digest of(std::string_view s) noexcept {
    sha256 h;
    h.update(s);
    return h.final();
  }

 private:
  static constexpr std::uint32_t rotr(std::uint32_t x, int n) noexcept {
    return (x >> n) | (x << (32 - n));
  }

  constexpr void compress(const std::uint8_t* p) noexcept {
#ifdef KVTK_SHA256_SHANI
    if (!std::is_constant_evaluated() && sha256_has_shani() && !force_portable_) {
      sha256_shani(state_.data(), p, 1);
      return;
    }
#endif
    compress_portable(p);
  }

 public:
  /// Tests: makes this object hash with the portable code even where SHA-NI is there.
  constexpr void force_portable() noexcept { force_portable_ = true; }

 private:
  constexpr void compress_portable(const std::uint8_t* p) noexcept {
    const auto& k = sha256_k;
    std::array<std::uint32_t, 64> w{};
    for (std::size_t i = 0; i < 16; ++i) {
      w[i] = (std::uint32_t{p[4 * i]} << 24) | (std::uint32_t{p[4 * i + 1]} << 16) |
             (std::uint32_t{p[4 * i + 2]} << 8) | std::uint32_t{p[4 * i + 3]};
    }
    for (std::size_t i = 16; i < 64; ++i) {
      const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    std::uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
    std::uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
    for (std::size_t i = 0; i < 64; ++i) {
      const std::uint32_t t1 =
          h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      const std::uint32_t t2 =
          (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state_[0] += a;
    state_[1] += b;
    state_[2] += c;
    state_[3] += d;
    state_[4] += e;
    state_[5] += f;
    state_[6] += g;
    state_[7] += h;
  }

  std::array<std::uint32_t, 8> state_{};
  std::array<std::uint8_t, 64> buf_{};
  std::uint64_t total_ = 0;  // bytes appended
  std::size_t used_ = 0;     // bytes in buf_
  bool force_portable_ = false;
};

}  // namespace kvtk::detail
