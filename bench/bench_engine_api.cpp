// The engine-facing API's overhead: kvtk::any_block_cache (policy chosen by name at run time, one
// indirect call per operation or per batch; linked from kvtk::policies, so this file includes only
// the light declaration) against block_cache<P> (the template, fully inlined), on the same key
// stream at 10,000 blocks. Targets (issue 22): <= 15% for single accesses, <= 5% for batches of
// 64. Every benchmark reports items/s = accesses/s.
#include <benchmark/benchmark.h>

#include <kvtk/cache/any_block_cache_decl.hpp>
#include <kvtk/cache/block_cache.hpp>
#include <kvtk/policy/policy_list.hpp>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

constexpr std::uint64_t kCapacity = 10'000;
constexpr std::size_t kBatch = 64;

// 1M accesses, 70% from a hot set of capacity/2 keys, 30% uniform over 8x capacity (about a
// 60% hit ratio under LRU: both paths, hit and miss+evict, are timed).
const std::vector<kvtk::block_key>& keys() {
  static const std::vector<kvtk::block_key> v = [] {
    std::mt19937_64 rng(42);
    std::vector<kvtk::block_key> k(1 << 20);
    for (auto& x : k) x = rng() % 10 < 7 ? rng() % (kCapacity / 2) : rng() % (kCapacity * 8);
    return k;
  }();
  return v;
}

template <class P>
void bm_template_single(benchmark::State& state) {
  kvtk::block_cache<P> cache({.capacity = kCapacity});
  const auto& k = keys();
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(cache.access(k[i]));
    i = (i + 1) & (k.size() - 1);
  }
  state.SetItemsProcessed(state.iterations());
}

template <class P>
void bm_any_single(benchmark::State& state) {
  kvtk::any_block_cache cache(P::name, {.capacity = kCapacity});
  const auto& k = keys();
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(cache.access(k[i]));
    i = (i + 1) & (k.size() - 1);
  }
  state.SetItemsProcessed(state.iterations());
}

// The template's batch is the loop an engine would write; the hint's depth follows the position
// as in any_block_cache's batched access.
template <class P>
void bm_template_batch(benchmark::State& state) {
  kvtk::block_cache<P> cache({.capacity = kCapacity});
  const auto& k = keys();
  std::vector<kvtk::access_result> out(kBatch);
  std::size_t i = 0;
  for (auto _ : state) {
    kvtk::access_hint h;
    for (std::size_t j = 0; j < kBatch; ++j) {
      h.depth = static_cast<std::uint32_t>(j);
      out[j] = cache.access(k[i + j], h).result;
    }
    benchmark::DoNotOptimize(out.data());
    i = (i + kBatch) & (k.size() - 1);
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

template <class P>
void bm_any_batch(benchmark::State& state) {
  kvtk::any_block_cache cache(P::name, {.capacity = kCapacity});
  const auto& k = keys();
  std::vector<kvtk::access_result> out(kBatch);
  std::size_t i = 0;
  for (auto _ : state) {
    cache.access(std::span<const kvtk::block_key>(k.data() + i, kBatch), out);
    benchmark::DoNotOptimize(out.data());
    i = (i + kBatch) & (k.size() - 1);
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

}  // namespace

// One list drives every benchmark: the online policies of the registry (all_policies).
int main(int argc, char** argv) {
  kvtk::all_policies::for_each([]<class P>() {
    if constexpr (!requires { P::offline; }) {
      const std::string n(P::name);
      benchmark::RegisterBenchmark(("template_single/" + n).c_str(), bm_template_single<P>);
      benchmark::RegisterBenchmark(("any_single/" + n).c_str(), bm_any_single<P>);
      benchmark::RegisterBenchmark(("template_batch64/" + n).c_str(), bm_template_batch<P>);
      benchmark::RegisterBenchmark(("any_batch64/" + n).c_str(), bm_any_batch<P>);
    }
  });
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
