#include <catch2/catch.hpp>
#include <kvtk/kvtk.hpp>
#include <kvtk/sparse/residency.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

TEST_CASE("registry holds exactly the documented names in order", "[registry]") {
  const std::vector<std::string_view> want = {"lru",      "fifo",         "clock", "sieve",
                                              "lfu",      "2q",           "arc",   "s3fifo",
                                              "wtinylfu", "priority-lru", "belady", "cost-aware"};
  REQUIRE(std::vector<std::string_view>(kvtk::policy_names.begin(), kvtk::policy_names.end()) ==
          want);
  REQUIRE(kvtk::all_policies::size == want.size());
}

TEST_CASE("visit_policy dispatches each name to its type", "[registry]") {
  for (std::string_view name : kvtk::policy_names) {
    const std::string_view got = kvtk::visit_policy(name, []<class P>() { return P::name; });
    REQUIRE(got == name);
  }
  int calls = 0;
  kvtk::visit_policy("arc", [&]<class P>() {
    STATIC_REQUIRE(kvtk::eviction_policy<P>);
    ++calls;
  });
  REQUIRE(calls == 1);
}

TEST_CASE("unknown policy names are a clear error", "[registry]") {
  REQUIRE_FALSE(kvtk::is_policy_name("LRU"));
  REQUIRE_FALSE(kvtk::is_policy_name(""));
  try {
    kvtk::visit_policy("lruu", []<class P>() {});
    FAIL("no exception");
  } catch (const kvtk::unknown_policy& e) {
    const std::string msg = e.what();
    REQUIRE(msg.find("'lruu'") != std::string::npos);
    REQUIRE(msg.find("s3fifo") != std::string::npos);  // lists the valid names
  }
}

TEST_CASE("every registry throws the one unknown_name, with the valid names", "[registry]") {
  auto caught = [](auto&& f) -> kvtk::unknown_name {
    try {
      f();
    } catch (const kvtk::unknown_name& e) {
      return e;
    }
    FAIL("no unknown_name thrown");
    return kvtk::unknown_name("", "", {});
  };
  const auto p = caught([] { kvtk::visit_policy("nope", []<class P>() {}); });
  CHECK(p.kind() == "policy");
  CHECK(p.name() == "nope");
  CHECK(p.known() == kvtk::name_list(kvtk::policy_names));
  CHECK(std::string(p.what()).find("unknown policy 'nope' (known: lru fifo") == 0);
  CHECK_THROWS_AS(kvtk::visit_policy("nope", []<class P>() {}), kvtk::unknown_policy);
  const auto l = caught([] { kvtk::prefix::visit_leaf_policy("arc", []<class L>() {}); });
  CHECK(l.kind() == "radix leaf policy");
  CHECK(l.known() == kvtk::name_list(kvtk::prefix::leaf_policy_names));
  const auto s = caught([] { kvtk::sparse::all_scorers::require("nope"); });
  CHECK(s.kind() == "scorer");
  CHECK(s.known().size() == kvtk::sparse::all_scorers::size);
  kvtk::sparse::all_scorers::require("h2o");  // a known one: nothing thrown
}

TEST_CASE("name tables: parse once, the names listed on a miss", "[registry]") {
  enum class colour : std::uint8_t { red, green, blue };
  constexpr kvtk::name_table<colour, 3> colours{"colour", {"red", "green", "blue"}};
  STATIC_REQUIRE(colours.find("green") == colour::green);
  STATIC_REQUIRE(!colours.find("Green"));
  STATIC_REQUIRE(colours.name(colour::blue) == "blue");
  CHECK(colours.parse("red") == colour::red);
  CHECK(colours.joined() == "red green blue");
  try {
    (void)colours.parse("mauve");
    FAIL("no unknown_name thrown");
  } catch (const kvtk::unknown_name& e) {
    CHECK(std::string(e.what()) == "unknown colour 'mauve' (known: red green blue)");
    CHECK(e.known() == std::vector<std::string>{"red", "green", "blue"});
  }
  // Every table of the headers round-trips each name through its enum.
  auto round_trips = [](const auto& table) {
    for (std::string_view n : table.names) CHECK(table.name(table.parse(n)) == n);
  };
  round_trips(kvtk::prefix::engine_names);
  round_trips(kvtk::prefix::partial_block_names);
  CHECK(kvtk::prefix::engine_names.parse("sglang") == kvtk::prefix::engine_accounting::sglang);
  CHECK(kvtk::prefix::partial_block_names.parse("cache") == kvtk::prefix::partial_block::cache);
  CHECK_THROWS_WITH(kvtk::prefix::engine_names.parse("trtllm"),
                    "unknown engine 'trtllm' (known: ideal vllm sglang)");
}

TEST_CASE("visit_named: one lookup for every type list", "[registry]") {
  using two = kvtk::type_list<kvtk::lru, kvtk::arc>;
  CHECK(kvtk::detail::visit_named<two>("arc", "policy", []<class P>() { return P::name; }) ==
        "arc");
  CHECK_THROWS_WITH(kvtk::detail::visit_named<two>("fifo", "policy", []<class P>() {}),
                    "unknown policy 'fifo' (known: lru arc)");
  auto typed = [] {
    kvtk::detail::visit_named<two, kvtk::unknown_policy>("x", "policy", []<class P>() {});
  };
  CHECK_THROWS_AS(typed(), kvtk::unknown_policy);
}

TEST_CASE("residency counters add every field", "[registry][sparse]") {
  kvtk::sparse::residency_counters a, b;
  a.steps = 1; a.selections = 2; a.invalid_selections = 3; a.hits = 4; a.recalls = 5;
  a.prefetches_issued = 6; a.prefetch_hits = 7; a.wasted_prefetches = 8; a.prefetches_dropped = 9;
  a.evictions = 10; a.dropped_selections = 11; a.over_budget_steps = 12; a.budget_raised_steps = 13;
  a.last_step_recalls = 14; a.resident_blocks = 15; a.resident_max = 16; a.total_mass = 17.5;
  a.dropped_mass = 18.5;
  b = a;
  b.resident_max = 3;
  b += a;
  CHECK(b.steps == 2);
  CHECK(b.invalid_selections == 6);
  CHECK(b.dropped_selections == 22);
  CHECK(b.budget_raised_steps == 26);
  CHECK(b.total_mass == 35.0);
  CHECK(b.dropped_mass == 37.0);
  CHECK(b.resident_max == 16);  // the larger, not the sum
  CHECK(b.resident_blocks == 30);
}
