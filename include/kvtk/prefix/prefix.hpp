// kvtk/prefix/prefix.hpp — the prefix layer: chained keys, radix tree, hash-chain pool, replay,
// miss-ratio curves.
#pragma once

#include "kvtk/prefix/admission.hpp"
#include "kvtk/prefix/block_keys.hpp"
#include "kvtk/prefix/engine_index.hpp"
#include "kvtk/prefix/hash_chain_pool.hpp"
#include "kvtk/prefix/leaf_policies.hpp"
#include "kvtk/prefix/mrc.hpp"
#include "kvtk/prefix/prefix_tree.hpp"
#include "kvtk/prefix/optimum.hpp"
#include "kvtk/prefix/replay.hpp"
#include "kvtk/prefix/leaf_registry.hpp"
