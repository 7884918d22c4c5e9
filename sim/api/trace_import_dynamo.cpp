// `kvtk trace import --format dynamo`: NVIDIA Dynamo's request trace (DYN_REQUEST_TRACE, schema
// dynamo.request.trace.v1, as its file sinks write it: {"timestamp", "event": record} per line,
// or the bare record) to a kvtk trace with its session fields.
//
// What a record gives (Dynamo's lib/llm/src/request_trace/types.rs, read in its source): per
// `request_end` event, request.replay {trace_block_size, input_length, input_sequence_hashes:
// the router's prefix-chained sequence hashes, one per block, the partial last block included},
// request.request_received_ms, request.output_tokens, request.request_id, and agent_context
// {session_id, parent_session_id}. Other event types (tool_start, tool_end, ...) and requests
// without replay data are counted and skipped, as Dynamo's own converter skips them.
//
// Session fields are inferred the way Dynamo's request_trace_to_mooncake --agentic orders them:
// a session's requests in arrival order are its turns (1, 2, ...), each the child of the one
// before; the first request of a child session (parent_session_id) is the child of the parent
// session's latest request that arrived before it, and every request of a child session has
// kind "sub-agent". Arrivals are made relative to the earliest request (the summary gives the
// absolute start). The file is not in arrival order (records are written at request end), so
// the requests are held in memory and sorted: about 8 bytes per block plus 100 per request.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "api/trace_import.hpp"
#include "api/usage_error.hpp"
#include "formats/gzip_input.hpp"
#include "formats/line_reader.hpp"
#include "formats/trace_limits.hpp"
#include "formats/utf8.hpp"
#include "formats/writers.hpp"
#include "kvtk/detail/mix.hpp"

namespace kvtk::sim::detail {

namespace {

using json = nlohmann::json;

std::uint64_t name_id(std::string_view s) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return kvtk::detail::mix64(h);
}

struct dynamo_request {
  double arrival_ms = 0;
  std::vector<kvtk::block_key> keys;
  std::uint64_t input_length = 0, line = 0;
  std::optional<std::uint64_t> output;
  std::string session, parent_session, request_id;
};

const json* member(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace

trace_import_result run_dynamo(const trace_import_options& o, const progress_callback& progress) {
  const auto start = std::chrono::steady_clock::now();
  // Dynamo's sink may write .jsonl.gz: read through zlib, a piece at a time.
  std::unique_ptr<std::istream> file;
  if (is_gzip(o.log)) {
    try {
      file = open_gzip(o.log);
    } catch (const std::runtime_error&) {
      throw usage_error("cannot open the log '" + o.log + "'");
    }
  } else {
    file = std::make_unique<std::ifstream>(o.log, std::ios::binary);
  }
  if (!*file) throw usage_error("cannot open the log '" + o.log + "'");
  line_reader lines(*file, o.log);
  std::vector<dynamo_request> rows;
  std::map<std::string, std::uint64_t> skipped;  // event type -> count
  std::uint32_t block = 0;
  std::string_view line;
  const auto next = [&] {
    try {
      return lines.next(line);
    } catch (const trace_error&) {
      if (const std::string why = gzip_failed(*file); !why.empty()) throw trace_error(o.log, lines.line_number() + 1, why);
      throw;
    }
  };
  while (next()) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const std::uint64_t n = lines.line_number();
    auto fail = [&](const std::string& why) { return trace_error(o.log, n, why); };
    const json wrapped = json::parse(line, nullptr, false);
    if (wrapped.is_discarded() || !wrapped.is_object()) throw fail("not a JSON object");
    const json* ev = member(wrapped, "event");
    const json& rec = ev != nullptr && ev->is_object() ? *ev : wrapped;
    const json* schema = member(rec, "schema");
    if (schema == nullptr || !schema->is_string() || *schema != "dynamo.request.trace.v1") {
      throw fail("not a Dynamo request trace record (schema dynamo.request.trace.v1; Dynamo writes "
                 "them with DYN_REQUEST_TRACE=1)");
    }
    const json* type = member(rec, "event_type");
    const std::string event = type != nullptr && type->is_string() ? type->get<std::string>() : "";
    if (event != "request_end") {
      ++skipped[event.empty() ? "untyped" : event];
      continue;
    }
    const json* req = member(rec, "request");
    if (req == nullptr || !req->is_object()) throw fail("a request_end record without 'request'");
    const json* replay = member(*req, "replay");
    if (replay == nullptr) {
      ++skipped["request_end without replay data"];
      continue;
    }
    const json* bs = member(*replay, "trace_block_size");
    const json* len = member(*replay, "input_length");
    const json* hashes = member(*replay, "input_sequence_hashes");
    if (bs == nullptr || !bs->is_number_unsigned() || bs->get<std::uint64_t>() == 0 ||
        bs->get<std::uint64_t>() > limits::max_block_tokens) {
      throw fail("request.replay.trace_block_size is not an integer in [1, 2^20]");
    }
    if (len == nullptr || !len->is_number_unsigned()) throw fail("request.replay.input_length is not a non-negative integer");
    if (hashes == nullptr || !hashes->is_array()) throw fail("request.replay.input_sequence_hashes is not a list");
    const auto b = bs->get<std::uint32_t>();
    if (block == 0) block = b;
    if (b != block) {
      throw fail("trace_block_size " + std::to_string(b) + " after " + std::to_string(block) +
                 " (a trace has one block size; import each engine's records apart)");
    }
    dynamo_request r;
    r.line = n;
    r.input_length = len->get<std::uint64_t>();
    for (const auto& h : *hashes) {
      if (!h.is_number_unsigned()) throw fail("a sequence hash is not an unsigned 64-bit integer");
      r.keys.push_back(h.get<std::uint64_t>());
    }
    if (r.keys.size() != (r.input_length + b - 1) / b) {
      throw fail(std::to_string(r.keys.size()) + " sequence hashes for " + std::to_string(r.input_length) +
                 " tokens in blocks of " + std::to_string(b));
    }
    const json* at = member(*req, "request_received_ms");
    if (at == nullptr) at = member(rec, "event_time_unix_ms");
    if (at == nullptr || !at->is_number() || !(at->get<double>() >= 0)) {
      throw fail("no request_received_ms (nor event_time_unix_ms) to time the request");
    }
    r.arrival_ms = at->get<double>();
    if (const json* out = member(*req, "output_tokens")) {
      if (!out->is_number_unsigned()) throw fail("request.output_tokens is not a non-negative integer");
      r.output = out->get<std::uint64_t>();
    }
    if (const json* id = member(*req, "request_id"); id != nullptr && id->is_string()) r.request_id = id->get<std::string>();
    if (const json* ctx = member(rec, "agent_context")) {
      if (const json* s = member(*ctx, "session_id"); s != nullptr && s->is_string()) r.session = s->get<std::string>();
      if (const json* p = member(*ctx, "parent_session_id"); p != nullptr && p->is_string()) {
        r.parent_session = p->get<std::string>();
      }
    }
    for (const std::string* s : {&r.session, &r.parent_session, &r.request_id}) {
      if (!valid_utf8(*s)) throw fail("an id is not valid UTF-8");
    }
    if (auto p = limits::request_problem(r.input_length, r.keys.size(), b, r.arrival_ms / 1000, r.output); !p.empty()) {
      throw fail(p);
    }
    rows.push_back(std::move(r));
  }
  if (rows.empty()) throw trace_error(o.log, 0, "has no request_end record with replay data");
  std::stable_sort(rows.begin(), rows.end(),
                   [](const dynamo_request& a, const dynamo_request& b) { return a.arrival_ms < b.arrival_ms; });
  const double origin = rows.front().arrival_ms;
  auto writer = trace_writer::open(o.output, *parse_format_name(o.to), block, o.force);
  progress_relay bar(progress, rows.size());
  std::unordered_map<std::string, std::pair<std::uint64_t, std::uint32_t>> last_of_session;  // id, turn
  trace_import_result res;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const dynamo_request& r = rows[i];
    request_record rec;
    rec.keys = r.keys;
    rec.input_length = r.input_length;
    rec.block_tokens = block;
    rec.line = r.line;
    rec.arrival_s = (r.arrival_ms - origin) / 1000;
    rec.output_length = r.output;
    const std::uint64_t id = name_id(r.request_id.empty() ? "line:" + std::to_string(r.line) : r.request_id);
    rec.request_id = id;
    if (!r.session.empty()) {
      rec.session = name_id(r.session);
      auto it = last_of_session.find(r.session);
      if (it != last_of_session.end()) {
        rec.parent = it->second.first;
        rec.turn = it->second.second + 1;
      } else {
        rec.turn = 1;
        if (!r.parent_session.empty()) {
          const auto p = last_of_session.find(r.parent_session);
          if (p != last_of_session.end()) rec.parent = p->second.first;  // spawned by it
        }
      }
      if (!r.parent_session.empty()) rec.kind = "sub-agent";
      last_of_session[r.session] = {id, *rec.turn};
    }
    writer->add(rec);
    ++res.requests;
    res.tokens += r.input_length;
    res.full_blocks += r.input_length / block;
    bar.add(1);
  }
  writer->finish();
  for (const auto& [type, count] : skipped) res.skipped_records[type] = count;
  res.start_unix_s = origin / 1000;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  res.threads = 1;
  res.engine = "dynamo";
  res.to = o.to;
  res.output = o.output;
  res.block_tokens = block;
  res.log_format = "dynamo";
  return res;
}

}  // namespace kvtk::sim::detail
