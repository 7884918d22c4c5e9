// After construction, no block_cache operation allocates: every policy, every operation kind,
// including evictions, ghost traffic, sketch aging and Belady heap compaction; nor do the
// simulator's per-iteration timing lookups (formula and table). Global operator
// new is replaced in this executable (and only here) to count allocations inside a window.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <kvtk/kvtk.hpp>
#include <new>
#include <random>

#include "des/timing.hpp"

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

TEMPLATE_LIST_TEST_CASE("no allocation after construction", "[alloc]", kvtk::all_policies::tuple) {
  // Inputs prepared outside the counting window.
  std::mt19937_64 rng(7);
  std::vector<kvtk::block_key> keys(200'000);
  for (auto& k : keys) k = rng() % 3 == 0 ? rng() % 64 : rng() % 4096;
  const std::vector<std::uint64_t> next = kvtk::next_use_positions(keys);
  typename kvtk::block_cache<TestType>::config cfg{};
  cfg.capacity = 256;
  kvtk::promise_next_use<TestType>(cfg.policy);
  kvtk::block_cache<TestType> cache(cfg);

  counting = true;
  kvtk::access_hint h;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    h.next_use = next[i];
    h.priority = static_cast<std::uint32_t>(i % 7) * 15;
    cache.access(keys[i], h);
    if (i % 13 == 0) cache.pin(keys[i]);
    if (i % 13 == 5) cache.unpin(keys[i - 5]);
    if (i % 17 == 0) cache.erase(keys[i / 2]);
    if (i % 19 == 0) cache.insert(keys[i] + 1, h);
  }
  counting = false;
  REQUIRE(allocations.load() == 0);
  REQUIRE(cache.stats().evictions > 10'000);
}

namespace {
template <class Index>
void replay_without_allocating(std::uint32_t capacity) {
  // A prefix-consistent trace: sessions that grow, chained from content ids.
  std::mt19937_64 rng(11);
  kvtk::prefix::prefix_trace t;
  std::vector<std::vector<std::uint64_t>> sessions(20);
  std::vector<kvtk::block_key> keys;
  for (int r = 0; r < 20000; ++r) {
    auto& s = sessions[rng() % sessions.size()];
    if (s.empty() || rng() % 9 == 0) s.assign(1, rng() % 4);
    for (unsigned i = rng() % 4; i > 0; --i) s.push_back(rng() % 100);
    keys.resize(s.size());
    kvtk::prefix::chain_keys(s, keys);
    t.add(keys, keys.size() * 16);
  }
  t.block_tokens = 16;
  const auto p = kvtk::prefix::partial_block::cache;
  const auto next = kvtk::prefix::next_use_positions(t, p);
  Index idx(capacity);
  // Warm-up: per-request buffers grow to the longest request once.
  const std::size_t longest = 4000;
  std::vector<kvtk::block_key> warm(longest);
  for (std::size_t i = 0; i < longest; ++i) warm[i] = 1'000'000 + i;
  std::vector<std::uint64_t> warm_next(longest, kvtk::access_hint::never);
  idx.process(warm, warm_next, {});
  counting = true;
  const auto c = kvtk::prefix::replay(t, idx, p, next);
  counting = false;
  REQUIRE(allocations.load() == 0);
  REQUIRE(c.evictions > 1000);
}
}  // namespace

namespace {
// A 3-tier hierarchy as an index constructible from one capacity (the top tier's).
template <bool Inclusive, kvtk::tier::write_policy::kind_t Write>
struct three_tiers : kvtk::tier::tier_index<> {
  explicit three_tiers(std::uint32_t c) : kvtk::tier::tier_index<>(config(c)) {}
  static kvtk::tier::hierarchy_config config(std::uint32_t c) {
    kvtk::tier::hierarchy_config cfg;
    cfg.mode = Inclusive ? kvtk::tier::inclusion::inclusive : kvtk::tier::inclusion::exclusive;
    cfg.write.kind = Write;
    const char* policies[3] = {"lru", "arc", "cost-aware"};
    for (int i = 0; i < 3; ++i) {
      kvtk::tier::tier_spec s;
      s.capacity_blocks = c << i;
      s.policy = policies[i];
      if (i == 2) s.admit.kind = kvtk::tier::admission::decaying;
      cfg.tiers.push_back(s);
    }
    return cfg;
  }
};
}  // namespace

TEST_CASE("tier hierarchies do not allocate in steady state", "[alloc]") {
  using kvtk::tier::write_policy;
  replay_without_allocating<three_tiers<false, write_policy::write_back>>(100);
  replay_without_allocating<three_tiers<true, write_policy::write_back>>(100);
  replay_without_allocating<three_tiers<true, write_policy::write_through>>(100);
  replay_without_allocating<three_tiers<true, write_policy::write_through_selective>>(100);
}

TEST_CASE("prefix indexes do not allocate in steady state", "[alloc]") {
  using namespace kvtk::prefix;
  replay_without_allocating<radix_index<leaf_lru>>(300);
  replay_without_allocating<radix_index<leaf_lfu>>(300);
  replay_without_allocating<radix_index<leaf_slru>>(300);
  replay_without_allocating<radix_index<leaf_s3fifo>>(300);
  replay_without_allocating<radix_index<leaf_reuse>>(300);
  replay_without_allocating<radix_index<leaf_belady>>(300);
  replay_without_allocating<radix_index<leaf_lru, admit_ghost>>(300);
  replay_without_allocating<radix_index<leaf_lru, admit_adaptive>>(300);
  replay_without_allocating<radix_index<leaf_slru, admit_tinylfu>>(300);
  replay_without_allocating<radix_index<leaf_s3fifo, admit_depth>>(300);
  replay_without_allocating<radix_index<leaf_belady, admit_belady>>(300);
  replay_without_allocating<hash_chain_index>(300);
  replay_without_allocating<flat_index<kvtk::lru>>(300);
}

TEMPLATE_LIST_TEST_CASE("sparse residency managers do not allocate per step", "[alloc][sparse]",
                        kvtk::sparse::all_scorers::tuple) {
  using namespace kvtk::sparse;
  // A growing DSA-like pattern with drift, prepared outside the counting window.
  pattern_config pc = pattern_config::dsa(512, 7);
  pc.grow = true;
  pc.drift = 0.2;
  const pattern_trace pattern = generate_pattern(pc, 600);
  residency_config rc;
  rc.max_blocks = pattern.max_context() + 1;
  rc.budget = hbm_budget::in_blocks(64);
  rc.prefetch = prefetch_mode::next_step;
  offload_recall_manager<TestType> offload(rc);
  lossy_manager<TestType> lossy(rc);
  for (std::uint32_t i = 0; i < pc.context_blocks; ++i) {
    offload.append_block();
    lossy.append_block();
  }
  allocations = 0;
  counting = true;
  for (std::size_t s = 0; s < pattern.steps(); ++s) {
    const auto sel = pattern.step(s);
    while (offload.context_blocks() < sel.context_blocks) {
      offload.append_block();
      lossy.append_block();
    }
    if (s + 1 < pattern.steps()) offload.prefetch(pattern.step(s + 1).blocks);
    offload.step(sel.blocks, sel.weights);
    lossy.step(sel.blocks, sel.weights);
  }
  counting = false;
  CHECK(allocations == 0);
  CHECK(offload.counters().steps == pattern.steps());
}

TEST_CASE("iteration timing does not allocate per iteration", "[alloc][simulate]") {
  // The simulator asks for every prefill, chunk and decode step's time: formula and table.
  using namespace kvtk::sim::des;
  const auto table = std::make_shared<const timing_table>(timing_table::parse(
      "kind,batch,tokens_per_request,context_tokens,ms\n"
      "prefill,1,512,0,10\nprefill,1,512,4096,20\nprefill,1,2048,0,40\nprefill,1,2048,4096,60\n"
      "decode,1,1,0,5\ndecode,1,1,8192,7\ndecode,64,1,0,9\ndecode,64,1,8192,30\n",
      "t.csv"));
  const model_profile m = model_presets().at("qwen2.5-7b");
  const gpu_profile g = gpu_presets().at("h100");
  const iteration_timing formula(m, g, 2, 1.0, 0.001, nullptr), measured(m, g, 2, 1.0, 0, table);
  const prefill_part parts[3] = {{100, 0}, {300, 1000}, {0, 50}};
  double sum = 0;
  counting = true;
  for (std::uint64_t i = 1; i < 5000; ++i) {
    for (const iteration_timing* t : {&formula, &measured}) {
      const decode_batch d{i % 70, static_cast<double>(i % 70) * 1000, static_cast<double>(i) * 1e6};
      sum += t->seconds(parts, d);
      sum += t->chunked_prefill_s(i % 300, 3000 + i, 512);
      sum += t->decode_s({1 + i % 64, static_cast<double>(1 + i % 64) * 100, 0});
    }
  }
  counting = false;
  CHECK(allocations == 0);
  CHECK(sum > 0);
}
