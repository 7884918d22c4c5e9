// The end-to-end fast paths (issue 15) against the slow, obvious versions they replace:
// key_map vs std::unordered_map; the ideal pass (set, and from next uses) vs an unbounded LRU
// replay; the unit layout of flat traces vs the same trace in the general layout (every index,
// every policy, the optimum); the loaded trace's bytes per reference.
#include <unistd.h>
#include <algorithm>
#include <cstring>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <kvtk/kvtk.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <unordered_map>
#include <unordered_set>

#include "bundled_traces.hpp"
#include "formats/mooncake_flat.hpp"
#include "formats/requests.hpp"

using namespace kvtk::prefix;
using kvtk::block_key;

namespace {

using kvtk::test::conversation;

// Random requests with shared prefixes and keys repeated inside a request (the case the
// next-use form of the ideal pass must get right).
prefix_trace random_requests(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  prefix_trace t;
  t.block_tokens = 4;
  std::vector<block_key> keys;
  for (std::size_t r = 0; r < n; ++r) {
    keys.resize(rng() % 6);
    for (auto& k : keys) k = rng() % 40;  // 0 included: key_map keeps it beside the table
    const std::uint64_t L = keys.size() * 4 - (keys.empty() ? 0 : rng() % 4);
    t.add(keys, L);
  }
  return t;
}

// The same single-block requests in both layouts.
struct two_layouts {
  prefix_trace unit, general;
};
two_layouts flat_trace(std::size_t n, std::uint64_t distinct, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  two_layouts out;
  out.unit.block_tokens = out.general.block_tokens = 1;
  out.unit.offsets.clear();
  std::geometric_distribution<std::uint64_t> pick(1.0 / static_cast<double>(distinct));
  for (std::size_t i = 0; i < n; ++i) {
    const block_key k = pick(rng) % distinct;
    out.unit.keys.push_back(k);
    out.general.add(std::span<const block_key>(&k, 1), 1);
  }
  return out;
}

}  // namespace

TEST_CASE("key_map agrees with std::unordered_map, across doublings and for keys 0 and ~0",
          "[e2e]") {
  std::mt19937_64 rng(7);
  kvtk::detail::key_map<std::uint64_t> m;
  std::unordered_map<std::uint64_t, std::uint64_t> ref;
  for (std::uint64_t i = 0; i < 200000; ++i) {
    std::uint64_t k = rng() % 50000;
    if (i % 1000 == 0) k = 0;
    if (i % 1001 == 0) k = ~std::uint64_t{0};
    if (i % 3 == 0) k <<= 40;  // high bits only, as disjoint trace copies are
    const auto [v, fresh] = m.try_emplace(k, i);
    const auto [it, ref_fresh] = ref.try_emplace(k, i);
    REQUIRE(fresh == ref_fresh);
    REQUIRE(*v == it->second);
    if (!fresh) *v = it->second = i;
  }
  REQUIRE(m.size() == ref.size());
  for (const auto& [k, v] : ref) {
    REQUIRE(m.find(k) != nullptr);
    REQUIRE(*m.find(k) == v);
  }
  REQUIRE(m.find(123456789) == nullptr);
  REQUIRE(m.memory_bytes() >= m.size() * 2 * sizeof(std::uint64_t) * 2);  // load <= 1/2
}

TEST_CASE("next_use_positions equals a quadratic scan", "[e2e]") {
  const prefix_trace t = random_requests(400, 3);
  const auto next = kvtk::next_use_positions(t.keys);
  for (std::size_t i = 0; i < t.keys.size(); ++i) {
    std::uint64_t want = kvtk::access_hint::never;
    for (std::size_t j = i + 1; j < t.keys.size(); ++j) {
      if (t.keys[j] == t.keys[i]) {
        want = j;
        break;
      }
    }
    REQUIRE(next[i] == want);
  }
}

TEST_CASE("ideal pass: set and next-use forms equal an unbounded flat LRU replay", "[e2e]") {
  std::vector<prefix_trace> traces;
  traces.push_back(conversation());
  for (std::uint64_t s = 1; s <= 20; ++s) traces.push_back(random_requests(500, s));
  for (const prefix_trace& t : traces) {
    for (const partial_block p : {partial_block::skip, partial_block::cache}) {
      std::unordered_set<block_key> distinct;
      for (std::size_t r = 0; r < t.requests(); ++r) {
        for (block_key k : t.cacheable(r, p)) distinct.insert(k);
      }
      flat_index<kvtk::lru> unbounded(static_cast<std::uint32_t>(distinct.size() + 1));
      const prefix_counts want = replay(t, unbounded, p);
      const auto next = next_use_positions(t, p);
      for (const ideal_counts& got : {replay_ideal(t, p), replay_ideal(t, p, next)}) {
        REQUIRE(got.unique_blocks == distinct.size());
        REQUIRE(got.counts.requests == want.requests);
        REQUIRE(got.counts.block_refs == want.block_refs);
        REQUIRE(got.counts.block_hits == want.block_hits);
        REQUIRE(got.counts.token_refs == want.token_refs);
        REQUIRE(got.counts.token_hits == want.token_hits);
      }
    }
  }
  REQUIRE_THROWS_AS(
      replay_ideal(conversation(), partial_block::skip, std::vector<std::uint64_t>(3)),
      std::invalid_argument);
}

TEST_CASE("unit layout replays exactly as the general layout, every index and policy", "[e2e]") {
  const two_layouts t = flat_trace(30000, 4000, 11);
  REQUIRE(t.unit.view().unit_requests());
  REQUIRE(t.unit.requests() == t.general.requests());
  const auto next_u = next_use_positions(t.unit, partial_block::skip);
  const auto next_g = next_use_positions(t.general, partial_block::skip);
  REQUIRE(next_u == next_g);
  for (const std::uint32_t cap : {1u, 64u, 1000u}) {
    for (const auto name : kvtk::policy_names) {
      kvtk::visit_policy(name, [&]<class P>() {
        flat_index<P> a(cap), b(cap);
        const prefix_counts x = replay(t.unit, a, partial_block::skip, next_u);
        const prefix_counts y = replay(t.general, b, partial_block::cache, next_g);
        INFO(name << " @" << cap);
        REQUIRE(x.block_hits == y.block_hits);
        REQUIRE(x.token_hits == y.token_hits);
        REQUIRE(x.token_refs == y.token_refs);
        REQUIRE(x.evictions == y.evictions);
      });
    }
    for (const auto name : leaf_policy_names) {
      visit_leaf_policy(name, [&]<class L>() {
        radix_index<L> a(cap), b(cap);
        INFO(name << " @" << cap);
        REQUIRE(replay(t.unit, a, partial_block::skip, next_u).block_hits ==
                replay(t.general, b, partial_block::skip, next_g).block_hits);
      });
    }
    hash_chain_index a(cap), b(cap);
    REQUIRE(replay(t.unit, a).block_hits == replay(t.general, b).block_hits);
    // On single-block requests the optimum is flat MIN with bypass (the bound's pass alone): it
    // must equal leaf-only Belady with bypass, and beat leaf-only Belady that admits all.
    radix_index<leaf_belady, admit_belady> leaf_opt(cap);
    radix_index<leaf_belady> forced(cap);
    const auto want = replay(t.general, leaf_opt, partial_block::skip, next_g).block_hits;
    REQUIRE(replay(t.general, forced, partial_block::skip, next_g).block_hits <= want);
    REQUIRE(replay_optimum(t.unit, cap, partial_block::skip, next_u).block_hits == want);
    REQUIRE(replay_optimum(t.general, cap, partial_block::skip, next_g).block_hits == want);
    const auto ideal_u = replay_ideal(t.unit), ideal_g = replay_ideal(t.general);
    REQUIRE(ideal_u.counts.block_hits == ideal_g.counts.block_hits);
    REQUIRE(ideal_u.unique_blocks == ideal_g.unique_blocks);
  }
}

TEST_CASE("flat trace files load in the unit layout at 8 bytes per reference", "[e2e]") {
  namespace fs = std::filesystem;
  using namespace kvtk::sim;
  const fs::path dir = fs::temp_directory_path() / ("kvtk_test_e2e_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string og = (dir / "t.oracleGeneral").string(), ids = (dir / "t.ids").string();
  {
    std::ofstream a(og, std::ios::binary), b(ids);
    for (std::uint64_t i = 0; i < 5000; ++i) {
      const std::uint64_t id = (i * 7919) % 1301;
      const std::uint32_t ts = 0, size = 1;
      const std::int64_t next = -1;
      a.write(reinterpret_cast<const char*>(&ts), 4);
      a.write(reinterpret_cast<const char*>(&id), 8);
      a.write(reinterpret_cast<const char*>(&size), 4);
      a.write(reinterpret_cast<const char*>(&next), 8);
      b << id << (i % 2 ? "\r\n" : "\n");
    }
  }
  for (const auto& [path, f] :
       {std::pair{og, trace_format::oracle_general}, std::pair{ids, trace_format::ids}}) {
    const loaded_trace lt = loaded_trace::load(path, f, 0, {}, nullptr);
    const auto& v = lt.view();
    REQUIRE(v.unit_requests());
    REQUIRE(v.requests() == 5000);
    REQUIRE(v.input_length.empty());  // nothing per request: the keys are the whole trace
    // oracle-general is sized from the file; the ids reader grows a vector (at most 2x).
    if (f == trace_format::oracle_general) REQUIRE(lt.memory_bytes() == 5000 * sizeof(block_key));
    REQUIRE(lt.memory_bytes() <= 2 * 5000 * sizeof(block_key));
    REQUIRE(v.blocks(10)[0] == (10 * 7919) % 1301);
    REQUIRE(v.input_tokens(10) == 1);
  }
  // JSONL requests: 8 bytes per key plus a per-request header (offset, input length, arrival,
  // output length: 32 bytes), within the 2x slack of vector growth.
  const loaded_trace lt =
      loaded_trace::load(KVTK_TRACES_DIR "/mooncake_fast25_conversation_trace.jsonl",
                         trace_format::mooncake, 0, {}, nullptr);
  const auto& v = lt.view();
  const std::size_t exact = v.keys.size() * 8 + v.requests() * 32 + 8;
  REQUIRE(lt.memory_bytes() >= exact);
  REQUIRE(lt.memory_bytes() <= 2 * exact);
  fs::remove_all(dir);
}

namespace {

void require_same_trace(const kvtk::sim::loaded_trace& a, const kvtk::sim::loaded_trace& b) {
  const auto& x = a.view();
  const auto& y = b.view();
  auto same = [](auto s, auto t) { return std::equal(s.begin(), s.end(), t.begin(), t.end()); };
  REQUIRE(x.block_tokens == y.block_tokens);
  REQUIRE(same(x.keys, y.keys));
  REQUIRE(same(x.offsets, y.offsets));
  REQUIRE(same(x.input_length, y.input_length));
  REQUIRE(same(x.priority, y.priority));
  REQUIRE(x.arrival_s.size() == y.arrival_s.size());
  for (std::size_t i = 0; i < x.arrival_s.size(); ++i) {
    REQUIRE((x.arrival_s[i] == y.arrival_s[i] ||
             (std::isnan(x.arrival_s[i]) && std::isnan(y.arrival_s[i]))));
  }
  REQUIRE(same(x.output_length, y.output_length));
  REQUIRE(same(x.session, y.session));
  REQUIRE(same(x.tenant, y.tenant));
  REQUIRE(same(x.request_block_tokens, y.request_block_tokens));
  REQUIRE(same(a.tenant_names(), b.tenant_names()));
  REQUIRE(same(x.request_id, y.request_id));
  REQUIRE(same(x.parent, y.parent));
  REQUIRE(same(x.join_offsets, y.join_offsets));
  REQUIRE(same(x.join_ids, y.join_ids));
}

// The message of the trace_error that loading `path` with `threads` threads throws ("" = none).
std::string load_error(const std::string& path, kvtk::sim::trace_format f, unsigned threads) {
  try {
    (void)kvtk::sim::loaded_trace::load(path, f, 0, {}, nullptr, threads);
  } catch (const kvtk::sim::trace_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("parallel JSONL reading gives the sequential reader's trace and errors", "[e2e]") {
  namespace fs = std::filesystem;
  using namespace kvtk::sim;
  const fs::path dir = fs::temp_directory_path() / ("kvtk_test_e2e_parallel_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // A kvtk-format file of several MB: the 1k generated trace six times, later copies with new
  // tenants, and priorities and per-request block sizes only near the end (columns that appear
  // in a later chunk only), plus a decode record.
  std::vector<std::string> lines;
  {
    std::ifstream in(KVTK_TRACES_DIR "/kvtk_gen_mixed_1k.jsonl");
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  const std::string kvtk_path = (dir / "big.kvtk.jsonl").string();
  {
    std::ofstream out(kvtk_path);
    out << lines[0] << "\n";  // the header
    for (int copy = 0; copy < 14; ++copy) {
      for (std::size_t i = 1; i < lines.size(); ++i) {
        auto j = nlohmann::json::parse(lines[i]);
        j["arrival_s"] = j["arrival_s"].get<double>() + 100000.0 * copy;
        if (copy % 2 == 1)
          j["tenant"] = j["tenant"].get<std::string>() + "_" + std::to_string(copy);
        if (copy == 13 && i % 3 == 0) j["priority"] = 2;
        if (copy == 12) {  // ids, and fan-in (several parents) only here: columns of a later chunk
          j["id"] = i;
          if (i % 7 == 0 && i > 3) j["parent"] = {i - 1, i - 3, i - 2};
        }
        if (copy == 13 && i % 5 == 0) {
          j["block_tokens"] = 256;
          j["hash_ids"] = nlohmann::json::array();
          for (std::uint64_t k = 0; k < (j["input_length"].get<std::uint64_t>() + 255) / 256; ++k)
            j["hash_ids"].push_back(k + 1000 * i);
        }
        out << j.dump() << "\n";
      }
    }
  }
  REQUIRE(fs::file_size(kvtk_path) > (std::size_t{3} << 20));
  const std::string conv = KVTK_TRACES_DIR "/mooncake_fast25_conversation_trace.jsonl";
  // oracleGeneral is read in parts with pread (the same ids, in order).
  const std::string og = KVTK_TEST_DATA_DIR "/small.oracleGeneral.bin";
  const auto og_one = loaded_trace::load(og, trace_format::oracle_general, 0, {}, nullptr, 1);
  REQUIRE(og_one.view().keys.size() > 8);
  for (unsigned threads : {2u, 3u, 7u, 1000u}) {
    const auto many = loaded_trace::load(og, trace_format::oracle_general, 0, {}, nullptr, threads);
    CHECK(std::equal(many.view().keys.begin(), many.view().keys.end(), og_one.view().keys.begin(),
                     og_one.view().keys.end()));
  }
  {
    // Parts larger than the 3 MiB read chunk (several preads each), and a size that is not a
    // whole number of records: the same ids, and the same error, with or without threads.
    const std::string big = (fs::temp_directory_path() /
                             ("kvtk-og-" + std::to_string(::getpid()) + ".bin")).string();
    std::string bytes(24 * 400'000, '\0');
    std::mt19937_64 rng(7);
    for (std::size_t r = 0; r < 400'000; ++r) {
      const std::uint64_t id = rng();
      std::memcpy(bytes.data() + r * 24 + 4, &id, 8);
    }
    std::ofstream(big, std::ios::binary) << bytes;
    const auto one = loaded_trace::load(big, trace_format::oracle_general, 0, {}, nullptr, 1);
    const auto two = loaded_trace::load(big, trace_format::oracle_general, 0, {}, nullptr, 2);
    CHECK(one.view().keys.size() == 400'000);
    CHECK(std::equal(two.view().keys.begin(), two.view().keys.end(), one.view().keys.begin(),
                     one.view().keys.end()));
    std::ofstream(big, std::ios::binary | std::ios::app) << "x";
    CHECK(load_error(big, trace_format::oracle_general, 2) ==
          load_error(big, trace_format::oracle_general, 1));
    CHECK_THAT(load_error(big, trace_format::oracle_general, 2),
               Catch::Contains("not a whole number of 24-byte"));
    fs::remove(big);
  }
  for (const auto& [path, f] :
       {std::pair{conv, trace_format::mooncake}, std::pair{kvtk_path, trace_format::kvtk}}) {
    const loaded_trace one = loaded_trace::load(path, f, 0, {}, nullptr, 1);
    if (f == trace_format::kvtk) REQUIRE(one.view().join_ids.size() > 200);
    for (unsigned threads : {2u, 3u, 4u, 7u}) {
      INFO(path << " threads " << threads);
      require_same_trace(one, loaded_trace::load(path, f, 0, {}, nullptr, threads));
    }
  }

  // Errors: the same message (file, line, reason) whichever thread meets them, including a
  // timestamp that goes backwards exactly at a chunk boundary and errors in several chunks.
  std::vector<std::string> conv_lines;
  {
    std::ifstream in(conv);
    for (std::string l; std::getline(in, l);) conv_lines.push_back(l);
  }
  auto write_with = [&](const std::map<std::size_t, std::string>& replace) {
    const std::string p = (dir / "bad.jsonl").string();
    std::ofstream out(p);
    for (std::size_t i = 0; i < conv_lines.size(); ++i) {
      const auto it = replace.find(i);
      out << (it == replace.end() ? conv_lines[i] : it->second) << "\n";
    }
    return p;
  };
  // The line that starts the second of two chunks: the first line after the middle byte.
  std::size_t bytes = 0, boundary = 0;
  std::size_t total = 0;
  for (const auto& l : conv_lines) total += l.size() + 1;
  for (std::size_t i = 0; i < conv_lines.size(); ++i) {
    if (bytes >= total / 2) {
      boundary = i;
      break;
    }
    bytes += conv_lines[i].size() + 1;
  }
  const std::string backwards =
      R"({"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]})";
  const std::string broken = R"({"timestamp": 1, "input_length": 10, "hash_ids": [1, 2]})";
  const std::vector<std::map<std::size_t, std::string>> cases = {
      {{boundary, backwards}},          // backwards across the 2-chunk boundary
      {{boundary + 1, backwards}},      // inside the second chunk
      {{9000, broken}},                 // an error late in the file
      {{500, broken}, {9000, broken}},  // errors in two chunks: the first wins
      {{boundary, "not json"}, {boundary + 5, backwards}},
      {{boundary + 2, backwards}, {boundary + 4, "{"}},
      {{conv_lines.size() - 1, "   "}},  // the very last line
  };
  for (const auto& c : cases) {
    const std::string p = write_with(c);
    const std::string want = load_error(p, trace_format::mooncake, 1);
    REQUIRE_FALSE(want.empty());
    for (unsigned threads : {2u, 3u, 5u}) {
      INFO("case at line " << c.begin()->first + 1 << ", threads " << threads);
      REQUIRE(load_error(p, trace_format::mooncake, threads) == want);
    }
  }
  fs::remove_all(dir);
}
