#include "formats/requests.hpp"
#include "formats/utf8.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "formats/jsonl_scan.hpp"
#include "formats/line_reader.hpp"
#include "formats/requests_detail.hpp"
#include "formats/trace_limits.hpp"
#include "kvtk/detail/frequency_sketch.hpp"
#include "kvtk/prefix/block_keys.hpp"

namespace kvtk::sim {
namespace {

// FNV-1a then a finaliser: a deterministic 64-bit id for a string (sessions, salts, models).
std::uint64_t string_id(std::string_view s) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return kvtk::detail::mix64(h);
}

// Everything a JSONL request line may carry.
struct line_fields {
  bool ids = false, content = false, length = false, time = false, output = false;
  bool priority = false, session = false, bt = false, chat = false, parent = false;
  bool decode = false;  // kvtk: a decode-step record, not a request
  std::uint64_t input_length = 0, output_length = 0, session_id = 0, block_tokens = 0;
  std::uint64_t chat_id = 0;
  std::int64_t parent_id = -1;
  // Session structure: Bailian turn/type, kvtk id/parent/turn/kind.
  bool has_id = false, has_turn = false;
  std::uint64_t id = 0;
  std::uint32_t turn = 0;
  std::string_view kind;
  bool has_tool = false;
  double tool_s = 0;
  std::vector<std::uint64_t>* joins = nullptr;  // kvtk "parent": [...] after its first id
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

// Reads the arrival member ("timestamp", or kvtk's "arrival_s") into `r`; returns a problem or "".
std::string take_time(std::string_view key, const jsonl::value& v, line_fields& r) {
  r.time = true;
  if (v.type != jsonl::kind::integer && v.type != jsonl::kind::number) {
    return "'" + std::string(key) + "' must be a number, got " + std::string(v.type_name());
  }
  if (v.number < 0) return "'" + std::string(key) + "' is negative";
  r.time_value = v.number;
  return {};
}

// Reads kvtk's fan-in form of "parent", an array of request ids (the first is the parent whose
// session and turn the request continues, the rest go to r.joins); returns a problem or "".
std::string take_parents(std::string_view text, line_fields& r) {
  constexpr std::size_t most = 1024;
  r.joins->clear();
  std::size_t at = 1, count = 0;  // past '['
  auto skip_space = [&] {
    while (at < text.size() && (text[at] == ' ' || text[at] == '\t' || text[at] == '\r' || text[at] == '\n')) ++at;
  };
  skip_space();
  if (at < text.size() && text[at] == ']') return "'parent' is an empty array (a root has no parent, or null)";
  for (;;) {
    skip_space();
    const std::string where = "'parent'[" + std::to_string(count) + "]";
    std::uint64_t id = 0;
    const auto [end, ec] = std::from_chars(text.data() + at, text.data() + text.size(), id);
    if (end == text.data() + at || (at < text.size() && text[at] == '-')) {
      return where + " must be a non-negative integer (a request id)";
    }
    if (ec == std::errc::result_out_of_range) return where + " is out of range";
    at = static_cast<std::size_t>(end - text.data());
    if (at < text.size() && (text[at] == '.' || text[at] == 'e' || text[at] == 'E')) {
      return where + " must be an integer (a request id)";
    }
    if (id == kvtk::prefix::no_parent) return where + " 2^64-1 is reserved (no parent)";
    if (count == 0) {
      r.parent = true;
      r.parent_id = static_cast<std::int64_t>(id);  // the bits; read back as unsigned
    } else {
      if (static_cast<std::uint64_t>(r.parent_id) == id ||
          std::find(r.joins->begin(), r.joins->end(), id) != r.joins->end()) {
        return where + " repeats request " + std::to_string(id);
      }
      r.joins->push_back(id);
    }
    if (++count > most) return "'parent' lists more than " + std::to_string(most) + " requests";
    skip_space();
    if (at < text.size() && text[at] == ',') {
      ++at;
      continue;
    }
    if (at < text.size() && text[at] == ']') return {};
    return "'parent' must be an id or an array of ids";
  }
}

// Reads a turn number (a non-negative integer below 2^32) into `r`; returns a problem or "".
std::string take_turn(std::string_view key, const jsonl::value& v, line_fields& r) {
  if (v.type == jsonl::kind::null) return {};  // absent
  std::uint64_t t = 0;
  if (auto e = want_count(key, v, t); !e.empty()) return e;
  if (t >= kvtk::prefix::no_turn) return "'" + std::string(key) + "' is not below 2^32-1";
  r.has_turn = true;
  r.turn = static_cast<std::uint32_t>(t);
  return {};
}

// Reads a request kind (Bailian "type", kvtk "kind": a non-empty UTF-8 string) into `r`.
std::string take_kind(std::string_view key, const jsonl::value& v, line_fields& r) {
  if (v.type == jsonl::kind::null) return {};
  if (v.type != jsonl::kind::string) {
    return "'" + std::string(key) + "' must be a string, got " + std::string(v.type_name());
  }
  if (v.text.empty()) return "'" + std::string(key) + "' is empty";
  if (!valid_utf8(v.text)) return "'" + std::string(key) + "' is not valid UTF-8";
  r.kind = v.text;
  return {};
}

// Reads a Bailian-only member (chat_id, parent_chat_id, turn, type) into `r`; returns a problem
// or "".
std::string take_bailian_member(std::string_view key, const jsonl::value& v, line_fields& r) {
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
  if (key == "turn") return take_turn(key, v, r);
  if (key == "type") return take_kind(key, v, r);
  return {};
}

// Reads kvtk's "session" (an integer, or a string hashed to one) into `r`; returns a problem or "".
std::string take_session(const jsonl::value& v, line_fields& r) {
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

// Reads kvtk's "tenant", "model" or "cache_salt" (a string) into `r`; returns a problem or "".
std::string take_name(std::string_view key, const jsonl::value& v, line_fields& r) {
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

// Reads a kvtk-only member into `r` (others are ignored); returns a problem or "".
std::string take_kvtk_member(std::string_view key, const jsonl::value& v, line_fields& r) {
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
  if (key == "session") return take_session(v, r);
  if (key == "id") {
    r.has_id = true;
    if (auto e = want_count(key, v, r.id); !e.empty()) return e;
    if (r.id == kvtk::prefix::no_parent) return "'id' 2^64-1 is reserved (no parent)";
    return {};
  }
  if (key == "parent") {
    if (v.type == jsonl::kind::null) return {};  // a root
    if (v.type == jsonl::kind::other && v.first == '[' && r.joins != nullptr) return take_parents(v.text, r);
    if (r.joins != nullptr) r.joins->clear();
    std::uint64_t p = 0;
    if (auto e = want_count(key, v, p); !e.empty()) return e;
    if (p == kvtk::prefix::no_parent) return "'parent' 2^64-1 is reserved (no parent)";
    r.parent = true;
    r.parent_id = static_cast<std::int64_t>(p);  // the bits; read back as unsigned below
    return {};
  }
  if (key == "turn") return take_turn(key, v, r);
  if (key == "kind") return take_kind(key, v, r);
  if (key == "tool_s") {
    if (v.type == jsonl::kind::null) return {};  // no tool call
    if (v.type != jsonl::kind::integer && v.type != jsonl::kind::number) {
      return "'tool_s' must be a number, got " + std::string(v.type_name());
    }
    if (!(v.number >= 0) || !(v.number <= 1e9)) return "'tool_s' must be in [0, 1e9] seconds";
    r.has_tool = true;
    r.tool_s = v.number;
    return {};
  }
  if (key == "tenant" || key == "model" || key == "cache_salt") return take_name(key, v, r);
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
    return take_time(key, v, r);
  }
  if (f == trace_format::bailian) return take_bailian_member(key, v, r);
  if (!kvtk_fmt) return {};
  return take_kvtk_member(key, v, r);
}

// Checks a request line's fields (which ids, required members, the shared range rules, the id
// count against input_length); returns the request's block size (its own, else `bt`).
std::uint32_t check_request(const line_fields& r, std::size_t id_count, trace_format f,
                            std::uint32_t bt, const std::string& name, std::uint64_t lineno) {
  if (!r.length) throw trace_error(name, lineno, "missing field 'input_length'");
  if (r.ids && r.content) {
    throw trace_error(name, lineno, "both 'hash_ids' and 'content_ids' (give one)");
  }
  if (!r.ids && !r.content) {
    throw trace_error(name, lineno,
                      f == trace_format::kvtk ? "missing field 'hash_ids' (or 'content_ids')"
                                              : "missing field 'hash_ids'");
  }
  if (f == trace_format::bailian && !r.chat) {
    throw trace_error(name, lineno, "missing field 'chat_id'");
  }
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
  if (id_count != want) {
    throw trace_error(name, lineno,
                      "'" + std::string(r.content ? "content_ids" : "hash_ids") + "' has " +
                          std::to_string(id_count) + " ids but input_length " +
                          std::to_string(r.input_length) + " makes " + std::to_string(want) +
                          " blocks of " + std::to_string(req_bt) + " tokens");
  }
  return req_bt;
}

// The line's arrival in seconds, checked against the range and (when timed) against the last
// arrival `last_time`, which it then becomes (`any_time`: whether a request was timed before).
double checked_arrival(const line_fields& r, trace_format f, double& last_time, bool& any_time,
                       const std::string& name, std::uint64_t lineno) {
  // Mooncake times are milliseconds; Bailian and kvtk times seconds.
  const double t_s = f == trace_format::mooncake ? r.time_value * 0.001 : r.time_value;
  if (r.time && !(t_s <= limits::max_arrival_s)) {  // also +inf (1e400) and NaN
    throw trace_error(name, lineno,
                      std::string(f == trace_format::kvtk ? "'arrival_s'" : "'timestamp'") +
                          " is beyond 1e12 s (or not finite)");
  }
  if (r.time) {
    if (any_time && t_s < last_time) {
      throw trace_error(name, lineno, "timestamp goes backwards (the format is in arrival order)");
    }
    last_time = t_s;
    any_time = true;
  }
  return t_s;
}

// Turns the line's ids into block keys in `keys` (reusing its storage): content ids chained into
// prefix keys, prefix ids taken as they are, then salted by the model / cache_salt namespace.
void make_keys(const std::vector<std::uint64_t>& ids, bool chain, std::uint64_t salt,
               std::vector<kvtk::block_key>& keys) {
  keys.resize(ids.size());
  if (chain) {
    kvtk::prefix::chain_keys(ids, keys);
  } else {
    std::copy(ids.begin(), ids.end(), keys.begin());
  }
  if (salt != 0) {
    for (auto& k : keys) k = kvtk::detail::mix64(k ^ salt);
  }
}

// The Bailian session of chat `r`: the root of its parent chain, recorded in `session_of_chat`.
std::uint64_t bailian_session(const line_fields& r,
                              std::unordered_map<std::uint64_t, std::uint64_t>& session_of_chat) {
  // The session is the root of the parent chain; an unknown parent starts a new session
  // (traces are windows of a longer log).
  std::uint64_t root = r.chat_id;
  if (r.parent && r.parent_id >= 0) {
    const auto it = session_of_chat.find(static_cast<std::uint64_t>(r.parent_id));
    if (it != session_of_chat.end()) root = it->second;
  }
  session_of_chat[r.chat_id] = root;
  return root;
}

}  // namespace

std::uint32_t detail::read_kvtk_header(std::string_view line, const std::string& name) {
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
  std::vector<std::uint64_t> ids, joins;
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
        const std::uint32_t header_bt = detail::read_kvtk_header(line, name);
        if (bt == 0) bt = header_bt;
        continue;
      }
      if (bt == 0) bt = detail::format_default(f);
      line_fields r;
      joins.clear();
      if (f == trace_format::kvtk) r.joins = &joins;
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
      const std::uint32_t req_bt = check_request(r, ids.size(), f, bt, name, lineno);
      const double t_s = checked_arrival(r, f, last_time, any_time, name, lineno);
      make_keys(ids, chained_format || r.content, r.salt, keys);
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
        rec.session = bailian_session(r, session_of_chat);
        rec.request_id = r.chat_id;
        if (r.parent && r.parent_id >= 0) rec.parent = static_cast<std::uint64_t>(r.parent_id);
      } else {
        if (r.has_id) rec.request_id = r.id;
        if (r.parent) rec.parent = static_cast<std::uint64_t>(r.parent_id);
        rec.joins = joins;
      }
      if (r.has_turn) rec.turn = r.turn;
      rec.kind = r.kind;
      if (r.has_tool) rec.tool_s = r.tool_s;
      sink(rec);
    } catch (const trace_error& e) {
      if (!opts.skip_invalid) throw;
      if (report != nullptr && report->skipped_lines++ == 0) report->first_error = e.what();
    }
  }
  if (in.bad()) throw trace_error(name, lineno, "read error");
  return bt ? bt : detail::format_default(f);
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
  // A name's index in its table, whose name 0 ("") means none.
  auto intern = [](std::string_view name, std::unordered_map<std::string, std::uint32_t>& index,
                   std::vector<std::string>& names) -> std::uint32_t {
    if (name.empty()) return 0;
    if (names.empty()) names.emplace_back();
    const auto [it, fresh] = index.try_emplace(std::string(name), static_cast<std::uint32_t>(names.size()));
    if (fresh) names.push_back(it->first);
    return it->second;
  };
  const std::uint32_t tenant = intern(r.tenant, tenant_index_, t_.tenant_names);
  column(t_.tenant, any_tenant_, !r.tenant.empty(), tenant, std::uint32_t{0});
  column(t_.request_block_tokens, mixed_block_size_, r.block_tokens != t_.block_tokens,
         r.block_tokens, t_.block_tokens);
  column(t_.request_id, any_id_, r.request_id.has_value(), r.request_id.value_or(kvtk::prefix::no_parent),
         kvtk::prefix::no_parent);
  column(t_.parent, any_parent_, r.parent.has_value(), r.parent.value_or(kvtk::prefix::no_parent),
         kvtk::prefix::no_parent);
  column(t_.turn, any_turn_, r.turn.has_value(), r.turn.value_or(kvtk::prefix::no_turn),
         kvtk::prefix::no_turn);
  const std::uint32_t kind = intern(r.kind, kind_index_, t_.kind_names);
  column(t_.kind, any_kind_, !r.kind.empty(), kind, std::uint32_t{0});
  column(t_.tool_s, any_tool_, r.tool_s.has_value(), r.tool_s.value_or(NAN),
         std::numeric_limits<double>::quiet_NaN());
  if (!r.joins.empty() && t_.join_offsets.empty()) t_.join_offsets.assign(n + 1, 0);
  if (!t_.join_offsets.empty()) {
    t_.join_ids.insert(t_.join_ids.end(), r.joins.begin(), r.joins.end());
    t_.join_offsets.push_back(t_.join_ids.size());
  }
  t_.add(r.keys, r.input_length);
}

kvtk::prefix::prefix_trace trace_builder::finish() { return std::move(t_); }

void check_parents(const request_record& r, const std::string& file) {
  if (r.joins.empty()) {
    if (r.parent && *r.parent == kvtk::prefix::no_parent) {
      throw trace_error(file, r.line, "parent 2^64-1 is reserved (no parent)");
    }
    return;
  }
  if (!r.parent) throw trace_error(file, r.line, "further parents (fan-in) without a parent");
  if (r.joins.size() >= 1024) throw trace_error(file, r.line, "more than 1024 parents");
  std::vector<std::uint64_t> ids(r.joins.begin(), r.joins.end());
  ids.push_back(*r.parent);
  std::sort(ids.begin(), ids.end());
  if (std::adjacent_find(ids.begin(), ids.end()) != ids.end()) {
    throw trace_error(file, r.line, "a parent is listed twice");
  }
  if (ids.back() == kvtk::prefix::no_parent) {
    throw trace_error(file, r.line, "parent 2^64-1 is reserved (no parent)");
  }
}

}  // namespace kvtk::sim
