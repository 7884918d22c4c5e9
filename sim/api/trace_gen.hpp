// sim/api/trace_gen.hpp — `kvtk trace gen` as a library call: synthetic DeepSeek-style request
// traces (the workload model is described atop api/trace_gen.cpp), streamed to a file or to any
// sink.
//
//   kvtk::sim::trace_gen_options o;
//   o.gen.requests = 20000;
//   o.output = "gen.kvtb";
//   kvtk::sim::run(o);  // or generate_trace(o.gen, sink) for records in memory
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
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
  /// Also write each request's id, parent, turn and kind (chat, agent, tool), and tool_s on an
  /// agent step whose reply is a tool call; agents then run on their own clock (each step when
  /// its parent's reply and tool are done), so agent and mixed traces differ from those without
  /// (chat and api traces keep their keys, times and lengths).
  bool session_fields = false;
};

/// Generates `opts.requests` requests (arrival, input and output length, prefix keys of
/// block_tokens-token blocks, session id, tenant) and hands each to `sink` in arrival order.
/// Deterministic for a seed (tenants come from a separate stream, so they never change the
/// requests); memory is bounded by the live sessions, not by the number of requests.
void generate_trace(const gen_options& opts, const request_sink& sink);

/// What `kvtk trace gen` does: the generator's knobs and where to write.
struct trace_gen_options {
  gen_options gen;
  std::string output;  ///< output file, or - for stdout (required)
  std::string to;      ///< kvtk | kvtb | mooncake; "" = kvtb for a .kvtb name, else kvtk
  bool force = false;  ///< replace an existing output file (never an input)
};

/// The knobs flattened ({"profile", "requests", "seed", "block_tokens", "rate", "arrivals",
/// "burst_cv", "tenants", "session_fields", "output", "to", "force"}).
nlohmann::json to_json(const trace_gen_options& o);
/// Throws usage_error naming an unknown key or a value of the wrong type.
trace_gen_options trace_gen_options_from_json(const nlohmann::json& j);
/// Checks the knobs and resolves `to`, in place. Throws usage_error naming the option.
void validate(trace_gen_options& o);

struct trace_gen_result {
  std::uint64_t requests = 0;         ///< requests written
  std::string output, format;         ///< where, and in which format
  std::vector<std::string> warnings;  ///< e.g. a Mooncake file of blocks other than 512 tokens
};

/// Effects: writes the trace by the output rules (temporary + rename; no overwrite without
/// force). Throws: as validate(); output_refused / output_error naming the file.
trace_gen_result run(trace_gen_options options);

}  // namespace kvtk::sim
