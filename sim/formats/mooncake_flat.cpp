#include "formats/mooncake_flat.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

namespace kvtk::sim {
namespace {

// Calls on_line(json object, lineno) for every line after the shared checks.
template <class F>
void for_each_record(std::istream& in, const std::string& name, F&& on_line) {
  std::string line;
  std::uint64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) {
      throw trace_error(name, lineno, "empty line (expected a JSON object)");
    }
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) throw trace_error(name, lineno, "invalid JSON");
    if (!j.is_object()) throw trace_error(name, lineno, "expected a JSON object");
    on_line(j, lineno);
  }
  if (in.bad()) throw trace_error(name, lineno, "read error");
}

void append_hash_ids(const nlohmann::json& j, const std::string& name, std::uint64_t lineno,
                     std::vector<std::uint64_t>& out) {
  const auto it = j.find("hash_ids");
  if (it == j.end()) throw trace_error(name, lineno, "missing field 'hash_ids'");
  if (!it->is_array()) throw trace_error(name, lineno, "'hash_ids' must be an array");
  for (std::size_t k = 0; k < it->size(); ++k) {
    const nlohmann::json& v = (*it)[k];
    if (v.is_number_unsigned()) {
      out.push_back(v.get<std::uint64_t>());
    } else if (v.is_number_integer()) {
      throw trace_error(name, lineno, "'hash_ids'[" + std::to_string(k) + "] is negative");
    } else {
      throw trace_error(name, lineno,
                        "'hash_ids'[" + std::to_string(k) + "] must be an integer, got " +
                            std::string(v.type_name()));
    }
  }
}

}  // namespace

std::vector<std::uint64_t> parse_mooncake_flat(std::istream& in, const std::string& name) {
  std::vector<std::uint64_t> ids;
  for_each_record(in, name, [&](const nlohmann::json& j, std::uint64_t lineno) {
    append_hash_ids(j, name, lineno, ids);
  });
  return ids;
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
  std::vector<std::uint64_t> ids;
  for_each_record(in, name, [&](const nlohmann::json& j, std::uint64_t lineno) {
    const auto len = j.find("input_length");
    if (len == j.end()) throw trace_error(name, lineno, "missing field 'input_length'");
    if (len->is_number_integer() && !len->is_number_unsigned()) {
      throw trace_error(name, lineno, "'input_length' is negative");
    }
    if (!len->is_number_unsigned()) {
      throw trace_error(name, lineno,
                        "'input_length' must be an integer, got " + std::string(len->type_name()));
    }
    ids.clear();
    append_hash_ids(j, name, lineno, ids);
    t.add(ids, len->get<std::uint64_t>());
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
