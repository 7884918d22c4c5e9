// Prefix-layer benchmarks: the Mooncake conversation trace repeated 40 times with disjoint ids
// (481,240 requests, 11.54 M block references) replayed through each index, the exact MRC of the
// same stream, and prefix_tree match / insert+evict rates. items/s = block references per second.
#include <benchmark/benchmark.h>

#include <kvtk/kvtk.hpp>

#include "formats/mooncake_flat.hpp"

namespace {

using namespace kvtk::prefix;
constexpr auto kPartial = partial_block::cache;  // every hash_id is a block (Mooncake's counting)

const prefix_trace& trace40() {
  static const prefix_trace t = [] {
    const prefix_trace base = kvtk::sim::load_mooncake_requests(
        KVTK_TRACES_DIR "/mooncake_fast25_conversation_trace.jsonl");
    prefix_trace out;
    out.block_tokens = base.block_tokens;
    std::vector<kvtk::block_key> keys;
    for (std::uint64_t rep = 0; rep < 40; ++rep) {
      for (std::size_t r = 0; r < base.requests(); ++r) {
        const auto b = base.blocks(r);
        keys.assign(b.begin(), b.end());
        for (auto& k : keys) k |= rep << 40;
        out.add(keys, base.input_length[r]);
      }
    }
    return out;
  }();
  return t;
}

const std::vector<std::uint64_t>& next40() {
  static const std::vector<std::uint64_t> n = next_use_positions(trace40(), kPartial);
  return n;
}

template <class Index>
void bm_replay(benchmark::State& state) {
  const prefix_trace& t = trace40();
  std::span<const std::uint64_t> next;
  if constexpr (Index::offline) next = next40();
  prefix_counts c;
  for (auto _ : state) {
    Index idx(static_cast<std::uint32_t>(state.range(0)));
    c = replay(t, idx, kPartial, next);
    benchmark::DoNotOptimize(c);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(c.block_refs));
  state.counters["block_hit_ratio"] = c.block_hit_ratio();
}

void bm_mrc(benchmark::State& state) {
  const prefix_trace& t = trace40();
  std::uint64_t refs = 0;
  for (auto _ : state) {
    const prefix_mrc m = exact_prefix_lru_mrc(t, kPartial);
    refs = m.block_refs;
    benchmark::DoNotOptimize(m.block_hits(10000));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(refs));
}

// match() of 16-block paths in a tree of 65,536 nodes (all hits).
void bm_tree_match(benchmark::State& state) {
  prefix_tree<leaf_lru> tree(1 << 16);
  std::vector<kvtk::block_key> path(16);
  auto none = [](kvtk::block_key, std::uint32_t, const no_payload&) {};
  for (std::uint64_t p = 0; p < (1 << 12); ++p) {
    for (std::uint64_t i = 0; i < 16; ++i) path[i] = (p << 8) | i;
    tree.unlock(tree.insert(prefix_tree<leaf_lru>::root, path, none).node);
  }
  std::uint64_t p = 0;
  for (auto _ : state) {
    for (std::uint64_t i = 0; i < 16; ++i) path[i] = (p << 8) | i;
    benchmark::DoNotOptimize(tree.match(path));
    p = (p + 1) & ((1 << 12) - 1);
  }
  state.SetItemsProcessed(state.iterations() * 16);
}

// insert() of fresh 16-block paths into a full tree: every block evicts a leaf.
void bm_tree_insert_evict(benchmark::State& state) {
  prefix_tree<leaf_lru> tree(1 << 16);
  std::vector<kvtk::block_key> path(16);
  auto none = [](kvtk::block_key, std::uint32_t, const no_payload&) {};
  std::uint64_t p = 0;
  for (auto _ : state) {
    for (std::uint64_t i = 0; i < 16; ++i) path[i] = (p << 8) | i;
    tree.unlock(tree.insert(prefix_tree<leaf_lru>::root, path, none).node);
    ++p;
  }
  state.SetItemsProcessed(state.iterations() * 16);
  state.counters["evictions"] = static_cast<double>(tree.evictions());
}

// A 3-tier hierarchy (1,000 / 5,000 / 20,000 blocks) over the same stream. Arg 0: exclusive
// lru/arc/s3fifo; 1: the same, inclusive write-back; 2: inclusive write-through; 3: exclusive,
// all lru (with a one-policy list: compile-time dispatch; with all policies: run-time).
template <class Policies>
void bm_tiers(benchmark::State& state) {
  const prefix_trace& t = trace40();
  kvtk::tier::hierarchy_config cfg;
  const bool lru_only = state.range(0) >= 3;
  const char* pols[3] = {"lru", lru_only ? "lru" : "arc", lru_only ? "lru" : "s3fifo"};
  const std::uint64_t caps[3] = {1000, 5000, 20000};
  for (int i = 0; i < 3; ++i) {
    kvtk::tier::tier_spec s;
    s.name = "t" + std::to_string(i);
    s.capacity_blocks = caps[i];
    s.policy = pols[i];
    cfg.tiers.push_back(s);
  }
  if (state.range(0) == 1 || state.range(0) == 2) cfg.mode = kvtk::tier::inclusion::inclusive;
  if (state.range(0) == 2) cfg.write.kind = kvtk::tier::write_policy::write_through;
  prefix_counts c;
  for (auto _ : state) {
    kvtk::tier::tier_index<Policies> idx(cfg);
    c = replay(t, idx, kPartial);
    benchmark::DoNotOptimize(c);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(c.block_refs));
  state.counters["block_hit_ratio"] = c.block_hit_ratio();
}

}  // namespace

BENCHMARK(bm_tiers<kvtk::all_policies>)
    ->Name("prefix_replay40/tiers3")
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Arg(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(bm_tiers<kvtk::type_list<kvtk::lru>>)
    ->Name("prefix_replay40/tiers3-lru-static")
    ->Arg(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(bm_replay<flat_index<kvtk::lru>>)
    ->Name("prefix_replay40/flat-lru")
    ->Arg(1000)
    ->Arg(10000)
    ->Arg(100000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(bm_replay<radix_index<leaf_lru>>)
    ->Name("prefix_replay40/radix-lru")
    ->Arg(1000)
    ->Arg(10000)
    ->Arg(100000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(bm_replay<radix_index<leaf_fifo>>)
    ->Name("prefix_replay40/radix-fifo")
    ->Arg(10000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(bm_replay<radix_index<leaf_lfu>>)
    ->Name("prefix_replay40/radix-lfu")
    ->Arg(10000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(bm_replay<radix_index<leaf_priority_lru>>)
    ->Name("prefix_replay40/radix-priority-lru")
    ->Arg(10000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(bm_replay<radix_index<leaf_slru>>)
    ->Name("prefix_replay40/radix-slru")
    ->Arg(10000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(bm_replay<radix_index<leaf_s3fifo>>)
    ->Name("prefix_replay40/radix-s3fifo")
    ->Arg(10000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(bm_replay<radix_index<leaf_reuse>>)
    ->Name("prefix_replay40/radix-reuse")
    ->Arg(10000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(bm_replay<radix_index<leaf_belady>>)
    ->Name("prefix_replay40/radix-belady")
    ->Arg(10000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(bm_replay<hash_chain_index>)
    ->Name("prefix_replay40/hashchain")
    ->Arg(10000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(bm_mrc)->Name("prefix_mrc40/exact-lru")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(bm_tree_match)->Name("prefix_tree/match");
BENCHMARK(bm_tree_insert_evict)->Name("prefix_tree/insert_evict");
BENCHMARK_MAIN();
