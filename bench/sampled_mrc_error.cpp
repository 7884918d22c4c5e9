// Error of the sampled prefix-LRU curve against the exact one: the bundled Mooncake traces and a
// 20,000-request generated trace (kvtk trace gen, mixed profile, seed 1, 64-token blocks).
// For several sampling rates and both partial-block modes: the sampled block references, the
// mean and worst absolute error of the token hit ratio over 100 capacities (1%..100% of the
// exact curve's saturation), and the mean of the curve's own error estimate (half-samples).
// Prints a Markdown table (docs/prefix.md).
#include <cmath>
#include <cstdio>
#include <kvtk/kvtk.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cli/trace_gen.hpp"
#include "formats/mooncake_flat.hpp"
#include "formats/requests.hpp"

int main() {
  using namespace kvtk::prefix;
  std::vector<std::pair<std::string, prefix_trace>> traces;
  for (const char* name : {"conversation", "synthetic"}) {
    traces.emplace_back(name, kvtk::sim::load_mooncake_requests(std::string(KVTK_TRACES_DIR) +
                                                                "/mooncake_fast25_" + name +
                                                                "_trace.jsonl"));
  }
  {
    kvtk::sim::gen_options g;
    g.requests = 20000;
    kvtk::sim::trace_builder b(g.block_tokens);
    kvtk::sim::generate_trace(g, [&](const kvtk::sim::request_record& r) { b.add(r); });
    traces.emplace_back("generated mixed", b.finish());
  }
  std::printf(
      "| trace | blocks | rate | sample size (rate x block refs) | mean abs. error | worst abs. error | mean "
      "error estimate |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|\n");
  for (const auto& [name, t] : traces) {
    for (partial_block p : {partial_block::cache, partial_block::skip}) {
      const prefix_mrc exact = exact_prefix_lru_mrc(t, p);
      const double top = static_cast<double>(exact.saturation());
      for (double rate : {0.01, 0.05, 0.1, 0.2, 0.5}) {
        const auto s = sampled_prefix_lru_mrc(t, rate, p, true);
        double worst = 0, sum = 0, estimate = 0;
        int n = 0;
        for (int i = 1; i <= 100; ++i, ++n) {
          const auto cap = static_cast<std::uint64_t>(top * i / 100.0);
          const double e = std::abs(s.token_hit_ratio(cap) - exact.token_hit_ratio(cap));
          worst = std::max(worst, e);
          sum += e;
          estimate += s.error_estimate(cap);
        }
        std::printf("| %s | %s | %.2f | %llu | %.4f | %.4f | %.4f |\n", name.c_str(),
                    p == partial_block::cache ? "cache" : "skip", rate,
                    static_cast<unsigned long long>(s.sample.block_refs), sum / n, worst,
                    estimate / n);
      }
    }
  }
  return 0;
}
