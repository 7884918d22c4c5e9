#include "formats/mooncake_flat.hpp"

#include <fstream>
#include <limits>

#include "formats/jsonl_scan.hpp"

namespace kvtk::sim {
namespace {

// One record: hash_ids always; input_length and timestamp when reading requests.
struct record {
  bool has_ids = false, has_length = false, has_time = false, has_output = false;
  std::uint64_t input_length = 0, output_length = 0;
  double timestamp = 0;
};

// Reads `in` line by line, validating each line and calling on_record(ids, record, lineno). With
// skip_invalid a bad line (including one on_record rejects) is counted in `report` and skipped.
template <class F>
void for_each_record(std::istream& in, const std::string& name, bool need_length, F&& on_record,
                     const read_options& opts = {}, read_report* report = nullptr) {
  std::string line;
  std::uint64_t lineno = 0;
  std::vector<std::uint64_t> ids;
  while (std::getline(in, line)) {
    ++lineno;
    try {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      const std::size_t first = line.find_first_not_of(" \t");
      if (first == std::string::npos) {
        throw trace_error(name, lineno, "empty line (expected a JSON object)");
      }
      if (line[first] != '{') throw trace_error(name, lineno, "expected a JSON object");
      record rec;
      std::string problem;
      const std::string err = jsonl::scan_object(
          line, ids, [](std::string_view key) { return key == "hash_ids"; },
          [&](std::string_view key, const jsonl::value& v) {
            if (key == "hash_ids") {
              rec.has_ids = true;
              if (v.type != jsonl::kind::int_array) {
                problem = "'hash_ids' must be an array";
              } else if (v.bad_element != jsonl::value::npos) {
                const std::string at = "'hash_ids'[" + std::to_string(v.bad_element) + "]";
                problem = v.bad_type == "negative"
                              ? at + " is negative"
                              : at + " must be an integer, got " + std::string(v.bad_type);
              }
            } else if (key == "timestamp" && need_length) {
              rec.has_time = true;
              if (v.type != jsonl::kind::integer && v.type != jsonl::kind::number) {
                problem = "'timestamp' must be a number, got " + std::string(v.type_name());
              } else {
                rec.timestamp = v.number;
              }
            } else if (key == "output_length" && need_length) {
              if (v.type == jsonl::kind::integer && !v.negative) {
                rec.has_output = true;
                rec.output_length = v.magnitude;
              } else {
                problem = "'output_length' must be a non-negative integer";
              }
            } else if (key == "input_length" && need_length) {
              rec.has_length = true;
              if (v.type == jsonl::kind::integer && v.negative && v.magnitude != 0) {
                problem = "'input_length' is negative";
              } else if (v.type != jsonl::kind::integer) {
                problem = "'input_length' must be an integer, got " + std::string(v.type_name());
              } else {
                rec.input_length = v.magnitude;
              }
            }
          });
      if (!err.empty()) throw trace_error(name, lineno, err);
      if (!problem.empty()) throw trace_error(name, lineno, problem);
      if (need_length && !rec.has_length) {
        throw trace_error(name, lineno, "missing field 'input_length'");
      }
      if (!rec.has_ids) throw trace_error(name, lineno, "missing field 'hash_ids'");
      on_record(ids, rec, lineno);
    } catch (const trace_error& e) {
      if (!opts.skip_invalid) throw;
      if (report != nullptr && report->skipped_lines++ == 0) report->first_error = e.what();
    }
  }
  if (in.bad()) throw trace_error(name, lineno, "read error");
}

}  // namespace

std::vector<std::uint64_t> parse_mooncake_flat(std::istream& in, const std::string& name) {
  std::vector<std::uint64_t> out;
  for_each_record(in, name, false,
                  [&](const std::vector<std::uint64_t>& ids, const record&, std::uint64_t) {
                    out.insert(out.end(), ids.begin(), ids.end());
                  });
  return out;
}

std::vector<std::uint64_t> load_mooncake_flat(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw trace_error(path, 0, "cannot open file");
  return parse_mooncake_flat(in, path);
}

namespace {

// Requests of a Mooncake (prefix ids) or Bailian (content ids, chained here) trace, with the
// checks both formats promise: one id per block of input, and arrival times that never go back.
kvtk::prefix::prefix_trace parse_requests(std::istream& in, const std::string& name,
                                          std::uint32_t block_tokens, bool content_ids,
                                          const read_options& opts, read_report* report) {
  if (block_tokens == 0) throw trace_error(name, 0, "block size must be positive");
  kvtk::prefix::prefix_trace t;
  t.block_tokens = block_tokens;
  std::vector<kvtk::block_key> chained;
  double last_time = 0;
  bool any = false, saw_time = false, saw_output = false;
  for_each_record(
      in, name, true,
      [&](const std::vector<std::uint64_t>& ids, const record& r, std::uint64_t lineno) {
        const std::uint64_t want = (r.input_length + block_tokens - 1) / block_tokens;
        if (ids.size() != want) {
          throw trace_error(name, lineno,
                            "'hash_ids' has " + std::to_string(ids.size()) +
                                " ids but input_length " + std::to_string(r.input_length) +
                                " makes " + std::to_string(want) + " blocks of " +
                                std::to_string(block_tokens) + " tokens");
        }
        if (r.has_time) {
          if (any && r.timestamp < last_time) {
            throw trace_error(name, lineno,
                              "timestamp goes backwards (the format is in arrival order)");
          }
          last_time = r.timestamp;
          any = true;
        }
        if (content_ids) {
          chained.resize(ids.size());
          kvtk::prefix::chain_keys(ids, chained);
          t.add(chained, r.input_length);
        } else {
          t.add(ids, r.input_length);
        }
        // Mooncake times are milliseconds, Bailian times seconds.
        t.arrival_s.push_back(r.has_time ? r.timestamp * (content_ids ? 1.0 : 0.001)
                                         : std::numeric_limits<double>::quiet_NaN());
        t.output_length.push_back(r.output_length);
        saw_time |= r.has_time;
        saw_output |= r.has_output;
      },
      opts, report);
  if (!saw_time) t.arrival_s.clear();
  if (!saw_output) t.output_length.clear();
  return t;
}

}  // namespace

kvtk::prefix::prefix_trace parse_mooncake_requests(std::istream& in, const std::string& name,
                                                   std::uint32_t block_tokens) {
  return parse_requests(in, name, block_tokens, false, {}, nullptr);
}

kvtk::prefix::prefix_trace parse_bailian_requests(std::istream& in, const std::string& name,
                                                  std::uint32_t block_tokens) {
  return parse_requests(in, name, block_tokens, true, {}, nullptr);
}

std::string detect_format(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw trace_error(path, 0, "cannot open file");
  std::string line;
  std::uint64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (line.find("\"chat_id\"") != std::string::npos ||
        line.find("\"parent_chat_id\"") != std::string::npos) {
      return "bailian";
    }
    if (line.find("\"hash_ids\"") != std::string::npos) return "mooncake";
    throw trace_error(path, lineno,
                      "cannot detect the format (no hash_ids or chat_id); give --format");
  }
  throw trace_error(path, 0, "empty trace: cannot detect the format");
}

kvtk::prefix::prefix_trace load_requests(const std::string& path, const std::string& format,
                                         std::uint32_t block_tokens, const read_options& opts,
                                         read_report* report) {
  const std::string f = format == "auto" ? detect_format(path) : format;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw trace_error(path, 0, "cannot open file");
  if (f == "mooncake") {
    return parse_requests(in, path, block_tokens ? block_tokens : 512, false, opts, report);
  }
  if (f == "bailian") {
    return parse_requests(in, path, block_tokens ? block_tokens : 16, true, opts, report);
  }
  throw trace_error(path, 0, "unsupported format '" + f + "'");
}

kvtk::prefix::prefix_trace load_mooncake_requests(const std::string& path,
                                                  std::uint32_t block_tokens) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw trace_error(path, 0, "cannot open file");
  return parse_mooncake_requests(in, path, block_tokens);
}

}  // namespace kvtk::sim
