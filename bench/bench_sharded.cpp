// Google Benchmark: accesses per second of a block cache shared by 1 and 2 threads.
//   sharded/single    sharded_block_cache<lru>, 16 shards, one access() per key
//   sharded/batch64   the same cache, batched access() of 64 keys (each touched shard locked once)
//   mutex/single      block_cache<lru> behind one std::mutex, locked per key (the baseline)
//   mutex/batch64     the same, locked once per 64 keys
// Capacity 10,000 blocks. Keys: 2^20 accesses precomputed outside the timed loop, Zipf(0.9) over
// 100,000 distinct blocks, each id scrambled by splitmix64 so that keys look like the prefix
// hashes engines use. Each thread starts at its own offset in the stream. items/s is the
// aggregate over all threads (wall-clock time: UseRealTime).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <kvtk/cache/block_cache.hpp>
#include <kvtk/cache/sharded_block_cache.hpp>
#include <kvtk/policy/lru.hpp>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <vector>

namespace {

constexpr std::uint64_t kCapacity = 10000;
constexpr std::uint32_t kShards = 16;
constexpr std::size_t kBatch = 64;
constexpr std::size_t kStream = std::size_t{1} << 20;  // power of two: index wraps with a mask
constexpr std::uint64_t kDistinct = 100000;

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

const std::vector<kvtk::block_key>& key_stream() {
  static const std::vector<kvtk::block_key> keys = [] {
    std::vector<double> cdf(kDistinct);
    double sum = 0;
    for (std::uint64_t r = 0; r < kDistinct; ++r) {
      sum += 1.0 / std::pow(static_cast<double>(r + 1), 0.9);
      cdf[r] = sum;
    }
    std::mt19937_64 rng(42);
    std::uniform_real_distribution<double> u(0, sum);
    std::vector<kvtk::block_key> v(kStream);
    for (auto& k : v) {
      const auto r = static_cast<std::uint64_t>(std::lower_bound(cdf.begin(), cdf.end(), u(rng)) -
                                                cdf.begin());
      k = splitmix64(r);
    }
    return v;
  }();
  return keys;
}

std::size_t start_of(const benchmark::State& state) {
  return (static_cast<std::size_t>(state.thread_index()) * (kStream / 4)) & (kStream - 1);
}

using sharded = kvtk::sharded_block_cache<kvtk::lru>;
struct locked {
  std::mutex lock;
  kvtk::block_cache<kvtk::lru> cache{{.capacity = kCapacity}};
};

// One cache per benchmark run, shared by its threads: thread 0 builds and warms it before the
// loop and reads the hit ratio after it (Google Benchmark's loop start and end are barriers).
std::unique_ptr<sharded> g_sharded;
std::unique_ptr<locked> g_locked;

void warm_sharded() {
  g_sharded = std::make_unique<sharded>(sharded::config{.capacity = kCapacity, .shards = kShards});
  for (std::size_t i = 0; i < kStream / 8; ++i) g_sharded->access(key_stream()[i]);
}
void warm_locked() {
  g_locked = std::make_unique<locked>();
  for (std::size_t i = 0; i < kStream / 8; ++i) g_locked->cache.access(key_stream()[i]);
}
template <class Stats>
void report(benchmark::State& state, const Stats& s) {
  const auto accesses = std::max<std::uint64_t>(1, s.hits + s.misses);
  state.counters["hit_ratio"] = static_cast<double>(s.hits) / static_cast<double>(accesses);
}

void bm_sharded_single(benchmark::State& state) {
  if (state.thread_index() == 0) warm_sharded();
  const auto& keys = key_stream();
  std::size_t i = start_of(state);
  for (auto _ : state) {
    benchmark::DoNotOptimize(g_sharded->access(keys[i]));
    i = (i + 1) & (kStream - 1);
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) report(state, g_sharded->stats());
}

void bm_sharded_batch(benchmark::State& state) {
  if (state.thread_index() == 0) warm_sharded();
  const auto& keys = key_stream();
  std::size_t i = start_of(state) & ~(kBatch - 1);
  kvtk::access_result out[kBatch];
  for (auto _ : state) {
    g_sharded->access(std::span<const kvtk::block_key>(keys.data() + i, kBatch), out);
    benchmark::DoNotOptimize(out);
    i = (i + kBatch) & (kStream - 1);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(kBatch));
  if (state.thread_index() == 0) report(state, g_sharded->stats());
}

void bm_mutex_single(benchmark::State& state) {
  if (state.thread_index() == 0) warm_locked();
  const auto& keys = key_stream();
  std::size_t i = start_of(state);
  for (auto _ : state) {
    const std::lock_guard<std::mutex> hold(g_locked->lock);
    benchmark::DoNotOptimize(g_locked->cache.access(keys[i]));
    i = (i + 1) & (kStream - 1);
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) report(state, g_locked->cache.stats());
}

void bm_mutex_batch(benchmark::State& state) {
  if (state.thread_index() == 0) warm_locked();
  const auto& keys = key_stream();
  std::size_t i = start_of(state) & ~(kBatch - 1);
  kvtk::access_result out[kBatch];
  for (auto _ : state) {
    {
      const std::lock_guard<std::mutex> hold(g_locked->lock);
      for (std::size_t j = 0; j < kBatch; ++j) out[j] = g_locked->cache.access(keys[i + j]).result;
    }
    benchmark::DoNotOptimize(out);
    i = (i + kBatch) & (kStream - 1);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(kBatch));
  if (state.thread_index() == 0) report(state, g_locked->cache.stats());
}

}  // namespace

BENCHMARK(bm_sharded_single)->Name("sharded/single")->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(bm_sharded_batch)->Name("sharded/batch64")->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(bm_mutex_single)->Name("mutex/single")->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(bm_mutex_batch)->Name("mutex/batch64")->Threads(1)->Threads(2)->UseRealTime();

BENCHMARK_MAIN();
