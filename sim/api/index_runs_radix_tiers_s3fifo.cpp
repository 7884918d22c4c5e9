// Radix tier hierarchies (radix_tier_index<Leaf> over every lower-tier core policy) for the
// leaf orders leaf_s3fifo, leaf_reuse.
#include <kvtk/prefix/leaf_reuse.hpp>
#include "api/index_runs_radix_tiers.ipp"

KVTK_INDEX_RUNS_RADIX_TIERS(kvtk::prefix::leaf_s3fifo);
KVTK_INDEX_RUNS_RADIX_TIERS(kvtk::prefix::leaf_reuse);
