#include <catch2/catch.hpp>
#include <kvtk/kvtk.hpp>
#include <set>
#include <string>

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
