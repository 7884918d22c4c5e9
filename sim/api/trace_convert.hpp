// sim/api/trace_convert.hpp — `kvtk trace convert` as a library call: any readable trace format
// to kvtk, kvtb, mooncake, ids or oracle-general, streaming (constant memory except
// oracle-general's next-access pass). Keys are written as prefix ids, so the converted trace
// replays identically.
//
//   kvtk::sim::trace_convert_options o;
//   o.trace = "traces/mooncake_fast25_conversation_trace.jsonl";
//   o.output = "conversation.kvtb";
//   std::cout << kvtk::sim::run(o).requests << "\n";
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "api/progress.hpp"

namespace kvtk::sim {

/// What `kvtk trace convert` does; each field is the option of the same name.
struct trace_convert_options {
  std::string trace;               ///< input trace (required)
  std::string format = "auto";     ///< input format, or auto
  std::uint32_t block_tokens = 0;  ///< tokens per block of the input; 0 = the trace's
  std::string output;              ///< output file, or - for stdout (required)
  std::string to;                  ///< kvtk | kvtb | mooncake | ids | oracle-general; "" = kvtb
                                   ///< for a .kvtb output name, else required
  bool skip_invalid = false;       ///< skip malformed input lines (counted) instead of stopping
  bool infer_sessions = false;     ///< write session, request id, parent and turn inferred from
                                   ///< prefixes (kvtk/prefix/sessions.hpp); the input must have
                                   ///< no session fields, the output must hold them (kvtk, kvtb)
  bool force = false;              ///< replace an existing output file (never an input)
};

nlohmann::json to_json(const trace_convert_options& o);
/// Throws usage_error naming an unknown key or a value of the wrong type.
trace_convert_options trace_convert_options_from_json(const nlohmann::json& j);
/// Checks the options and resolves format, block_tokens and `to`, in place. Throws
/// usage_error naming the option; trace_error when the input cannot be read.
void validate(trace_convert_options& o);

struct trace_convert_result {
  std::uint64_t requests = 0;       ///< requests written
  std::uint64_t skipped_lines = 0;  ///< invalid lines skipped (skip_invalid)
  std::string first_error;          ///< the first skipped line's error
  std::uint64_t decode_records = 0;  ///< decode-step records not carried (request formats only)
  std::string from, to;             ///< the formats read and written
  std::uint32_t block_tokens = 0;   ///< the input's block size
  std::string output;
  std::uint64_t continuations = 0;  ///< infer_sessions: requests given a parent
};

/// Progress counts requests (total unknown: 0). Throws: as validate(); trace_error naming the
/// input line; output_refused / output_error naming the output.
trace_convert_result run(trace_convert_options options, const progress_callback& progress = {});

/// What `kvtk trace convert` prints on stderr: skipped lines, dropped decode records, the summary.
std::string to_text(const trace_convert_result& r);

}  // namespace kvtk::sim
