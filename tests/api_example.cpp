// The README's "Commands as a library" example, compiled and run by ctest (api.example), so the
// snippet the README shows is known to build and to give what it says.
#include <cstdio>

#include "api/cost.hpp"
#include "api/mrc.hpp"
#include "api/replay.hpp"

int main(int argc, char** argv) {
  const std::string trace = argc > 1 ? argv[1] : "traces/mooncake_fast25_conversation_trace.jsonl";

  // `kvtk replay --trace T --policy lru,arc --index radix,flat --capacity 1000,3Mtok`
  kvtk::sim::replay_options replay;
  replay.trace = trace;
  replay.index = {"radix", "flat"};
  replay.policy = {"lru", "arc"};  // arc is a flat policy: it runs with the flat index only
  replay.capacity = {"1000", "3Mtok"};
  replay.threads = 2;
  const kvtk::sim::replay_result r = kvtk::sim::run(replay, [](std::uint64_t done, std::uint64_t total) {
    if (done == total) std::fprintf(stderr, "replayed %llu block references\n",
                                    static_cast<unsigned long long>(total));
  });
  for (const auto& row : r.results) {
    std::printf("%-6s %-4s %6s  token hit ratio %.4f  (%.3f of the optimum)\n",
                row["index"].get<std::string>().c_str(), row["policy"].get<std::string>().c_str(),
                row["capacity"].get<std::string>().c_str(), row["token_hit_ratio"].get<double>(),
                row["opt_fraction"].get<double>());
  }

  // The same options from JSON (what a sweep file or the Python package passes).
  const auto again = kvtk::sim::replay_options_from_json(kvtk::sim::to_json(replay));

  // `kvtk mrc`, then what the curve's hits are worth: `kvtk cost --from <mrc result>`.
  kvtk::sim::mrc_options mrc;
  mrc.trace = again.trace;
  mrc.points = 8;
  kvtk::sim::cost_options cost;
  cost.from_result = kvtk::sim::to_json(kvtk::sim::run(mrc));
  cost.model = "qwen2.5-7b";
  cost.gpu = "h100";
  cost.usd_per_gb_month = 3.0;
  const auto worth = kvtk::sim::run(cost);
  std::printf("break-even capacity at 3 USD/GB-month: %.0f blocks\n",
              worth.estimate["break_even_capacity_blocks"]["gpu_time"].get<double>());
  return r.results.size() == 6 ? 0 : 1;
}
