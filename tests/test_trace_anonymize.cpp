// `kvtk trace anonymize` (sim/api/trace_anonymize.hpp): the keyed permutation is a bijection
// (it inverts), the anonymized trace replays identically to its input under every index and
// policy (hits, optimum), shares no key value with it, keeps sessions and tenants apart, maps
// alike under one salt and differently under another, shifts time as asked, and refuses bad
// salts and shifts naming them.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "api/keyed_permutation.hpp"
#include "api/replay.hpp"
#include "api/trace_anonymize.hpp"
#include "api/trace_gen.hpp"
#include "api/usage_error.hpp"
#include "formats/requests.hpp"

namespace {

namespace fs = std::filesystem;

std::string tmp(const std::string& name) {
  return (fs::temp_directory_path() / ("kvtk_anon_" + std::to_string(::getpid()) + "_" + name)).string();
}

std::string salt(const std::string& name, char fill) {
  const std::string path = tmp(name);
  std::ofstream(path, std::ios::binary) << std::string(24, fill) << "salt";
  return path;
}

// (block_tokens: a Mooncake file does not say its block size.)
std::vector<kvtk::sim::request_record> records(const std::string& path,
                                               std::vector<std::vector<kvtk::block_key>>* keys,
                                               std::vector<std::string>* tenants,
                                               std::uint32_t block_tokens = 0) {
  std::vector<kvtk::sim::request_record> out;
  kvtk::sim::for_each_request(path, kvtk::sim::detect_trace_format(path), block_tokens, {}, nullptr,
                              [&](const kvtk::sim::request_record& r) {
                                out.push_back(r);
                                out.back().keys = {};
                                out.back().tenant = {};
                                out.back().kind = {};
                                if (keys) keys->emplace_back(r.keys.begin(), r.keys.end());
                                if (tenants) tenants->emplace_back(r.tenant);
                              });
  return out;
}

// Every job's counts (hits, evictions, the optimum), without its run time.
nlohmann::json replay_rows(const std::string& trace, std::uint32_t block_tokens) {
  kvtk::sim::replay_options o;
  o.trace = trace;
  o.block_tokens = block_tokens;
  o.index = {"radix", "flat"};
  o.policy = {"lru", "arc", "s3fifo"};
  o.capacity = {"300", "3000"};
  nlohmann::json rows = kvtk::sim::run(o).results;
  for (auto& row : rows) {
    row.erase("seconds");
    row.erase("block_refs_per_second");
  }
  return rows;
}

}  // namespace

TEST_CASE("keyed permutation: a bijection per domain, keyed by the salt", "[anonymize]") {
  const std::vector<std::uint8_t> s1(16, 1), s2(16, 2);
  const kvtk::sim::keyed_permutation p(s1), q(s2);
  std::set<std::uint64_t> images;
  for (std::uint64_t x : {0ull, 1ull, 2ull, 0xffffffffffffffffull, 0x123456789abcdefull}) {
    CHECK(p.inverse(p(x, 'k'), 'k') == x);
    CHECK(p(x, 'k') != q(x, 'k'));  // another salt, another map
    CHECK(p(x, 'k') != p(x, 's'));  // domains apart
    images.insert(p(x, 'k'));
  }
  CHECK(images.size() == 5);
  // A small domain checked whole: 2^12 consecutive inputs, 2^12 distinct images.
  std::set<std::uint64_t> all;
  for (std::uint64_t x = 0; x < 4096; ++x) all.insert(p(x, 'k'));
  CHECK(all.size() == 4096);
}

TEST_CASE("trace anonymize: replays equal the input's, no key survives", "[anonymize]") {
  const std::string in = tmp("in.kvtb");
  kvtk::sim::trace_gen_options g;
  g.gen.requests = 2500;
  g.gen.seed = 11;
  g.output = in;
  g.force = true;
  (void)kvtk::sim::run(g);
  const std::string s = salt("a.salt", 'a');
  for (const char* to : {"kvtb", "kvtk", "mooncake"}) {
    INFO(to);
    const std::string out = tmp(std::string("out.") + to);
    kvtk::sim::trace_anonymize_options o;
    o.trace = in;
    o.output = out;
    o.to = to;
    o.salt_file = s;
    o.force = true;
    const auto r = kvtk::sim::run(o);
    CHECK(r.requests == 2500);
    CHECK_FALSE(r.random_salt);
    CHECK(replay_rows(out, r.block_tokens) == replay_rows(in, r.block_tokens));
    std::vector<std::vector<kvtk::block_key>> ka, kb;
    std::vector<std::string> ta, tb;
    const auto a = records(in, &ka, &ta);
    const auto b = records(out, &kb, &tb, r.block_tokens);
    REQUIRE(a.size() == b.size());
    std::set<kvtk::block_key> before;
    for (const auto& k : ka) before.insert(k.begin(), k.end());
    std::size_t surviving = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      REQUIRE(ka[i].size() == kb[i].size());
      CHECK(a[i].input_length == b[i].input_length);
      CHECK(a[i].output_length == b[i].output_length);
      for (const auto k : kb[i]) surviving += before.count(k);
      if (std::string(to) == "mooncake") continue;  // mooncake has no sessions or tenants
      CHECK(a[i].arrival_s == b[i].arrival_s);
      REQUIRE(a[i].session.has_value() == b[i].session.has_value());
      CHECK(tb[i] != ta[i]);
      CHECK(tb[i].rfind('t', 0) == 0);
      if (i == 0) continue;
      // Which requests share a session or a tenant is kept, the ids themselves are not.
      CHECK((a[i].session == a[i - 1].session) == (b[i].session == b[i - 1].session));
      CHECK((ta[i] == ta[i - 1]) == (tb[i] == tb[i - 1]));
      if (a[i].session) CHECK(*a[i].session != *b[i].session);
    }
    CHECK(surviving == 0);
    fs::remove(out);
  }
  // One salt maps alike (two runs give the same file), another salt gives other keys.
  auto keys_of = [&](const std::string& salt_file) {
    kvtk::sim::trace_anonymize_options o;
    o.trace = in;
    o.output = tmp("again.kvtb");
    o.salt_file = salt_file;
    o.force = true;
    (void)kvtk::sim::run(o);
    std::vector<std::vector<kvtk::block_key>> k;
    (void)records(o.output, &k, nullptr);
    fs::remove(o.output);
    return k;
  };
  CHECK(keys_of(s) == keys_of(s));
  const std::string other = salt("b.salt", 'b');
  CHECK(keys_of(s) != keys_of(other));
  fs::remove(in);
  fs::remove(s);
  fs::remove(other);
}

TEST_CASE("trace anonymize: time shifts, bad salts and shifts are refused", "[anonymize]") {
  const std::string in = tmp("t.jsonl");
  std::ofstream(in) << "{\"kvtk_trace\": 1, \"block_tokens\": 4}\n"
                       "{\"arrival_s\": 100.5, \"input_length\": 8, \"hash_ids\": [1, 2], \"session\": 3, \"id\": 1}\n"
                       "{\"arrival_s\": 101.0, \"input_length\": 4, \"hash_ids\": [1], \"tenant\": \"acme\", "
                       "\"id\": 2, \"parent\": 1, \"turn\": 2, \"kind\": \"tool\"}\n";
  kvtk::sim::trace_anonymize_options o;
  o.trace = in;
  o.output = tmp("t.out.jsonl");
  o.force = true;
  o.time_zero = true;
  o.time_shift_s = 5;
  const auto r = kvtk::sim::run(o);  // a random salt
  CHECK(r.random_salt);
  CHECK(r.to == "kvtk");
  CHECK(r.sessions == 1);
  CHECK(r.tenants == 1);
  std::vector<std::vector<kvtk::block_key>> k;
  const auto got = records(o.output, &k, nullptr);
  REQUIRE(got.size() == 2);
  CHECK(*got[0].arrival_s == Approx(5.0));
  CHECK(*got[1].arrival_s == Approx(5.5));
  CHECK(k[0][0] == k[1][0]);  // the shared first block stays shared
  CHECK(k[0][0] != 1);
  // The parent still names its request; ids are opaque; turn and kind are kept.
  REQUIRE((got[0].request_id && got[1].parent));
  CHECK(*got[1].parent == *got[0].request_id);
  CHECK(*got[0].request_id != 1);
  CHECK(got[1].turn == 2u);
  std::string kind;
  kvtk::sim::for_each_request(o.output, kvtk::sim::trace_format::kvtk, 0, {}, nullptr,
                              [&](const kvtk::sim::request_record& r) {
                                if (r.turn) kind = std::string(r.kind);
                              });
  CHECK(kind == "tool");

  o.time_zero = false;
  o.output = tmp("t.out2.jsonl");  // (the first output was read back: an input now)
  o.time_shift_s = -101;  // the first arrival would be -0.5 s
  CHECK_THROWS_WITH(kvtk::sim::run(o), Catch::Contains(":2:") && Catch::Contains("outside [0, 1e12]"));
  o.time_shift_s = 0;
  o.salt_file = tmp("short.salt");
  std::ofstream(o.salt_file) << "too short";
  CHECK_THROWS_WITH(kvtk::sim::run(o), Catch::Contains("--salt-file") && Catch::Contains("16 bytes to 1 MiB"));
  o.salt_file = "/nonexistent/salt";
  CHECK_THROWS_AS(kvtk::sim::run(o), kvtk::sim::usage_error);
  o.salt_file = "";
  o.output = in;  // never over the input, force or not
  CHECK_THROWS(kvtk::sim::run(o));
  std::ifstream back(in);
  std::string first;
  std::getline(back, first);
  CHECK(first == "{\"kvtk_trace\": 1, \"block_tokens\": 4}");
  fs::remove(in);
  fs::remove(tmp("t.out.jsonl"));
  CHECK_FALSE(fs::exists(tmp("t.out2.jsonl")));  // a refused run leaves nothing
  fs::remove(tmp("short.salt"));
}
