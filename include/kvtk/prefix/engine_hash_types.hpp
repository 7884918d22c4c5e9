// kvtk/prefix/engine_hash_types.hpp — what the engine hashers (vllm_hash.hpp, sglang_hash.hpp)
// take and give: token ranges, a request's extras, and the raw digest.
//
// One request_extras serves both engines, each reading its own fields and ignoring the rest, so a
// caller that switches engines (block_hasher) describes a request once. Token ids are Python ints
// to the engines: any random-access range of an integral type is accepted, each id in
// [-2^63, 2^63) (vLLM hashes any int; SGLang requires ids >= 0).
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kvtk/detail/sha256.hpp"

namespace kvtk::prefix {

/// An engine's block hash as raw bytes: 32 (SHA-256) or 16 (XXH3-128); unused bytes are zero.
/// A fixed array, not a vector: a request's chain of digests is one allocation.
struct block_digest {
  std::array<std::uint8_t, 32> data{};
  std::uint8_t size = 0;

  [[nodiscard]] std::span<const std::uint8_t> bytes() const noexcept { return {data.data(), size}; }
  /// Returns: lower-case hex of bytes() (SGLang's hash strings are this form).
  [[nodiscard]] std::string hex() const {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s;
    s.reserve(2 * size);
    for (std::size_t i = 0; i < size; ++i) {
      s.push_back(digits[data[i] >> 4]);
      s.push_back(digits[data[i] & 15]);
    }
    return s;
  }
  /// Requires: hex of 2..64 hex digits, even count.  Throws: std::invalid_argument otherwise.
  [[nodiscard]] static block_digest from_hex(std::string_view hex) {
    if (hex.size() % 2 != 0 || hex.empty() || hex.size() > 64) {
      throw std::invalid_argument("block_digest: hex must have 2..64 digits, an even count");
    }
    auto nibble = [](char c) -> std::uint8_t {
      if (c >= '0' && c <= '9') return static_cast<std::uint8_t>(c - '0');
      if (c >= 'a' && c <= 'f') return static_cast<std::uint8_t>(c - 'a' + 10);
      if (c >= 'A' && c <= 'F') return static_cast<std::uint8_t>(c - 'A' + 10);
      throw std::invalid_argument("block_digest: not a hex digit");
    };
    block_digest d;
    d.size = static_cast<std::uint8_t>(hex.size() / 2);
    for (std::size_t i = 0; i < d.size; ++i) {
      d.data[i] = static_cast<std::uint8_t>((nibble(hex[2 * i]) << 4) | nibble(hex[2 * i + 1]));
    }
    return d;
  }
  /// Returns: the first min(b.size(), 32) bytes of b.  Complexity: O(1).
  [[nodiscard]] static block_digest of(std::span<const std::uint8_t> b) noexcept {
    block_digest d;
    d.size = static_cast<std::uint8_t>(std::min<std::size_t>(b.size(), 32));
    std::copy_n(b.begin(), d.size, d.data.begin());
    return d;
  }
  friend bool operator==(const block_digest&, const block_digest&) = default;
};

/// vLLM: a request's LoRA adapter; also its ("lora", name, path) extra key.
struct vllm_lora_key {
  std::string name{}, path{};
};

/// A multimodal item of a vLLM request: its identifier (mm hash) and placeholder token range.
struct vllm_mm_item {
  std::string identifier{};
  std::uint64_t offset = 0;  ///< first placeholder token
  std::uint64_t length = 0;  ///< placeholder tokens
};

/// What besides the tokens names a request's blocks. Fields an engine does not use are ignored.
struct request_extras {
  /// Both engines; empty = none (vLLM tests `if cache_salt`, SGLang stores `cache_salt or None`).
  std::string cache_salt{};
  /// vLLM: the LoRA adapter (lora_name, lora_path).
  std::optional<vllm_lora_key> lora{};
  /// vLLM: multimodal items, sorted by offset (as vLLM keeps mm_features).
  std::vector<vllm_mm_item> mm{};
  /// vLLM: per hashed block, SHA-256 of its prompt embeddings' bytes; empty = not a prompt-embeds
  /// request. Must then have one digest per hashed block.
  std::vector<detail::sha256_digest> prompt_embeds{};
  /// SGLang: RadixKey.extra_key (LoRA id and/or user namespace); nullopt = None ("" differs).
  std::optional<std::string> extra_key{};
};

namespace detail_hasher {

/// Token ids as the engines see them (Python ints).
template <class R>
concept token_range =
    std::ranges::random_access_range<R> && std::integral<std::ranges::range_value_t<R>>;

/// Throws: std::invalid_argument for an unsigned id >= 2^63 (no int64 holds it).
template <class T>
std::int64_t token_value(T v) {
  if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(std::int64_t)) {
    if (v > static_cast<T>(INT64_MAX))
      throw std::invalid_argument("block_hasher: token id >= 2^63");
  }
  return static_cast<std::int64_t>(v);
}

/// The tokens as int64, the one width the serializers handle.
template <class R>
std::vector<std::int64_t> to_tokens(const R& r) {
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(std::ranges::size(r)));
  for (auto v : r) out.push_back(token_value(v));
  return out;
}

}  // namespace detail_hasher
}  // namespace kvtk::prefix
