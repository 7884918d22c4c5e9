// Trace formats: kvtb invariants and corruption detection, the kvtk schema against the reader and
// writer, the replay result against its schema, and streaming equivalences.
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>
#include <sstream>

#include "cli/replay.hpp"
#include "cli/trace_gen.hpp"
#include "formats/kvtb.hpp"
#include "formats/line_reader.hpp"
#include "formats/requests.hpp"
#include "formats/writers.hpp"
#include "schema_check.hpp"

namespace {

using kvtk::sim::request_record;
using kvtk::sim::trace_format;
namespace fs = std::filesystem;

const std::string data_dir = KVTK_TEST_DATA_DIR;

std::vector<std::uint64_t> read_words(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::uint64_t> words((bytes.size() + 7) / 8);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  words.resize(words.size());
  return words;
}

std::span<const unsigned char> as_bytes(const std::vector<std::uint64_t>& w, std::size_t n) {
  return {reinterpret_cast<const unsigned char*>(w.data()), n};
}

std::string tmp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("kvtk_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

nlohmann::json load_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("kvtb checksum: split updates equal one update", "[formats][kvtb]") {
  std::vector<std::uint64_t> w(103);
  std::mt19937_64 rng(7);
  for (auto& x : w) x = rng();
  kvtk::sim::kvtb::checksum whole, parts;
  whole.update(w);
  for (std::size_t i = 0; i < w.size();) {
    const std::size_t n = std::min<std::size_t>(1 + rng() % 9, w.size() - i);
    parts.update({w.data() + i, n});
    i += n;
  }
  CHECK(whole.digest() == parts.digest());
  std::swap(w[3], w[4]);
  kvtk::sim::kvtb::checksum swapped;
  swapped.update(w);
  CHECK(swapped.digest() != whole.digest());
}

TEST_CASE("kvtb files from other writers get the readers' semantic checks", "[formats][kvtb]") {
  // kvtb::writer writes what it is given; parse must refuse what a JSONL reader would have.
  struct bad_case {
    const char* want;
    std::uint64_t input;
    std::optional<double> arrival;
    std::optional<std::uint64_t> output;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<bad_case> cases = {
      {"request 1: 1 block keys but input_length 40 makes 3 blocks", 40, 1.0, {}},
      {"request 1: arrival time -inf s is outside", 16, -inf, {}},
      {"request 1: arrival time inf s is outside", 16, inf, {}},
      {"request 1: arrival time -1.0+ s is outside", 16, -1.0, {}},
      {"request 1: arrival goes backwards", 16, 0.25, {}},
      {"request 1: output_length 4294967296 is not below 2\\^32", 16, 1.0, std::uint64_t{1} << 32},
      {"request 1: input_length 18446744073709551615 is not below 2\\^32",
       ~std::uint64_t{0},
       1.0,
       {}},
      {"", 16, nan, {}},  // NaN = no arrival time: accepted
  };
  for (const auto& c : cases) {
    const std::string path = tmp_path("semantic.kvtb");
    {
      kvtk::sim::kvtb::writer w(path, 16);
      const std::vector<kvtk::block_key> one = {7};
      request_record rec;
      rec.keys = one;
      rec.input_length = 16;
      rec.block_tokens = 16;
      rec.arrival_s = 0.5;
      w.add(rec);
      rec.input_length = c.input;
      rec.arrival_s = c.arrival;
      rec.output_length = c.output;
      w.add(rec);
      w.finish();
    }
    kvtk::sim::kvtb::mapping m(path);
    INFO(c.want);
    if (std::string(c.want).empty()) {
      CHECK_NOTHROW(kvtk::sim::kvtb::parse(m.bytes(), path));
    } else {
      try {
        (void)kvtk::sim::kvtb::parse(m.bytes(), path);
        FAIL("accepted");
      } catch (const kvtk::sim::trace_error& e) {
        CHECK(std::regex_search(std::string(e.what()), std::regex(c.want)));
      }
    }
    fs::remove(path);
  }
  // A tenant table that is not UTF-8 (names end up in JSON output): refused where it is read.
  const std::string path = tmp_path("tenant.kvtb");
  {
    kvtk::sim::kvtb::writer w(path, 16);
    const std::vector<kvtk::block_key> one = {7};
    request_record rec;
    rec.keys = one;
    rec.input_length = 16;
    rec.block_tokens = 16;
    const std::string bad = "t\xff\xfe";
    rec.tenant = bad;
    w.add(rec);
    w.finish();
  }
  kvtk::sim::kvtb::mapping m(path);
  CHECK_THROWS_WITH(kvtk::sim::kvtb::parse(m.bytes(), path),
                    Catch::Contains("tenant 1 in the tenant table is not valid UTF-8"));
  fs::remove(path);
}

TEST_CASE("kvtb round-trips every column", "[formats][kvtb]") {
  const std::string path = tmp_path("cols.kvtb");
  std::vector<std::vector<kvtk::block_key>> keys = {{1, 2, 3}, {}, {4}, {5, 6}};
  {
    kvtk::sim::kvtb::writer w(path, 16);
    for (std::size_t r = 0; r < keys.size(); ++r) {
      request_record rec;
      rec.keys = keys[r];
      rec.block_tokens = r == 3 ? 8 : 16;
      rec.input_length = keys[r].size() * rec.block_tokens;
      if (r != 1) rec.arrival_s = 0.5 * static_cast<double>(r);
      rec.output_length = 100 + r;
      if (r == 2) rec.priority = 7;
      rec.session = 40 + r / 2;
      if (r % 2 == 0) rec.tenant = r == 0 ? "a" : "b";
      w.add(rec);
    }
    w.finish();
  }
  CHECK_FALSE(fs::exists(path + ".kvtk-partial"));
  kvtk::sim::kvtb::mapping m(path);
  const auto im = kvtk::sim::kvtb::parse(m.bytes(), path);
  const auto& v = im.view;
  REQUIRE(v.requests() == 4);
  CHECK(v.block_tokens == 16);
  for (std::size_t r = 0; r < 4; ++r) {
    CHECK(std::vector<kvtk::block_key>(v.blocks(r).begin(), v.blocks(r).end()) == keys[r]);
    CHECK(v.output_length[r] == 100 + r);
    CHECK(v.session[r] == 40 + r / 2);
  }
  CHECK(std::isnan(v.arrival_s[1]));
  CHECK(v.arrival_s[3] == 1.5);
  CHECK(v.priority[2] == 7);
  CHECK(v.priority[0] == kvtk::access_hint{}.priority);
  CHECK(v.block_tokens_of(3) == 8);
  CHECK(v.block_tokens_of(0) == 16);
  REQUIRE(v.tenant.size() == 4);
  CHECK(im.tenants[v.tenant[0]] == "a");
  CHECK(im.tenants[v.tenant[2]] == "b");
  CHECK(im.tenants[v.tenant[1]].empty());
  fs::remove(path);
}

TEST_CASE("kvtb fan-in: the parents after the first round-trip - ids without a parent are refused",
          "[formats][kvtb]") {
  const std::vector<kvtk::block_key> one = {7};
  const std::vector<std::uint64_t> joins2 = {11, 12}, joins1 = {13};
  const auto write = [&](const std::string& path, bool with_parent, const std::vector<std::uint64_t>& repeat) {
    kvtk::sim::kvtb::writer w(path, 16, true);
    w.check_parents = false;  // a file from another writer: the reader's own checks
    for (std::uint64_t r = 0; r < 4; ++r) {
      request_record rec;
      rec.keys = one;
      rec.input_length = 16;
      rec.block_tokens = 16;
      rec.request_id = 20 + r;
      if (r >= 2 && with_parent) rec.parent = 20;
      if (r == 2) rec.joins = repeat.empty() ? std::span<const std::uint64_t>(joins2) : std::span(repeat);
      if (r == 3) rec.joins = joins1;
      w.add(rec);
    }
    w.finish();
  };
  const std::string path = tmp_path("fan.kvtb");
  write(path, true, {});
  {
    kvtk::sim::kvtb::mapping m(path);
    const auto im = kvtk::sim::kvtb::parse(m.bytes(), path);
    const auto& v = im.view;
    CHECK(std::vector<std::uint64_t>(v.join_offsets.begin(), v.join_offsets.end()) ==
          std::vector<std::uint64_t>{0, 0, 0, 2, 3});
    CHECK(v.joins(0).empty());
    CHECK(std::vector<std::uint64_t>(v.joins(2).begin(), v.joins(2).end()) == joins2);
    CHECK(std::vector<std::uint64_t>(v.joins(3).begin(), v.joins(3).end()) == joins1);
  }
  write(path, false, {});
  {
    kvtk::sim::kvtb::mapping m(path);
    CHECK_THROWS_WITH(kvtk::sim::kvtb::parse(m.bytes(), path), Catch::Contains("request 2 has fan-in ids but no parent"));
  }
  write(path, true, {11, 20});
  {
    kvtk::sim::kvtb::mapping m(path);
    CHECK_THROWS_WITH(kvtk::sim::kvtb::parse(m.bytes(), path), Catch::Contains("request 2 lists parent 20 twice"));
  }
  // kvtk's own writer refuses such records before they reach a file.
  {
    kvtk::sim::kvtb::writer w(path, 16, true);
    request_record rec;
    rec.keys = one;
    rec.input_length = 16;
    rec.block_tokens = 16;
    rec.line = 5;
    rec.joins = joins2;
    CHECK_THROWS_WITH(w.add(rec), Catch::Contains(":5: further parents (fan-in) without a parent"));
    rec.parent = 12;
    CHECK_THROWS_WITH(w.add(rec), Catch::Contains("a parent is listed twice"));
    rec.parent = kvtk::prefix::no_parent;
    CHECK_THROWS_WITH(w.add(rec), Catch::Contains("2^64-1 is reserved"));
  }
  fs::remove(path);
}

TEST_CASE("kvtb: every header byte flip, payload flip and truncation is detected",
          "[formats][kvtb]") {
  const std::string path = data_dir + "/small.kvtb";
  auto words = read_words(path);
  const std::size_t size = fs::file_size(path);
  REQUIRE_NOTHROW(kvtk::sim::kvtb::parse(as_bytes(words, size), path));
  auto* bytes = reinterpret_cast<unsigned char*>(words.data());
  for (std::size_t i = 0; i < kvtk::sim::kvtb::header_bytes; ++i) {
    bytes[i] ^= 0x10;
    CHECK_THROWS_AS(kvtk::sim::kvtb::parse(as_bytes(words, size), path), kvtk::sim::trace_error);
    bytes[i] ^= 0x10;
  }
  std::mt19937_64 rng(3);
  for (int k = 0; k < 200; ++k) {
    const std::size_t i = kvtk::sim::kvtb::header_bytes + rng() % (size - 128);
    bytes[i] ^= static_cast<unsigned char>(1u << (rng() % 8));
    CHECK_THROWS_WITH(kvtk::sim::kvtb::parse(as_bytes(words, size), path),
                      Catch::Contains("payload checksum mismatch"));
    bytes[i] = reinterpret_cast<const unsigned char*>(read_words(path).data())[i];
  }
  for (std::size_t n = 0; n < size; n += 1 + size / 97) {
    CHECK_THROWS_AS(kvtk::sim::kvtb::parse(as_bytes(words, n), path), kvtk::sim::trace_error);
  }
}

TEST_CASE("kvtk schema: the writer's lines validate - the reader knows every property",
          "[formats][schema]") {
  const auto schema = load_json(std::string(KVTK_TRACES_DIR) + "/kvtk-trace.schema.json");
  // A generated trace with sessions and tenants, plus a hand-written line with every field.
  std::ostringstream out;
  auto w = kvtk::sim::trace_writer::to_stream(out, trace_format::kvtk, 64);
  kvtk::sim::gen_options g;
  g.requests = 300;
  kvtk::sim::generate_trace(g, [&](const request_record& r) { w->add(r); });
  w->finish();
  std::string text = out.str();
  text +=
      "{\"arrival_s\": 99999, \"input_length\": 70, \"output_length\": 1, \"content_ids\": [1, "
      "2], \"session\": \"s\", \"tenant\": \"x\", \"priority\": 4, \"model\": \"m\", "
      "\"cache_salt\": \"c\", \"block_tokens\": 64, \"id\": 7, \"parent\": 3, \"turn\": 2, "
      "\"kind\": \"tool\"}\n";
  std::istringstream lines(text);
  std::size_t n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    INFO(line.substr(0, 200));
    CHECK(kvtk::test::schema_violation(schema, nlohmann::json::parse(line)).empty());
  }
  CHECK(n == 302);
  std::istringstream in(text);
  const auto t = kvtk::sim::parse_kvtk_requests(in, "gen", 64);
  CHECK(t.requests() == 301);
  // Lines the schema rejects, the reader rejects too.
  for (const std::string bad : {"{\"input_length\": 64}",
                                "{\"input_length\": 64, \"hash_ids\": [1], \"content_ids\": [1]}",
                                "{\"input_length\": -1, \"hash_ids\": []}",
                                "{\"input_length\": 64, \"hash_ids\": [-1]}",
                                "{\"kvtk_trace\": 2}"}) {
    INFO(bad);
    CHECK_FALSE(kvtk::test::schema_violation(schema, nlohmann::json::parse(bad)).empty());
    std::istringstream bin(bad + "\n");
    CHECK_THROWS_AS(kvtk::sim::parse_kvtk_requests(bin, "bad", 64), kvtk::sim::trace_error);
  }
  // Every request property is one the reader checks: a value of the wrong type names it.
  const auto& props = schema["oneOf"][1]["properties"];
  REQUIRE(props.size() == 15);
  for (const auto& [name, sub] : props.items()) {
    std::string line = "{\"" + name + "\": {}";
    if (name != "input_length") line += ", \"input_length\": 64";
    if (name != "hash_ids" && name != "content_ids") line += ", \"hash_ids\": [1]";
    line += "}\n";
    std::istringstream bin(line);
    INFO(line);
    CHECK_THROWS_WITH(kvtk::sim::parse_kvtk_requests(bin, "p", 64),
                      Catch::Contains("'" + name + "'"));
  }
}

TEST_CASE("replay --json validates against docs/replay-result.schema.json", "[formats][schema]") {
  const auto schema = load_json(std::string(KVTK_DOCS_DIR) + "/replay-result.schema.json");
  const std::string out = tmp_path("result.json");
  for (const char* trace : {"small.kvtb", "small.ids", "small.bailian.jsonl"}) {
    const std::vector<std::string> args = {
        "--trace", data_dir + "/" + trace, "--index", "radix,flat,hashchain", "--policy",
        "lru,fifo", "--capacity", "50,300", "--block-tokens",
        std::string(trace) == "small.ids" ? "1" : "512", "--json", out, "--force"};
    REQUIRE(kvtk::sim::run_replay(args) == 0);
    const auto result = load_json(out);
    INFO(trace);
    CHECK(kvtk::test::schema_violation(schema, result).empty());
    CHECK(result["results"].size() == 10);
  }
  fs::remove(out);
}

TEST_CASE("streamed and in-memory reads agree for every format", "[formats]") {
  for (const char* f : {"small.mooncake.jsonl", "small.kvtk.jsonl", "small.kvtb", "small.ids",
                        "small.oracleGeneral.bin"}) {
    const std::string path = data_dir + "/" + f;
    const trace_format fmt = kvtk::sim::detect_trace_format(path);
    const auto loaded = kvtk::sim::loaded_trace::load(path, fmt, 0, {}, nullptr);
    std::size_t r = 0;
    bool same = true;
    kvtk::sim::for_each_request(path, fmt, 0, {}, nullptr, [&](const request_record& rec) {
      const auto b = loaded.view().blocks(r);
      same = same && rec.input_length == loaded.view().input_tokens(r) &&
             std::equal(b.begin(), b.end(), rec.keys.begin(), rec.keys.end());
      ++r;
    });
    INFO(f);
    CHECK(same);
    CHECK(r == loaded.view().requests());
  }
}

TEST_CASE("line_reader: lines across buffer growth, the last line without newline, the cap",
          "[formats]") {
  for (std::size_t len : {0u, 1u, 65534u, 65535u, 65536u, 65537u, 200000u}) {
    const std::string a(len, 'a'), b(len / 2 + 1, 'b');
    std::istringstream in(a + "\n" + b + "\n\nlast");
    kvtk::sim::line_reader lines(in, "mem");
    std::string_view line;
    REQUIRE(lines.next(line));
    CHECK(line == a);
    REQUIRE(lines.next(line));
    CHECK(line == b);
    REQUIRE(lines.next(line));
    CHECK(line.empty());
    REQUIRE(lines.next(line));
    CHECK(line == "last");
    CHECK(lines.line_number() == 4);
    CHECK_FALSE(lines.next(line));
  }
  std::istringstream ok("0123456789\n"), over("0123456789x\n");
  std::string_view line;
  kvtk::sim::line_reader at_cap(ok, "mem", 1, 10);
  REQUIRE(at_cap.next(line));
  CHECK(line == "0123456789");
  kvtk::sim::line_reader past_cap(over, "over", 7, 10);
  CHECK_THROWS_WITH(past_cap.next(line), Catch::Contains("over:7: line is longer than"));
}

TEST_CASE("session fields: Bailian chat_id, parent, turn and type survive kvtb and kvtk JSONL",
          "[formats][sessions]") {
  const std::string bailian = tmp_path("sessions.bailian.jsonl");
  std::ofstream(bailian)
      << "{\"chat_id\": 10, \"parent_chat_id\": -1, \"timestamp\": 0.5, \"input_length\": 32, "
         "\"output_length\": 5, \"type\": \"text\", \"turn\": 1, \"hash_ids\": [1, 2]}\n"
         "{\"chat_id\": 12, \"parent_chat_id\": -1, \"timestamp\": 1.0, \"input_length\": 16, "
         "\"output_length\": 5, \"type\": \"image\", \"turn\": 1, \"hash_ids\": [7]}\n"
         "{\"chat_id\": 11, \"parent_chat_id\": 10, \"timestamp\": 2.0, \"input_length\": 48, "
         "\"output_length\": 5, \"type\": \"text\", \"turn\": 2, \"hash_ids\": [1, 2, 3]}\n"
         "{\"chat_id\": 13, \"parent_chat_id\": 11, \"timestamp\": 3.0, \"input_length\": 64, "
         "\"output_length\": 5, \"type\": \"search\", \"turn\": 3, \"hash_ids\": [1, 2, 3, 4]}\n"
         "{\"chat_id\": 14, \"parent_chat_id\": 99, \"timestamp\": 4.0, \"input_length\": 16, "
         "\"output_length\": 5, \"type\": \"text\", \"turn\": 2, \"hash_ids\": [9]}\n";
  struct fields {
    std::optional<std::uint64_t> id, parent, session;
    std::optional<std::uint32_t> turn;
    std::string kind;
    bool operator==(const fields&) const = default;
  };
  auto read = [](const std::string& path) {
    std::vector<fields> out;
    kvtk::sim::for_each_request(path, kvtk::sim::detect_trace_format(path), 16, {}, nullptr,
                                [&](const request_record& r) {
                                  out.push_back({r.request_id, r.parent, r.session, r.turn, std::string(r.kind)});
                                });
    return out;
  };
  const auto from_bailian = read(bailian);
  REQUIRE(from_bailian.size() == 5);
  CHECK(from_bailian[0] == fields{10, std::nullopt, 10, 1, "text"});
  CHECK(from_bailian[2] == fields{11, 10, 10, 2, "text"});  // the root's session
  CHECK(from_bailian[3] == fields{13, 11, 10, 3, "search"});
  CHECK(from_bailian[4] == fields{14, 99, 14, 2, "text"});  // parent outside the window: kept
  // kvtb and kvtk JSONL keep every field; kvtk JSONL back to kvtb too.
  for (const auto to : {trace_format::kvtb, trace_format::kvtk}) {
    const std::string out = tmp_path(to == trace_format::kvtb ? "sessions.kvtb" : "sessions.kvtk.jsonl");
    auto w = kvtk::sim::trace_writer::open(out, to, 16, true);
    kvtk::sim::for_each_request(bailian, trace_format::bailian, 16, {}, nullptr,
                                [&](const request_record& r) { w->add(r); });
    w->finish();
    CHECK(read(out) == from_bailian);
    const auto lt = kvtk::sim::loaded_trace::load(out, to, 16, {}, nullptr);
    REQUIRE(lt.view().parent.size() == 5);
    CHECK(lt.view().parent[0] == kvtk::prefix::no_parent);
    CHECK(lt.view().parent[3] == 11);
    CHECK(lt.view().turn[3] == 3);
    CHECK(lt.kind_names()[lt.view().kind[3]] == "search");
    CHECK(lt.view().request_id[4] == 14);
    fs::remove(out);
  }
  // Requests without the fields get none (the columns' fillers are not read back as values).
  const std::string mixed = tmp_path("mixed.kvtk.jsonl");
  std::ofstream(mixed) << "{\"kvtk_trace\": 1, \"block_tokens\": 16}\n"
                          "{\"input_length\": 16, \"hash_ids\": [1]}\n"
                          "{\"input_length\": 16, \"hash_ids\": [1], \"id\": 5, \"parent\": null, \"kind\": \"chat\"}\n"
                          "{\"input_length\": 32, \"hash_ids\": [1, 2], \"id\": 6, \"parent\": 5, \"turn\": 2}\n";
  const std::string mixed_kvtb = tmp_path("mixed.kvtb");
  {
    auto w = kvtk::sim::trace_writer::open(mixed_kvtb, trace_format::kvtb, 16, true);
    kvtk::sim::for_each_request(mixed, trace_format::kvtk, 16, {}, nullptr, [&](const request_record& r) { w->add(r); });
    w->finish();
  }
  const auto m = read(mixed_kvtb);
  REQUIRE(m.size() == 3);
  CHECK(m[0].parent == std::nullopt);
  CHECK(m[0] == fields{});
  CHECK(m[1] == fields{5, std::nullopt, std::nullopt, std::nullopt, "chat"});
  CHECK(m[2].parent == 5);
  CHECK(m[2].turn == 2u);
  CHECK(read(mixed) == read(mixed_kvtb));
  // Bad values name the field.
  for (const auto& [line, want] : std::vector<std::pair<std::string, std::string>>{
           {"{\"input_length\": 16, \"hash_ids\": [1], \"turn\": -1}", "'turn' is negative"},
           {"{\"input_length\": 16, \"hash_ids\": [1], \"turn\": null, \"id\": -2}", "'id' is negative"},
           {"{\"input_length\": 16, \"hash_ids\": [1], \"parent\": \"x\"}", "'parent' must be an integer"},
           {"{\"input_length\": 16, \"hash_ids\": [1], \"kind\": \"\"}", "'kind' is empty"},
           {"{\"input_length\": 16, \"hash_ids\": [1], \"turn\": 4294967296}", "'turn' is not below 2^32-1"}}) {
    std::istringstream bin(line + "\n");
    INFO(line);
    CHECK_THROWS_WITH(kvtk::sim::parse_kvtk_requests(bin, "p", 16), Catch::Contains(want));
  }
  fs::remove(bailian);
  fs::remove(mixed);
  fs::remove(mixed_kvtb);
}
