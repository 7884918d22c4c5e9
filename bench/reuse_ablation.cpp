// Ablations of the reuse-ranked radix order (include/kvtk/prefix/leaf_reuse.hpp): each feature
// turned off in turn, and other horizon multipliers, on the traces given, at the capacities of
// docs/policy-quality.md, partial blocks cached. Prints CSV: trace,capacity,variant,opt_fraction
// (scripts/policy-quality --ablation-csv renders it).
//   kvtk_reuse_ablation TRACE...
#include <cstdio>
#include <kvtk/kvtk.hpp>
#include <string>
#include <vector>

#include "cli/common.hpp"

namespace {

using namespace kvtk::prefix;

template <reuse_features F>
double fraction(const prefix_trace_view& t, std::uint32_t cap, const prefix_counts& opt) {
  radix_index<basic_leaf_reuse<F>> idx(cap);
  return replay(t, idx, partial_block::cache).fraction_of(opt);
}

constexpr reuse_features all{};
constexpr reuse_features with_depth{true, true, true, true, false, 3.0};
constexpr reuse_features no_refs{false, false, true, true, false, 3.0};
constexpr reuse_features no_partial{true, false, false, true, false, 3.0};
constexpr reuse_features no_history{true, false, true, false, false, 3.0};
constexpr reuse_features horizon1{true, false, true, true, false, 1.0};
constexpr reuse_features horizon2{true, false, true, true, false, 2.0};
constexpr reuse_features horizon5{true, false, true, true, false, 5.0};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: kvtk_reuse_ablation TRACE...\n");
    return 2;
  }
  std::printf("trace,capacity,variant,opt_fraction\n");
  for (int a = 1; a < argc; ++a) {
    std::string format = "auto";
    std::uint32_t block_tokens = 0;
    kvtk::sim::read_report report;
    std::vector<std::string> warnings;  // none: invalid lines are not skipped here
    try {
      const kvtk::sim::loaded_trace lt = kvtk::sim::load_trace_for(
          argv[a], format, block_tokens, false, report, warnings);
      const prefix_trace_view& t = lt.view();
      const auto next = next_use_positions(t, partial_block::cache);
      std::string name = argv[a];
      name = name.substr(name.find_last_of('/') + 1);
      for (const std::uint32_t c : {1000u, 3000u, 5859u, 10000u, 30000u, 100000u}) {
        const std::uint32_t cap = kvtk::sim::allocation_capacity(c, t.keys.size());
        const prefix_counts opt = replay_optimum(t, cap, partial_block::cache, next);
        radix_index<leaf_lru> lru(cap);
        const auto row = [&](const char* v, double f) {
          std::printf("%s,%u,%s,%.4f\n", name.c_str(), c, v, f);
        };
        row("radix lru", replay(t, lru, partial_block::cache).fraction_of(opt));
        row("reuse", fraction<all>(t, cap, opt));
        row("+ continuation depth", fraction<with_depth>(t, cap, opt));
        row("no reference counts", fraction<no_refs>(t, cap, opt));
        row("no partial-block class", fraction<no_partial>(t, cap, opt));
        row("no history", fraction<no_history>(t, cap, opt));
        row("horizon x1", fraction<horizon1>(t, cap, opt));
        row("horizon x2", fraction<horizon2>(t, cap, opt));
        row("horizon x5", fraction<horizon5>(t, cap, opt));
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kvtk_reuse_ablation: %s: %s\n", argv[a], e.what());
      return 1;
    }
  }
  return 0;
}
