// Tier hierarchies with an engine's GPU cache on top (engine_tier_index over every core policy):
// vLLM's block pool or SGLang's radix cache (--tier-top vllm|sglang).
#include <kvtk/tier/engine_tier_hierarchy.hpp>

#include "api/index_runs.hpp"
#include "api/next_uses.hpp"

namespace kvtk::sim::index_runs {
namespace {

template <class Cache>
tier_run replay_with(kvtk::tier::hierarchy_config cfg, const loaded_trace& lt, partial_block p,
                     detail::progress_relay& bar, nlohmann::json& engine) {
  kvtk::tier::hierarchy_index<kvtk::tier::engine_tier_hierarchy<Cache>> idx(std::move(cfg));
  tier_run r;
  r.counts = detail::replay_sliced(lt, idx, p, nullptr, &bar);
  r.state = state_of(idx, kvtk::tier::engine_tier_hierarchy<Cache>::engine_name);
  engine = {{"version", Cache::engine_version},
            {"unscheduled_requests", idx.hierarchy().unscheduled()}};
  return r;
}

}  // namespace

tier_run replay_engine_tiers(const std::string& engine, kvtk::tier::hierarchy_config cfg,
                             const loaded_trace& lt, partial_block p, detail::progress_relay& bar,
                             nlohmann::json& engine_state) {
  if (engine == "vllm") {
    return replay_with<kvtk::prefix::vllm_block_pool>(std::move(cfg), lt, p, bar, engine_state);
  }
  return replay_with<kvtk::prefix::sglang_radix_cache>(std::move(cfg), lt, p, bar, engine_state);
}

void check_engine_tiers(const std::string& engine, const kvtk::tier::hierarchy_config& cfg) {
  if (engine == "vllm") {
    const kvtk::tier::engine_tier_hierarchy<kvtk::prefix::vllm_block_pool> probe(cfg);
  } else {
    const kvtk::tier::engine_tier_hierarchy<kvtk::prefix::sglang_radix_cache> probe(cfg);
  }
}

}  // namespace kvtk::sim::index_runs
