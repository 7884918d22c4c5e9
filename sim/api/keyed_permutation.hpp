// sim/api/keyed_permutation.hpp — a secret, keyed permutation of 64-bit ids (what `kvtk trace
// anonymize` re-keys blocks and sessions with) and keyed opaque names (tenants).
//
// Design: a balanced Feistel network on two 32-bit halves, ten rounds (as NIST SP 800-38G's FF1
// uses ten), each round function the first 4 bytes of SHA-256(K || domain || round || half),
// where K = SHA-256("kvtk-anonymize-v1" || salt) fills the first 64-byte block so that a round
// costs one compression (the keyed midstate is computed once).
//  * A permutation, not a hash: distinct ids stay distinct whatever the salt, so prefix equality
//    (and therefore every hit, miss and eviction of a replay) is kept exactly, with no collision
//    probability to argue about.
//  * Without the salt the map cannot be computed, so a public prompt's well-known block hash
//    cannot be looked up in the anonymized trace. With the same salt two traces anonymize
//    consistently (a block shared between them keeps one new key).
//  * The domain byte separates the maps: a block key and a session id that happen to be equal
//    do not map to the same value.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "kvtk/detail/sha256.hpp"

namespace kvtk::sim {

class keyed_permutation {
 public:
  static constexpr int rounds = 10;

  /// Requires: salt is the secret (any length; `kvtk trace anonymize` asks for >= 16 bytes).
  explicit keyed_permutation(std::span<const std::uint8_t> salt) noexcept {
    kvtk::detail::sha256 k;
    k.update(std::string_view("kvtk-anonymize-v1"));
    k.update(salt);
    const auto key = k.final();
    std::array<std::uint8_t, 64> block{};
    for (std::size_t i = 0; i < key.size(); ++i) block[i] = key[i];
    keyed_.update(std::span<const std::uint8_t>(block));  // one whole block: the midstate
  }

  /// Returns: the image of x in the permutation of `domain` (a bijection of 64-bit values for
  /// each domain).  Complexity: `rounds` SHA-256 compressions.  Throws: nothing.
  [[nodiscard]] std::uint64_t operator()(std::uint64_t x, std::uint8_t domain) const noexcept {
    std::uint32_t left = static_cast<std::uint32_t>(x >> 32), right = static_cast<std::uint32_t>(x);
    for (std::uint8_t r = 0; r < rounds; ++r) {
      const std::uint32_t f = round_function(domain, r, right);
      const std::uint32_t next = left ^ f;
      left = right;
      right = next;
    }
    return (std::uint64_t{left} << 32) | right;
  }

  /// Returns: the inverse of operator() (tests; the tool never inverts).
  [[nodiscard]] std::uint64_t inverse(std::uint64_t y, std::uint8_t domain) const noexcept {
    std::uint32_t left = static_cast<std::uint32_t>(y >> 32), right = static_cast<std::uint32_t>(y);
    for (int r = rounds - 1; r >= 0; --r) {
      const std::uint32_t prev = right ^ round_function(domain, static_cast<std::uint8_t>(r), left);
      right = left;
      left = prev;
    }
    return (std::uint64_t{left} << 32) | right;
  }

  /// Returns: 64 keyed bits of a name (a tenant, a model): an opaque id, "t" + 16 hex digits in
  /// the tool. Not a permutation (names are strings); the caller checks that distinct names got
  /// distinct ids.
  [[nodiscard]] std::uint64_t name_bits(std::string_view name, std::uint8_t domain) const noexcept {
    kvtk::detail::sha256 h = keyed_;
    h.update_byte(domain);
    h.update_byte(0xff);  // never a round number
    h.update(name);
    const auto d = h.final();
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | d[static_cast<std::size_t>(i)];
    return v;
  }

 private:
  [[nodiscard]] std::uint32_t round_function(std::uint8_t domain, std::uint8_t round,
                                             std::uint32_t half) const noexcept {
    kvtk::detail::sha256 h = keyed_;
    const std::array<std::uint8_t, 6> in = {domain,
                                            round,
                                            static_cast<std::uint8_t>(half >> 24),
                                            static_cast<std::uint8_t>(half >> 16),
                                            static_cast<std::uint8_t>(half >> 8),
                                            static_cast<std::uint8_t>(half)};
    h.update(std::span<const std::uint8_t>(in));
    const auto d = h.final();
    return (std::uint32_t{d[0]} << 24) | (std::uint32_t{d[1]} << 16) | (std::uint32_t{d[2]} << 8) | d[3];
  }

  kvtk::detail::sha256 keyed_;
};

}  // namespace kvtk::sim
