#include "formats/mooncake_flat.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

namespace kvtk::sim {

std::vector<std::uint64_t> parse_mooncake_flat(std::istream& in, const std::string& name) {
  std::vector<std::uint64_t> ids;
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
    const auto it = j.find("hash_ids");
    if (it == j.end()) throw trace_error(name, lineno, "missing field 'hash_ids'");
    if (!it->is_array()) throw trace_error(name, lineno, "'hash_ids' must be an array");
    for (std::size_t k = 0; k < it->size(); ++k) {
      const nlohmann::json& v = (*it)[k];
      if (v.is_number_unsigned()) {
        ids.push_back(v.get<std::uint64_t>());
      } else if (v.is_number_integer()) {
        throw trace_error(name, lineno, "'hash_ids'[" + std::to_string(k) + "] is negative");
      } else {
        throw trace_error(name, lineno,
                          "'hash_ids'[" + std::to_string(k) + "] must be an integer, got " +
                              std::string(v.type_name()));
      }
    }
  }
  if (in.bad()) throw trace_error(name, lineno, "read error");
  return ids;
}

std::vector<std::uint64_t> load_mooncake_flat(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw trace_error(path, 0, "cannot open file");
  return parse_mooncake_flat(in, path);
}

}  // namespace kvtk::sim
