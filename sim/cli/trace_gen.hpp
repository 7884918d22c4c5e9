// sim/cli/trace_gen.hpp — `kvtk trace gen`: synthetic DeepSeek-style request traces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "formats/requests.hpp"

namespace kvtk::sim {

/// Generator knobs (see docs in trace_gen.cpp and README).
struct gen_options {
  std::string profile = "mixed";  ///< chat | agent | api | mixed
  std::uint64_t requests = 10000;
  std::uint64_t seed = 1;
  std::uint32_t block_tokens = 64;
  double rate_per_s = 5.0;  ///< mean arrival rate (day/night modulated)
  std::string arrivals = "poisson";  ///< poisson | bursty (gamma inter-arrivals)
  double burst_cv = 3.0;  ///< bursty: coefficient of variation of the inter-arrival times (> 1)
  std::uint32_t tenants = 4;  ///< tenants t0..t{n-1}, Zipf-weighted per session (0 = none)
};

/// Generates `opts.requests` requests (arrival, input and output length, prefix keys of
/// block_tokens-token blocks, session id, tenant) and hands each to `sink` in arrival order.
/// Deterministic for a seed (tenants come from a separate stream, so they never change the
/// requests); memory is bounded by the live sessions, not by the number of requests.
void generate_trace(const gen_options& opts, const request_sink& sink);

/// Runs `kvtk trace gen` with the arguments after "gen". Returns the exit code.
int run_trace_gen(const std::vector<std::string>& args);

}  // namespace kvtk::sim
