#include "formats/kv_events.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <nlohmann/json.hpp>

#include "formats/line_reader.hpp"

namespace kvtk::sim {

namespace {

using json = nlohmann::json;

// Standard base64 (RFC 4648, with padding), as Python's base64.b64encode writes it.
bool base64_decode(std::string_view in, std::string& out) {
  static constexpr auto table = [] {
    std::array<std::int8_t, 256> t{};
    t.fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(alphabet[i])] = static_cast<std::int8_t>(i);
    return t;
  }();
  out.clear();
  if (in.size() % 4 != 0) return false;
  out.reserve(in.size() / 4 * 3);
  for (std::size_t i = 0; i < in.size(); i += 4) {
    std::uint32_t v = 0;
    int pad = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const char c = in[i + k];
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        ++pad;
        v <<= 6;
        continue;
      }
      if (pad > 0) return false;  // data after padding
      const std::int8_t d = table[static_cast<unsigned char>(c)];
      if (d < 0) return false;
      v = (v << 6) | static_cast<std::uint32_t>(d);
    }
    out += static_cast<char>(v >> 16);
    if (pad < 2) out += static_cast<char>((v >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(v & 0xff);
  }
  return true;
}

// An engine block hash as opaque bytes: an integer as 8 big-endian bytes, bytes as themselves.
bool hash_bytes(const json& j, std::string& out) {
  out.clear();
  if (j.is_number_integer()) {
    const auto v = j.is_number_unsigned() ? j.get<std::uint64_t>()
                                          : static_cast<std::uint64_t>(j.get<std::int64_t>());
    for (int b = 7; b >= 0; --b) out += static_cast<char>((v >> (8 * b)) & 0xff);
    return true;
  }
  if (j.is_binary()) {
    const auto& bin = j.get_binary();
    out.assign(bin.begin(), bin.end());
    return !out.empty();
  }
  if (j.is_string()) {  // some encoders send bytes as str
    out = j.get<std::string>();
    return !out.empty();
  }
  return false;
}

// The event's field `name`: in the array-like form the element at its place in the engine's
// declaration order (after the tag), in the map form the key; null when absent. Shared by both
// engines: BlockStored block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium;
// BlockRemoved block_hashes, medium. After that, vLLM: lora_name, extra_keys; SGLang:
// cache_salt, session_id, lora_name. vLLM's session_id is a map key only (array-like vLLM
// versions predate it).
enum class slot : std::uint8_t { lora_name, extra_keys, cache_salt, session_id };

std::optional<std::size_t> position(event_engine engine, slot s) {
  if (engine == event_engine::vllm) {
    if (s == slot::lora_name) return 6;
    if (s == slot::extra_keys) return 7;
    return std::nullopt;
  }
  if (s == slot::cache_salt) return 6;
  if (s == slot::session_id) return 7;
  if (s == slot::lora_name) return 8;
  return std::nullopt;
}

const json& field(const json& e, bool array_like, std::optional<std::size_t> pos, const char* name) {
  static const json null;
  if (array_like) return pos && *pos + 1 < e.size() ? e[*pos + 1] : null;
  const auto it = e.find(name);
  return it == e.end() ? null : *it;
}

// An optional string field: absent/null, or a string (else the reason).
std::string optional_string(const json& j, const char* name, std::optional<std::string>& out) {
  if (j.is_string()) {
    out = j.get<std::string>();
  } else if (!j.is_null()) {
    return std::string(name) + " is not a string";
  }
  return "";
}

std::string decode_event(const json& e, std::size_t index, event_engine engine, kv_event& out) {
  const std::string at = "event " + std::to_string(index) + ": ";
  const bool array_like = e.is_array();
  std::string tag;
  if (array_like && !e.empty() && e[0].is_string()) {
    tag = e[0].get<std::string>();
  } else if (e.is_object() && e.contains("type") && e["type"].is_string()) {
    tag = e["type"].get<std::string>();
  } else {
    return at + "not a tagged event (an array starting with its type, or a map with \"type\")";
  }
  out = kv_event{};
  std::string h;
  if (tag == "AllBlocksCleared") {
    out.type = kv_event::kind::cleared;
    return "";
  }
  const bool stored = tag == "BlockStored" || tag == "BlockStoredWithMetadata";
  if (!stored && tag != "BlockRemoved") return at + "unknown event type '" + tag + "'";
  out.type = stored ? kv_event::kind::stored : kv_event::kind::removed;
  const json& hashes = field(e, array_like, 0, "block_hashes");
  if (!hashes.is_array() || hashes.empty()) return at + "block_hashes is not a non-empty list";
  for (const auto& x : hashes) {
    if (!hash_bytes(x, h)) return at + "a block hash is not an integer or bytes";
    out.hashes.push_back(h);
  }
  const json& medium = field(e, array_like, std::size_t{stored ? 5u : 1u}, "medium");
  if (medium.is_string()) {
    out.medium = medium.get<std::string>();
  } else if (!medium.is_null()) {
    return at + "medium is not a string";
  }
  if (!stored) return "";
  const json& parent = field(e, array_like, 1, "parent_block_hash");
  if (!parent.is_null()) {
    if (!hash_bytes(parent, h)) return at + "parent_block_hash is not an integer or bytes";
    out.parent = h;
  }
  const json& tokens = field(e, array_like, 2, "token_ids");
  const json& size = field(e, array_like, 3, "block_size");
  if (!size.is_number_unsigned() || size.get<std::uint64_t>() == 0 || size.get<std::uint64_t>() > (1u << 20)) {
    return at + "block_size is not an integer in [1, 2^20]";
  }
  out.block_size = size.get<std::uint32_t>();
  if (!tokens.is_array()) return at + "token_ids is not a list";
  for (const auto& t : tokens) {
    if (t.is_array()) return at + "token ids are pairs (SGLang's EAGLE bigram pages), which kvtk does not read";
    if (!t.is_number_unsigned()) return at + "a token id is not a non-negative integer";
    out.token_ids.push_back(t.get<std::uint64_t>());
  }
  if (out.token_ids.size() != out.hashes.size() * out.block_size) {
    return at + std::to_string(out.token_ids.size()) + " token ids for " +
           std::to_string(out.hashes.size()) + " blocks of " + std::to_string(out.block_size);
  }
  if (std::string why = optional_string(field(e, array_like, position(engine, slot::lora_name), "lora_name"),
                                        "lora_name", out.lora_name);
      !why.empty()) {
    return at + why;
  }
  if (std::string why = optional_string(field(e, array_like, position(engine, slot::cache_salt), "cache_salt"),
                                        "cache_salt", out.cache_salt);
      !why.empty()) {
    return at + why;
  }
  if (std::string why = optional_string(field(e, array_like, position(engine, slot::session_id), "session_id"),
                                        "session_id", out.session_id);
      !why.empty()) {
    return at + why;
  }
  const json& extra = field(e, array_like, position(engine, slot::extra_keys), "extra_keys");
  out.has_extra_keys = !extra.is_null() && !(extra.is_array() && std::all_of(extra.begin(), extra.end(), [](const json& x) {
    return x.is_null() || (x.is_array() && x.empty());
  }));
  return "";
}

// Whether `b` is a sequence of msgpack values none nested deeper than `max_depth` (a walk with an
// explicit stack of the containers' remaining element counts; truncated input is left to the
// real parser to reject). Depth counts arrays and maps.
bool shallow_msgpack(std::string_view b, std::size_t max_depth) {
  std::vector<std::uint64_t> left;  // elements still to read in each open container
  std::size_t i = 0;
  auto be = [&](std::size_t at, int bytes) {
    std::uint64_t v = 0;
    for (int k = 0; k < bytes; ++k) v = (v << 8) | static_cast<unsigned char>(b[at + static_cast<std::size_t>(k)]);
    return v;
  };
  while (i < b.size()) {
    const auto c = static_cast<unsigned char>(b[i]);
    std::uint64_t skip = 0, children = 0;
    bool container = false;
    auto need = [&](std::size_t bytes) { return i + bytes <= b.size(); };
    if (c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3) {
      skip = 1;
    } else if ((c & 0xe0) == 0xa0) {
      skip = 1 + (c & 0x1f);
    } else if ((c & 0xf0) == 0x90 || (c & 0xf0) == 0x80) {
      container = true;
      children = static_cast<std::uint64_t>(c & 0x0f) * ((c & 0xf0) == 0x80 ? 2 : 1);
      skip = 1;
    } else {
      switch (c) {
        case 0xcc: case 0xd0: skip = 2; break;
        case 0xcd: case 0xd1: skip = 3; break;
        case 0xce: case 0xd2: case 0xca: skip = 5; break;
        case 0xcf: case 0xd3: case 0xcb: skip = 9; break;
        case 0xd4: skip = 3; break;
        case 0xd5: skip = 4; break;
        case 0xd6: skip = 6; break;
        case 0xd7: skip = 10; break;
        case 0xd8: skip = 18; break;
        case 0xc4: case 0xd9: if (!need(2)) return true; skip = 2 + be(i + 1, 1); break;
        case 0xc5: case 0xda: if (!need(3)) return true; skip = 3 + be(i + 1, 2); break;
        case 0xc6: case 0xdb: if (!need(5)) return true; skip = 5 + be(i + 1, 4); break;
        case 0xc7: if (!need(2)) return true; skip = 3 + be(i + 1, 1); break;
        case 0xc8: if (!need(3)) return true; skip = 4 + be(i + 1, 2); break;
        case 0xc9: if (!need(5)) return true; skip = 6 + be(i + 1, 4); break;
        case 0xdc: case 0xde:
          if (!need(3)) return true;
          container = true;
          children = be(i + 1, 2) * (c == 0xde ? 2 : 1);
          skip = 3;
          break;
        case 0xdd: case 0xdf:
          if (!need(5)) return true;
          container = true;
          children = be(i + 1, 4) * (c == 0xdf ? 2 : 1);
          skip = 5;
          break;
        default:
          return true;  // 0xc1 (never used): the parser refuses it
      }
    }
    if (skip > b.size() - i) return true;  // truncated: the parser says so
    i += static_cast<std::size_t>(skip);
    if (!left.empty()) --left.back();
    if (container && children > 0) {
      if (left.size() + 1 > max_depth) return false;
      left.push_back(children);
    }
    while (!left.empty() && left.back() == 0) left.pop_back();
  }
  return true;
}

constexpr std::int64_t max_seq = std::int64_t{1} << 62;

// A Dynamo RouterEvent (see the header) into `out`.
std::string decode_router_event(const json& e, std::size_t index, kv_event& out) {
  const std::string at = "event " + std::to_string(index) + ": ";
  if (!e.is_object() || !e.contains("event") || !e["event"].is_object() || !e["event"].contains("data")) {
    return at + "not a RouterEvent ({worker_id, storage_tier, event: {event_id, data, dp_rank}})";
  }
  out = kv_event{};
  const json& worker = e.value("worker_id", json());
  if (!worker.is_number_unsigned()) return at + "worker_id is not a non-negative integer";
  out.worker_id = worker.get<std::uint64_t>();
  const json& rank = e["event"].value("dp_rank", json());
  if (!rank.is_null()) {  // absent: rank 0
    if (!rank.is_number_unsigned() || rank.get<std::uint64_t>() > UINT32_MAX) return at + "dp_rank is not a 32-bit non-negative integer";
    out.dp_rank = rank.get<std::uint32_t>();
  }
  const json& tier = e.value("storage_tier", json("device"));
  if (!tier.is_string()) return at + "storage_tier is not a string";
  out.medium = tier.get<std::string>() == "device" ? "GPU" : tier.get<std::string>();
  const json& data = e["event"]["data"];
  std::string h;
  if ((data.is_string() && data.get<std::string>() == "cleared") || (data.is_object() && data.contains("cleared"))) {
    out.type = kv_event::kind::cleared;
    return "";
  }
  const auto list = [&](const json& hashes, const char* what) -> std::string {
    if (!hashes.is_array() || hashes.empty()) return at + what + " is not a non-empty list";
    for (const auto& x : hashes) {
      const json& v = x.is_object() ? x.value("block_hash", json()) : x;
      if (!v.is_number_integer() || !hash_bytes(v, h)) return at + "a block hash is not an integer";
      out.hashes.push_back(h);
    }
    return "";
  };
  if (data.is_object() && data.contains("stored") && data["stored"].is_object()) {
    out.type = kv_event::kind::stored;
    const json& st = data["stored"];
    if (std::string why = list(st.value("blocks", json()), "stored.blocks"); !why.empty()) return why;
    const json& parent = st.value("parent_hash", json());
    if (!parent.is_null()) {
      if (!parent.is_number_integer() || !hash_bytes(parent, h)) return at + "parent_hash is not an integer";
      out.parent = h;
    }
    return "";
  }
  if (data.is_object() && data.contains("removed") && data["removed"].is_object()) {
    out.type = kv_event::kind::removed;
    return list(data["removed"].value("block_hashes", json()), "removed.block_hashes");
  }
  return at + "data is not stored, removed or cleared";
}

// Dynamo's event-plane envelope (see the header) into `out`.
std::string decode_dynamo_envelope(const std::string& bytes, kv_batch& out) {
  if (bytes.size() < 5 || static_cast<unsigned char>(bytes[0]) != 1) {
    return "not a Dynamo event-plane frame (version byte 1, u32 length, envelope)";
  }
  std::uint64_t len = 0;
  for (std::size_t i = 1; i < 5; ++i) len = (len << 8) | static_cast<unsigned char>(bytes[i]);
  if (len != bytes.size() - 5) return "the frame's length is not its envelope's";
  const std::string_view env_bytes(bytes.data() + 5, bytes.size() - 5);
  if (!shallow_msgpack(env_bytes, 32)) return "the envelope is not msgpack nested at most 32 deep";
  const json env = json::from_msgpack(env_bytes, /*strict=*/true, /*allow_exceptions=*/false);
  if (env.is_discarded() || !env.is_object() || !env.contains("payload") || !env["payload"].is_binary()) {
    return "the envelope is not a msgpack map with a binary payload";
  }
  const json& when = env.value("published_at", json(0));
  if (!when.is_number()) return "published_at is not a number";
  out.ts = when.get<double>() / 1000.0;
  const auto& bin = env["payload"].get_binary();
  const std::string_view events_bytes(reinterpret_cast<const char*>(bin.data()), bin.size());
  if (!shallow_msgpack(events_bytes, 32)) return "the events are not msgpack nested at most 32 deep";
  const json events = json::from_msgpack(events_bytes, true, false);
  if (events.is_discarded() || !events.is_array()) return "the envelope's payload is not a msgpack list of RouterEvents";
  out.events.clear();
  out.events.resize(events.size());
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (std::string why = decode_router_event(events[i], i, out.events[i]); !why.empty()) return why;
  }
  return "";
}

}  // namespace

std::string decode_event_batch(const std::string& msgpack, kv_batch& out, event_engine engine) {
  if (engine == event_engine::dynamo) return decode_dynamo_envelope(msgpack, out);
  // nlohmann's msgpack parser recurses per nesting level: a payload nested deeper than any
  // event batch is refused first, so that a crafted one cannot exhaust the stack.
  if (!shallow_msgpack(msgpack, 32)) return "the payload is not msgpack nested at most 32 deep";
  const json j = json::from_msgpack(msgpack, /*strict=*/true, /*allow_exceptions=*/false);
  if (j.is_discarded()) return "the payload is not msgpack";
  const json* ts = nullptr;
  const json* events = nullptr;
  if (j.is_array() && j.size() >= 2) {  // array-like [ts, events, rank]
    ts = &j[0];
    events = &j[1];
  } else if (j.is_object() && j.contains("ts") && j.contains("events")) {
    ts = &j["ts"];
    events = &j["events"];
  } else {
    return "the payload is not an event batch ([ts, events, ...] or {\"ts\", \"events\"})";
  }
  if (!ts->is_number() || !events->is_array()) return "the batch's ts is not a number or its events not a list";
  out.ts = ts->get<double>();
  out.events.clear();
  out.events.resize(events->size());
  for (std::size_t i = 0; i < events->size(); ++i) {
    if (std::string why = decode_event((*events)[i], i, engine, out.events[i]); !why.empty()) return why;
  }
  return "";
}

namespace {

// The recording at `path`, opened; refused when it is not a regular file.
std::ifstream open_recording(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw trace_error(path, 0, "cannot open file");
  if (!S_ISREG(st.st_mode)) throw trace_error(path, 0, "not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw trace_error(path, 0, "cannot open file");
  return in;
}

}  // namespace

std::string recorded_engine(const std::string& path) {
  std::ifstream in = open_recording(path);
  line_reader lines(in, path);
  std::string_view line;
  while (lines.next(line)) {
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("kvtk_events") && j["kvtk_events"] == 1 && j.contains("engine") &&
        j["engine"].is_string()) {
      return j["engine"].get<std::string>();
    }
    break;
  }
  return "";  // read_kv_events says what is wrong with it
}

kv_recording read_kv_events(const std::string& path, const std::string& engine,
                            const std::function<void(const kv_batch&)>& on_batch) {
  std::ifstream in = open_recording(path);
  line_reader lines(in, path);
  kv_recording rec;
  std::string_view line;
  bool header = false;
  std::int64_t last_seq = -1;  // -1: none yet (or since a restart)
  kv_batch batch;
  std::string payload;
  event_engine layout = event_engine::vllm;  // the header's engine's (below)
  while (lines.next(line)) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const std::uint64_t n = lines.line_number();
    const json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw trace_error(path, n, "not a JSON object");
    if (!header) {
      if (!j.contains("kvtk_events") || j["kvtk_events"] != 1) {
        throw trace_error(path, n, "not a kvtk KV-event recording (its first line is "
                                   "{\"kvtk_events\": 1, ...}; kvtk trace record writes them)");
      }
      if (j.contains("engine") && !j["engine"].is_string()) throw trace_error(path, n, "'engine' is not a string");
      rec.engine = j.contains("engine") ? j["engine"].get<std::string>() : "";
      if (!engine.empty() && rec.engine != engine) {
        throw trace_error(path, n, "was recorded from " + (rec.engine.empty() ? std::string("an unnamed engine") : rec.engine) +
                                       ", not " + engine);
      }
      layout = rec.engine == "sglang"   ? event_engine::sglang
               : rec.engine == "dynamo" ? event_engine::dynamo
                                        : event_engine::vllm;
      header = true;
      continue;
    }
    if (rec.ended) throw trace_error(path, n, "comes after the end line");
    if (j.contains("kvtk_events_end")) {
      rec.ended = true;
      continue;
    }
    if (j.contains("restart")) {
      // The engine restarted (`kvtk trace record` saw its numbers go back): its cache is empty
      // and its numbering starts anew. Consumers see it as AllBlocksCleared.
      const json& rs = j["restart"];
      if (!rs.is_object() || !rs.value("seq", json()).is_number_integer() || rs["seq"].get<std::int64_t>() < 0 ||
          rs["seq"].get<std::int64_t>() >= max_seq) {
        throw trace_error(path, n, "a restart line without an integer seq in [0, 2^62)");
      }
      ++rec.restarts;
      last_seq = -1;
      kv_batch restart;
      restart.seq = rs["seq"].get<std::int64_t>();
      restart.ts = batch.ts;
      restart.line = n;
      restart.restart = true;
      restart.events.resize(1);
      restart.events[0].type = kv_event::kind::cleared;
      on_batch(restart);
      continue;
    }
    if (j.contains("gap")) {
      const json& g = j["gap"];
      if (!g.is_object() || !g.value("first", json()).is_number_integer() ||
          !g.value("last", json()).is_number_integer() || g["last"].get<std::int64_t>() < g["first"].get<std::int64_t>()) {
        throw trace_error(path, n, "a gap line without integer first <= last");
      }
      const auto first = g["first"].get<std::int64_t>(), last = g["last"].get<std::int64_t>();
      if (first < 0 || last >= max_seq) throw trace_error(path, n, "a gap outside sequence numbers [0, 2^62)");
      if (last_seq >= 0 && first <= last_seq) throw trace_error(path, n, "a gap before the last batch");
      rec.gaps.emplace_back(first, last);
      rec.lost_batches += static_cast<std::uint64_t>(last - first + 1);
      if (last_seq >= 0 && first > last_seq + 1) rec.unrecorded_seqs += static_cast<std::uint64_t>(first - last_seq - 1);
      last_seq = last;
      continue;
    }
    if (!j.contains("seq") || !j["seq"].is_number_integer() || !j.contains("payload") || !j["payload"].is_string()) {
      throw trace_error(path, n, "a batch line without an integer \"seq\" and a base64 \"payload\"");
    }
    batch.seq = j["seq"].get<std::int64_t>();
    if (batch.seq < 0 || batch.seq >= max_seq) throw trace_error(path, n, "sequence number outside [0, 2^62)");
    if (last_seq >= 0 && batch.seq <= last_seq) {
      throw trace_error(path, n, "sequence number " + std::to_string(batch.seq) + " after " +
                                     std::to_string(last_seq) + " (a recording is in sequence order)");
    }
    if (last_seq >= 0 && batch.seq > last_seq + 1) rec.unrecorded_seqs += static_cast<std::uint64_t>(batch.seq - last_seq - 1);
    last_seq = batch.seq;
    if (!base64_decode(j["payload"].get<std::string>(), payload)) throw trace_error(path, n, "the payload is not base64");
    batch.line = n;
    if (std::string why = decode_event_batch(payload, batch, layout); !why.empty()) throw trace_error(path, n, why);
    ++rec.batches;
    on_batch(batch);
  }
  if (!header) throw trace_error(path, 0, "is empty (not a kvtk KV-event recording)");
  return rec;
}

}  // namespace kvtk::sim
