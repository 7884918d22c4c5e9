// Radix tier hierarchies (radix_tier_index<Leaf> over every lower-tier core policy) for the
// leaf orders leaf_lru, leaf_fifo and leaf_priority_lru, and the configuration check of the
// offline leaf_belady (which a radix top tier refuses, after the check).
#include "api/index_runs_radix_tiers.ipp"

KVTK_INDEX_RUNS_RADIX_TIERS(kvtk::prefix::leaf_lru);
KVTK_INDEX_RUNS_RADIX_TIERS(kvtk::prefix::leaf_fifo);
KVTK_INDEX_RUNS_RADIX_TIERS(kvtk::prefix::leaf_priority_lru);
template void kvtk::sim::index_runs::check_radix_tiers<kvtk::prefix::leaf_belady>(
    const kvtk::tier::hierarchy_config&);
