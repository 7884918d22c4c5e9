// sim/cli/trace_gen.hpp — `kvtk trace gen`: synthetic DeepSeek-style request traces.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace kvtk::sim {

/// Generator knobs (see docs in trace_gen.cpp and README).
struct gen_options {
  std::string profile = "mixed";  ///< chat | agent | api | mixed
  std::uint64_t requests = 10000;
  std::uint64_t seed = 1;
  std::uint32_t block_tokens = 64;
  double rate_per_s = 5.0;  ///< mean arrival rate (day/night modulated)
};

/// Writes `opts.requests` Mooncake-format JSONL lines (timestamp ms, input_length,
/// output_length, hash_ids = prefix ids of block_tokens-token blocks) to out. Deterministic for a
/// seed; memory is bounded by the live sessions, not by the number of requests.
void generate_trace(const gen_options& opts, std::ostream& out);

}  // namespace kvtk::sim
