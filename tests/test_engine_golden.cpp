// The `sglang` scheduler against SGLang 0.5.23's own scheduling code, iteration by iteration:
// tests/data/engine_sched/sglang holds what tools/engine-check/sglang_scheduler.py --golden
// recorded from SGLang's real SchedulePolicy, PrefillAdder, ScheduleBatch and RadixCache on CPU
// (5 scenarios x lpm/fcfs; three under memory pressure, where PrefillAdder's budget and
// batch_is_full decide admissions). Each iteration's requests, new tokens and context lengths
// must be equal.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/simulate.hpp"

namespace {

using step = std::vector<std::array<std::uint64_t, 3>>;  // (request, new tokens, context), sorted

std::vector<step> kvtk_steps(const nlohmann::json& golden, const std::string& dir,
                             std::uint64_t& preemptions) {
  kvtk::sim::simulate_options o;
  o.trace = dir + "/" + golden["trace"].get<std::string>();
  o.engine = "sglang";
  o.set = {"model=qwen2.5-7b", "gpu=h100"};
  for (const auto& [k, v] : golden["set"].items()) o.set.push_back(k + "=" + v.dump());
  o.iteration_log = true;
  const auto r = kvtk::sim::run(o);
  preemptions = r.result["preemptions"].get<std::uint64_t>();
  std::map<std::uint64_t, step> by_iteration;
  for (const auto& it : r.iterations) {
    by_iteration[it.iteration].push_back({it.request, it.new_tokens, it.context_tokens});
  }
  std::vector<step> out;
  for (auto& [i, s] : by_iteration) {
    REQUIRE(i == out.size());  // no iteration number skipped
    std::sort(s.begin(), s.end());
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

TEST_CASE("sglang scheduler equals SGLang 0.5.23's scheduling code iteration by iteration",
          "[engine_sched][golden]") {
  const std::string dir = KVTK_ENGINE_GOLDEN_DIR "/sglang";
  for (const char* run : {"a_prefix_chunked", "b_preemption", "c_mooncake50",
                          "d_mooncake50_pressure", "e_mooncake50_tight"}) {
    for (const char* policy : {"lpm", "fcfs"}) {
      const std::string name = std::string(run) + "_" + policy;
      INFO(name);
      std::ifstream f(dir + "/" + name + ".json");
      REQUIRE(f);
      const auto golden = nlohmann::json::parse(f);
      const auto want = golden["steps"].get<std::vector<step>>();
      std::uint64_t preemptions = 0;
      const auto got = kvtk_steps(golden, dir, preemptions);
      // SGLang's retractions (none in these runs: with fixed output lengths its budget holds
      // back every running request's remaining output, so decode never runs short).
      CHECK(preemptions == golden["retractions"].get<std::uint64_t>());
      CHECK(got.size() == want.size());
      std::size_t first = 0;
      while (first < std::min(got.size(), want.size()) && got[first] == want[first]) ++first;
      INFO("first differing iteration " << first);
      CHECK(first == std::min(got.size(), want.size()));
    }
  }
}
