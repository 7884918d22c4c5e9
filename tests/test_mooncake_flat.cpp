#include <catch2/catch.hpp>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <sstream>

#include "formats/flat_traces.hpp"
#include "formats/kvtb.hpp"
#include "formats/mooncake_flat.hpp"
#include "formats/requests.hpp"

using kvtk::sim::parse_mooncake_flat;
using kvtk::sim::trace_error;
using kvtk::sim::trace_format;

namespace {
std::string error_of(const std::string& text) {
  std::istringstream in(text);
  try {
    parse_mooncake_flat(in, "t.jsonl");
  } catch (const trace_error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("mooncake flat reader flattens hash_ids in file order", "[formats]") {
  std::istringstream in(
      "{\"timestamp\": 0, \"input_length\": 600, \"hash_ids\": [0, 1]}\n"
      "{\"hash_ids\": [0, 2, 18446744073709551615]}\r\n"
      "{\"hash_ids\": []}\n");
  REQUIRE(parse_mooncake_flat(in, "x") ==
          std::vector<std::uint64_t>{0, 1, 0, 2, 18446744073709551615ull});
}

TEST_CASE("mooncake flat reader names the line and the reason", "[formats]") {
  const std::string ok = "{\"hash_ids\": [1]}\n";
  CHECK(error_of(ok + "{\"hash_ids\": [1,\n") ==
        "t.jsonl:2: invalid JSON: unterminated array at column 17");
  CHECK(error_of(ok + ok + "[1, 2]\n") == "t.jsonl:3: expected a JSON object");
  CHECK(error_of("{\"input_length\": 5}\n") == "t.jsonl:1: missing field 'hash_ids'");
  CHECK(error_of("{\"hash_ids\": 5}\n") == "t.jsonl:1: 'hash_ids' must be an array");
  CHECK(error_of("{\"hash_ids\": [1, -2]}\n") == "t.jsonl:1: 'hash_ids'[1] is negative");
  CHECK(error_of("{\"hash_ids\": [1.5]}\n") ==
        "t.jsonl:1: 'hash_ids'[0] must be an integer, got number");
  CHECK(error_of("{\"hash_ids\": [\"a\"]}\n") ==
        "t.jsonl:1: 'hash_ids'[0] must be an integer, got string");
  CHECK(error_of(ok + "\n" + ok) == "t.jsonl:2: empty line (expected a JSON object)");
  CHECK(error_of("{\"hash_ids\": [1]} trailing\n") ==
        "t.jsonl:1: invalid JSON: trailing characters after the object at column 19");
  CHECK(error_of("{\"hash_ids\" [1]}\n") == "t.jsonl:1: invalid JSON: expected ':' at column 13");
  CHECK(error_of("{\"hash_ids\": [1] \"x\": 2}\n") ==
        "t.jsonl:1: invalid JSON: expected ',' or '}' at column 18");
  CHECK(error_of("{\"a\": \"\x01\", \"hash_ids\": []}\n") ==
        "t.jsonl:1: invalid JSON: control character in string at column 8");
  CHECK(error_of("{\"a\": 01, \"hash_ids\": []}\n") ==
        "t.jsonl:1: invalid JSON: leading zero in number at column 7");
  CHECK(error_of("{\"a\": tru, \"hash_ids\": []}\n") ==
        "t.jsonl:1: invalid JSON: bad literal at column 7");
  CHECK(error_of("{\"hash_ids\": [1, null]}\n") ==
        "t.jsonl:1: 'hash_ids'[1] must be an integer, got null");
  // Unknown members, nested values and escapes are skipped, not rejected.
  CHECK(error_of("{\"x\": {\"y\": [1, {\"z\": \"\\u00e9\\\"\"}]}, \"hash_ids\": [3]}\n") ==
        "no error");
}

TEST_CASE("mooncake request reader keeps requests and names bad input_length", "[formats]") {
  std::istringstream ok(
      "{\"input_length\": 600, \"hash_ids\": [0, 1]}\n{\"input_length\": 10, \"hash_ids\": [0]}\n");
  const auto t = kvtk::sim::parse_mooncake_requests(ok, "x");
  REQUIRE(t.requests() == 2);
  REQUIRE(t.input_length == std::vector<std::uint64_t>{600, 10});
  REQUIRE(t.blocks(0).size() == 2);
  auto err = [](const std::string& text) {
    std::istringstream in(text);
    try {
      kvtk::sim::parse_mooncake_requests(in, "t.jsonl");
    } catch (const trace_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(err("{\"hash_ids\": [1]}\n") == "t.jsonl:1: missing field 'input_length'");
  CHECK(err("{\"input_length\": -3, \"hash_ids\": []}\n") ==
        "t.jsonl:1: 'input_length' is negative");
  CHECK(err("{\"input_length\": \"9\", \"hash_ids\": []}\n") ==
        "t.jsonl:1: 'input_length' must be an integer, got string");
}

TEST_CASE("mooncake flat reader reports a missing file", "[formats]") {
  try {
    kvtk::sim::load_mooncake_flat("/nonexistent/trace.jsonl");
    FAIL("no exception");
  } catch (const trace_error& e) {
    REQUIRE(std::string(e.what()) == "/nonexistent/trace.jsonl:0: cannot open file");
  }
}

// Hard inputs kept in tests/fuzz/regressions (hand-made stress cases, plus every input the
// fuzzer ever crashed on) must keep producing either ids or a trace_error, never a crash.
TEST_CASE("fuzz regression inputs are handled", "[formats][fuzz]") {
  for (const auto& entry : std::filesystem::directory_iterator(KVTK_FUZZ_REGRESSIONS_DIR)) {
    const std::string name = entry.path().string();
    std::ifstream f(name, std::ios::binary);
    REQUIRE(f.good());
    std::stringstream buf;
    buf << f.rdbuf();
    std::istringstream in(buf.str());
    try {
      (void)parse_mooncake_flat(in, name);
    } catch (const trace_error&) {
    }
    for (auto f : {trace_format::mooncake, trace_format::bailian, trace_format::kvtk}) {
      std::istringstream again(buf.str());
      try {
        kvtk::sim::for_each_request(again, name, f, 0, {}, nullptr,
                                    [](const kvtk::sim::request_record&) {});
      } catch (const trace_error&) {
      }
    }
    const std::string bytes = buf.str();
    std::vector<std::uint64_t> aligned((bytes.size() + 7) / 8);
    if (!bytes.empty()) std::memcpy(aligned.data(), bytes.data(), bytes.size());
    try {
      (void)kvtk::sim::kvtb::parse(
          {reinterpret_cast<const unsigned char*>(aligned.data()), bytes.size()}, name);
    } catch (const trace_error&) {
    }
  }
}

TEST_CASE("oracleGeneral records: ids in little-endian order - truncation detected", "[formats]") {
  std::string bytes;
  auto put = [&](std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  for (std::uint64_t id : {7ull, 0x0102030405060708ull, 7ull}) {
    put(1, 4);      // time
    put(id, 8);     // id
    put(1, 4);      // size
    put(~0ull, 8);  // next access (-1)
  }
  REQUIRE(kvtk::sim::parse_oracle_general(bytes, "o.bin") ==
          std::vector<std::uint64_t>{7, 0x0102030405060708ull, 7});
  try {
    kvtk::sim::parse_oracle_general(bytes.substr(0, 30), "o.bin");
    FAIL("no exception");
  } catch (const trace_error& e) {
    REQUIRE(std::string(e.what()).find("o.bin:0: size 30 bytes is not a whole number") == 0);
  }
}
