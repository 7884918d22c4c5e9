// Radix tier hierarchies (radix_tier_index<Leaf> over every lower-tier core policy) for the
// session-aware leaf orders leaf_session_ttl, leaf_session_reuse.
#include <kvtk/prefix/leaf_reuse.hpp>
#include <kvtk/prefix/leaf_session.hpp>
#include "api/index_runs_radix_tiers.ipp"

KVTK_INDEX_RUNS_RADIX_TIERS(kvtk::prefix::leaf_session_ttl);
KVTK_INDEX_RUNS_RADIX_TIERS(kvtk::prefix::leaf_session_reuse);
