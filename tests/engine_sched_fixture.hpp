// tests/engine_sched_fixture.hpp — what the engine-scheduler tests share: hand-made traces of
// 16-token blocks, a random shared-prefix trace, and an engine config whose timing table makes
// every prefill iteration 10 ms, every decode iteration 5 ms and a mixed one 15 ms.
#pragma once

#include <catch2/catch.hpp>
#include <kvtk/kvtk.hpp>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "des/simulator.hpp"
#include "des/timing.hpp"

namespace engine_sched_fixture {

using namespace kvtk;
using sim::des::cluster_config;

struct req {
  double at;
  std::vector<block_key> keys;  // full 16-token blocks; L = 16 x keys unless given
  std::uint64_t out;
  std::uint64_t L = 0;
};

inline prefix::prefix_trace make(const std::vector<req>& rs) {
  prefix::prefix_trace t;
  t.block_tokens = 16;
  for (const req& r : rs) {
    t.add(r.keys, r.L ? r.L : 16 * r.keys.size());
    t.arrival_s.push_back(r.at);
    t.output_length.push_back(r.out);
  }
  return t;
}

inline cluster_config engine(const std::string& scheduler, std::uint64_t kv_blocks,
                      std::uint64_t budget) {
  cluster_config c;
  c.sched.scheduler = scheduler;
  c.sched.max_num_batched_tokens = budget;
  c.local_cache_blocks = kv_blocks;
  // Constant rows: any prefill iteration 10 ms, any decode iteration 5 ms.
  std::string csv = "kind,batch,tokens_per_request,context_tokens,ms\n";
  for (int b : {1, 1024}) {  // any batch an engine runs here: no lookup beyond reach
    for (int tok : {1, 4096}) {
      for (int ctx : {0, 4096}) {
        csv += "prefill," + std::to_string(b) + "," + std::to_string(tok) + "," +
               std::to_string(ctx) + ",10\n";
      }
    }
    for (int ctx : {0, 4096}) csv += "decode," + std::to_string(b) + ",1," + std::to_string(ctx) + ",5\n";
  }
  c.timing = std::make_shared<const sim::des::timing_table>(
      sim::des::timing_table::parse(csv, "constant.csv"));
  return c;
}

inline void check(const sim::des::request_outcome& o, double first, double done) {
  CHECK(o.first_token == Approx(first).margin(1e-12));
  CHECK(o.done == Approx(done).margin(1e-12));
}


// Requests sharing prefixes (a few conversations growing turn by turn, and one-off prompts), of
// at most 18 blocks, one second apart, 16-token blocks, some with a partial last block.
inline prefix::prefix_trace shared_prefix_trace(std::uint64_t seed, std::size_t n) {
  std::mt19937_64 rng(seed);
  prefix::prefix_trace t;
  t.block_tokens = 16;
  std::vector<std::vector<block_key>> conversations(4);
  block_key next = 1;
  for (std::size_t r = 0; r < n; ++r) {
    std::vector<block_key> raw;
    if (rng() % 3 != 0) {
      auto& c = conversations[rng() % conversations.size()];
      if (c.size() > 12) c.clear();  // a new conversation: requests stay within 18 blocks
      for (std::uint64_t k = 1 + rng() % 6; k > 0; --k) c.push_back(next++);
      raw = c;
    } else {
      for (std::uint64_t k = 1 + rng() % 8; k > 0; --k) raw.push_back(next++);
    }
    std::vector<block_key> keys(raw.size());
    prefix::chain_keys(std::span<const block_key>(raw), std::span<block_key>(keys));
    t.add(keys, 16 * keys.size() - (rng() % 2 ? 5 : 0));
    t.arrival_s.push_back(static_cast<double>(r));
    t.output_length.push_back(1 + rng() % 4);
  }
  return t;
}


}  // namespace engine_sched_fixture
