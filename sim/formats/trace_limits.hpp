// sim/formats/trace_limits.hpp — the range rules every trace reader applies, so that a request
// one format rejects is rejected by all of them (JSONL, kvtb, flat formats).
//
// Why these bounds: they are far beyond any real request (a 2^32-token prompt is ~4,000 times
// the longest context of 2025 models) yet keep every derived product exact in 64 bits: tokens x
// requests, blocks x bytes per block, and token counts converted to double (< 2^53).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace kvtk::sim::limits {

inline constexpr std::uint64_t max_input_tokens = std::uint64_t{1} << 32;   ///< exclusive
inline constexpr std::uint64_t max_output_tokens = std::uint64_t{1} << 32;  ///< exclusive
inline constexpr std::uint32_t max_block_tokens = 1u << 20;                 ///< inclusive
inline constexpr double max_arrival_s = 1e12;  ///< about 31,700 years of trace, inclusive
/// The longest line of a text trace (JSONL, ids), inclusive. 64 MiB holds over three million
/// block ids: a 50M-token prompt at 16 tokens per block.
inline constexpr std::size_t max_line_bytes = std::size_t{64} << 20;

/// The first problem with a request's numbers, or "" when they are in range. `keys`: the number
/// of block keys the request lists, which must be ceil(input_length / block_tokens).
inline std::string request_problem(std::uint64_t input_length, std::uint64_t keys,
                                   std::uint64_t block_tokens, std::optional<double> arrival_s,
                                   std::optional<std::uint64_t> output_length) {
  if (block_tokens == 0 || block_tokens > max_block_tokens) {
    return "block size " + std::to_string(block_tokens) + " is outside [1, 2^20] tokens";
  }
  if (input_length >= max_input_tokens) {
    return "input_length " + std::to_string(input_length) + " is not below 2^32 tokens";
  }
  if (output_length && *output_length >= max_output_tokens) {
    return "output_length " + std::to_string(*output_length) + " is not below 2^32 tokens";
  }
  if (arrival_s && !std::isnan(*arrival_s) &&
      (!std::isfinite(*arrival_s) || *arrival_s < 0 || *arrival_s > max_arrival_s)) {
    return "arrival time " + std::to_string(*arrival_s) + " s is outside [0, 1e12] s";
  }
  const std::uint64_t want = (input_length + block_tokens - 1) / block_tokens;
  if (keys != want) {
    return std::to_string(keys) + " block keys but input_length " + std::to_string(input_length) +
           " makes " + std::to_string(want) + " blocks of " + std::to_string(block_tokens) +
           " tokens";
  }
  return {};
}

}  // namespace kvtk::sim::limits
