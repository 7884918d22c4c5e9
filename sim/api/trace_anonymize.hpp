// sim/api/trace_anonymize.hpp — `kvtk trace anonymize` as a library call: a trace that can be
// shared. Every block key and session id goes through a secret keyed permutation
// (api/keyed_permutation.hpp), tenants become opaque ids, and arrival times can be shifted; the
// prefix structure, lengths, order and relative timing stay exact, so every replay of the result
// equals the replay of the input (tests/test_trace_anonymize.cpp checks it).
//
//   kvtk::sim::trace_anonymize_options o;
//   o.trace = "ours.kvtb";
//   o.output = "shareable.kvtb";
//   o.salt_file = "secret.salt";   // >= 16 bytes; "" = a random salt, used once and forgotten
//   kvtk::sim::run(o);
//
// What is kept: input and output lengths, the number of blocks, per-request block size,
// priorities, which requests share a session or a tenant, which request is whose parent, turns
// and request kinds, and arrival times (shifted when asked). What is not: key values, session
// and request ids, tenant names. Model names and cache_salts of kvtk JSONL
// traces were folded into the keys when read, so they are gone too. A kvtk routing policy that
// hashes the session id (`simulate`'s session affinity) sees other ids and can place sessions on
// other instances: only the key-level results (replay, mrc, tune) are identical by construction.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "api/progress.hpp"

namespace kvtk::sim {

/// What `kvtk trace anonymize` does; each field is the option of the same name.
struct trace_anonymize_options {
  std::string trace;               ///< input trace (required; any request format)
  std::string format = "auto";     ///< input format, or auto
  std::uint32_t block_tokens = 0;  ///< tokens per block of the input; 0 = the trace's
  std::string output;              ///< output file, or - for stdout (required)
  std::string to;                  ///< output format; "" = kvtb for a .kvtb name, else the input's
  std::string salt_file;           ///< the secret salt's file (16 B to 1 MiB, read whole); "" = a
                                   ///< random 32-byte salt from the OS, never written anywhere
  double time_shift_s = 0;         ///< seconds added to every arrival (after time_zero)
  bool time_zero = false;          ///< first shift arrivals so that the first is at 0
  bool force = false;              ///< replace an existing output file (never an input)
};

nlohmann::json to_json(const trace_anonymize_options& o);
/// Throws usage_error naming an unknown key or a value of the wrong type.
trace_anonymize_options trace_anonymize_options_from_json(const nlohmann::json& j);
/// Checks the options and resolves format, block_tokens and `to`, in place. Throws usage_error
/// naming the option; trace_error when the input cannot be read.
void validate(trace_anonymize_options& o);

struct trace_anonymize_result {
  std::uint64_t requests = 0, keys = 0;  ///< requests written, block keys re-keyed
  std::uint64_t sessions = 0, tenants = 0;  ///< distinct session ids and tenant names mapped
  bool random_salt = false;  ///< the salt was drawn and forgotten (not reproducible)
  std::string from, to, output;
  std::uint32_t block_tokens = 0;
};

nlohmann::json to_json(const trace_anonymize_result& r);
/// Progress counts requests (total unknown: 0). Throws: as validate(); trace_error naming the
/// input's line (malformed, or an arrival shifted outside [0, 1e12] s); output_refused /
/// output_error naming the output.
trace_anonymize_result run(trace_anonymize_options options, const progress_callback& progress = {});

/// What `kvtk trace anonymize` prints on stderr.
std::string to_text(const trace_anonymize_result& r);

}  // namespace kvtk::sim
