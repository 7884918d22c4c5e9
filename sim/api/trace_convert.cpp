#include "api/trace_convert.hpp"

#include "api/options_json.hpp"
#include "api/trace_options.hpp"
#include "formats/writers.hpp"
#include "kvtk/prefix/sessions.hpp"
#include "util/output_file.hpp"

namespace kvtk::sim {

nlohmann::json to_json(const trace_convert_options& o) {
  return {{"trace", o.trace}, {"format", o.format}, {"block_tokens", o.block_tokens},
          {"output", o.output}, {"to", o.to}, {"skip_invalid", o.skip_invalid}, {"infer_sessions", o.infer_sessions}, {"force", o.force}};
}

trace_convert_options trace_convert_options_from_json(const nlohmann::json& j) {
  trace_convert_options o;
  detail::options_reader in(j, "trace convert options");
  in.get("trace", o.trace);
  in.get("format", o.format);
  in.get("block_tokens", o.block_tokens);
  in.get("output", o.output);
  in.get("to", o.to);
  in.get("skip_invalid", o.skip_invalid);
  in.get("infer_sessions", o.infer_sessions);
  in.get("force", o.force);
  in.finish();
  return o;
}

void validate(trace_convert_options& o) {
  check_request_format(o.format);
  if (o.output.empty()) throw usage_error("-o: give the output file, or - for stdout");
  if (o.to.empty()) {
    if (o.output.size() < 5 || o.output.compare(o.output.size() - 5, 5, ".kvtb") != 0) {
      throw usage_error("--to: give the output format (kvtk kvtb mooncake ids oracle-general)");
    }
    o.to = "kvtb";
  }
  const auto f = parse_format_name(o.to);
  if (!f || *f == trace_format::bailian) {
    throw usage_error("--to: cannot write '" + o.to +
                      "' (writable: kvtk kvtb mooncake ids oracle-general)");
  }
  if (o.infer_sessions && *f != trace_format::kvtk && *f != trace_format::kvtb) {
    throw usage_error("--infer-sessions: '" + o.to + "' has no session fields (write kvtk or kvtb)");
  }
  resolve_trace(o.trace, o.format, o.block_tokens);  // trace_error: exit 1 via main
  // The output never replaces the input (or any other file without force).
  note_input(o.trace);
  check_output(o.output, o.force, "-o");
}

trace_convert_result run(trace_convert_options o, const progress_callback& progress) {
  validate(o);
  read_options ro;
  ro.skip_invalid = o.skip_invalid;
  read_report report;
  trace_convert_result r;
  const trace_format out_format = *parse_format_name(o.to);
  auto writer = trace_writer::open(o.output, out_format, o.block_tokens, o.force);
  detail::progress_relay bar(progress, 0);
  kvtk::prefix::session_inferrer sessions;
  for_each_request(o.trace, *parse_format_name(o.format), o.block_tokens, ro, &report,
                   [&](const request_record& in) {
                     request_record rec = in;
                     if (o.infer_sessions) {
                       if (in.session || in.parent || in.request_id || in.turn) {
                         throw trace_error(o.trace, in.line, "has session fields already; --infer-sessions is "
                                                             "for traces without them");
                       }
                       const std::uint64_t full = std::min<std::uint64_t>(in.input_length / in.block_tokens, in.keys.size());
                       const auto s = sessions.next(in.keys, in.input_length, full);
                       rec.session = s.session;
                       rec.request_id = s.request_id;
                       if (s.parent != kvtk::prefix::no_parent) rec.parent = s.parent;
                       rec.turn = s.turn;
                       r.continuations += s.parent != kvtk::prefix::no_parent;
                     }
                     try {
                       writer->add(rec);
                     } catch (const trace_error& e) {
                       // Writers name the record by line; the file is the input.
                       throw trace_error(o.trace, rec.line,
                                         e.what() + std::string(e.what()).find(": ", 0) + 2);
                     }
                     ++r.requests;
                     bar.add(1);
                   });
  writer->finish();
  r.skipped_lines = report.skipped_lines;
  r.first_error = report.first_error;
  r.decode_records = report.decode_records;
  r.from = o.format;
  r.to = format_name(out_format);
  r.block_tokens = o.block_tokens;
  r.output = o.output;
  return r;
}

std::string to_text(const trace_convert_result& r) {
  std::string s;
  if (r.skipped_lines > 0) {
    s += "kvtk trace convert: skipped " + std::to_string(r.skipped_lines) +
         " invalid line(s); the first: " + r.first_error + "\n";
  }
  if (r.decode_records > 0) {
    s += "kvtk trace convert: " + std::to_string(r.decode_records) +
         " decode-step record(s) were not carried (request formats only; keep the input for kvtk "
         "sparse)\n";
  }
  s += "kvtk trace convert: wrote " + std::to_string(r.requests) + " requests (" + r.from + " -> " +
       r.to + ", " + std::to_string(r.block_tokens) + "-token blocks) to " + r.output + "\n";
  if (r.continuations > 0) {
    s += "kvtk trace convert: inferred sessions: " + std::to_string(r.continuations) +
         " requests continue an earlier one, " + std::to_string(r.requests - r.continuations) + " start a session\n";
  }
  return s;
}

}  // namespace kvtk::sim
