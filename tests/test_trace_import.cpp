// `kvtk trace import --format token-ids` (sim/api/trace_import.hpp): the imported keys are the
// engine's (vLLM's own block hashes from tests/data/engine_hash_vectors.json, which
// tools/engine-check/gen_hash_vectors.py wrote by calling vLLM's hasher; SGLang's through
// block_hasher), a generated multi-turn log imports to the keys make_prefix_trace gives on any
// thread count, and bad logs are refused naming the line.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "api/trace_import.hpp"
#include "api/usage_error.hpp"
#include "engine_vectors.hpp"
#include "formats/requests.hpp"
#include "kvtk/prefix/block_hasher.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using kvtk::block_key;

std::string tmp(const std::string& name) {
  return (fs::temp_directory_path() / ("kvtk_import_" + std::to_string(::getpid()) + "_" + name)).string();
}

using engine_vectors::expand;
using engine_vectors::vectors;

// Every request's keys and record of an imported trace.
// (records' views, keys, tenant and kind, point into the reader: copied, and cleared.)
struct read_back {
  std::vector<std::vector<block_key>> keys;
  std::vector<kvtk::sim::request_record> records;
  std::vector<std::string> kinds;
};
read_back read(const std::string& path, kvtk::sim::trace_format f) {
  read_back r;
  kvtk::sim::for_each_request(path, f, 0, {}, nullptr, [&](const kvtk::sim::request_record& rec) {
    r.keys.emplace_back(rec.keys.begin(), rec.keys.end());
    r.kinds.emplace_back(rec.kind);
    r.records.push_back(rec);
    r.records.back().keys = {};
    r.records.back().tenant = {};
    r.records.back().kind = {};
  });
  return r;
}

kvtk::sim::trace_import_options options(const std::string& log, const std::string& out) {
  kvtk::sim::trace_import_options o;
  o.log = log;
  o.output = out;
  o.force = true;
  return o;
}

}  // namespace

TEST_CASE("trace import: the keys are vLLM's own block hashes", "[trace_import]") {
  // One import per vector (each has its own algorithm, block size and seed), as JSONL and as
  // CSV; the extras a log carries (cache_salt, LoRA name and path, multimodal items) included;
  // prompt-embeds vectors are not a token log's, lookahead is not an import option.
  std::size_t checked = 0, with_mm = 0;
  for (const auto& v : vectors().at("vllm")) {
    const auto& e = v.at("extras");
    if (e.contains("prompt_embeds") || v.at("lookahead").get<int>() != 0) continue;
    if (e.contains("cache_salt") && !e["cache_salt"].is_string()) continue;
    INFO(v.at("name").get<std::string>());
    const auto tokens = v.at("token_ids_used").is_null()
                            ? expand(vectors().at("sequences").at(v.at("tokens").get<std::string>()))
                            : expand(v.at("token_ids_used"));
    json line = {{"token_ids", tokens}};
    if (e.contains("cache_salt")) line["cache_salt"] = e["cache_salt"];
    if (e.contains("lora")) {
      line["lora_name"] = e["lora"].at("name");
      line["lora_path"] = e["lora"].at("path");
    }
    if (e.contains("mm")) {
      line["mm_hashes"] = e["mm"];
      ++with_mm;
    }
    // The same request as a CSV record: every cell quoted, quotes doubled.
    auto cell = [](const json& j) {
      std::string text = j.is_string() ? j.get<std::string>() : j.dump(), q = "\"";
      for (char c : text) q += c == '"' ? std::string("\"\"") : std::string(1, c);
      return q + "\"";
    };
    std::string header, record;
    for (const auto& [k, val] : line.items()) {
      header += (header.empty() ? "" : ",") + k;
      record += (record.empty() ? "" : ",") + cell(val);
    }
    for (const char* syntax : {"jsonl", "csv"}) {
      INFO(syntax);
      const std::string log = tmp(std::string("vec.") + syntax), out = tmp("vec.kvtb");
      if (std::string(syntax) == "jsonl") {
        std::ofstream(log) << line.dump() << "\n";
      } else {
        std::ofstream(log) << header << "\r\n" << record << "\r\n";
      }
      auto o = options(log, out);
      o.block_tokens = v.at("block_size").get<std::uint32_t>();
      o.hash_algo = v.at("algo").get<std::string>();
      if (!v.at("pythonhashseed").is_null()) o.hash_seed = v.at("none_hash_seed").get<std::string>();
      const auto r = kvtk::sim::run(o);
      CHECK(r.requests == 1);
      CHECK(r.log_format == syntax);
      const auto got = read(out, kvtk::sim::trace_format::kvtb);
      REQUIRE(got.keys.size() == 1);
      std::vector<block_key> want;
      for (const auto& k : v.at("int_block_hashes")) want.push_back(k.get<std::uint64_t>());
      const std::size_t full = tokens.size() / o.block_tokens;
      REQUIRE(want.size() == full);
      CHECK(std::vector<block_key>(got.keys[0].begin(), got.keys[0].begin() + full) == want);
      CHECK(got.keys[0].size() == (tokens.size() + o.block_tokens - 1) / o.block_tokens);
      CHECK(got.records[0].input_length == tokens.size());
      fs::remove(log);
      fs::remove(out);
    }
    ++checked;
  }
  CHECK(checked >= 70);
  CHECK(with_mm >= 10);
}

TEST_CASE("trace import: a generated multi-turn log, any thread count, both engines",
          "[trace_import]") {
  // Conversations growing turn by turn (shared prefixes), timestamps, sessions, output lengths.
  std::mt19937_64 rng(7);
  std::vector<std::vector<std::int64_t>> convs(4), seqs;
  std::vector<std::size_t> conv_of;
  const std::string log = tmp("gen.jsonl");
  {
    std::ofstream f(log);
    double t = 0;
    for (int i = 0; i < 300; ++i) {
      const std::size_t c = rng() % convs.size();
      if (convs[c].size() > 600) convs[c].clear();
      for (std::uint64_t n = 1 + rng() % 90; n > 0; --n) convs[c].push_back(static_cast<std::int64_t>(rng() % 50000));
      seqs.push_back(convs[c]);
      conv_of.push_back(c);
      t += 0.25;
      f << json{{"timestamp", t}, {"token_ids", convs[c]}, {"output_length", 8 + i % 5},
                {"session", "conv-" + std::to_string(c)}}.dump()
        << "\n";
    }
  }
  for (const char* engine : {"vllm", "sglang"}) {
    kvtk::prefix::vllm_hash_options vo;
    vo.block_size = 16;
    kvtk::prefix::sglang_hash_options so;
    so.page_size = 16;
    const auto hasher = std::string(engine) == "vllm" ? kvtk::prefix::block_hasher(vo)
                                                      : kvtk::prefix::block_hasher(so);
    const auto want = kvtk::prefix::make_prefix_trace(seqs, hasher);
    for (const std::uint32_t threads : {1u, 2u, 3u}) {
      INFO(engine << ", " << threads << " threads");
      const std::string out = tmp("gen.jsonl.out");
      auto o = options(log, out);
      o.to = "kvtk";
      o.engine = engine;
      o.threads = threads;
      const auto r = kvtk::sim::run(o);
      CHECK(r.requests == 300);
      const auto got = read(out, kvtk::sim::trace_format::kvtk);
      REQUIRE(got.keys.size() == 300);
      std::uint64_t full = 0;
      for (std::size_t q = 0; q < 300; ++q) {
        const auto w = want.blocks(q);
        REQUIRE(got.keys[q].size() >= w.size());
        CHECK(std::equal(w.begin(), w.end(), got.keys[q].begin()));
        CHECK(got.records[q].input_length == seqs[q].size());
        CHECK(got.records[q].arrival_s == Approx(0.25 * static_cast<double>(q + 1)));
        CHECK(got.records[q].output_length == std::uint64_t(8 + q % 5));
        full += w.size();
      }
      CHECK(r.full_blocks == full);
      // Two requests of one conversation share a session; different conversations do not.
      for (std::size_t q = 1; q < 300; ++q) {
        CHECK((got.records[q].session == got.records[q - 1].session) == (conv_of[q] == conv_of[q - 1]));
      }
      fs::remove(out);
    }
  }
  fs::remove(log);
}

TEST_CASE("trace import: a prompt shorter than a block keeps its extras apart", "[trace_import]") {
  // Its only key is the derived partial key: two equal prompts with different cache_salt (or
  // LoRA) must not share it; equal prompts and extras do.
  const std::string log = tmp("short.jsonl"), out = tmp("short.jsonl.out");
  std::ofstream(log) << "{\"token_ids\": [5, 6, 7]}\n{\"token_ids\": [5, 6, 7], \"cache_salt\": \"t\"}\n"
                        "{\"token_ids\": [5, 6, 7], \"lora_name\": \"a\", \"lora_path\": \"/a\"}\n"
                        "{\"token_ids\": [5, 6, 7], \"cache_salt\": \"t\"}\n";
  auto o = options(log, out);
  o.to = "kvtk";
  (void)kvtk::sim::run(o);
  const auto got = read(out, kvtk::sim::trace_format::kvtk);
  REQUIRE(got.keys.size() == 4);
  CHECK(got.keys[0][0] != got.keys[1][0]);
  CHECK(got.keys[0][0] != got.keys[2][0]);
  CHECK(got.keys[1][0] != got.keys[2][0]);
  CHECK(got.keys[1][0] == got.keys[3][0]);
  fs::remove(log);
  fs::remove(out);
}

TEST_CASE("trace import: bad logs are refused naming the line", "[trace_import]") {
  struct bad_case {
    const char* lines;
    const char* want;
  };
  const std::vector<bad_case> cases = {
      {"{\"timestamp\": 1, \"token_ids\": [1, 2]}\n{\"timestamp\": 2}\n", ":2: missing field 'token_ids'"},
      {"{\"timestamp\": 2, \"token_ids\": [1]}\n{\"timestamp\": 1, \"token_ids\": [1]}\n",
       ":2: timestamp goes backwards"},
      {"{\"token_ids\": [1, 2.5]}\n", ":1: 'token_ids'\\[1\\] is a number, not a token id"},
      {"{\"token_ids\": [1, -2]}\n", ":1: 'token_ids'\\[1\\] is a negative number, not a token id"},
      {"{\"timestamp\": 1, \"token_ids\": [1]}\n{\"token_ids\": [1]}\n", ":2: has no timestamp"},
      {"{\"token_ids\": [1], \"lora_name\": \"a\"}\n", ":1: 'lora_name' without 'lora_path'"},
      {"{\"token_ids\": []}\n", ":1: 'token_ids' is empty"},
      {"{\"token_ids\": [1]\n", ":1: invalid JSON"},
      {"{\"timestamp\": -5, \"token_ids\": [1]}\n", ":1: the timestamp -5.0+ s is outside"},
      {"{\"timestamp\": -0.5, \"token_ids\": [1]}\n", ":1: the timestamp -0.50+ s is outside"},
      {"{\"token_ids\": [1], \"output_length\": 4294967296}\n", ":1: output_length 4294967296 is not below 2\\^32"},
  };
  for (const auto& c : cases) {
    INFO(c.want);
    const std::string log = tmp("bad.jsonl"), out = tmp("bad.kvtb");
    std::ofstream(log) << c.lines;
    try {
      (void)kvtk::sim::run(options(log, out));
      FAIL("accepted");
    } catch (const kvtk::sim::trace_error& e) {
      CHECK(std::regex_search(std::string(e.what()), std::regex(c.want)));
    }
    CHECK_FALSE(fs::exists(out));  // nothing half-written under the real name
    fs::remove(log);
  }
  auto o = options("/nonexistent/log.jsonl", tmp("x.kvtb"));
  CHECK_THROWS_AS(kvtk::sim::run(o), kvtk::sim::usage_error);
  o.log = tmp("ok.jsonl");
  std::ofstream(o.log) << "{\"token_ids\": [1]}\n";
  o.engine = "trtllm";
  CHECK_THROWS_WITH(kvtk::sim::run(o), Catch::Contains("--engine: 'trtllm'"));
  o.engine = "vllm";
  o.hash_algo = "xxhash";
  CHECK_THROWS_WITH(kvtk::sim::run(o), Catch::Contains("give --hash-seed"));
  o.hash_algo = "md5";
  CHECK_THROWS_WITH(kvtk::sim::run(o), Catch::Contains("--hash-algo: 'md5'"));
  o.hash_algo = "sha256";
  o.threads = 4096;
  CHECK_THROWS_WITH(kvtk::sim::run(o), Catch::Contains("--threads: 4096 is over 256"));
  o.threads = 1;
  // vLLM's max_tokens default and an absent time: null means absent.
  std::ofstream(o.log) << "{\"prompt_token_ids\": [1, 2, 3], \"max_tokens\": null, \"arrival_time\": null}\n";
  o.preset = "vllm";
  o.field_timestamp = o.field_tokens = o.field_output = o.field_session = o.field_lora =
      o.field_lora_path = o.field_cache_salt = "";
  CHECK(kvtk::sim::run(o).requests == 1);
  fs::remove(o.output);
  fs::remove(o.log);
}

TEST_CASE("trace import: CSV logs read as JSONL ones do, bad ones are refused", "[trace_import]") {
  // Equal requests as JSONL and as CSV (ids bracketed with commas, or space-separated; a quoted
  // cache_salt holding a comma and a quote; an empty cell = absent) give the same trace.
  const std::string jsonl = tmp("same.jsonl"), csv = tmp("same.csv");
  std::ofstream(jsonl) << "{\"timestamp\": 1.5, \"token_ids\": [1, 2, 3, 4, 5], \"output_length\": 7, "
                          "\"session\": \"a\", \"cache_salt\": \"x,\\\"y\"}\n"
                          "{\"timestamp\": 2, \"token_ids\": [1, 2, 3, 4, 9, 9], \"session\": 12}\n";
  std::ofstream(csv) << "\xEF\xBB\xBFsession,timestamp,token_ids,output_length,cache_salt,notes\n"
                        "a,1.5,\"[1, 2, 3, 4, 5]\",7,\"x,\"\"y\",free text\n"
                        "12, 2 ,1 2 3 4 9 9,,,\n";
  auto o = options(jsonl, tmp("same.a.kvtk"));
  o.to = "kvtk";
  o.block_tokens = 2;
  (void)kvtk::sim::run(o);
  o.log = csv;
  o.output = tmp("same.b.kvtk");
  CHECK(kvtk::sim::run(o).log_format == "csv");
  const auto a = read(tmp("same.a.kvtk"), kvtk::sim::trace_format::kvtk);
  const auto b = read(tmp("same.b.kvtk"), kvtk::sim::trace_format::kvtk);
  CHECK(a.keys == b.keys);
  REQUIRE(b.records.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(a.records[i].arrival_s == b.records[i].arrival_s);
    CHECK(a.records[i].output_length == b.records[i].output_length);
    CHECK(a.records[i].session == b.records[i].session);
  }
  CHECK_FALSE(b.records[1].output_length.has_value());
  CHECK(a.keys[0][0] != a.keys[1][0]);  // the cache_salt separates the first block
  fs::remove(jsonl);
  fs::remove(csv);
  fs::remove(tmp("same.a.kvtk"));
  fs::remove(tmp("same.b.kvtk"));

  struct bad_case {
    const char* lines;
    const char* want;
  };
  const std::vector<bad_case> cases = {
      {"timestamp,prompt\n1,\"1 2\"\n", ":1: the CSV header has no 'token_ids' column"},
      {"token_ids,token_ids\n1,2\n", ":1: the CSV header names 'token_ids' twice"},
      {"timestamp,token_ids\n1,\"1 2\n", ":2: invalid CSV: column 3: a quoted field does not end"},
      {"timestamp,token_ids\n1,1 2,3\n", ":2: has 3 fields, the header 2"},
      {"timestamp,token_ids\n1,1 x 2\n", ":2: 'token_ids'\\[1\\] is 'x', not a token id"},
      {"timestamp,token_ids\nsoon,1 2\n", ":2: 'timestamp' is 'soon', not a number"},
      {"timestamp,token_ids\n1,\n", ":2: 'token_ids' is empty"},
      {"timestamp,token_ids\n1,[1 2\n", ":2: 'token_ids' opens '\\[' and does not close it"},
      {"token_ids,x\n1 2,a\"b\n", ":2: invalid CSV: column 5: a quote inside an unquoted field"},
      {"token_ids,mm_hashes\n1 2 3,\"[{\"\"identifier\"\": \"\"i\"\", \"\"offset\"\": 2, \"\"length\"\": 5}]\"\n",
       ":2: 'mm_hashes': an item ends at token 7, past the prompt's 3"},
      {"{\"token_ids\": [1, 2, 3], \"mm_hashes\": [{\"identifier\": \"i\", \"offset\": 0}]}\n",
       ":1: 'mm_hashes'\\[0\\] is not \\{"},
      {"{\"token_ids\": [1, 2, 3], \"mm_hashes\": [{\"identifier\": \"i\", \"offset\": 0, \"length\": 2}, "
       "{\"identifier\": \"j\", \"offset\": 1, \"length\": 1}]}\n",
       ":1: 'mm_hashes': items at offsets 0 and 1 overlap"},
      {"{\"token_ids\": [1, 2, 3], \"mm_hashes\": \"img\"}\n", ":1: 'mm_hashes' is a string, not an array"},
  };
  for (const auto& c : cases) {
    INFO(c.want);
    const std::string log = tmp("bad.csv"), out = tmp("bad.kvtb");
    std::ofstream(log) << c.lines;
    try {
      (void)kvtk::sim::run(options(log, out));
      FAIL("accepted");
    } catch (const kvtk::sim::trace_error& e) {
      CHECK(std::regex_search(std::string(e.what()), std::regex(c.want)));
    }
    CHECK_FALSE(fs::exists(out));
    fs::remove(log);
  }
  // A first line that is only a byte-order mark is a blank line, not a CSV header.
  {
    const std::string bom = tmp("bom.jsonl");
    std::ofstream(bom) << "\xEF\xBB\xBF\n{\"token_ids\": [1, 2, 3]}\n";
    auto b = options(bom, tmp("bom.kvtb"));
    const auto r = kvtk::sim::run(b);
    CHECK((r.requests == 1 && r.log_format == "jsonl"));
    fs::remove(bom);
    fs::remove(b.output);
  }
  // Multimodal items are vLLM's: SGLang's keys come from the pad values in the ids.
  auto s = options(tmp("mm.jsonl"), tmp("mm.kvtb"));
  std::ofstream(s.log) << "{\"token_ids\": [1, 2, 3], \"mm_hashes\": [{\"identifier\": \"i\", \"offset\": 0, \"length\": 2}]}\n";
  s.engine = "sglang";
  CHECK_THROWS_WITH(kvtk::sim::run(s), Catch::Contains("'mm_hashes' is vLLM's"));
  s.engine = "vllm";
  s.field_session = "token_ids";
  CHECK_THROWS_WITH(kvtk::sim::run(s), Catch::Contains("'token_ids' names two fields"));
  s.field_session = "";
  s.log_format = "tsv";
  CHECK_THROWS_WITH(kvtk::sim::run(s), Catch::Contains("--log-format: 'tsv'"));
  fs::remove(s.log);
}

TEST_CASE("trace import: a Dynamo request trace, with its sessions", "[trace_import]") {
  const std::string log = std::string(KVTK_TEST_DATA_DIR) + "/../import/dynamo_request_trace_example.jsonl";
  // What the records say, read here independently: request_end records with replay data, in
  // arrival order.
  struct row {
    double at;
    std::vector<block_key> keys;
    std::string session, parent_session;
  };
  std::vector<row> want;
  {
    std::ifstream in(log);
    for (std::string line; std::getline(in, line);) {
      const json e = json::parse(line)["event"];
      if (e["event_type"] != "request_end" || !e["request"].contains("replay")) continue;
      row r{e["request"]["request_received_ms"].get<double>(), {}, e["agent_context"]["session_id"], ""};
      for (const auto& h : e["request"]["replay"]["input_sequence_hashes"]) r.keys.push_back(h.get<block_key>());
      if (e["agent_context"].contains("parent_session_id")) r.parent_session = e["agent_context"]["parent_session_id"];
      want.push_back(r);
    }
  }
  std::stable_sort(want.begin(), want.end(), [](const row& a, const row& b) { return a.at < b.at; });
  auto o = options(log, tmp("dynamo.kvtb"));
  o.format = "dynamo";
  const auto r = kvtk::sim::run(o);
  CHECK(r.requests == want.size());
  CHECK(r.block_tokens == 64);
  CHECK(r.skipped_records.at("tool_start") == 4);  // requests 4, 13, 22, 31
  CHECK(r.skipped_records.at("request_end without replay data") == 1);
  const auto got = read(o.output, kvtk::sim::trace_format::kvtb);
  REQUIRE(got.keys.size() == want.size());
  std::map<std::string, std::pair<std::uint64_t, std::uint32_t>> last;  // session -> id, turn
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO(i);
    const auto& rec = got.records[i];
    CHECK(got.keys[i] == want[i].keys);
    CHECK(*rec.arrival_s == Approx((want[i].at - want[0].at) / 1000));
    const auto it = last.find(want[i].session);
    if (it != last.end()) {  // a later turn: the child of the session's previous request
      CHECK(rec.parent == it->second.first);
      CHECK(rec.turn == it->second.second + 1);
    } else {
      CHECK(rec.turn == 1u);
      const auto p = last.find(want[i].parent_session);
      if (!want[i].parent_session.empty() && p != last.end()) {
        CHECK(rec.parent == p->second.first);  // spawned by the parent session
      } else {
        CHECK_FALSE(rec.parent.has_value());
      }
    }
    CHECK(got.kinds[i] == (want[i].parent_session.empty() ? "" : "sub-agent"));
    last[want[i].session] = {*rec.request_id, *rec.turn};
  }
  // Bad records name their line.
  const std::string head = "{\"schema\": \"dynamo.request.trace.v1\", \"event_type\": \"request_end\", "
                           "\"request\": {\"request_received_ms\": 5, \"replay\": ";
  for (const auto& [text, want_error] : std::vector<std::pair<std::string, std::string>>{
           {"{\"event\": {\"schema\": \"other\"}}\n", ":1: not a Dynamo request trace record"},
           {head + "{\"trace_block_size\": 4, \"input_length\": 9, \"input_sequence_hashes\": [1, 2]}}}\n",
            ":1: 2 sequence hashes for 9 tokens in blocks of 4"},
           {head + "{\"trace_block_size\": 4, \"input_length\": 4, \"input_sequence_hashes\": [1]}}}\n" + head +
                "{\"trace_block_size\": 8, \"input_length\": 4, \"input_sequence_hashes\": [1]}}}\n",
            ":2: trace_block_size 8 after 4"},
           {"{\"schema\": \"dynamo.request.trace.v1\", \"event_type\": \"tool_end\"}\n",
            ":0: has no request_end record with replay data"}}) {
    INFO(want_error);
    const std::string bad = tmp("bad-dynamo.jsonl");
    std::ofstream(bad) << text;
    auto b = options(bad, tmp("bad-dynamo.kvtb"));
    b.format = "dynamo";
    CHECK_THROWS_WITH(kvtk::sim::run(b), Catch::Contains(want_error));
    fs::remove(bad);
  }
  fs::remove(o.output);
}
