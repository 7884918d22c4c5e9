// The engine-facing call shape (issue 22): the size-first access of block_cache, prefix_tree's
// config + stored callback + set_payload against its legacy per-call form, any_block_cache
// without a callback, the hint fields policies read and the replay's record of them, and
// Belady's refusal of online use.
#include <catch2/catch.hpp>
// The light declaration; the definitions come from kvtk::policies (the consumer test compiles
// the header-only form and mixes it with the library).
#include <kvtk/cache/any_block_cache_decl.hpp>
#include <kvtk/kvtk.hpp>
#include <random>
#include <tuple>
#include <vector>

#include "api/replay.hpp"

namespace {

std::vector<std::vector<kvtk::block_key>> session_requests(std::size_t n, std::uint64_t seed) {
  // Requests that share prefixes: a session's next turn repeats its previous turn's keys.
  std::mt19937_64 rng(seed);
  std::vector<std::vector<kvtk::block_key>> sessions(12), out;
  kvtk::block_key next = 1;
  for (std::size_t i = 0; i < n; ++i) {
    auto& s = sessions[rng() % sessions.size()];
    if (rng() % 8 == 0) s.clear();
    const std::size_t grow = 1 + rng() % 4;
    for (std::size_t g = 0; g < grow; ++g) s.push_back(next++);
    out.push_back(s);
  }
  return out;
}

}  // namespace

TEST_CASE("block_cache: access(key, size, hint) equals the legacy access(key, hint, size)",
          "[engine_api]") {
  kvtk::block_cache<kvtk::lru> a({.capacity = 100, .max_entries = 40});
  kvtk::block_cache<kvtk::lru> b({.capacity = 100, .max_entries = 40});
  std::mt19937_64 rng(5);
  for (int i = 0; i < 5000; ++i) {
    const kvtk::block_key k = rng() % 60;
    const auto size = static_cast<std::uint32_t>(1 + k % 7);
    kvtk::access_hint h;
    h.depth = static_cast<std::uint32_t>(i % 5);
    const auto x = i % 3 == 0 ? a.insert(k, size, h) : a.access(k, size, h);
    const auto y = i % 3 == 0 ? b.insert(k, h, size) : b.access(k, h, size);
    REQUIRE(x.result == y.result);
    REQUIRE(x.slot == y.slot);
  }
  CHECK(a.used() == b.used());
  CHECK(a.stats().hits == b.stats().hits);
}

TEST_CASE("prefix_tree: config, stored callback and set_payload equal the per-call form",
          "[engine_api]") {
  using evictions = std::vector<std::tuple<kvtk::block_key, std::uint32_t, int>>;
  evictions stored, per_call;
  auto record = [&](kvtk::block_key k, std::uint32_t s, const int& p) { stored.emplace_back(k, s, p); };
  kvtk::prefix::prefix_tree<kvtk::prefix::leaf_lru, int, decltype(record)> modern({.capacity = 64},
                                                                               record);
  kvtk::prefix::prefix_tree<kvtk::prefix::leaf_lru, int> legacy(64);
  for (const auto& keys : session_requests(3000, 9)) {
    const std::span<const kvtk::block_key> ks(keys);
    const auto m1 = modern.match(ks);
    const auto m2 = legacy.match(ks);
    REQUIRE(m1.length == m2.length);
    REQUIRE(m1.node == m2.node);
    if (m1.node != modern.root) {
      modern.lock_and_touch(m1.node, m1.length, [](std::uint32_t) { return kvtk::access_hint{}; });
      legacy.lock_and_touch(m2.node, m2.length, [](std::uint32_t) { return kvtk::access_hint{}; });
    }
    kvtk::access_hint h;
    h.depth = m1.length;  // the new call numbers depths from the matched length
    const auto r1 = modern.insert(m1.node, ks.subspan(m1.length), h);
    std::vector<kvtk::prefix::prefix_tree<kvtk::prefix::leaf_lru, int>::handle> slots(keys.size());
    const auto r2 = legacy.insert(
        m2.node, ks.subspan(m2.length),
        [&](kvtk::block_key k, std::uint32_t s, const int& p) { per_call.emplace_back(k, s, p); },
        [&](std::uint32_t i) {
          kvtk::access_hint x;
          x.depth = m2.length + i;
          return x;
        },
        [&](std::uint32_t i) { return static_cast<int>(keys[m2.length + i] % 1000); },
        std::span(slots));
    REQUIRE(r1.inserted == r2.inserted);
    REQUIRE(r1.node == r2.node);
    // Payloads through the separate call: the same values on the same slots.
    for (std::uint32_t i = 0; i < r1.inserted; ++i) {
      modern.set_payload(slots[i], static_cast<int>(keys[m1.length + i] % 1000));
    }
    if (r1.node != modern.root) {
      modern.unlock(r1.node);
      legacy.unlock(r2.node);
    }
    REQUIRE(modern.audit().empty());
  }
  CHECK(stored == per_call);
  CHECK(modern.evict(5) == legacy.evict(5, [&](kvtk::block_key k, std::uint32_t s, const int& p) {
    per_call.emplace_back(k, s, p);
  }));
  CHECK(stored == per_call);
  CHECK(stored.size() > 100);
}

TEST_CASE("any_block_cache: no callback means no call, and a moved cache keeps working",
          "[engine_api]") {
  kvtk::any_block_cache a("s3fifo", {.capacity = 8});
  for (kvtk::block_key k = 0; k < 100; ++k) a.access(k);  // evicts without a callback
  CHECK(a.stats().evictions > 0);
  int calls = 0;
  a.set_on_evict([&](kvtk::block_key, std::uint32_t) { ++calls; });
  kvtk::any_block_cache b = std::move(a);
  CHECK(a.policy().empty());
  for (kvtk::block_key k = 100; k < 120; ++k) b.access(k, 1);
  CHECK(calls == 20);
  b = kvtk::any_block_cache("lru", {.capacity = 2});
  CHECK(b.policy() == "lru");
  CHECK(b.access(1, 3).result == kvtk::access_result::rejected);  // size 3 > capacity 2
}

TEST_CASE("policies declare the hint fields they read", "[engine_api]") {
  STATIC_REQUIRE(kvtk::hints_read_by<kvtk::lru>() == 0);
  STATIC_REQUIRE(kvtk::hints_read_by<kvtk::cost_aware>() == kvtk::hint_fields::depth);
  STATIC_REQUIRE(kvtk::hints_read_by<kvtk::priority_lru>() == kvtk::hint_fields::priority);
  STATIC_REQUIRE(kvtk::hints_read_by<kvtk::belady>() == kvtk::hint_fields::next_use);
  STATIC_REQUIRE(kvtk::hints_read_by<kvtk::prefix::leaf_reuse>() ==
                 (kvtk::hint_fields::depth | kvtk::hint_fields::full_blocks));
}

TEST_CASE("replay results record the hints each policy read and was given", "[engine_api]") {
  kvtk::sim::replay_options o;
  o.trace = KVTK_TRACES_DIR "/mooncake_fast25_conversation_trace.jsonl";
  o.index = {"flat", "radix"};
  o.policy = {"priority-lru", "cost-aware", "belady", "lru"};
  o.capacity = {"1000"};
  o.opt = false;
  const auto r = kvtk::sim::run(o);
  int seen = 0;
  for (const auto& row : r.results) {
    const std::string p = row["policy"], idx = row["index"];
    const auto& h = row["hints"];
    if (p == "priority-lru") {
      CHECK(h["missing"] == nlohmann::json::array({"priority"}));  // ran as LRU
      ++seen;
    } else if (p == "cost-aware") {
      CHECK(h["read"] == nlohmann::json::array({"depth"}));
      CHECK(h["missing"].empty());
      ++seen;
    } else if (p == "belady") {
      CHECK(h["given"] == nlohmann::json::array({"depth", "next_use", "full_blocks"}));
      CHECK(h["missing"].empty());
      ++seen;
    } else if (p == "lru") {
      CHECK(h["read"].empty());
      ++seen;
    }
  }
  CHECK(seen == 7);  // cost-aware is flat only
}
