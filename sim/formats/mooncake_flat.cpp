#include "formats/mooncake_flat.hpp"

#include <fstream>

#include "formats/jsonl_scan.hpp"
#include "formats/line_reader.hpp"
#include "formats/requests.hpp"

namespace kvtk::sim {

std::vector<std::uint64_t> parse_mooncake_flat(std::istream& in, const std::string& name) {
  std::vector<std::uint64_t> out, ids;
  line_reader lines(in, name);
  std::string_view line;
  std::uint64_t lineno = 0;
  while (lines.next(line)) {
    lineno = lines.line_number();
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::size_t first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos) {
      throw trace_error(name, lineno, "empty line (expected a JSON object)");
    }
    if (line[first] != '{') throw trace_error(name, lineno, "expected a JSON object");
    // A kvtk JSONL header ({"kvtk_trace": 1, "block_tokens": B}) carries no blocks; the request
    // lines after it read like Mooncake lines (their hash_ids are the prefix keys).
    if (lineno == 1 && line.find("\"kvtk_trace\"") != std::string_view::npos) continue;
    bool has_ids = false;
    std::string problem;
    const std::string err = jsonl::scan_object(
        line, ids, [](std::string_view key) { return key == "hash_ids"; },
        [&](std::string_view key, const jsonl::value& v) {
          if (key != "hash_ids") return;
          has_ids = true;
          if (v.type != jsonl::kind::int_array) {
            problem = "'hash_ids' must be an array";
          } else if (v.bad_element != jsonl::value::npos) {
            const std::string at = "'hash_ids'[" + std::to_string(v.bad_element) + "]";
            problem = v.bad_type == "negative"
                          ? at + " is negative"
                          : at + " must be an integer, got " + std::string(v.bad_type);
          }
        });
    if (!err.empty()) throw trace_error(name, lineno, err);
    if (!problem.empty()) throw trace_error(name, lineno, problem);
    if (!has_ids) throw trace_error(name, lineno, "missing field 'hash_ids'");
    out.insert(out.end(), ids.begin(), ids.end());
  }
  if (in.bad()) throw trace_error(name, lineno, "read error");
  return out;
}

std::vector<std::uint64_t> load_mooncake_flat(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw trace_error(path, 0, "cannot open file");
  return parse_mooncake_flat(in, path);
}

namespace {
kvtk::prefix::prefix_trace read_stream(std::istream& in, const std::string& name, trace_format f,
                                       std::uint32_t block_tokens, const read_options& opts,
                                       read_report* report) {
  if (block_tokens == 0) throw trace_error(name, 0, "block size must be positive");
  trace_builder b(block_tokens);
  for_each_request(in, name, f, block_tokens, opts, report,
                   [&](const request_record& r) { b.add(r); });
  return b.finish();
}
}  // namespace

kvtk::prefix::prefix_trace parse_mooncake_requests(std::istream& in, const std::string& name,
                                                   std::uint32_t block_tokens) {
  return read_stream(in, name, trace_format::mooncake, block_tokens, {}, nullptr);
}

kvtk::prefix::prefix_trace parse_bailian_requests(std::istream& in, const std::string& name,
                                                  std::uint32_t block_tokens) {
  return read_stream(in, name, trace_format::bailian, block_tokens, {}, nullptr);
}

kvtk::prefix::prefix_trace parse_kvtk_requests(std::istream& in, const std::string& name,
                                               std::uint32_t block_tokens) {
  return read_stream(in, name, trace_format::kvtk, block_tokens, {}, nullptr);
}

std::string detect_format(const std::string& path) {
  return std::string(format_name(detect_trace_format(path)));
}

kvtk::prefix::prefix_trace load_requests(const std::string& path, const std::string& format,
                                         std::uint32_t block_tokens, const read_options& opts,
                                         read_report* report) {
  const auto f = format == "auto" ? detect_trace_format(path) : parse_format_name(format);
  if (!f || *f == trace_format::kvtb) {
    throw trace_error(path, 0, "unsupported format '" + format + "' for an in-memory load");
  }
  const std::uint32_t bt = block_tokens ? block_tokens : default_block_tokens(path, *f);
  trace_builder b(bt);
  for_each_request(path, *f, bt, opts, report, [&](const request_record& r) { b.add(r); });
  return b.finish();
}

kvtk::prefix::prefix_trace load_mooncake_requests(const std::string& path,
                                                  std::uint32_t block_tokens) {
  return load_requests(path, "mooncake", block_tokens);
}

}  // namespace kvtk::sim
