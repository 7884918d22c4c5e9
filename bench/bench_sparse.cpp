// Google Benchmark: block selections per second through the sparse-attention residency managers
// (kvtk/sparse/residency.hpp) on one pre-generated DSA pattern: a 128k-token context (2048 blocks
// of 64 tokens), top-2048 tokens = 32 pages per step, 2000 decode steps, an HBM budget of 256
// blocks. One iteration replays the whole pattern into a fresh manager (construction and the
// prefill appends are not timed); items_per_second = block selections per second.
#include <benchmark/benchmark.h>

#include <kvtk/sparse/pattern_gen.hpp>
#include <kvtk/sparse/residency.hpp>

namespace {

using namespace kvtk::sparse;

constexpr std::uint32_t kContext = 2048;
constexpr std::uint32_t kBudget = 256;
constexpr std::size_t kSteps = 2000;

const pattern_trace& dsa_trace() {
  static const pattern_trace t = generate_pattern(pattern_config::dsa(kContext, 1), kSteps);
  return t;
}

residency_config config(prefetch_mode mode) {
  return {.max_blocks = kContext,
          .budget = hbm_budget::in_blocks(kBudget),
          .sinks = 1,
          .recent_window = 2,
          .prefetch = mode};
}

template <class Manager, bool Prefetch>
void replay(benchmark::State& state) {
  const pattern_trace& t = dsa_trace();
  std::uint64_t recalls = 0;
  for (auto _ : state) {
    state.PauseTiming();
    Manager m(config(Prefetch ? prefetch_mode::next_step : prefetch_mode::none));
    for (std::uint32_t i = 0; i < kContext; ++i) m.append_block();
    state.ResumeTiming();
    for (std::size_t s = 0; s < t.steps(); ++s) {
      const step_selection sel = t.step(s);
      m.step(sel.blocks, sel.weights);
      if constexpr (Prefetch) {
        if (s + 1 < t.steps()) m.prefetch(t.step(s + 1).blocks);  // a perfect predictor
      }
    }
    benchmark::DoNotOptimize(m.counters());
    recalls = m.counters().recalls + m.counters().dropped_selections;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(t.blocks.size()));
  state.counters["recalls_or_drops_per_replay"] = static_cast<double>(recalls);
}

}  // namespace

BENCHMARK_TEMPLATE(replay, offload_recall_manager<selection_lru>, false)
    ->Name("offload/selection-lru")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(replay, offload_recall_manager<selection_lru>, true)
    ->Name("offload/selection-lru/prefetch-next-step")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(replay, offload_recall_manager<h2o>, false)
    ->Name("offload/h2o")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(replay, lossy_manager<h2o>, false)
    ->Name("lossy/h2o")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(replay, lossy_manager<selection_lru>, false)
    ->Name("lossy/selection-lru")
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
