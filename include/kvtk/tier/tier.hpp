// kvtk/tier/tier.hpp — the tier layer: specs, admission filters, the hierarchy and its replay
// index.
#pragma once

#include "kvtk/tier/admission_filter.hpp"
#include "kvtk/tier/tier_hierarchy.hpp"
#include "kvtk/tier/tier_index.hpp"
#include "kvtk/tier/tier_spec.hpp"
