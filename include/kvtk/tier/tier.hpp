// kvtk/tier/tier.hpp — the tier layer: specs, admission filters, the flat-tier core, the
// hierarchy (flat, with a radix top tier, or with an engine's GPU cache on top) and its replay
// index. vLLM's own CPU offloading under its block pool is kvtk/tier/vllm_offload.hpp, included
// on its own.
#pragma once

#include "kvtk/tier/admission_filter.hpp"
#include "kvtk/tier/engine_tier_hierarchy.hpp"
#include "kvtk/tier/lower_tiers.hpp"
#include "kvtk/tier/radix_tier_hierarchy.hpp"
#include "kvtk/tier/tier_hierarchy.hpp"
#include "kvtk/tier/tier_index.hpp"
#include "kvtk/tier/tier_spec.hpp"
