// kvtk/tier/tier.hpp — the tier layer: specs, admission filters, the flat-tier core, the
// hierarchy (flat or with a radix top tier) and its replay index.
#pragma once

#include "kvtk/tier/admission_filter.hpp"
#include "kvtk/tier/lower_tiers.hpp"
#include "kvtk/tier/radix_tier_hierarchy.hpp"
#include "kvtk/tier/tier_hierarchy.hpp"
#include "kvtk/tier/tier_index.hpp"
#include "kvtk/tier/tier_spec.hpp"
