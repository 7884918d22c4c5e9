#include "formats/mooncake_flat.hpp"

#include <fstream>

#include "formats/jsonl_scan.hpp"

namespace kvtk::sim {
namespace {

// One Mooncake record: hash_ids always, input_length when asked for.
struct record {
  bool has_ids = false, has_length = false;
  std::uint64_t input_length = 0;
};

// Reads `in` line by line, validating each line and calling on_record(ids, record).
template <class F>
void for_each_record(std::istream& in, const std::string& name, bool need_length, F&& on_record) {
  std::string line;
  std::uint64_t lineno = 0;
  std::vector<std::uint64_t> ids;
  while (std::getline(in, line)) {
    ++lineno;
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
    on_record(ids, rec);
  }
  if (in.bad()) throw trace_error(name, lineno, "read error");
}

}  // namespace

std::vector<std::uint64_t> parse_mooncake_flat(std::istream& in, const std::string& name) {
  std::vector<std::uint64_t> out;
  for_each_record(in, name, false, [&](const std::vector<std::uint64_t>& ids, const record&) {
    out.insert(out.end(), ids.begin(), ids.end());
  });
  return out;
}

std::vector<std::uint64_t> load_mooncake_flat(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw trace_error(path, 0, "cannot open file");
  return parse_mooncake_flat(in, path);
}

kvtk::prefix::prefix_trace parse_mooncake_requests(std::istream& in, const std::string& name,
                                                   std::uint32_t block_tokens) {
  kvtk::prefix::prefix_trace t;
  t.block_tokens = block_tokens;
  for_each_record(in, name, true, [&](const std::vector<std::uint64_t>& ids, const record& r) {
    t.add(ids, r.input_length);
  });
  return t;
}

kvtk::prefix::prefix_trace load_mooncake_requests(const std::string& path,
                                                  std::uint32_t block_tokens) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw trace_error(path, 0, "cannot open file");
  return parse_mooncake_requests(in, path, block_tokens);
}

}  // namespace kvtk::sim
