// Error of the sampled prefix-LRU curve against the exact one on the bundled Mooncake traces:
// mean and worst absolute block-hit-ratio error over capacities 1000, 2000, ..., 100000, for
// several sampling rates and both partial-block modes. Prints a Markdown table (docs/prefix.md).
#include <cmath>
#include <cstdio>
#include <kvtk/kvtk.hpp>
#include <string>

#include "formats/mooncake_flat.hpp"

int main() {
  using namespace kvtk::prefix;
  std::printf(
      "| trace | blocks | rate | depth | sampled requests | mean abs. error | worst abs. error "
      "|\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|\n");
  for (const char* name : {"conversation", "synthetic"}) {
    const prefix_trace t = kvtk::sim::load_mooncake_requests(
        std::string(KVTK_TRACES_DIR) + "/mooncake_fast25_" + name + "_trace.jsonl");
    for (partial_block p : {partial_block::cache, partial_block::skip}) {
      const prefix_mrc exact = exact_prefix_lru_mrc(t, p);
      for (double rate : {0.01, 0.05, 0.1, 0.2, 0.5}) {
        const auto s = sampled_prefix_lru_mrc(t, rate, p);
        double worst = 0, sum = 0;
        int n = 0;
        for (unsigned cap = 1000; cap <= 100000; cap += 1000, ++n) {
          const double e = std::abs(s.block_hit_ratio(cap) - exact.block_hit_ratio(cap));
          worst = std::max(worst, e);
          sum += e;
        }
        std::printf("| %s | %s | %.2f | %u | %zu | %.4f | %.4f |\n", name,
                    p == partial_block::cache ? "cache" : "skip", rate, s.depth, s.sampled_requests,
                    sum / n, worst);
      }
    }
  }
  return 0;
}
