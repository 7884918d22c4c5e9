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

// The fields of BlockStored / BlockRemoved in the engines' declaration order (the positions of
// the array-like encoding, after the tag).
constexpr std::array<const char*, 8> stored_fields = {
    "block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium",
    "lora_name", "extra_keys"};
constexpr std::array<const char*, 2> removed_fields = {"block_hashes", "medium"};

// The event's field `name` (index `pos` of the array-like form); null when absent.
const json& field(const json& e, bool array_like, std::size_t pos, const char* name) {
  static const json null;
  if (array_like) return pos + 1 < e.size() ? e[pos + 1] : null;
  const auto it = e.find(name);
  return it == e.end() ? null : *it;
}

std::string decode_event(const json& e, std::size_t index, kv_event& out) {
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
  const json& medium = field(e, array_like, stored ? 5 : 1, "medium");
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
    if (!t.is_number_unsigned()) return at + "a token id is not a non-negative integer";
    out.token_ids.push_back(t.get<std::uint64_t>());
  }
  if (out.token_ids.size() != out.hashes.size() * out.block_size) {
    return at + std::to_string(out.token_ids.size()) + " token ids for " +
           std::to_string(out.hashes.size()) + " blocks of " + std::to_string(out.block_size);
  }
  const json& lora = field(e, array_like, 6, "lora_name");
  if (lora.is_string()) out.lora_name = lora.get<std::string>();
  const json& extra = field(e, array_like, 7, "extra_keys");
  out.has_extra_keys = !extra.is_null() && !(extra.is_array() && std::all_of(extra.begin(), extra.end(), [](const json& x) {
    return x.is_null() || (x.is_array() && x.empty());
  }));
  return "";
}

}  // namespace

std::string decode_event_batch(const std::string& msgpack, kv_batch& out) {
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
    if (std::string why = decode_event((*events)[i], i, out.events[i]); !why.empty()) return why;
  }
  return "";
}

kv_recording read_kv_events(const std::string& path, const std::string& engine,
                            const std::function<void(const kv_batch&)>& on_batch) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw trace_error(path, 0, "cannot open file");
  if (!S_ISREG(st.st_mode)) throw trace_error(path, 0, "not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw trace_error(path, 0, "cannot open file");
  line_reader lines(in, path);
  kv_recording rec;
  std::string_view line;
  bool header = false;
  std::optional<std::int64_t> last_seq;
  kv_batch batch;
  std::string payload;
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
      rec.engine = j.value("engine", "");
      if (!engine.empty() && rec.engine != engine) {
        throw trace_error(path, n, "was recorded from " + (rec.engine.empty() ? std::string("an unnamed engine") : rec.engine) +
                                       ", not " + engine);
      }
      header = true;
      continue;
    }
    if (rec.ended) throw trace_error(path, n, "comes after the end line");
    if (j.contains("kvtk_events_end")) {
      rec.ended = true;
      continue;
    }
    if (j.contains("gap")) {
      const json& g = j["gap"];
      if (!g.is_object() || !g.value("first", json()).is_number_integer() ||
          !g.value("last", json()).is_number_integer() || g["last"].get<std::int64_t>() < g["first"].get<std::int64_t>()) {
        throw trace_error(path, n, "a gap line without integer first <= last");
      }
      const auto first = g["first"].get<std::int64_t>(), last = g["last"].get<std::int64_t>();
      if (last_seq && first <= *last_seq) throw trace_error(path, n, "a gap before the last batch");
      rec.gaps.emplace_back(first, last);
      rec.lost_batches += static_cast<std::uint64_t>(last - first + 1);
      if (last_seq && first > *last_seq + 1) rec.unrecorded_seqs += static_cast<std::uint64_t>(first - *last_seq - 1);
      last_seq = last;
      continue;
    }
    if (!j.contains("seq") || !j["seq"].is_number_integer() || !j.contains("payload") || !j["payload"].is_string()) {
      throw trace_error(path, n, "a batch line without an integer \"seq\" and a base64 \"payload\"");
    }
    batch.seq = j["seq"].get<std::int64_t>();
    if (last_seq && batch.seq <= *last_seq) {
      throw trace_error(path, n, "sequence number " + std::to_string(batch.seq) + " after " +
                                     std::to_string(*last_seq) + " (a recording is in sequence order)");
    }
    if (last_seq && batch.seq > *last_seq + 1) rec.unrecorded_seqs += static_cast<std::uint64_t>(batch.seq - *last_seq - 1);
    last_seq = batch.seq;
    if (!base64_decode(j["payload"].get<std::string>(), payload)) throw trace_error(path, n, "the payload is not base64");
    batch.line = n;
    if (std::string why = decode_event_batch(payload, batch); !why.empty()) throw trace_error(path, n, why);
    ++rec.batches;
    on_batch(batch);
  }
  if (!header) throw trace_error(path, 0, "is empty (not a kvtk KV-event recording)");
  return rec;
}

}  // namespace kvtk::sim
