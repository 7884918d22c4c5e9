// KV-event recordings (sim/formats/kv_events.hpp), their import as the engine's miss stream and
// `kvtk check-engine` (sim/api/check_engine.hpp). tests/data/import/vllm_events_example.jsonl was
// recorded by `kvtk trace record` from vLLM 0.33.0's own Scheduler and ZmqEventPublisher serving
// the example token-id log one request at a time, prompt only, 64 GPU blocks
// (tools/engine-check/record_vllm_events.sh): kvtk's model must match it block for block, and a
// block removed by hand must be the first divergence reported.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "api/check_engine.hpp"
#include "api/event_keys.hpp"
#include "api/trace_import.hpp"
#include "api/usage_error.hpp"
#include "formats/kv_events.hpp"
#include "formats/requests.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::string import_dir = KVTK_TEST_DATA_DIR "/../import";
const std::string recording = import_dir + "/vllm_events_example.jsonl";
// SGLang 0.5.23's RadixCache and ZmqEventPublisher serving the same log, 64 pages of 16 tokens
// (tools/engine-check/record_sglang_events.sh).
const std::string sglang_recording = import_dir + "/sglang_events_example.jsonl";
// vLLM again, every request with kv_cache_report_mode="full" (REPORT_MODE=full
// tools/engine-check/record_vllm_events.sh): reused prefixes are reported too.
const std::string full_recording = import_dir + "/vllm_events_full_example.jsonl";
// NVIDIA Dynamo 1.6.1's own KvEventPublisher relaying the vLLM recording as RouterEvents on its
// event plane (tools/engine-check/record_dynamo_relay.sh).
const std::string dynamo_recording = import_dir + "/dynamo_events_example.jsonl";

std::string tmp(const std::string& name) {
  return (fs::temp_directory_path() / ("kvtk_events_" + std::to_string(::getpid()) + "_" + name)).string();
}

std::string b64(const std::vector<std::uint8_t>& bytes) {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    std::uint32_t v = std::uint32_t{bytes[i]} << 16;
    if (i + 1 < bytes.size()) v |= std::uint32_t{bytes[i + 1]} << 8;
    if (i + 2 < bytes.size()) v |= bytes[i + 2];
    out += a[(v >> 18) & 63];
    out += a[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? a[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? a[v & 63] : '=';
  }
  return out;
}

// The example's requests as a trace (LoRA fields renamed away: the recordings left LoRA out),
// with vLLM's block keys or SGLang's page keys.
// (Each made once per test process, and removed when the process exits.)
const std::string& requests_trace(const std::string& engine = "vllm") {
  struct removed_at_exit : std::map<std::string, std::string> {
    ~removed_at_exit() {
      for (const auto& [name, path] : *this) {
        std::error_code ec;
        fs::remove(path, ec);
      }
    }
  };
  static removed_at_exit paths;
  if (const auto it = paths.find(engine); it != paths.end()) return it->second;
  return paths[engine] = [&] {
    kvtk::sim::trace_import_options o;
    o.engine = engine;
    o.log = import_dir + "/token_ids_example.jsonl";
    o.output = tmp("requests_" + engine + ".kvtb");
    o.field_lora = "no_lora";
    o.field_lora_path = "no_lora_path";
    o.force = true;
    (void)kvtk::sim::run(o);
    return o.output;
  }();
}

kvtk::sim::check_engine_options check(const std::string& events, const std::string& engine = "vllm") {
  kvtk::sim::check_engine_options o;
  o.events = events;
  o.engine = engine;
  o.trace = requests_trace(engine);
  o.gpu_blocks = 64;
  return o;
}

// The recording's lines, a function applied to each batch's decoded payload, written anew.
std::string edited(const std::string& name, const std::function<void(std::int64_t seq, json& batch)>& edit,
                   const std::string& source = recording) {
  std::ifstream in(source);
  const std::string out = tmp(name);
  std::ofstream o(out);
  std::string line;
  while (std::getline(in, line)) {
    json j = json::parse(line);
    if (j.contains("payload")) {
      static const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
      const std::string p = j["payload"];
      std::vector<std::uint8_t> bytes;
      std::uint32_t acc = 0;
      int bits = 0;
      for (char c : p) {
        if (c == '=') break;
        acc = (acc << 6) | static_cast<std::uint32_t>(alphabet.find(c));
        bits += 6;
        if (bits >= 8) {
          bits -= 8;
          bytes.push_back(static_cast<std::uint8_t>((acc >> bits) & 0xff));
        }
      }
      json batch = json::from_msgpack(bytes);
      edit(j["seq"].get<std::int64_t>(), batch);
      if (batch.is_null()) continue;  // the batch dropped
      j["payload"] = b64(json::to_msgpack(batch));
    }
    o << j.dump() << "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("kv events: the vLLM recording decodes, imports as the miss stream", "[events]") {
  std::uint64_t stored = 0, removed = 0, batches = 0;
  const auto rec = kvtk::sim::read_kv_events(recording, "vllm", [&](const kvtk::sim::kv_batch& b) {
    ++batches;
    for (const auto& e : b.events) {
      if (e.type == kvtk::sim::kv_event::kind::stored) {
        stored += e.hashes.size();
        CHECK(e.token_ids.size() == e.hashes.size() * 16);
        CHECK(e.medium == "GPU");
      } else if (e.type == kvtk::sim::kv_event::kind::removed) {
        removed += e.hashes.size();
      }
    }
  });
  CHECK(rec.ended);
  CHECK(rec.engine == "vllm");
  CHECK((batches == 40 && stored == 481 && removed == 419));
  // The import writes the stored blocks' derived keys: every one is a key of the requests, and
  // each request's keys that were not cached before appear in order.
  kvtk::sim::trace_import_options o;
  o.log = recording;
  o.format = "vllm-events";
  o.to = "ids";
  o.output = tmp("miss.ids");
  o.force = true;
  const auto r = kvtk::sim::run(o);
  CHECK((r.stored_blocks == 481 && r.removed_blocks == 419 && r.unresolved_blocks == 0));
  std::set<kvtk::block_key> request_keys;
  kvtk::sim::for_each_request(requests_trace(), kvtk::sim::trace_format::kvtb, 0, {}, nullptr,
                              [&](const kvtk::sim::request_record& q) {
                                request_keys.insert(q.keys.begin(), q.keys.end());
                              });
  std::ifstream ids(o.output);
  std::uint64_t k = 0, n = 0, known = 0;
  while (ids >> k) {
    ++n;
    known += request_keys.count(k);
  }
  CHECK(n == 481);
  CHECK(known == 481);
  // A recording is not a request trace: request formats are refused, saying why.
  o.to = "kvtb";
  o.output = tmp("no.kvtb");
  CHECK_THROWS_WITH(kvtk::sim::run(o), Catch::Contains("not its requests"));
  fs::remove(tmp("miss.ids"));
}

TEST_CASE("check-engine: no divergence on vLLM's own recording - a removed block is found",
          "[events]") {
  auto r = kvtk::sim::run(check(recording));
  CHECK(r.equal);
  CHECK((r.requests == 40 && r.recorded_stored == 481 && r.predicted_stored == 481));
  CHECK((r.recorded_removed == 419 && r.predicted_removed == 419));
  auto engine_keys = check(recording);
  engine_keys.keys = "engine";  // vLLM's default NONE_HASH: its own hashes are the import's
  CHECK(kvtk::sim::run(engine_keys).equal);
  // The engine's logged block count matters: one block fewer, other evictions.
  auto smaller = check(recording);
  smaller.gpu_blocks = 63;
  CHECK_FALSE(kvtk::sim::run(smaller).equal);

  // One stored block removed by hand from batch 7's event: the first divergence is that block.
  std::uint64_t stored_before = 0;
  std::string dropped_at;
  const std::string cut = edited("cut.jsonl", [&](std::int64_t seq, json& batch) {
    for (auto& e : batch[1]) {
      if (e["type"] != "BlockStored") continue;
      if (seq < 7) {
        stored_before += e["block_hashes"].size();
        continue;
      }
      if (seq == 7) {
        REQUIRE(e["block_hashes"].size() >= 2);
        e["block_hashes"].erase(e["block_hashes"].size() - 1);
        auto& t = e["token_ids"];
        t.erase(t.begin() + static_cast<std::ptrdiff_t>(t.size() - 16), t.end());
        stored_before += e["block_hashes"].size();
      }
    }
  });
  r = kvtk::sim::run(check(cut));
  CHECK_FALSE(r.equal);
  INFO(r.first_divergence);
  CHECK(r.divergence["stored"]["index"] == stored_before);
  CHECK_THAT(r.first_divergence, Catch::StartsWith("stored block #" + std::to_string(stored_before) + ":"));

  // The same edit as a map of array-like events (the pre-2026 encoding): read alike.
  const std::string arrays = edited("arrays.jsonl", [&](std::int64_t, json& batch) {
    for (auto& e : batch[1]) {
      json a = json::array({e["type"]});
      if (e["type"] == "BlockStored") {
        for (const char* f : {"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium"}) a.push_back(e[f]);
      } else if (e["type"] == "BlockRemoved") {
        a.push_back(e["block_hashes"]);
        a.push_back(e["medium"]);
      }
      e = a;
    }
  });
  CHECK(kvtk::sim::run(check(arrays)).equal);
  // A lost batch is reported, not passed off as equal.
  const std::string lost = edited("lost.jsonl", [&](std::int64_t seq, json& batch) {
    if (seq == 20) batch = nullptr;
  });
  r = kvtk::sim::run(check(lost));
  CHECK_FALSE(r.equal);
  for (const auto& f : {cut, arrays, lost}) fs::remove(f);
}

TEST_CASE("kv events: SGLang's own recording decodes and check-engine finds no divergence", "[events]") {
  std::uint64_t stored = 0, removed = 0, cleared = 0, batches = 0;
  const auto rec = kvtk::sim::read_kv_events(sglang_recording, "sglang", [&](const kvtk::sim::kv_batch& b) {
    ++batches;
    for (const auto& e : b.events) {
      if (e.type == kvtk::sim::kv_event::kind::stored) {
        stored += e.hashes.size();  // one event per new radix node, its pages coalesced
        CHECK(e.token_ids.size() == e.hashes.size() * 16);
        CHECK(e.block_size == 16);
      } else if (e.type == kvtk::sim::kv_event::kind::removed) {
        removed += e.hashes.size();
      } else {
        ++cleared;
        CHECK(batches == 1);  // RadixCache's reset() at start-up
      }
    }
  });
  CHECK((rec.ended && rec.engine == "sglang"));
  CHECK((batches == 40 && stored == 550 && removed == 507 && cleared == 1));
  CHECK_THROWS_WITH(kvtk::sim::read_kv_events(sglang_recording, "vllm", [](const kvtk::sim::kv_batch&) {}),
                    Catch::Contains("was recorded from sglang, not vllm"));

  // The miss stream: derived keys (SGLang's page hash of each event's tokens chained from its
  // parent) equal SGLang's own hashes, and every one is a page of the requests.
  kvtk::sim::trace_import_options o;
  o.log = sglang_recording;
  o.format = "sglang-events";
  o.block_tokens = 16;
  o.to = "ids";
  o.force = true;
  std::vector<std::string> outputs;
  for (const char* keys : {"derived", "engine"}) {
    o.keys = keys;
    o.output = tmp(std::string("sglang_") + keys + ".ids");
    const auto imported = kvtk::sim::run(o);
    CHECK((imported.stored_blocks == 550 && imported.removed_blocks == 507 && imported.unresolved_blocks == 0));
    CHECK(imported.engine == "sglang");
    std::ifstream in(o.output);
    outputs.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    fs::remove(o.output);
  }
  CHECK(outputs[0] == outputs[1]);
  std::set<std::string> pages;
  kvtk::sim::for_each_request(requests_trace("sglang"), kvtk::sim::trace_format::kvtb, 0, {}, nullptr,
                              [&](const kvtk::sim::request_record& q) {
                                for (auto k : q.keys) pages.insert(std::to_string(k));
                              });
  std::istringstream ids(outputs[0]);
  std::string k;
  std::uint64_t n = 0, known = 0;
  while (ids >> k) ++n, known += pages.count(k);
  CHECK((n == 550 && known == 550));
  o.engine = "vllm";  // the format names the engine
  CHECK_THROWS_WITH(kvtk::sim::run(o), Catch::Contains("--engine must be sglang"));

  auto r = kvtk::sim::run(check(sglang_recording, "sglang"));
  INFO(r.first_divergence);
  CHECK(r.equal);
  CHECK((r.requests == 40 && r.recorded_stored == 550 && r.predicted_stored == 550));
  CHECK((r.recorded_removed == 507 && r.predicted_removed == 507 && r.cleared == 0));
  auto engine_keys = check(sglang_recording, "sglang");
  engine_keys.keys = "engine";  // SGLang's hash has no seed: its own int64s are kvtk's keys
  CHECK(kvtk::sim::run(engine_keys).equal);
  auto smaller = check(sglang_recording, "sglang");
  smaller.gpu_blocks = 60;
  CHECK_FALSE(kvtk::sim::run(smaller).equal);
  // vLLM's model of an SGLang recording is refused at the header, not compared.
  auto wrong = check(sglang_recording, "vllm");
  CHECK_THROWS_WITH(kvtk::sim::run(wrong), Catch::Contains("was recorded from sglang"));

  // The last page of the first multi-page store after batch 10 removed by hand: that page is
  // the first divergence.
  std::uint64_t stored_before = 0;
  bool cut_done = false;
  const std::string cut = edited("sglang_cut.jsonl", [&](std::int64_t seq, json& batch) {
    for (auto& e : batch[1]) {
      if (e["type"] != "BlockStored" || cut_done) continue;
      if (seq >= 10 && e["block_hashes"].size() >= 2) {
        e["block_hashes"].erase(e["block_hashes"].size() - 1);
        auto& t = e["token_ids"];
        t.erase(t.begin() + static_cast<std::ptrdiff_t>(t.size() - 16), t.end());
        cut_done = true;
      }
      stored_before += e["block_hashes"].size();
    }
  }, sglang_recording);
  REQUIRE(cut_done);
  r = kvtk::sim::run(check(cut, "sglang"));
  CHECK_FALSE(r.equal);
  CHECK(r.divergence["stored"]["index"] == stored_before);

  // SGLang's array-like layout (fields after medium: cache_salt, session_id, lora_name) with a
  // session id: read by position, the session kept, the streams unchanged.
  const std::string arrays = edited("sglang_arrays.jsonl", [&](std::int64_t, json& batch) {
    for (auto& e : batch[1]) {
      json a = json::array({e["type"]});
      if (e["type"] == "BlockStored") {
        for (const char* f : {"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium"}) {
          a.push_back(e.value(f, json()));
        }
        a.push_back(nullptr);     // cache_salt
        a.push_back("chat-7");    // session_id
        a.push_back(nullptr);     // lora_name
      } else if (e["type"] == "BlockRemoved") {
        a.push_back(e["block_hashes"]);
        a.push_back(e.value("medium", json()));
      }
      e = a;
    }
  }, sglang_recording);
  std::uint64_t with_session = 0;
  (void)kvtk::sim::read_kv_events(arrays, "sglang", [&](const kvtk::sim::kv_batch& b) {
    for (const auto& e : b.events) with_session += e.session_id == std::optional<std::string>("chat-7");
  });
  CHECK(with_session == 40);
  CHECK(kvtk::sim::run(check(arrays, "sglang")).equal);
  // A cache_salt page is namespaced by SGLang: derived keys refuse to guess it.
  const std::string salted = edited("sglang_salted.jsonl", [&](std::int64_t seq, json& batch) {
    if (seq != 3) return;
    for (auto& e : batch[1]) {
      if (e["type"] == "BlockStored") e["cache_salt"] = "tenant-a";
    }
  }, sglang_recording);
  r = kvtk::sim::run(check(salted, "sglang"));
  CHECK_FALSE(r.equal);
  CHECK(r.unresolved_blocks > 0);
  for (const auto& f : {cut, arrays, salted}) fs::remove(f);
}

TEST_CASE("kv events: vLLM's reuse reports rebuild the requests - check-engine compares the hits", "[events]") {
  // The requests rebuilt from the parent chains are the log's requests: each one's full blocks,
  // in order, with its session.
  kvtk::sim::trace_import_options o;
  o.log = full_recording;
  o.format = "vllm-events";
  o.report_mode = "full";
  o.to = "kvtk";
  o.output = tmp("rebuilt.jsonl");
  o.force = true;
  auto r = kvtk::sim::run(o);
  CHECK((r.requests == 40 && r.full_blocks == 912 && r.reused_blocks == 431 && r.stored_blocks == 481));
  CHECK((r.unattributed_blocks == 0 && r.dropped_requests == 0 && r.unresolved_blocks == 0));
  struct req {
    std::vector<kvtk::block_key> keys;
    std::optional<std::uint64_t> session;
    std::uint64_t input_length;
  };
  const auto read = [](const std::string& path) {
    std::vector<req> out;
    kvtk::sim::for_each_request(path, *kvtk::sim::parse_format_name(path.ends_with(".kvtb") ? "kvtb" : "kvtk"), 0, {},
                                nullptr, [&](const kvtk::sim::request_record& q) {
                                  out.push_back({{q.keys.begin(), q.keys.end()}, q.session, q.input_length});
                                });
    return out;
  };
  const auto rebuilt = read(o.output);
  const auto logged = read(requests_trace());
  REQUIRE(rebuilt.size() == logged.size());
  std::uint64_t same = 0;
  for (std::size_t i = 0; i < rebuilt.size(); ++i) {
    const std::size_t full = logged[i].input_length / 16;
    same += rebuilt[i].keys == std::vector<kvtk::block_key>(logged[i].keys.begin(), logged[i].keys.begin() + static_cast<std::ptrdiff_t>(full)) &&
            rebuilt[i].session == logged[i].session && rebuilt[i].input_length == full * 16;
  }
  CHECK(same == 40);
  // The miss stream of a full recording equals the incremental recording's, block for block.
  const auto ids = [&](const std::string& log, const std::string& mode) {
    kvtk::sim::trace_import_options m;
    m.log = log;
    m.format = "vllm-events";
    m.report_mode = mode;
    m.to = "ids";
    m.output = tmp("ids_" + mode + ".ids");
    m.force = true;
    const auto res = kvtk::sim::run(m);
    std::ifstream in(m.output);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    fs::remove(m.output);
    return std::make_pair(res, text);
  };
  const auto [full_res, full_ids] = ids(full_recording, "full");
  const auto [inc_res, inc_ids] = ids(recording, "incremental");
  CHECK(full_ids == inc_ids);
  // Read as incremental, the reuse reports would be misses: the import says so.
  const auto [wrong_res, wrong_ids] = ids(full_recording, "incremental");
  CHECK((wrong_res.stored_blocks == 912 && wrong_res.reuse_like_events == 39));
  CHECK_THAT(kvtk::sim::to_text(wrong_res), Catch::Contains("give --report-mode full"));
  // Report mode full is vLLM's; an incremental recording is still refused as a request trace.
  o.format = "sglang-events";
  o.log = sglang_recording;
  CHECK_THROWS_WITH(kvtk::sim::run(o), Catch::Contains("--report-mode full is vLLM's"));

  // check-engine compares the reused stream with the model's hits: equal block for block.
  auto c = check(full_recording);
  c.report_mode = "full";
  auto e = kvtk::sim::run(c);
  INFO(e.first_divergence);
  CHECK(e.equal);
  CHECK((e.recorded_reused == 431 && e.predicted_reused == 431 && e.recorded_stored == 481));
  c.report_mode = "incremental";
  e = kvtk::sim::run(c);
  CHECK_FALSE(e.equal);
  CHECK(e.reuse_reports == 39);
  fs::remove(o.output);
}

TEST_CASE("kv events: Dynamo's RouterEvents give vLLM's miss stream - one cache a recording", "[events]") {
  // Dynamo passes the engine's hashes through: its recording's miss stream is the vLLM
  // recording's with the engine's keys, block for block.
  const auto miss_stream = [&](const std::string& log, const std::string& format, const std::string& keys) {
    kvtk::sim::trace_import_options o;
    o.log = log;
    o.format = format;
    o.keys = keys;
    o.to = "ids";
    o.output = tmp("dyn_" + format + ".ids");
    o.force = true;
    const auto r = kvtk::sim::run(o);
    CHECK((r.stored_blocks == 481 && r.removed_blocks == 419 && r.unresolved_blocks == 0));
    std::ifstream in(o.output);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    fs::remove(o.output);
    return text;
  };
  CHECK(miss_stream(dynamo_recording, "dynamo-events", "") == miss_stream(recording, "vllm-events", "engine"));
  kvtk::sim::trace_import_options derived;
  derived.log = dynamo_recording;
  derived.format = "dynamo-events";
  derived.keys = "derived";
  derived.to = "ids";
  derived.output = tmp("x.ids");
  CHECK_THROWS_WITH(kvtk::sim::run(derived), Catch::Contains("carry no token ids"));
  // check-engine against kvtk's vLLM model, with the engine's keys.
  auto c = check(dynamo_recording);
  c.keys = "engine";
  const auto r = kvtk::sim::run(c);
  INFO(r.first_divergence);
  CHECK(r.equal);
  c.keys = "derived";
  CHECK_THROWS_WITH(kvtk::sim::run(c), Catch::Contains("give --keys engine"));

  // Hand-made envelopes: tiers, cleared, a second worker refused.
  const auto envelope = [](const json& router_events) {
    const auto payload = json::to_msgpack(router_events);
    const json env = {{"publisher_id", 1}, {"sequence", 0}, {"published_at", 1500}, {"topic", "kv-events"},
                      {"payload", json::binary(payload)}};
    auto body = json::to_msgpack(env);
    std::vector<std::uint8_t> frame = {1, 0, 0, 0, 0};
    for (int i = 0; i < 4; ++i) frame[static_cast<std::size_t>(1 + i)] = static_cast<std::uint8_t>(body.size() >> (8 * (3 - i)));
    frame.insert(frame.end(), body.begin(), body.end());
    return std::string(frame.begin(), frame.end());
  };
  const auto stored = [](std::uint64_t worker, const char* tier, std::uint64_t hash) {
    return json{{"worker_id", worker}, {"storage_tier", tier},
                {"event", {{"event_id", 1}, {"dp_rank", 0},
                           {"data", {{"stored", {{"parent_hash", nullptr},
                                                 {"blocks", json::array({json{{"block_hash", hash}, {"tokens_hash", 5}}})}}}}}}}};
  };
  kvtk::sim::kv_batch b;
  const json events = json::array({stored(7, "device", 0xffffffffffffffffull), stored(7, "host_pinned", 2),
                                   json{{"worker_id", 7}, {"storage_tier", "device"},
                                        {"event", {{"event_id", 3}, {"data", "cleared"}}}}});
  {
    const std::string why = kvtk::sim::decode_event_batch(envelope(events), b, kvtk::sim::event_engine::dynamo);
    INFO(why);
    REQUIRE(why.empty());
  }
  REQUIRE(b.events.size() == 3);
  CHECK((b.ts == 1.5 && b.events[0].medium == "GPU" && b.events[1].medium == "host_pinned"));
  CHECK(b.events[2].type == kvtk::sim::kv_event::kind::cleared);
  CHECK(kvtk::sim::event_keys::engine_key(b.events[0].hashes[0]) == 0xffffffffffffffffull);
  CHECK_THAT(kvtk::sim::decode_event_batch(std::string("\x02") + "abcd", b, kvtk::sim::event_engine::dynamo),
             Catch::Contains("not a Dynamo event-plane frame"));
  const std::string two = tmp("two_workers.jsonl");
  {
    std::ofstream out(two);
    out << "{\"kvtk_events\": 1, \"engine\": \"dynamo\"}\n";
    const auto b64s = [](const std::string& bytes) { return b64(std::vector<std::uint8_t>(bytes.begin(), bytes.end())); };
    out << "{\"seq\": 0, \"payload\": \"" << b64s(envelope(json::array({stored(7, "device", 1)}))) << "\"}\n";
    out << "{\"seq\": 1, \"payload\": \"" << b64s(envelope(json::array({stored(8, "device", 2)}))) << "\"}\n";
  }
  derived.log = two;
  derived.keys = "engine";
  CHECK_THROWS_WITH(kvtk::sim::run(derived), Catch::Contains(":3: holds events of worker 8 rank 0 after worker 7"));
  auto two_caches = check(two);  // check-engine refuses it the same way
  two_caches.keys = "engine";
  CHECK_THROWS_WITH(kvtk::sim::run(two_caches), Catch::Contains(":3: holds events of worker 8 rank 0 after worker 7"));
  for (const auto& f : {two, derived.output}) fs::remove(f);
}

TEST_CASE("kv events: resident blocks count copies - a reuse report is parentless and resident", "[events]") {
  using kvtk::sim::kv_event;
  const auto stored = [](std::vector<std::string> hashes, std::optional<std::string> parent) {
    kv_event e;
    e.type = kv_event::kind::stored;
    e.hashes = std::move(hashes);
    e.parent = std::move(parent);
    return e;
  };
  kv_event removed;
  removed.type = kv_event::kind::removed;
  kvtk::sim::resident_blocks r;
  r.stored(stored({"a1", "a2"}, std::nullopt));
  r.stored(stored({"a2"}, "a1"));  // vLLM recomputed a2: a second copy of the hash
  removed.hashes = {"a2"};
  r.removed(removed);  // one copy evicted, one still cached
  CHECK(r.reuse_report(stored({"a1", "a2"}, std::nullopt)));
  CHECK_FALSE(r.reuse_report(stored({"a1", "a2"}, "x")));  // a parent: a store
  r.removed(removed);
  CHECK_FALSE(r.reuse_report(stored({"a1", "a2"}, std::nullopt)));
  r.cleared();
  CHECK_FALSE(r.reuse_report(stored({"a1"}, std::nullopt)));
}

TEST_CASE("kv events: bad recordings are refused naming the line", "[events]") {
  struct bad {
    std::string text, want;
  };
  const std::string header = "{\"kvtk_events\": 1, \"engine\": \"vllm\"}\n";
  const auto batch = [](const json& j) { return b64(json::to_msgpack(j)); };
  const std::vector<bad> cases = {
      {"{\"seq\": 0}\n", ":1: not a kvtk KV-event recording"},
      {"{\"kvtk_events\": 1, \"engine\": \"sglang\"}\n", ":1: was recorded from sglang, not vllm"},
      {header + "{\"seq\": 0, \"payload\": \"@@@@\"}\n", ":2: the payload is not base64"},
      {header + "{\"seq\": 0, \"payload\": \"" + b64({0xc1}) + "\"}\n", ":2: the payload is not msgpack"},
      {header + "{\"seq\": 0, \"payload\": \"" + batch(json::array({1.0, json::array({json{{"type", "BlockMoved"}}})})) + "\"}\n",
       ":2: event 0: unknown event type 'BlockMoved'"},
      {header + "{\"seq\": 0, \"payload\": \"" +
           batch(json::array({1.0, json::array({json{{"type", "BlockStored"}, {"block_hashes", {1}},
                                                      {"token_ids", {1, 2}}, {"block_size", 4}}})})) + "\"}\n",
       ":2: event 0: 2 token ids for 1 blocks of 4"},
      {header + "{\"seq\": 3, \"payload\": \"" + batch(json::array({1.0, json::array()})) + "\"}\n" +
           "{\"seq\": 2, \"payload\": \"" + batch(json::array({1.0, json::array()})) + "\"}\n",
       ":3: sequence number 2 after 3"},
      {header + "{\"kvtk_events_end\": {}}\n{\"seq\": 0, \"payload\": \"\"}\n", ":3: comes after the end line"},
      {"{\"kvtk_events\": 1, \"engine\": 5}\n", ":1: 'engine' is not a string"},
      {header + "{\"seq\": -1, \"payload\": \"\"}\n", ":2: sequence number outside [0, 2^62)"},
      {header + "{\"gap\": {\"first\": -9223372036854775808, \"last\": 9223372036854775807}}\n",
       ":2: a gap outside sequence numbers"},
      // A payload nested 300,000 deep (the reviewer's crash: nlohmann's parser recurses).
      {header + "{\"seq\": 0, \"payload\": \"" + [] {
         std::vector<std::uint8_t> deep = {0x92, 0x00};
         deep.insert(deep.end(), 300000, 0x91);
         deep.push_back(0xc0);
         return b64(deep);
       }() + "\"}\n",
       ":2: the payload is not msgpack nested at most 32 deep"},
  };
  for (const auto& c : cases) {
    INFO(c.want);
    const std::string path = tmp("bad.jsonl");
    std::ofstream(path) << c.text;
    CHECK_THROWS_WITH(kvtk::sim::read_kv_events(path, "vllm", [](const kvtk::sim::kv_batch&) {}),
                      Catch::Contains(c.want));
    fs::remove(path);
  }
  // A restart line (the recorder saw the engine's numbers go back): read as AllBlocksCleared
  // with numbering anew, so check-engine does not call the run equal.
  {
    const std::string path = tmp("restart.jsonl");
    const std::string empty = batch(json::array({1.0, json::array()}));
    std::ofstream(path) << header << "{\"seq\": 0, \"payload\": \"" << empty << "\"}\n"
                        << "{\"seq\": 1, \"payload\": \"" << empty << "\"}\n"
                        << "{\"restart\": {\"seq\": 0, \"t\": 5}}\n"
                        << "{\"seq\": 0, \"payload\": \"" << empty << "\"}\n";
    std::uint64_t cleared = 0, restarts = 0;
    const auto rec = kvtk::sim::read_kv_events(path, "vllm", [&](const kvtk::sim::kv_batch& b) {
      restarts += b.restart;
      for (const auto& e : b.events) cleared += e.type == kvtk::sim::kv_event::kind::cleared;
    });
    CHECK((rec.restarts == 1 && restarts == 1 && cleared == 1 && rec.batches == 3));
    std::ofstream(path) << header << "{\"restart\": {\"seq\": -4}}\n";
    CHECK_THROWS_WITH(kvtk::sim::read_kv_events(path, "vllm", [](const kvtk::sim::kv_batch&) {}),
                      Catch::Contains(":2: a restart line without an integer seq"));
    fs::remove(path);
  }
  // Bytes hashes (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0): the engine key is their last 8 bytes.
  kvtk::sim::kv_batch b;
  std::vector<std::uint8_t> digest(32);
  for (std::size_t i = 0; i < 32; ++i) digest[i] = static_cast<std::uint8_t>(i);
  const json stored = json::array({1.5, json::array({json{{"type", "BlockRemoved"},
                                                          {"block_hashes", json::array({json::binary(digest)})},
                                                          {"medium", "CPU"}}})});
  const auto raw = json::to_msgpack(stored);
  REQUIRE(kvtk::sim::decode_event_batch(std::string(raw.begin(), raw.end()), b).empty());
  REQUIRE(b.events.size() == 1);
  CHECK(b.events[0].medium == "CPU");
  CHECK(b.events[0].hashes[0].size() == 32);
}
