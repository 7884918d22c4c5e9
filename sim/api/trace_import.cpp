#include "api/trace_import.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <charconv>
#include <deque>
#include <optional>
#include <thread>
#include <vector>

#include "api/options_json.hpp"
#include "util/parallel.hpp"
#include "api/usage_error.hpp"
#include "formats/jsonl_scan.hpp"
#include "formats/line_reader.hpp"
#include "formats/trace_error.hpp"
#include "formats/trace_limits.hpp"
#include "formats/utf8.hpp"
#include "formats/writers.hpp"
#include "kvtk/detail/mix.hpp"
#include "kvtk/prefix/block_hasher.hpp"
#include "util/output_file.hpp"

namespace kvtk::sim {

nlohmann::json to_json(const trace_import_options& o) {
  return {{"log", o.log},
          {"format", o.format},
          {"log_format", o.log_format},
          {"keys", o.keys},
          {"output", o.output},
          {"to", o.to},
          {"engine", o.engine},
          {"report_mode", o.report_mode},
          {"block_tokens", o.block_tokens},
          {"hash_algo", o.hash_algo},
          {"hash_seed", o.hash_seed},
          {"preset", o.preset},
          {"field_timestamp", o.field_timestamp},
          {"field_tokens", o.field_tokens},
          {"field_output", o.field_output},
          {"field_session", o.field_session},
          {"field_lora", o.field_lora},
          {"field_lora_path", o.field_lora_path},
          {"field_cache_salt", o.field_cache_salt},
          {"field_mm", o.field_mm},
          {"time_unit", o.time_unit},
          {"threads", o.threads},
          {"force", o.force}};
}

trace_import_options trace_import_options_from_json(const nlohmann::json& j) {
  trace_import_options o;
  detail::options_reader in(j, "trace import options");
  in.get("log", o.log);
  in.get("format", o.format);
  in.get("log_format", o.log_format);
  in.get("keys", o.keys);
  in.get("report_mode", o.report_mode);
  in.get("output", o.output);
  in.get("to", o.to);
  in.get("engine", o.engine);
  in.get("block_tokens", o.block_tokens);
  in.get("hash_algo", o.hash_algo);
  in.get("hash_seed", o.hash_seed);
  in.get("preset", o.preset);
  in.get("field_timestamp", o.field_timestamp);
  in.get("field_tokens", o.field_tokens);
  in.get("field_output", o.field_output);
  in.get("field_session", o.field_session);
  in.get("field_lora", o.field_lora);
  in.get("field_lora_path", o.field_lora_path);
  in.get("field_cache_salt", o.field_cache_salt);
  in.get("field_mm", o.field_mm);
  in.get("time_unit", o.time_unit);
  in.get("threads", o.threads);
  in.get("force", o.force);
  in.finish();
  return o;
}

void validate(trace_import_options& o) {
  if (o.log.empty()) throw usage_error("give the request log (kvtk trace import LOG -o OUT)");
  const bool events = o.format == "vllm-events" || o.format == "sglang-events" || o.format == "dynamo-events";
  if (o.format != "token-ids" && !events && o.format != "dynamo") {
    throw usage_error("--format: '" + o.format + "' cannot be imported (token-ids: a JSONL or "
                      "CSV log with token ids; vllm-events, sglang-events, dynamo-events: a kvtk "
                      "trace record recording; dynamo: Dynamo's request trace; text logs are "
                      "imported by the Python package, kvtk.import_trace)");
  }
  // The engine: given, or the format's (an events format names it), else vLLM's.
  const std::string implied = o.format == "sglang-events"   ? "sglang"
                              : o.format == "dynamo-events" ? "dynamo"
                                                            : "vllm";
  if (o.engine.empty()) o.engine = implied;
  // Dynamo's RouterEvents carry no token ids: only the engine's own keys.
  if (o.keys.empty()) o.keys = o.format == "dynamo-events" ? "engine" : "derived";
  if (o.format == "dynamo-events" && o.keys != "engine") {
    throw usage_error("--keys derived: Dynamo's RouterEvents carry no token ids (only its XXH3 "
                      "tokens_hash), so keys cannot be derived; use --keys engine (the engine's "
                      "own hashes, which Dynamo passes through)");
  }
  if (o.keys != "derived" && o.keys != "engine") {
    throw usage_error("--keys: '" + o.keys + "' is not derived or engine");
  }
  if (o.report_mode != "incremental" && o.report_mode != "full") {
    throw usage_error("--report-mode: '" + o.report_mode + "' is not incremental or full");
  }
  if (o.report_mode == "full" && o.format != "vllm-events") {
    throw usage_error("--report-mode full is vLLM's kv_cache_report_mode (--format vllm-events)");
  }
  if (events) {
    if (o.engine != implied) throw usage_error("--format " + o.format + ": --engine must be " + implied);
    if (o.report_mode != "full" && (o.to.empty() || (o.to != "ids" && o.to != "oracle-general"))) {
      throw usage_error(
          "--to: a KV-event recording holds the blocks the engine stored (its misses) and "
          "removed, not its requests: a prefix-cache hit emits nothing and events carry no "
          "request id, so it cannot be a request trace. Give --to ids or --to oracle-general "
          "for the engine's miss stream, or import the requests' token ids, or record with "
          "vLLM's kv_cache_report_mode=\"full\" and give --report-mode full "
          "(docs/formats.md \"KV-event recordings\")");
    }
  }
  if (o.log_format != "auto" && o.log_format != "jsonl" && o.log_format != "csv") {
    throw usage_error("--log-format: '" + o.log_format + "' is not auto, jsonl or csv");
  }
  if (o.engine != "vllm" && o.engine != "sglang" && !(o.engine == "dynamo" && o.format == "dynamo-events")) {
    throw usage_error("--engine: '" + o.engine + "' is not vllm or sglang");
  }
  if (o.block_tokens == 0 || o.block_tokens > limits::max_block_tokens) {
    throw usage_error("--block-tokens: " + std::to_string(o.block_tokens) +
                      " is outside [1, 2^20] tokens");
  }
  try {
    (void)kvtk::prefix::parse_vllm_hash_algo(o.hash_algo);
  } catch (const std::invalid_argument&) {
    throw usage_error("--hash-algo: '" + o.hash_algo +
                      "' is not one of vLLM's (sha256 sha256_cbor xxhash xxhash_cbor)");
  }
  if (o.engine == "sglang" && (o.hash_algo != "sha256" || !o.hash_seed.empty())) {
    throw usage_error("--hash-algo and --hash-seed are vLLM's: SGLang's page hashes have neither");
  }
  if (o.engine == "vllm" && o.hash_seed.empty() && o.hash_algo.rfind("xxhash", 0) == 0) {
    throw usage_error("--hash-algo " + o.hash_algo + ": without PYTHONHASHSEED vLLM draws a random "
                      "NONE_HASH seed per process, so its keys cannot be reproduced; give "
                      "--hash-seed (the engine's PYTHONHASHSEED)");
  }
  if (o.preset != "kvtk" && o.preset != "vllm") {
    throw usage_error("--preset: '" + o.preset + "' is not kvtk or vllm");
  }
  const bool vllm_names = o.preset == "vllm";
  auto name = [](std::string& field, const char* preset) {
    if (field.empty()) field = preset;
  };
  name(o.field_timestamp, vllm_names ? "arrival_time" : "timestamp");
  name(o.field_tokens, vllm_names ? "prompt_token_ids" : "token_ids");
  name(o.field_output, vllm_names ? "max_tokens" : "output_length");
  name(o.field_session, "session");
  name(o.field_lora, "lora_name");
  name(o.field_lora_path, "lora_path");
  name(o.field_cache_salt, "cache_salt");
  name(o.field_mm, "mm_hashes");
  {
    const std::string* fields[] = {&o.field_timestamp, &o.field_tokens, &o.field_output,
                                   &o.field_session,   &o.field_lora,   &o.field_lora_path,
                                   &o.field_cache_salt, &o.field_mm};
    for (std::size_t a = 0; a < std::size(fields); ++a) {
      for (std::size_t b = a + 1; b < std::size(fields); ++b) {
        if (*fields[a] == *fields[b]) {
          throw usage_error("--field-*: '" + *fields[a] + "' names two fields (each field its own name)");
        }
      }
    }
  }
  if (o.threads > 256) {
    throw usage_error("--threads: " + std::to_string(o.threads) + " is over 256 (0 = every core)");
  }
  if (o.time_unit != "s" && o.time_unit != "ms") {
    throw usage_error("--time-unit: '" + o.time_unit + "' is not s or ms");
  }
  if (o.output.empty()) throw usage_error("-o: give the output file, or - for stdout");
  if (o.to.empty()) {
    if (o.output.size() < 5 || o.output.compare(o.output.size() - 5, 5, ".kvtb") != 0) {
      throw usage_error("--to: give the output format (kvtb kvtk mooncake)");
    }
    o.to = "kvtb";
  }
  if (o.to != "kvtb" && o.to != "kvtk" && o.to != "mooncake" && !events) {
    throw usage_error("--to: cannot write '" + o.to + "' here (kvtb kvtk mooncake)");
  }
  struct stat st {};
  if (::stat(o.log.c_str(), &st) != 0) throw usage_error("cannot open the log '" + o.log + "'");
  if (!S_ISREG(st.st_mode)) throw usage_error("the log '" + o.log + "' is not a regular file");
  note_input(o.log);
  check_output(o.output, o.force, "-o");
}

namespace {

using detail::string_id;

// One log line, parsed and hashed by a worker.
struct imported {
  std::vector<kvtk::block_key> keys;
  std::uint64_t tokens = 0;
  std::optional<double> arrival_s;
  std::optional<std::uint64_t> output_length;
  std::optional<std::uint64_t> session;
  std::uint64_t full_blocks = 0;
  std::string error;  // "" = fine
};

// The key of a partial last block: a content key kvtk derives (no engine hashes it), chained to
// the key before it so that two requests share it only when they share everything before it.
kvtk::block_key partial_key(kvtk::block_key before, std::span<const std::uint64_t> tokens) noexcept {
  std::uint64_t h = kvtk::detail::mix64(before ^ 0x7061727469616cull);  // "partial"
  for (const std::uint64_t t : tokens) h = kvtk::detail::mix64(h ^ t);
  return h;
}

// What one log line gives, whatever the log's syntax (JSONL or CSV).
struct line_fields {
  std::vector<std::uint64_t> tokens;
  bool have_tokens = false;
  std::optional<double> arrival;  // in the log's unit
  std::optional<std::uint64_t> output_length, session;
  std::optional<std::string> lora_name, lora_path;
  kvtk::prefix::request_extras x;
  bool have_mm = false;
  std::string problem;
  void fail(std::string why) {
    if (problem.empty()) problem = std::move(why);
  }
};

// A CSV column's meaning, from the header and the field options.
enum class column_role : std::uint8_t { ignore, timestamp, tokens, output, session, lora, lora_path, cache_salt, mm };

// The multimodal items of a vLLM request: a JSON array of {"identifier" (or "hash"): string,
// "offset": first placeholder token, "length": placeholder tokens}, as vLLM's mm_features name
// them. Sorted by offset here (vLLM keeps them sorted); overlapping items are refused.
void parse_mm(std::string_view text, const std::string& field, line_fields& f) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_array()) {
    f.fail("'" + field + "' is not a JSON array of {identifier, offset, length} objects");
    return;
  }
  f.have_mm = true;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    const std::string at = "'" + field + "'[" + std::to_string(i) + "]";
    const char* id_key = e.is_object() && e.contains("identifier") ? "identifier" : "hash";
    if (!e.is_object() || !e.contains(id_key) || !e[id_key].is_string() || !e.contains("offset") ||
        !e["offset"].is_number_unsigned() || !e.contains("length") || !e["length"].is_number_unsigned()) {
      f.fail(at + " is not {\"identifier\": string, \"offset\": integer >= 0, \"length\": integer >= 0}");
      return;
    }
    const auto id = e[id_key].get<std::string>();
    if (!valid_utf8(id)) {
      f.fail(at + ": the identifier is not UTF-8");
      return;
    }
    const auto offset = e["offset"].get<std::uint64_t>(), length = e["length"].get<std::uint64_t>();
    if (length == 0 || offset > limits::max_input_tokens || length > limits::max_input_tokens) {
      f.fail(at + ": an item covers 1 to 2^32 tokens from an offset below 2^32");
      return;
    }
    f.x.mm.push_back({id, offset, length});
  }
  std::stable_sort(f.x.mm.begin(), f.x.mm.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
  for (std::size_t i = 1; i < f.x.mm.size(); ++i) {
    if (f.x.mm[i].offset < f.x.mm[i - 1].offset + f.x.mm[i - 1].length) {
      f.fail("'" + field + "': items at offsets " + std::to_string(f.x.mm[i - 1].offset) + " and " +
             std::to_string(f.x.mm[i].offset) + " overlap");
      return;
    }
  }
}

// Splits one CSV record (RFC 4180: comma-separated fields; a field in double quotes may hold
// commas, and "" inside it is one quote). A record is one line: a quoted field that would go on
// to the next line is refused. Cells view `line`, or `owned` where quotes were undoubled.
std::string split_csv(std::string_view line, std::vector<std::string_view>& cells,
                      std::deque<std::string>& owned) {
  cells.clear();
  std::size_t i = 0;
  for (;;) {
    if (i < line.size() && line[i] == '"') {
      const std::size_t open = i++;
      std::string unquoted;
      bool doubled = false;
      for (;; ++i) {
        if (i >= line.size()) {
          return "column " + std::to_string(open + 1) +
                 ": a quoted field does not end on its line (kvtk reads one record per line)";
        }
        if (line[i] != '"') continue;
        if (i + 1 < line.size() && line[i + 1] == '"') {
          doubled = true;
          ++i;
          continue;
        }
        break;
      }
      std::string_view cell = line.substr(open + 1, i - open - 1);
      if (doubled) {
        std::string u;
        for (std::size_t k = 0; k < cell.size(); ++k) {
          u += cell[k];
          if (cell[k] == '"') ++k;  // the second of a doubled quote
        }
        cell = owned.emplace_back(std::move(u));
      }
      cells.push_back(cell);
      ++i;  // the closing quote
      if (i < line.size() && line[i] != ',') {
        return "column " + std::to_string(i + 1) + ": expected ',' after a quoted field";
      }
    } else {
      const std::size_t comma = line.find(',', i);
      const std::string_view cell = line.substr(i, comma == std::string_view::npos ? line.size() - i : comma - i);
      if (cell.find('"') != std::string_view::npos) {
        return "column " + std::to_string(i + 1) + ": a quote inside an unquoted field";
      }
      cells.push_back(cell);
      i += cell.size();
    }
    if (i >= line.size()) return "";
    ++i;  // the comma
  }
}

// `s` without leading and trailing spaces and tabs (CSV cells, header names).
std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A CSV cell of token ids: "[1, 2, 3]", "1 2 3", "1;2;3" (brackets optional; commas, spaces,
// tabs or semicolons between ids).
void parse_token_cell(std::string_view cell, const std::string& field, line_fields& f) {
  std::string_view s = trim(cell);
  if (!s.empty() && s.front() == '[') {
    if (s.back() != ']') {
      f.fail("'" + field + "' opens '[' and does not close it");
      return;
    }
    s = s.substr(1, s.size() - 2);
  }
  std::size_t i = 0, n = 0;
  auto sep = [](char c) { return c == ',' || c == ' ' || c == '\t' || c == ';'; };
  while (i < s.size()) {
    while (i < s.size() && sep(s[i])) ++i;
    if (i >= s.size()) break;
    std::size_t j = i;
    while (j < s.size() && !sep(s[j])) ++j;
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data() + i, s.data() + j, v);
    if (ec != std::errc() || end != s.data() + j) {
      f.fail("'" + field + "'[" + std::to_string(n) + "] is '" + std::string(s.substr(i, std::min<std::size_t>(j - i, 32))) +
             "', not a token id (a non-negative integer)");
      return;
    }
    f.tokens.push_back(v);
    ++n;
    i = j;
  }
  f.have_tokens = true;
}

class line_importer {
 public:
  line_importer(const trace_import_options& o, const kvtk::prefix::block_hasher& h) : o_(o), h_(h) {}

  /// Requires (CSV): set before any run(), from the header line.
  void set_csv_columns(std::vector<column_role> roles) { csv_ = std::move(roles); }
  [[nodiscard]] std::size_t csv_columns() const noexcept { return csv_.size(); }

  void run(std::string_view line, imported& out) const {
    out = imported{};
    line_fields f;
    const std::string err = csv_.empty() ? scan_jsonl(line, f) : scan_csv(line, f);
    if (!err.empty()) {
      out.error = err;
      return;
    }
    finish(f, out);
  }

 private:
  std::string scan_jsonl(std::string_view line, line_fields& f) const {
    return jsonl::scan_object(
        line, f.tokens, [&](std::string_view key) { return key == o_.field_tokens; },
        [&](std::string_view key, const jsonl::value& v) {
          if (key == o_.field_tokens) {
            if (v.type != jsonl::kind::int_array) {
              f.fail("'" + o_.field_tokens + "' is not an array of token ids");
            } else if (v.bad_element != jsonl::value::npos) {
              const std::string what = v.bad_type == "negative" ? "a negative number" : "a " + std::string(v.bad_type);
              f.fail("'" + o_.field_tokens + "'[" + std::to_string(v.bad_element) + "] is " + what +
                     ", not a token id (a non-negative integer)");
            }
            f.have_tokens = true;
          } else if (key == o_.field_timestamp) {
            if (v.type == jsonl::kind::null) return;  // absent
            if (v.type != jsonl::kind::integer && v.type != jsonl::kind::number) {
              f.fail("'" + o_.field_timestamp + "' is a " + std::string(v.type_name()) + ", not a number");
              return;
            }
            f.arrival = v.number;  // signed already
          } else if (key == o_.field_output) {
            if (v.type == jsonl::kind::null) return;  // absent (vLLM's max_tokens default)
            if (v.type != jsonl::kind::integer || v.negative) {
              f.fail("'" + o_.field_output + "' is not a non-negative integer");
              return;
            }
            f.output_length = v.magnitude;
          } else if (key == o_.field_session) {
            if (v.type == jsonl::kind::string) {
              if (!valid_utf8(v.text)) f.fail("'" + o_.field_session + "' is not valid UTF-8");
              f.session = string_id(v.text);
            } else if (v.type == jsonl::kind::integer && !v.negative) {
              f.session = v.magnitude;
            } else if (v.type != jsonl::kind::null) {
              f.fail("'" + o_.field_session + "' is not a string or a non-negative integer");
            }
          } else if (key == o_.field_lora || key == o_.field_lora_path || key == o_.field_cache_salt) {
            if (v.type == jsonl::kind::null) return;
            if (v.type != jsonl::kind::string || !valid_utf8(v.text)) {
              f.fail("'" + std::string(key) + "' is not a UTF-8 string");
              return;
            }
            const column_role role = key == o_.field_lora        ? column_role::lora
                                     : key == o_.field_lora_path ? column_role::lora_path
                                                                 : column_role::cache_salt;
            if (v.text.find('\\') == std::string_view::npos) {
              text_field(role, v.text, f);
            } else {
              // Raw JSON string contents with escapes (the scanner checked the syntax): decoded
              // as JSON decodes them, so "\u00e9" and "é" are one salt.
              const auto decoded = nlohmann::json::parse("\"" + std::string(v.text) + "\"", nullptr, false);
              if (decoded.is_discarded() || !decoded.is_string()) {
                f.fail("'" + std::string(key) + "' has an escape JSON does not define");
                return;
              }
              text_field(role, decoded.get<std::string>(), f);
            }
          } else if (key == o_.field_mm) {
            if (v.type == jsonl::kind::null) return;
            if (v.type != jsonl::kind::other || v.first != '[') {
              f.fail("'" + o_.field_mm + "' is a " + std::string(v.type_name()) + ", not an array");
              return;
            }
            parse_mm(v.text, o_.field_mm, f);
          }
        });
  }

  std::string scan_csv(std::string_view line, line_fields& f) const {
    std::vector<std::string_view> cells;
    std::deque<std::string> owned;
    if (std::string e = split_csv(line, cells, owned); !e.empty()) return "invalid CSV: " + e;
    if (cells.size() != csv_.size()) {
      return "has " + std::to_string(cells.size()) + " fields, the header " + std::to_string(csv_.size());
    }
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const column_role role = csv_[c];
      const std::string_view v = role == column_role::tokens ? cells[c] : trim(cells[c]);
      if (role == column_role::ignore || (v.empty() && role != column_role::tokens)) continue;  // empty = absent
      switch (role) {
        case column_role::tokens:
          parse_token_cell(v, o_.field_tokens, f);
          break;
        case column_role::timestamp: {
          double t = 0;
          const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), t);
          if (ec != std::errc() || end != v.data() + v.size()) {
            f.fail("'" + o_.field_timestamp + "' is '" + std::string(v.substr(0, 32)) + "', not a number");
          } else {
            f.arrival = t;
          }
          break;
        }
        case column_role::output: {
          std::uint64_t n = 0;
          const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
          if (ec != std::errc() || end != v.data() + v.size()) {
            f.fail("'" + o_.field_output + "' is '" + std::string(v.substr(0, 32)) + "', not a non-negative integer");
          } else {
            f.output_length = n;
          }
          break;
        }
        case column_role::session: {
          // Digits are an integer session (as a JSON integer is), anything else a name.
          std::uint64_t n = 0;
          const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
          if (ec == std::errc() && end == v.data() + v.size()) {
            f.session = n;
          } else if (!valid_utf8(v)) {
            f.fail("'" + o_.field_session + "' is not valid UTF-8");
          } else {
            f.session = string_id(v);
          }
          break;
        }
        case column_role::mm:
          parse_mm(v, o_.field_mm, f);
          break;
        default:
          if (!valid_utf8(v)) {
            f.fail("column " + std::to_string(c + 1) + " is not UTF-8");
          } else {
            text_field(role, v, f);
          }
      }
    }
    return "";
  }

  static void text_field(column_role role, std::string_view text, line_fields& f) {
    if (role == column_role::lora) {
      f.lora_name = std::string(text);
    } else if (role == column_role::lora_path) {
      f.lora_path = std::string(text);
    } else {
      f.x.cache_salt = std::string(text);
    }
  }

  void finish(line_fields& f, imported& out) const {
    if (!f.problem.empty()) {
      out.error = f.problem;
      return;
    }
    if (f.arrival) out.arrival_s = o_.time_unit == "ms" ? *f.arrival * 0.001 : *f.arrival;
    out.output_length = f.output_length;
    out.session = f.session;
    auto& x = f.x;
    if (f.lora_name && o_.engine == "vllm") {
      if (!f.lora_path) {
        out.error = "'" + o_.field_lora + "' without '" + o_.field_lora_path +
                    "': vLLM's LoRA extra key is the adapter's (name, path)";
        return;
      }
      x.lora = kvtk::prefix::vllm_lora_key{*f.lora_name, *f.lora_path};
    } else if (f.lora_name) {
      x.extra_key = *f.lora_name;  // SGLang: the LoRA id namespaces the radix key
    }
    if (f.have_mm && o_.engine == "sglang") {
      out.error = "'" + o_.field_mm + "' is vLLM's: SGLang keys a multimodal prompt by the pad "
                  "values in its token ids (log the ids after pad_input_ids, without '" + o_.field_mm + "')";
      return;
    }
    const auto& tokens = f.tokens;
    if (!f.have_tokens) {
      out.error = "missing field '" + o_.field_tokens + "' (the prompt's token ids)";
      return;
    }
    if (tokens.empty()) {
      out.error = "'" + o_.field_tokens + "' is empty (a request has at least one token)";
      return;
    }
    if (tokens.size() >= limits::max_input_tokens) {
      out.error = "the prompt has 2^32 tokens or more";
      return;
    }
    if (!x.mm.empty() && x.mm.back().offset + x.mm.back().length > tokens.size()) {
      out.error = "'" + o_.field_mm + "': an item ends at token " +
                  std::to_string(x.mm.back().offset + x.mm.back().length) + ", past the prompt's " +
                  std::to_string(tokens.size());
      return;
    }
    if (out.arrival_s && (!std::isfinite(*out.arrival_s) || *out.arrival_s < 0 ||
                          *out.arrival_s > limits::max_arrival_s)) {
      out.error = "the timestamp " + std::to_string(*out.arrival_s) + " s is outside [0, 1e12] s";
      return;
    }
    try {
      h_.append_keys(tokens, out.keys, x);
    } catch (const std::exception& e) {
      out.error = e.what();
      return;
    }
    out.full_blocks = out.keys.size();
    const std::uint64_t bt = o_.block_tokens;
    const std::uint64_t blocks = (tokens.size() + bt - 1) / bt;
    if (out.keys.size() > blocks) out.keys.resize(blocks);  // never with full pages only
    out.full_blocks = std::min<std::uint64_t>(out.full_blocks, tokens.size() / bt);
    if (out.keys.size() < blocks) {
      // Chained to the last full key, which carries the request's extra keys; a prompt shorter
      // than a block starts from its extras (cache_salt, LoRA, images), so that they still
      // separate it.
      kvtk::block_key before = 0;
      if (!out.keys.empty()) {
        before = out.keys.back();
      } else {
        before = string_id(x.cache_salt);
        if (x.lora) before = kvtk::detail::mix64(before ^ string_id(x.lora->name) ^ (string_id(x.lora->path) << 1));
        if (x.extra_key) before = kvtk::detail::mix64(before ^ string_id(*x.extra_key) ^ 0x65787472ull);
        for (const auto& m : x.mm) before = kvtk::detail::mix64(before ^ string_id(m.identifier) ^ (m.offset << 20) ^ m.length);
      }
      out.keys.push_back(partial_key(before, std::span<const std::uint64_t>(tokens).subspan(out.keys.size() * bt)));
    }
    out.tokens = tokens.size();
    // What every kvtk reader checks (formats/trace_limits.hpp), here on the log's line.
    if (auto p = limits::request_problem(out.tokens, out.keys.size(), o_.block_tokens, out.arrival_s,
                                         out.output_length);
        !p.empty()) {
      out.error = p;
      return;
    }
  }

  const trace_import_options& o_;
  const kvtk::prefix::block_hasher& h_;
  std::vector<column_role> csv_;  // empty: the log is JSONL
};

// The roles of a CSV header's columns. Throws trace_error naming the line.
std::vector<column_role> csv_header(std::string_view line, const trace_import_options& o,
                                    std::uint64_t line_number) {
  std::vector<std::string_view> cells;
  std::deque<std::string> owned;
  if (std::string e = split_csv(line, cells, owned); !e.empty()) {
    throw trace_error(o.log, line_number, "invalid CSV header: " + e);
  }
  const std::pair<const std::string*, column_role> names[] = {
      {&o.field_timestamp, column_role::timestamp}, {&o.field_tokens, column_role::tokens},
      {&o.field_output, column_role::output},       {&o.field_session, column_role::session},
      {&o.field_lora, column_role::lora},           {&o.field_lora_path, column_role::lora_path},
      {&o.field_cache_salt, column_role::cache_salt}, {&o.field_mm, column_role::mm}};
  std::vector<column_role> roles(cells.size(), column_role::ignore);
  bool tokens = false;
  for (std::size_t c = 0; c < cells.size(); ++c) {
    const std::string_view name = trim(cells[c]);
    for (const auto& [field, role] : names) {
      if (name != *field) continue;
      for (std::size_t before = 0; before < c; ++before) {
        if (roles[before] == role) {
          throw trace_error(o.log, line_number, "the CSV header names '" + *field + "' twice");
        }
      }
      roles[c] = role;
      tokens = tokens || role == column_role::tokens;
    }
  }
  if (!tokens) {
    throw trace_error(o.log, line_number,
                      "the CSV header has no '" + o.field_tokens +
                          "' column (the prompt's token ids; --field-tokens names another)");
  }
  return roles;
}

kvtk::prefix::block_hasher make_hasher(const trace_import_options& o) {
  if (o.engine == "sglang") {
    kvtk::prefix::sglang_hash_options s;
    s.page_size = o.block_tokens;
    return kvtk::prefix::block_hasher(s);
  }
  kvtk::prefix::vllm_hash_options v;
  v.algo = kvtk::prefix::parse_vllm_hash_algo(o.hash_algo);
  v.block_size = o.block_tokens;
  if (!o.hash_seed.empty()) v.none_hash_seed = o.hash_seed;
  return kvtk::prefix::block_hasher(v);
}

}  // namespace

trace_import_result run(trace_import_options o, const progress_callback& progress) {
  validate(o);
  if (o.format == "vllm-events" || o.format == "sglang-events" || o.format == "dynamo-events") {
    return detail::run_events(o, progress);
  }
  if (o.format == "dynamo") return detail::run_dynamo(o, progress);
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const kvtk::prefix::block_hasher hasher = make_hasher(o);
  line_importer importer(o, hasher);
  const std::uint32_t threads =
      o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  std::ifstream in(o.log, std::ios::binary);
  if (!in) throw usage_error("cannot open the log '" + o.log + "'");
  line_reader lines(in, o.log);
  const trace_format out_format = *parse_format_name(o.to);
  auto writer = trace_writer::open(o.output, out_format, o.block_tokens, o.force);
  detail::progress_relay bar(progress, 0);
  trace_import_result r;
  // Batches of lines (bounded in count and bytes: streaming), parsed and hashed in parallel,
  // then written in order.
  constexpr std::size_t batch_lines = 4096, batch_bytes = std::size_t{64} << 20;
  std::vector<std::string> batch;
  std::vector<std::uint64_t> numbers;  // the batch's line numbers
  std::vector<imported> done(batch_lines);
  std::optional<double> last_time;
  bool any_untimed = false, any_timed = false, syntax_known = false;
  double hash_s = 0;
  for (bool more = true; more;) {
    batch.clear();
    numbers.clear();
    std::size_t bytes = 0;
    std::string_view line;
    std::exception_ptr read_failure;  // a line over the cap or a read error: after the lines before it
    try {
      while (batch.size() < batch_lines && bytes < batch_bytes && (more = lines.next(line))) {
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.find_first_not_of(" \t") == std::string_view::npos) continue;  // blank lines
        if (!syntax_known) {
          // The first line decides: JSONL opens an object, anything else is a CSV header.
          if (lines.line_number() == 1 && line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);
          if (line.find_first_not_of(" \t") == std::string_view::npos) continue;  // only a BOM
          const bool csv = o.log_format == "csv" ||
                           (o.log_format == "auto" && line[line.find_first_not_of(" \t")] != '{');
          syntax_known = true;
          r.log_format = csv ? "csv" : "jsonl";
          if (csv) {
            importer.set_csv_columns(csv_header(line, o, lines.line_number()));
            continue;
          }
        }
        batch.emplace_back(line);
        numbers.push_back(lines.line_number());
        bytes += line.size();
      }
    } catch (const trace_error&) {
      read_failure = std::current_exception();
      more = false;
    }
    if (batch.empty()) {
      if (read_failure) std::rethrow_exception(read_failure);
      continue;
    }
    const auto t0 = clock::now();
    detail::parallel_for(threads, batch.size(), [&](std::size_t i) { importer.run(batch[i], done[i]); });
    hash_s += std::chrono::duration<double>(clock::now() - t0).count();
    for (std::size_t i = 0; i < batch.size(); ++i) {
      imported& q = done[i];
      if (!q.error.empty()) throw trace_error(o.log, numbers[i], q.error);
      if (q.arrival_s) {
        if (any_untimed) {
          throw trace_error(o.log, numbers[i], "has a timestamp, but an earlier line has none "
                                               "(a log times every request or none)");
        }
        if (last_time && *q.arrival_s < *last_time) {
          throw trace_error(o.log, numbers[i], "timestamp goes backwards (sort the log by arrival "
                                               "time first: a trace is in arrival order)");
        }
        last_time = q.arrival_s;
        any_timed = true;
      } else {
        if (any_timed) {
          throw trace_error(o.log, numbers[i], "has no timestamp ('" + o.field_timestamp +
                                                   "'), but earlier lines have one");
        }
        any_untimed = true;
      }
      request_record rec;
      rec.keys = q.keys;
      rec.input_length = q.tokens;
      rec.block_tokens = o.block_tokens;
      rec.line = numbers[i];
      rec.arrival_s = q.arrival_s;
      rec.output_length = q.output_length;
      rec.session = q.session;
      writer->add(rec);
      ++r.requests;
      r.tokens += q.tokens;
      r.full_blocks += q.full_blocks;
      bar.add(1);
    }
    if (read_failure) std::rethrow_exception(read_failure);
  }
  writer->finish();
  r.seconds = std::chrono::duration<double>(clock::now() - start).count();
  r.hash_seconds = hash_s;
  r.tokens_per_s = hash_s > 0 ? static_cast<double>(r.tokens) / hash_s : 0.0;
  r.threads = threads;
  r.engine = o.engine;
  r.to = o.to;
  r.output = o.output;
  r.block_tokens = o.block_tokens;
  if (r.log_format.empty()) r.log_format = o.log_format == "auto" ? "jsonl" : o.log_format;
  return r;
}

namespace detail {

std::uint64_t string_id(std::string_view s) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return kvtk::detail::mix64(h);
}

}  // namespace detail

nlohmann::json to_json(const trace_import_result& r) {
  return {{"requests", r.requests},     {"tokens", r.tokens},
          {"full_blocks", r.full_blocks}, {"seconds", r.seconds},
          {"hash_seconds", r.hash_seconds}, {"tokens_per_s", r.tokens_per_s},
          {"threads", r.threads},       {"engine", r.engine},
          {"to", r.to},                 {"output", r.output},
          {"block_tokens", r.block_tokens}, {"log_format", r.log_format},
          {"batches", r.batches},       {"stored_blocks", r.stored_blocks},
          {"removed_blocks", r.removed_blocks}, {"other_media_events", r.other_media_events},
          {"cleared", r.cleared},       {"lost_batches", r.lost_batches},
          {"unresolved_blocks", r.unresolved_blocks}, {"recording_ended", r.recording_ended},
          {"first_unresolved", r.first_unresolved}, {"skipped_records", r.skipped_records},
          {"start_unix_s", r.start_unix_s}, {"reused_blocks", r.reused_blocks},
          {"unattributed_blocks", r.unattributed_blocks}, {"dropped_requests", r.dropped_requests},
          {"reuse_like_events", r.reuse_like_events}, {"restarts", r.restarts}};
}

std::string to_text(const trace_import_result& r) {
  if (r.log_format == "dynamo") {
    std::string s = "kvtk trace import: wrote " + std::to_string(r.requests) + " requests (" +
                    std::to_string(r.tokens) + " tokens, blocks of " + std::to_string(r.block_tokens) +
                    " tokens) from a Dynamo request trace to " + r.output + " (" + r.to + ")\n";
    for (const auto& [type, count] : r.skipped_records) {
      s += "kvtk trace import: skipped " + std::to_string(count) + " " + type + " records\n";
    }
    return s;
  }
  if (r.log_format == "events" && r.to != "ids" && r.to != "oracle-general") {
    std::string s = "kvtk trace import: " + std::to_string(r.batches) + " event batches: rebuilt " +
                    std::to_string(r.requests) + " requests (" + std::to_string(r.full_blocks) +
                    " blocks, " + std::to_string(r.reused_blocks) + " of them reported reused) to " +
                    r.output + " (" + r.to + "); " + std::to_string(r.stored_blocks) + " blocks stored, " +
                    std::to_string(r.removed_blocks) + " removed\n";
    if (r.unattributed_blocks > 0) {
      s += "kvtk trace import: warning: " + std::to_string(r.unattributed_blocks) +
           " stored blocks extend no request's chain (recorded late, or a lost batch) and were left out\n";
    }
    if (r.dropped_requests > 0) {
      s += "kvtk trace import: warning: " + std::to_string(r.dropped_requests) +
           " requests have a block without a key and were left out: " + r.first_unresolved + "\n";
    }
    if (r.lost_batches > 0) {
      s += "kvtk trace import: warning: the recording lost " + std::to_string(r.lost_batches) + " batches\n";
    }
    if (!r.recording_ended) s += "kvtk trace import: warning: the recording has no end line (the recorder was killed)\n";
    return s;
  }
  if (r.log_format == "events") {
    std::string s = "kvtk trace import: " + std::to_string(r.batches) + " event batches: " +
                    std::to_string(r.stored_blocks) + " blocks stored (the engine's misses), " +
                    std::to_string(r.removed_blocks) + " removed (its evictions), " +
                    std::to_string(r.cleared) + " AllBlocksCleared; wrote the " +
                    std::to_string(r.stored_blocks - r.unresolved_blocks) + " stored blocks' keys to " +
                    r.output + " (" + r.to + ")\n";
    if (r.unresolved_blocks > 0) {
      s += "kvtk trace import: warning: " + std::to_string(r.unresolved_blocks) +
           " stored blocks have no key and were left out: " + r.first_unresolved + "\n";
    }
    if (r.reuse_like_events > 0) {
      s += "kvtk trace import: warning: " + std::to_string(r.reuse_like_events) +
           " stored events re-report blocks already cached (no parent): the engine ran with "
           "kv_cache_report_mode=\"full\", so they are hits, not misses; give --report-mode full\n";
    }
    if (r.lost_batches > 0) {
      s += "kvtk trace import: warning: the recording lost " + std::to_string(r.lost_batches) +
           " batches (gaps the replay socket could not fill)\n";
    }
    if (r.restarts > 0) {
      s += "kvtk trace import: the engine restarted " + std::to_string(r.restarts) +
           " time(s) during the recording (its cache emptied; counted as AllBlocksCleared)\n";
    }
    if (r.other_media_events > 0) {
      s += "kvtk trace import: " + std::to_string(r.other_media_events) +
           " events of other media (CPU, disk: offload tiers) were not counted\n";
    }
    if (!r.recording_ended) {
      s += "kvtk trace import: warning: the recording has no end line (the recorder was killed): "
           "it may stop mid-stream\n";
    }
    return s;
  }
  char rate[64];
  std::snprintf(rate, sizeof rate, "%.1f M tokens/s", r.tokens_per_s / 1e6);
  return "kvtk trace import: wrote " + std::to_string(r.requests) + " requests (" +
         std::to_string(r.tokens) + " tokens, " + std::to_string(r.full_blocks) + " full " +
         r.engine + " blocks of " + std::to_string(r.block_tokens) + " tokens) to " + r.output +
         " (" + r.to + "); parsed and hashed at " + rate + " on " + std::to_string(r.threads) +
         " thread(s)\n";
}

}  // namespace kvtk::sim
