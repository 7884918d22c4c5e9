// Tier hierarchies with a flat top tier (tier_index over every core policy).
#include <kvtk/tier/tier_index.hpp>

#include "api/index_runs.hpp"
#include "api/next_uses.hpp"

namespace kvtk::sim::index_runs {

tier_run replay_flat_tiers(kvtk::tier::hierarchy_config cfg, const loaded_trace& lt,
                           partial_block p, detail::progress_relay& bar) {
  kvtk::tier::tier_index<> idx(std::move(cfg));
  tier_run r;
  r.counts = detail::replay_sliced(lt, idx, p, nullptr, &bar);
  r.state = state_of(idx, "flat");
  return r;
}

}  // namespace kvtk::sim::index_runs
