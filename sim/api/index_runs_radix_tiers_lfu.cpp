// Radix tier hierarchies (radix_tier_index<Leaf> over every lower-tier core policy) for the
// leaf orders leaf_lfu, leaf_slru.
#include "api/index_runs_radix_tiers.ipp"

KVTK_INDEX_RUNS_RADIX_TIERS(kvtk::prefix::leaf_lfu);
KVTK_INDEX_RUNS_RADIX_TIERS(kvtk::prefix::leaf_slru);
