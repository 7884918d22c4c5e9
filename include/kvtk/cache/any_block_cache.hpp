// kvtk/cache/any_block_cache.hpp — kvtk::any_block_cache, header-only: the declaration
// (any_block_cache_decl.hpp, where the design and the operations are documented) and the
// definitions for every policy. To compile faster, include any_block_cache_decl.hpp alone and
// link kvtk::policies instead.
#pragma once

#include "kvtk/cache/any_block_cache_decl.hpp"
#include "kvtk/cache/any_block_cache_impl.hpp"
