// kvtk/kvtk.hpp — umbrella header: every header-only component of kvtk.
#pragma once

#include "kvtk/cache/block_cache.hpp"
#include "kvtk/concepts.hpp"
#include "kvtk/names.hpp"
#include "kvtk/offline.hpp"
#include "kvtk/policy/policy_list.hpp"
#include "kvtk/registry.hpp"
#include "kvtk/prefix/prefix.hpp"
#include "kvtk/sparse/pattern_gen.hpp"
#include "kvtk/sparse/residency.hpp"
#include "kvtk/tier/tier.hpp"
