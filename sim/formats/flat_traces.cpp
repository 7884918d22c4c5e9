#include "formats/flat_traces.hpp"

#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "formats/mooncake_flat.hpp"

namespace kvtk::sim {

std::vector<std::uint64_t> parse_ids(std::istream& in, const std::string& name) {
  std::vector<std::uint64_t> ids;
  std::string line;
  std::uint64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::size_t b = line.find_first_not_of(" \t");
    if (b == std::string::npos) throw trace_error(name, lineno, "empty line (expected an id)");
    const std::size_t e = line.find_last_not_of(" \t") + 1;
    const char* first = line.data() + b;
    const char* last = line.data() + e;
    if (*first == '-') throw trace_error(name, lineno, "negative id");
    std::uint64_t id = 0;
    const auto r = std::from_chars(first, last, id);
    if (r.ec == std::errc::result_out_of_range) {
      throw trace_error(name, lineno, "id does not fit in 64 bits");
    }
    if (r.ec != std::errc() || r.ptr != last) {
      throw trace_error(
          name, lineno,
          "expected one non-negative integer id, got '" + line.substr(b, e - b) + "'");
    }
    ids.push_back(id);
  }
  if (in.bad()) throw trace_error(name, lineno, "read error");
  return ids;
}

std::vector<std::uint64_t> parse_oracle_general(const std::string& bytes, const std::string& name) {
  constexpr std::size_t record = 24;
  if (bytes.size() % record != 0) {
    throw trace_error(name, 0,
                      "size " + std::to_string(bytes.size()) +
                          " bytes is not a whole number of 24-byte oracleGeneral records "
                          "(truncated or not this format)");
  }
  std::vector<std::uint64_t> ids(bytes.size() / record);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    std::uint64_t id = 0;
    for (int k = 7; k >= 0; --k) {  // little-endian, whatever the host
      id = (id << 8) |
           static_cast<unsigned char>(bytes[i * record + 4 + static_cast<std::size_t>(k)]);
    }
    ids[i] = id;
  }
  return ids;
}

namespace {
std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw trace_error(path, 0, "cannot open file");
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) throw trace_error(path, 0, "read error");
  return buf.str();
}
}  // namespace

std::string detect_flat_format(const std::string& path) {
  const std::string head = read_all(path);
  if (head.empty()) throw trace_error(path, 0, "empty trace: cannot detect the format");
  const std::size_t b = head.find_first_not_of(" \t\r\n");
  const bool text = head.find('\0') == std::string::npos;
  if (text && b != std::string::npos && head[b] == '{') return "mooncake";
  if (text && b != std::string::npos && head[b] >= '0' && head[b] <= '9') return "ids";
  if (head.size() % 24 == 0) return "oracle-general";
  throw trace_error(path, 0,
                    "cannot detect the format (not JSONL, not ids, not 24-byte records); give "
                    "--format");
}

std::vector<std::uint64_t> load_flat(const std::string& path, const std::string& format) {
  const std::string f = format == "auto" ? detect_flat_format(path) : format;
  if (f == "mooncake") return load_mooncake_flat(path);
  if (f == "oracle-general") return parse_oracle_general(read_all(path), path);
  if (f == "ids") {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw trace_error(path, 0, "cannot open file");
    return parse_ids(in, path);
  }
  throw trace_error(path, 0, "unsupported flat format '" + f + "'");
}

}  // namespace kvtk::sim
