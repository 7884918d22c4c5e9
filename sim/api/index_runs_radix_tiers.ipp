// The definitions behind index_runs.hpp's radix-tier templates, included by the units that
// instantiate them (index_runs_radix_tiers_*.cpp: a few leaf orders each).
#pragma once

#include <kvtk/tier/radix_tier_hierarchy.hpp>

#include "api/index_runs.hpp"
#include "api/next_uses.hpp"

namespace kvtk::sim::index_runs {

template <class Leaf>
tier_run replay_radix_tiers(kvtk::tier::hierarchy_config cfg, const loaded_trace& lt,
                            partial_block p, detail::progress_relay& bar) {
  kvtk::tier::radix_tier_index<Leaf> idx(std::move(cfg));
  tier_run r;
  r.counts = detail::replay_sliced(lt, idx, p, nullptr, &bar);
  r.state = state_of(idx, "radix");
  return r;
}

template <class Leaf>
void check_radix_tiers(const kvtk::tier::hierarchy_config& cfg) {
  const kvtk::tier::radix_tier_hierarchy<Leaf> probe(cfg);
}

}  // namespace kvtk::sim::index_runs

// KVTK_INDEX_RUNS_RADIX_TIERS(Leaf): the explicit instantiations for one leaf order.
#define KVTK_INDEX_RUNS_RADIX_TIERS(Leaf)                                                     \
  template kvtk::sim::index_runs::tier_run kvtk::sim::index_runs::replay_radix_tiers<Leaf>(   \
      kvtk::tier::hierarchy_config, const kvtk::sim::loaded_trace&,                           \
      kvtk::prefix::partial_block, kvtk::sim::detail::progress_relay&);                       \
  template void kvtk::sim::index_runs::check_radix_tiers<Leaf>(const kvtk::tier::hierarchy_config&)
