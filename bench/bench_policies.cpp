// Google Benchmark harness templated on the policy list: per-policy hit, miss+evict and mixed
// operation rates, and the flattened Mooncake conversation trace replayed 40 times with disjoint
// ids (11.54M requests, keys in memory). Every benchmark reports items/s = requests/s.
#include <benchmark/benchmark.h>

#include <kvtk/kvtk.hpp>
#include <random>
#include <string>

#include "formats/mooncake_flat.hpp"

namespace {

constexpr std::uint64_t kOpCapacity = 4096;

// The operation benchmarks time the mechanics; belady gets next_use = never (a valid hint).
template <class P>
typename kvtk::block_cache<P>::config op_config() {
  typename kvtk::block_cache<P>::config cfg{};
  cfg.capacity = kOpCapacity;
  kvtk::promise_next_use<P>(cfg.policy);
  return cfg;
}

template <class P>
void bm_hit(benchmark::State& state) {
  kvtk::block_cache<P> cache(op_config<P>());
  kvtk::access_hint h;
  for (std::uint64_t k = 0; k < kOpCapacity; ++k) cache.access(k, h);
  std::uint64_t k = 0;
  for (auto _ : state) {
    h.next_use = k + kOpCapacity;  // belady: keep every resident block useful
    benchmark::DoNotOptimize(cache.access(k, h));
    k = (k + 1) & (kOpCapacity - 1);
  }
  state.SetItemsProcessed(state.iterations());
}

template <class P>
void bm_miss_evict(benchmark::State& state) {
  kvtk::block_cache<P> cache(op_config<P>());
  kvtk::access_hint h;
  std::uint64_t k = 0;
  for (auto _ : state) {
    h.next_use = k + 1'000'000'000;
    benchmark::DoNotOptimize(cache.access(k++, h));
  }
  state.SetItemsProcessed(state.iterations());
}

// 1M accesses, 70% from a hot set of capacity/2 keys, 30% uniform over 8x capacity.
const std::vector<kvtk::block_key>& mixed_keys() {
  static const std::vector<kvtk::block_key> keys = [] {
    std::mt19937_64 rng(42);
    std::vector<kvtk::block_key> v(1 << 20);
    for (auto& k : v) k = rng() % 10 < 7 ? rng() % (kOpCapacity / 2) : rng() % (kOpCapacity * 8);
    return v;
  }();
  return keys;
}

template <class P>
void bm_mixed(benchmark::State& state) {
  const auto& keys = mixed_keys();
  static const std::vector<std::uint64_t> next = kvtk::next_use_positions(keys);
  kvtk::block_cache<P> cache(op_config<P>());
  kvtk::access_hint h;
  std::size_t i = 0;
  for (auto _ : state) {
    h.next_use = next[i];
    benchmark::DoNotOptimize(cache.access(keys[i], h));
    if (++i == keys.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}

struct replay_input {
  std::vector<kvtk::block_key> keys;
  std::vector<std::uint64_t> next;  // filled on first Belady use
};

replay_input& replay_trace() {
  static replay_input in = [] {
    const auto base =
        kvtk::sim::load_mooncake_flat(KVTK_TRACES_DIR "/mooncake_fast25_conversation_trace.jsonl");
    replay_input r;
    r.keys.reserve(base.size() * 40);
    for (std::uint64_t rep = 0; rep < 40; ++rep) {
      for (auto k : base) r.keys.push_back(k | (rep << 40));  // ids < 2^40: copies are disjoint
    }
    return r;
  }();
  return in;
}

template <class P>
void bm_replay(benchmark::State& state) {
  replay_input& in = replay_trace();
  if constexpr (kvtk::is_offline_policy<P>) {
    if (in.next.empty()) in.next = kvtk::next_use_positions(in.keys);
  }
  typename kvtk::block_cache<P>::config cfg{};
  cfg.capacity = static_cast<std::uint64_t>(state.range(0));
  kvtk::promise_next_use<P>(cfg.policy);
  std::uint64_t misses = 0;
  for (auto _ : state) {
    const kvtk::flat_replay_counts r = kvtk::replay_flat<P>(in.keys, cfg, in.next);
    misses = r.misses;
    benchmark::DoNotOptimize(misses);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(in.keys.size()));
  state.counters["miss_ratio"] = static_cast<double>(misses) / static_cast<double>(in.keys.size());
}

}  // namespace

int main(int argc, char** argv) {
  kvtk::all_policies::for_each([]<class P>() {
    const std::string n(P::name);
    benchmark::RegisterBenchmark(("hit/" + n).c_str(), bm_hit<P>);
    benchmark::RegisterBenchmark(("miss_evict/" + n).c_str(), bm_miss_evict<P>);
    benchmark::RegisterBenchmark(("mixed/" + n).c_str(), bm_mixed<P>);
    benchmark::RegisterBenchmark(("replay40/" + n).c_str(), bm_replay<P>)
        ->Arg(1000)
        ->Arg(10000)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  });
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
