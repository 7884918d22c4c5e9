#include "formats/decode_records.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "formats/line_reader.hpp"
#include "formats/trace_error.hpp"

namespace kvtk::sim {
namespace {

std::uint64_t whole(const nlohmann::json& j, const char* key, std::uint64_t max,
                    const std::string& file, std::uint64_t line) {
  if (!j.contains(key)) throw trace_error(file, line, std::string("missing field '") + key + "'");
  const auto& v = j[key];
  if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<std::int64_t>() < 0)) {
    throw trace_error(file, line, std::string("'") + key + "' must be a non-negative integer");
  }
  const std::uint64_t x = v.get<std::uint64_t>();
  if (x > max) {
    throw trace_error(file, line, std::string("'") + key + "' is over " + std::to_string(max));
  }
  return x;
}

// Reads the record's 'request' into `id` and `key` (the key tells "1" from 1).
void read_request_id(const nlohmann::json& j, std::string& id, std::string& key,
                     const std::string& path, std::uint64_t lineno) {
  if (!j.contains("request")) throw trace_error(path, lineno, "missing field 'request'");
  if (j["request"].is_string()) {
    id = j["request"].get<std::string>();
    key = "s" + id;
  } else if (j["request"].is_number_integer()) {
    id = j["request"].dump();
    key = "i" + id;
  } else {
    throw trace_error(path, lineno, "'request' must be an integer or a string");
  }
}

// Reads 'selected' and 'weights' into `s` (whose context_blocks is already set), in file order.
void read_selection(const nlohmann::json& j, decode_step& s, const std::string& path,
                    std::uint64_t lineno) {
  if (!j.contains("selected") || !j["selected"].is_array()) {
    throw trace_error(path, lineno, "missing array 'selected'");
  }
  for (const auto& e : j["selected"]) {
    if (!e.is_number_unsigned() && !(e.is_number_integer() && e.get<std::int64_t>() >= 0)) {
      throw trace_error(path, lineno, "'selected' must hold non-negative integers");
    }
    const std::uint64_t b = e.get<std::uint64_t>();
    if (b >= s.context_blocks) {
      throw trace_error(path, lineno, "selected block " + std::to_string(b) +
                                          " is not below context_blocks " +
                                          std::to_string(s.context_blocks));
    }
    s.selected.push_back(static_cast<std::uint32_t>(b));
  }
  if (j.contains("weights")) {
    if (!j["weights"].is_array() || j["weights"].size() != s.selected.size()) {
      throw trace_error(path, lineno, "'weights' must be an array as long as 'selected'");
    }
    for (const auto& w : j["weights"]) {
      if (!w.is_number() || !(w.get<double>() >= 0) || !(w.get<double>() <= 3.0e38)) {
        throw trace_error(path, lineno, "'weights' must hold numbers in [0, 3e38]");
      }
      s.weights.push_back(w.get<float>());
    }
  } else {
    s.weights.assign(s.selected.size(), 1.0f);
  }
}

// Returns `s` sorted by block; throws when a block is selected twice within the record.
decode_step sorted_by_block(const decode_step& s, const std::string& path, std::uint64_t lineno) {
  std::vector<std::size_t> order(s.selected.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return s.selected[a] < s.selected[b]; });
  decode_step sorted;
  sorted.step = s.step;
  sorted.context_blocks = s.context_blocks;
  for (std::size_t i : order) {
    if (!sorted.selected.empty() && sorted.selected.back() == s.selected[i]) {
      throw trace_error(path, lineno, "block " + std::to_string(s.selected[i]) +
                                          " is selected twice in one record");
    }
    sorted.selected.push_back(s.selected[i]);
    sorted.weights.push_back(s.weights[i]);
  }
  return sorted;
}

// Unites the sorted selection `add` into `u` (same step), summing the weights of shared blocks.
void merge_step(decode_step& u, const decode_step& add) {
  u.context_blocks = std::max(u.context_blocks, add.context_blocks);
  decode_step merged;
  merged.step = u.step;
  merged.context_blocks = u.context_blocks;
  std::size_t a = 0, b = 0;
  while (a < u.selected.size() || b < add.selected.size()) {
    if (b == add.selected.size() || (a < u.selected.size() && u.selected[a] < add.selected[b])) {
      merged.selected.push_back(u.selected[a]);
      merged.weights.push_back(u.weights[a++]);
    } else if (a == u.selected.size() || add.selected[b] < u.selected[a]) {
      merged.selected.push_back(add.selected[b]);
      merged.weights.push_back(add.weights[b++]);
    } else {
      merged.selected.push_back(u.selected[a]);
      merged.weights.push_back(static_cast<float>(
          std::min(3.0e38, static_cast<double>(u.weights[a++]) + add.weights[b++])));
    }
  }
  u = std::move(merged);
}

// Appends `sorted` (layer group `group`, -1 for none) to request `id`'s `steps`, or unites it with
// the latest step; `seen` holds the layer groups of that latest step.
void add_step(std::vector<decode_step>& steps, std::vector<std::int64_t>& seen,
              decode_step&& sorted, std::int64_t group, const std::string& id,
              const std::string& path, std::uint64_t lineno) {
  if (!steps.empty() && steps.back().step > sorted.step) {
    throw trace_error(path, lineno, "step " + std::to_string(sorted.step) + " of request " + id +
                                        " comes after step " + std::to_string(steps.back().step));
  }
  if (!steps.empty() && steps.back().step < sorted.step &&
      sorted.context_blocks < steps.back().context_blocks) {
    throw trace_error(path, lineno, "context_blocks of request " + id + " shrinks from " +
                                        std::to_string(steps.back().context_blocks) + " to " +
                                        std::to_string(sorted.context_blocks));
  }
  if (!steps.empty() && steps.back().step == sorted.step) {
    // Another layer group of the same step: the union, weights summed. A repeated group (or
    // a step given twice without groups) is an error, not a silent doubling of weights.
    if (group < 0 || std::find(seen.begin(), seen.end(), -1) != seen.end() ||
        std::find(seen.begin(), seen.end(), group) != seen.end()) {
      throw trace_error(path, lineno, "step " + std::to_string(sorted.step) + " of request " +
                                          id + " appears again without a new layer_group");
    }
    seen.push_back(group);
    merge_step(steps.back(), sorted);
  } else {
    steps.push_back(std::move(sorted));
    seen.assign(1, group);
  }
}

}  // namespace

std::vector<decode_request> load_decode_records(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw trace_error(path, 0, "cannot open");
  return parse_decode_records(in, path);
}

std::vector<decode_request> parse_decode_records(std::istream& in, const std::string& path) {
  std::vector<decode_request> out;
  std::unordered_map<std::string, std::size_t> index;
  std::vector<std::vector<std::int64_t>> groups;  // per request
  line_reader lines(in, path);
  std::string_view line;
  std::uint64_t lineno = 0;
  constexpr std::uint64_t max_blocks = 1ull << 24;  // 16M blocks: a 1G-token context at 64
  while (lines.next(line)) {
    lineno = lines.line_number();
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    // Cheap pre-filter: request lines (most of a mixed file) carry no "type" and are not parsed.
    if (line.find("\"type\"") == std::string_view::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw trace_error(path, lineno, std::string("invalid JSON (") + e.what() + ")");
    }
    if (!j.is_object() || !j.contains("type")) continue;
    if (j["type"] == "request") continue;
    if (j["type"] != "decode") {
      throw trace_error(path, lineno, "'type' must be \"request\" or \"decode\"");
    }
    std::string id, key;  // key tells "1" from 1
    read_request_id(j, id, key, path, lineno);
    decode_step s;
    s.step = whole(j, "step", ~0ull >> 1, path, lineno);
    s.context_blocks = static_cast<std::uint32_t>(whole(j, "context_blocks", max_blocks, path, lineno));
    const std::int64_t group =
        j.contains("layer_group") ? static_cast<std::int64_t>(whole(j, "layer_group", 1u << 20, path, lineno))
                                  : -1;
    if (s.context_blocks == 0) throw trace_error(path, lineno, "'context_blocks' must be > 0");
    read_selection(j, s, path, lineno);
    decode_step sorted = sorted_by_block(s, path, lineno);
    auto [it, fresh] = index.try_emplace(key, out.size());
    if (fresh) {
      out.push_back({id, {}});
      groups.emplace_back();
    }
    add_step(out[it->second].steps, groups[it->second], std::move(sorted), group, id, path, lineno);
  }
  if (out.empty()) throw trace_error(path, 0, "no decode record (\"type\": \"decode\") in the file");
  return out;
}

}  // namespace kvtk::sim
