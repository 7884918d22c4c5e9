// kvtk/prefix/block_keys.hpp — chained prefix keys for KV blocks.
//
// A request's prompt is a sequence of blocks of `block_tokens` tokens. A KV block can be reused
// only together with everything before it, so its cache key must identify the whole prefix:
//
//   key(0) = H(chain_root, content(0)),   key(i) = H(key(i-1), content(i))
//
// H is `chain_hash` by default: splitmix64(parent * 0x9E3779B97F4A7C15 + content), a bijection in
// `content` for a fixed parent, with full avalanche (any parent bit changes every output bit with
// probability 1/2). Pass any callable uint64(uint64 parent, uint64 content) to replace it (e.g. to
// match an engine's own hashing).
//
// Traces differ in what their ids are:
//  * Mooncake `hash_ids` are already prefix ids (each id names its block and all before it): use
//    them unchanged.
//  * Alibaba Bailian `hash_ids` are per-block *content* ids: equal content under different
//    prefixes shares an id, so they must be chained with chain_keys() before use as cache keys.
/// Thread safety: pure functions and constants.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>

#include "kvtk/names.hpp"
#include "kvtk/detail/mix.hpp"

namespace kvtk::prefix {

/// The parent key of a request's first block.
inline constexpr std::uint64_t chain_root = 0x6b76746b2d726f6full;  // "kvtk-roo"

/// Default chaining hash H(parent, content).
struct chain_hash {
  constexpr std::uint64_t operator()(std::uint64_t parent, std::uint64_t content) const noexcept {
    return detail::mix64(parent * 0x9E3779B97F4A7C15ull + content);
  }
};

/// Requires: out.size() >= content.size().
/// Effects: out[i] = H(out[i-1], content[i]) with out[-1] = root.  Complexity: O(n).
/// Throws: std::invalid_argument if out is too small.
template <class H = chain_hash>
void chain_keys(std::span<const std::uint64_t> content, std::span<std::uint64_t> out, H h = {},
                std::uint64_t root = chain_root) {
  if (out.size() < content.size()) throw std::invalid_argument("chain_keys: output too small");
  std::uint64_t parent = root;
  for (std::size_t i = 0; i < content.size(); ++i) {
    parent = h(parent, content[i]);
    out[i] = parent;
  }
}

/// Which blocks of a request are cacheable.
enum class partial_block : std::uint8_t {
  skip,   ///< only full blocks (vLLM, SGLang with page size > 1): the default
  cache,  ///< the partial last block too (SGLang page size 1; how Mooncake's published hit ratios
          ///< count: every listed hash_id is a block)
};

/// The rule names, as the CLI, JSON options and Python spell them.
inline constexpr name_table<partial_block, 2> partial_block_names{"partial-block rule",
                                                                   {"skip", "cache"}};

/// Number of cacheable blocks of a request with `input_length` tokens.
/// Requires: block_tokens > 0 (0 gives 0).
constexpr std::uint64_t cacheable_blocks(std::uint64_t input_length, std::uint32_t block_tokens,
                                         partial_block p = partial_block::skip) noexcept {
  if (block_tokens == 0) return 0;
  const std::uint64_t full = input_length / block_tokens;
  return full + ((p == partial_block::cache && input_length % block_tokens != 0) ? 1 : 0);
}

/// Tokens of block i (0-based) of a request with `input_length` tokens in blocks of
/// `block_tokens`: block_tokens for a full block, the remainder for the partial last one, 0 past
/// the end. The one definition of "tokens in block i" (hit tokens, token refs, load sizes).
constexpr std::uint64_t tokens_in_block(std::uint64_t input_length, std::uint32_t block_tokens,
                                        std::uint64_t i) noexcept {
  const std::uint64_t begin = i * block_tokens, end = begin + block_tokens;
  return (end < input_length ? end : input_length) - (begin < input_length ? begin : input_length);
}

/// Tokens of a request's first n blocks: min(n * block_tokens, input_length). With n the hit
/// length this is the definition of hit tokens (README "Definitions").
constexpr std::uint64_t tokens_in_blocks(std::uint64_t input_length, std::uint32_t block_tokens,
                                         std::uint64_t n) noexcept {
  const std::uint64_t t = n * block_tokens;
  return t < input_length ? t : input_length;
}

}  // namespace kvtk::prefix
