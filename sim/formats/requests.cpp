#include "formats/requests.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <unordered_map>

#include "formats/flat_traces.hpp"
#include "formats/jsonl_scan.hpp"
#include "formats/kvtb.hpp"
#include "formats/line_reader.hpp"
#include "formats/trace_limits.hpp"
#include "kvtk/detail/frequency_sketch.hpp"
#include "kvtk/prefix/block_keys.hpp"

namespace kvtk::sim {
namespace {

constexpr std::string_view names[] = {"mooncake", "bailian", "kvtk", "ids", "oracle-general",
                                      "kvtb"};

// FNV-1a then a finaliser: a deterministic 64-bit id for a string (sessions, salts, models).
std::uint64_t string_id(std::string_view s) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return kvtk::detail::mix64(h);
}

// True when `s` is valid UTF-8 (no overlongs, surrogates or code points above U+10FFFF): names
// read from a trace end up in JSON output, which must be valid UTF-8.
bool valid_utf8(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    for (std::size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return false;
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr std::uint32_t min_of[4] = {0, 0x80, 0x800, 0x10000};
    if (cp < min_of[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

// Everything a JSONL request line may carry.
struct line_fields {
  bool ids = false, content = false, length = false, time = false, output = false;
  bool priority = false, session = false, bt = false, chat = false, parent = false;
  bool decode = false;  // kvtk: a decode-step record, not a request
  std::uint64_t input_length = 0, output_length = 0, session_id = 0, block_tokens = 0;
  std::uint64_t chat_id = 0;
  std::int64_t parent_id = -1;
  std::uint32_t priority_value = 0;
  double time_value = 0;
  std::uint64_t salt = 0;  // kvtk: model / cache_salt namespace (0 = none)
  std::string_view tenant;
};

bool is_integer(const jsonl::value& v) { return v.type == jsonl::kind::integer; }

// A non-negative integer member, or the reason it is not one.
std::string want_count(std::string_view key, const jsonl::value& v, std::uint64_t& out) {
  if (!is_integer(v)) {
    return "'" + std::string(key) + "' must be an integer, got " + std::string(v.type_name());
  }
  if (v.negative && v.magnitude != 0) return "'" + std::string(key) + "' is negative";
  out = v.magnitude;
  return {};
}

std::string id_array_problem(std::string_view key, const jsonl::value& v) {
  if (v.type != jsonl::kind::int_array) return "'" + std::string(key) + "' must be an array";
  if (v.bad_element == jsonl::value::npos) return {};
  const std::string at = "'" + std::string(key) + "'[" + std::to_string(v.bad_element) + "]";
  return v.bad_type == "negative" ? at + " is negative"
                                  : at + " must be an integer, got " + std::string(v.bad_type);
}

// Reads one member of a request line of format f into `r`; returns a problem or "".
std::string take_member(trace_format f, std::string_view key, const jsonl::value& v,
                        line_fields& r) {
  const bool kvtk_fmt = f == trace_format::kvtk;
  if (key == "hash_ids") {
    r.ids = true;
    return id_array_problem(key, v);
  }
  if (key == "input_length") {
    r.length = true;
    return want_count(key, v, r.input_length);
  }
  if (key == "output_length") {
    r.output = true;
    return want_count(key, v, r.output_length);
  }
  if ((key == "timestamp" && !kvtk_fmt) || (key == "arrival_s" && kvtk_fmt)) {
    r.time = true;
    if (v.type != jsonl::kind::integer && v.type != jsonl::kind::number) {
      return "'" + std::string(key) + "' must be a number, got " + std::string(v.type_name());
    }
    if (v.number < 0) return "'" + std::string(key) + "' is negative";
    r.time_value = v.number;
    return {};
  }
  if (f == trace_format::bailian) {
    if (key == "chat_id") {
      r.chat = true;
      return want_count(key, v, r.chat_id);
    }
    if (key == "parent_chat_id") {
      r.parent = true;
      if (!is_integer(v)) return "'parent_chat_id' must be an integer";
      if (v.negative) {
        r.parent_id = -1;  // a root (the format writes -1)
      } else if (v.magnitude > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return "'parent_chat_id' is out of range";
      } else {
        r.parent_id = static_cast<std::int64_t>(v.magnitude);
      }
    }
    return {};
  }
  if (!kvtk_fmt) return {};
  if (key == "type") {
    if (v.type == jsonl::kind::string && v.text == "decode") {
      r.decode = true;
    } else if (v.type != jsonl::kind::string || v.text != "request") {
      return "'type' must be \"request\" or \"decode\"";
    }
    return {};
  }
  if (key == "content_ids") {
    r.content = true;
    return id_array_problem(key, v);
  }
  if (key == "session") {
    r.session = true;
    if (v.type == jsonl::kind::string) {
      if (!valid_utf8(v.text)) return "'session' is not valid UTF-8";
      r.session_id = string_id(v.text);
    } else if (is_integer(v) && !v.negative) {
      r.session_id = v.magnitude;
    } else {
      return "'session' must be a non-negative integer or a string";
    }
    return {};
  }
  if (key == "tenant" || key == "model" || key == "cache_salt") {
    if (v.type != jsonl::kind::string) {
      return "'" + std::string(key) + "' must be a string, got " + std::string(v.type_name());
    }
    if (!valid_utf8(v.text)) return "'" + std::string(key) + "' is not valid UTF-8";
    if (key == "tenant") {
      r.tenant = v.text;
      if (v.text.empty()) return "'tenant' is empty";
    } else {
      // Different models (or salts) never share KV: their keys live in separate namespaces.
      r.salt = kvtk::detail::mix64(r.salt ^ string_id(v.text) ^ (key == "model" ? 1 : 2));
    }
    return {};
  }
  if (key == "priority") {
    r.priority = true;
    std::uint64_t p = 0;
    if (auto e = want_count(key, v, p); !e.empty()) return e;
    if (p > std::numeric_limits<std::uint32_t>::max()) return "'priority' is over 2^32-1";
    r.priority_value = static_cast<std::uint32_t>(p);
    return {};
  }
  if (key == "block_tokens") {
    r.bt = true;
    if (auto e = want_count(key, v, r.block_tokens); !e.empty()) return e;
    if (r.block_tokens == 0 || r.block_tokens > (1u << 20)) {
      return "'block_tokens' must be in [1, 2^20]";
    }
  }
  return {};
}

// The kvtk header line {"kvtk_trace": 1, "block_tokens": B}: returns B (0 if absent).
std::uint32_t read_kvtk_header(std::string_view line, const std::string& name) {
  std::vector<std::uint64_t> ints;
  std::uint64_t version = 0, bt = 0;
  bool bt_given = false;
  std::string problem;
  const std::string err = jsonl::scan_object(
      line, ints, [](std::string_view) { return false; },
      [&](std::string_view key, const jsonl::value& v) {
        if (key == "kvtk_trace") {
          if (auto e = want_count(key, v, version); !e.empty()) problem = e;
        } else if (key == "block_tokens") {
          bt_given = true;
          if (auto e = want_count(key, v, bt); !e.empty()) problem = e;
        }
      });
  if (!err.empty()) throw trace_error(name, 1, err);
  if (!problem.empty()) throw trace_error(name, 1, problem);
  if (version != 1) {
    throw trace_error(name, 1, "kvtk_trace version " + std::to_string(version) +
                                   " (this kvtk reads version 1)");
  }
  if (bt_given && (bt == 0 || bt > (1u << 20))) {  // 0 would read as "absent": the default
    throw trace_error(name, 1, "'block_tokens' must be in [1, 2^20]");
  }
  return static_cast<std::uint32_t>(bt);
}

std::uint32_t format_default(trace_format f) {
  switch (f) {
    case trace_format::mooncake:
      return 512;
    case trace_format::bailian:
      return 16;
    case trace_format::kvtk:
      return 64;
    default:
      return 1;
  }
}

// The first non-blank line within the file's first MiB and its 1-based number (0 when there is
// none): one bounded read, so detecting the format of a binary file with no '\n' byte, or of a
// huge first line, reads a MiB and not the whole file. A line cut at the MiB is returned cut
// (detection needs only its start; the reader proper reports over-long lines).
std::string first_line(const std::string& path, std::uint64_t* number = nullptr) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw trace_error(path, 0, std::string("cannot open file: ") + std::strerror(errno));
  std::string head(std::size_t{1} << 20, '\0');
  head.resize(std::fread(head.data(), 1, head.size(), f.get()));
  if (std::ferror(f.get())) throw trace_error(path, 0, "read error");
  std::size_t at = 0;
  for (std::uint64_t n = 1; at < head.size(); ++n) {
    std::size_t end = head.find('\n', at);
    if (end == std::string::npos) end = head.size();
    const std::string_view line(head.data() + at, end - at);
    if (line.find_first_not_of(" \t\r") != std::string_view::npos) {
      if (number != nullptr) *number = n;
      return std::string(line);
    }
    at = end + 1;
  }
  return {};
}

}  // namespace

std::string_view format_name(trace_format f) noexcept {
  return names[static_cast<std::size_t>(f)];
}

std::optional<trace_format> parse_format_name(std::string_view name) noexcept {
  for (std::size_t i = 0; i < std::size(names); ++i) {
    if (names[i] == name) return static_cast<trace_format>(i);
  }
  return std::nullopt;
}

std::string format_names() {
  return "mooncake|bailian|oracle-general|ids|kvtk|kvtb";
}

void require_trace_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw trace_error(path, 0, std::string("cannot open file: ") + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) throw trace_error(path, 0, "is a directory, not a trace file");
  if (!S_ISREG(st.st_mode)) {
    throw trace_error(path, 0,
                      "not a regular file (a FIFO, socket or device): kvtk reads a trace more "
                      "than once; save it to a file first");
  }
}

trace_format detect_trace_format(const std::string& path) {
  if (kvtb::has_magic(path)) return trace_format::kvtb;
  std::uint64_t lineno = 0;
  const std::string line = first_line(path, &lineno);
  const std::size_t b = line.find_first_not_of(" \t");
  if (b != std::string::npos && line[b] == '{') {
    for (const char* marker : {"\"kvtk_trace\"", "\"content_ids\"", "\"arrival_s\"", "\"session\""}) {
      if (line.find(marker) != std::string::npos) return trace_format::kvtk;
    }
    if (line.find("\"chat_id\"") != std::string::npos ||
        line.find("\"parent_chat_id\"") != std::string::npos) {
      return trace_format::bailian;
    }
    if (line.find("\"hash_ids\"") != std::string::npos) return trace_format::mooncake;
    throw trace_error(path, lineno,
                      "cannot detect the format (a JSON line without hash_ids, chat_id or "
                      "kvtk_trace); give --format");
  }
  const std::string flat = detect_flat_format(path);  // throws when nothing fits
  return flat == "ids" ? trace_format::ids : trace_format::oracle_general;
}

std::uint32_t default_block_tokens(const std::string& path, trace_format f) {
  if (f == trace_format::kvtb) {
    kvtb::mapping m(path);
    return kvtb::header_block_tokens(m.bytes(), path);
  }
  if (f == trace_format::kvtk) {
    const std::string line = first_line(path);
    if (line.find("\"kvtk_trace\"") != std::string::npos) {
      if (const std::uint32_t bt = read_kvtk_header(line, path)) return bt;
    }
  }
  return format_default(f);
}

std::uint32_t for_each_request(std::istream& in, const std::string& name, trace_format f,
                               std::uint32_t block_tokens, const read_options& opts,
                               read_report* report, const request_sink& sink,
                               std::uint64_t first_line) {
  if (f != trace_format::mooncake && f != trace_format::bailian && f != trace_format::kvtk) {
    throw trace_error(name, 0, "not a JSONL request format: " + std::string(format_name(f)));
  }
  const bool chained_format = f == trace_format::bailian;
  std::uint32_t bt = block_tokens;
  line_reader lines(in, name, first_line);
  std::string_view line;
  std::uint64_t lineno = first_line - 1;
  std::vector<std::uint64_t> ids;
  std::vector<kvtk::block_key> keys;
  std::unordered_map<std::uint64_t, std::uint64_t> session_of_chat;  // Bailian
  double last_time = 0;
  bool any_time = false;
  while (lines.next(line)) {
    lineno = lines.line_number();
    try {
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      const std::size_t first = line.find_first_not_of(" \t");
      if (first == std::string::npos) {
        throw trace_error(name, lineno, "empty line (expected a JSON object)");
      }
      if (line[first] != '{') throw trace_error(name, lineno, "expected a JSON object");
      if (f == trace_format::kvtk && lineno == 1 &&
          line.find("\"kvtk_trace\"") != std::string::npos) {
        const std::uint32_t header_bt = read_kvtk_header(line, name);
        if (bt == 0) bt = header_bt;
        continue;
      }
      if (bt == 0) bt = format_default(f);
      line_fields r;
      std::string problem;
      const std::string err = jsonl::scan_object(
          line, ids,
          [](std::string_view key) { return key == "hash_ids" || key == "content_ids"; },
          [&](std::string_view key, const jsonl::value& v) {
            if (problem.empty()) problem = take_member(f, key, v, r);
          });
      if (!err.empty()) throw trace_error(name, lineno, err);
      if (!problem.empty()) throw trace_error(name, lineno, problem);
      if (r.decode) {  // read by `kvtk sparse` (sim/formats/decode_records.hpp)
        if (report != nullptr) ++report->decode_records;
        continue;
      }
      if (!r.length) throw trace_error(name, lineno, "missing field 'input_length'");
      if (r.ids && r.content) {
        throw trace_error(name, lineno, "both 'hash_ids' and 'content_ids' (give one)");
      }
      if (!r.ids && !r.content) {
        throw trace_error(name, lineno,
                          f == trace_format::kvtk ? "missing field 'hash_ids' (or 'content_ids')"
                                                  : "missing field 'hash_ids'");
      }
      if (chained_format && !r.chat) throw trace_error(name, lineno, "missing field 'chat_id'");
      const std::uint32_t req_bt = r.bt ? static_cast<std::uint32_t>(r.block_tokens) : bt;
      // The range rules every reader shares (formats/trace_limits.hpp), field by field here so
      // that the message names the JSON member.
      if (r.input_length >= limits::max_input_tokens) {
        throw trace_error(
            name, lineno,
            "'input_length' " + std::to_string(r.input_length) + " is not below 2^32 tokens");
      }
      if (r.output && r.output_length >= limits::max_output_tokens) {
        throw trace_error(
            name, lineno,
            "'output_length' " + std::to_string(r.output_length) + " is not below 2^32 tokens");
      }
      const std::uint64_t want = (r.input_length + req_bt - 1) / req_bt;
      if (ids.size() != want) {
        throw trace_error(name, lineno,
                          "'" + std::string(r.content ? "content_ids" : "hash_ids") + "' has " +
                              std::to_string(ids.size()) + " ids but input_length " +
                              std::to_string(r.input_length) + " makes " + std::to_string(want) +
                              " blocks of " + std::to_string(req_bt) + " tokens");
      }
      // Mooncake times are milliseconds; Bailian and kvtk times seconds.
      const double t_s = f == trace_format::mooncake ? r.time_value * 0.001 : r.time_value;
      if (r.time && !(t_s <= limits::max_arrival_s)) {  // also +inf (1e400) and NaN
        throw trace_error(name, lineno,
                          std::string(f == trace_format::kvtk ? "'arrival_s'" : "'timestamp'") +
                              " is beyond 1e12 s (or not finite)");
      }
      if (r.time) {
        if (any_time && t_s < last_time) {
          throw trace_error(name, lineno,
                            "timestamp goes backwards (the format is in arrival order)");
        }
        last_time = t_s;
        any_time = true;
      }
      keys.resize(ids.size());
      if (chained_format || r.content) {
        kvtk::prefix::chain_keys(ids, keys);
      } else {
        std::copy(ids.begin(), ids.end(), keys.begin());
      }
      if (r.salt != 0) {
        for (auto& k : keys) k = kvtk::detail::mix64(k ^ r.salt);
      }
      request_record rec;
      rec.keys = keys;
      rec.input_length = r.input_length;
      rec.block_tokens = req_bt;
      rec.line = lineno;
      if (r.time) rec.arrival_s = t_s;
      if (r.output) rec.output_length = r.output_length;
      if (r.priority) rec.priority = r.priority_value;
      if (r.session) rec.session = r.session_id;
      rec.tenant = r.tenant;
      if (chained_format) {
        // The session is the root of the parent chain; an unknown parent starts a new session
        // (traces are windows of a longer log).
        std::uint64_t root = r.chat_id;
        if (r.parent && r.parent_id >= 0) {
          const auto it = session_of_chat.find(static_cast<std::uint64_t>(r.parent_id));
          if (it != session_of_chat.end()) root = it->second;
        }
        session_of_chat[r.chat_id] = root;
        rec.session = root;
      }
      sink(rec);
    } catch (const trace_error& e) {
      if (!opts.skip_invalid) throw;
      if (report != nullptr && report->skipped_lines++ == 0) report->first_error = e.what();
    }
  }
  if (in.bad()) throw trace_error(name, lineno, "read error");
  return bt ? bt : format_default(f);
}

std::uint32_t for_each_request(const std::string& path, trace_format f,
                               std::uint32_t block_tokens, const read_options& opts,
                               read_report* report, const request_sink& sink) {
  if (f == trace_format::kvtb) {
    kvtb::mapping m(path);
    const kvtb::image im = kvtb::parse(m.bytes(), path, &m);
    const auto& v = im.view;
    if (block_tokens != 0 && block_tokens != v.block_tokens) {
      throw trace_error(path, 0,
                        "kvtb file was written with " + std::to_string(v.block_tokens) +
                            "-token blocks; --block-tokens " + std::to_string(block_tokens) +
                            " would misread it");
    }
    for (std::size_t r = 0; r < v.requests(); ++r) {
      request_record rec;
      rec.keys = v.blocks(r);
      rec.input_length = v.input_length[r];
      rec.block_tokens = v.block_tokens_of(r);
      rec.line = r + 1;
      if (!v.arrival_s.empty() && !std::isnan(v.arrival_s[r])) rec.arrival_s = v.arrival_s[r];
      if (!v.output_length.empty()) rec.output_length = v.output_length[r];
      if (!v.priority.empty()) rec.priority = v.priority[r];
      if (!v.session.empty()) rec.session = v.session[r];
      if (!v.tenant.empty()) rec.tenant = im.tenants[v.tenant[r]];
      sink(rec);
      if ((r + 1) % 65536 == 0) kvtb::drop_requests(m, v, r + 1 - 65536, r + 1);  // streamed past
    }
    return v.block_tokens;
  }
  if (f == trace_format::ids || f == trace_format::oracle_general) {
    const std::uint32_t bt = block_tokens ? block_tokens : format_default(f);
    // Flat traces are read whole (they are id lists; the JSONL formats stream).
    const std::vector<std::uint64_t> ids = load_flat(path, std::string(format_name(f)));
    for (std::size_t i = 0; i < ids.size(); ++i) {
      request_record rec;
      rec.keys = {&ids[i], 1};
      rec.input_length = bt;
      rec.block_tokens = bt;
      rec.line = i + 1;
      sink(rec);
    }
    return bt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw trace_error(path, 0, "cannot open file");
  return for_each_request(in, path, f, block_tokens, opts, report, sink);
}

trace_builder::trace_builder(std::uint32_t block_tokens) { t_.block_tokens = block_tokens; }

void trace_builder::reserve(std::size_t requests, std::size_t keys) {
  requests_hint_ = requests;
  t_.keys.reserve(keys);
  t_.offsets.reserve(requests + 1);
  t_.input_length.reserve(requests);
}

void trace_builder::add(const request_record& r) {
  const std::size_t n = t_.requests();
  // Optional columns start when the first request has the field; earlier requests get fillers.
  auto column = [&]<class T>(std::vector<T>& col, bool& any, bool has, T value, T filler) {
    if (has && !any) {
      any = true;
      col.reserve(std::max(requests_hint_, n + 1));
      col.assign(n, filler);
    }
    if (any) col.push_back(has ? value : filler);
  };
  column(t_.arrival_s, any_time_, r.arrival_s.has_value(), r.arrival_s.value_or(0.0),
         std::numeric_limits<double>::quiet_NaN());
  column(t_.output_length, any_output_, r.output_length.has_value(), r.output_length.value_or(0),
         std::uint64_t{0});
  column(t_.priority, any_priority_, r.priority.has_value(), r.priority.value_or(0),
         kvtk::access_hint{}.priority);
  column(t_.session, any_session_, r.session.has_value(), r.session.value_or(0),
         std::uint64_t{0});
  std::uint32_t tenant = 0;
  if (!r.tenant.empty()) {
    if (t_.tenant_names.empty()) t_.tenant_names.emplace_back();  // 0 = no tenant
    const auto [it, fresh] = tenant_index_.try_emplace(
        std::string(r.tenant), static_cast<std::uint32_t>(t_.tenant_names.size()));
    if (fresh) t_.tenant_names.push_back(it->first);
    tenant = it->second;
  }
  column(t_.tenant, any_tenant_, !r.tenant.empty(), tenant, std::uint32_t{0});
  column(t_.request_block_tokens, mixed_block_size_, r.block_tokens != t_.block_tokens,
         r.block_tokens, t_.block_tokens);
  t_.add(r.keys, r.input_length);
}

kvtk::prefix::prefix_trace trace_builder::finish() { return std::move(t_); }

void loaded_trace::release(std::size_t first, std::size_t last) const noexcept {
  if (mapping_ != nullptr) kvtb::drop_requests(*mapping_, view_, first, last);
}

loaded_trace::loaded_trace(kvtk::prefix::prefix_trace t) {
  auto owned = std::make_shared<const kvtk::prefix::prefix_trace>(std::move(t));
  view_ = owned->view();
  auto bytes = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  heap_bytes_ = bytes(owned->keys) + bytes(owned->offsets) + bytes(owned->input_length) +
                bytes(owned->priority) + bytes(owned->arrival_s) + bytes(owned->output_length) +
                bytes(owned->session) + bytes(owned->tenant) + bytes(owned->request_block_tokens);
  tenants_ = owned->tenant_names;
  storage_ = std::move(owned);
}

loaded_trace loaded_trace::load(const std::string& path, trace_format f, std::uint32_t block_tokens,
                                const read_options& opts, read_report* report, unsigned threads) {
  if (f == trace_format::kvtb) {
    auto m = std::make_shared<const kvtb::mapping>(path);
    kvtb::image im = kvtb::parse(m->bytes(), path, m.get());
    if (block_tokens != 0 && block_tokens != im.view.block_tokens) {
      throw trace_error(path, 0,
                        "kvtb file was written with " + std::to_string(im.view.block_tokens) +
                            "-token blocks; --block-tokens " + std::to_string(block_tokens) +
                            " would misread it");
    }
    loaded_trace out;
    out.view_ = im.view;
    out.tenants_ = std::move(im.tenants);
    // A flat trace written as kvtb (every request one whole block of the file's size) replays
    // through the unit layout's faster paths; the check reads two columns once.
    auto& v = out.view_;
    bool unit = v.request_block_tokens.empty() && v.keys.size() == v.requests();
    constexpr std::size_t slice = 1 << 20;
    for (std::size_t first = 0; unit && first < v.requests(); first += slice) {
      const std::size_t last = std::min(v.requests(), first + slice);
      for (std::size_t r = first; unit && r < last; ++r) {
        unit = v.offsets[r] == r && v.input_length[r] == v.block_tokens;
      }
      kvtb::drop_requests(*m, v, first, last);  // the columns just read
    }
    if (unit) {
      v.offsets = {};
      v.input_length = {};
    }
    out.mapping_ = m.get();
    out.storage_ = std::move(m);
    return out;
  }
  const std::uint32_t bt = block_tokens ? block_tokens : default_block_tokens(path, f);
  if (f == trace_format::ids || f == trace_format::oracle_general) {
    // The unit layout (prefix_trace_view): the ids are the keys, 8 bytes per reference.
    kvtk::prefix::prefix_trace t;
    t.block_tokens = bt;
    t.keys = load_flat(path, std::string(format_name(f)));
    std::vector<std::uint64_t>().swap(t.offsets);
    return loaded_trace(std::move(t));
  }
  if (f == trace_format::mooncake || f == trace_format::kvtk) {
    return loaded_trace(parse_jsonl_parallel(path, f, bt, opts, report, threads));
  }
  trace_builder b(bt);
  for_each_request(path, f, bt, opts, report, [&](const request_record& r) { b.add(r); });
  return loaded_trace(b.finish());
}

}  // namespace kvtk::sim
