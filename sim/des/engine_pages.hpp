// sim/des/engine_pages.hpp — the trace as an engine's KV cache sees it: pages of the engine's own
// size (vLLM's block_size, SGLang's page_size) inside the trace's blocks, and prefix caching on or
// off (docs/simulate.md "Engine memory and pages").
//
// Design. Both are a rewrite of the prompts' keys, so every scheduler, accounting and tier runs
// unchanged on the rewritten trace:
//  * pages: a trace block of B tokens is B / P engine pages of P tokens; page j of a block keyed
//    k is keyed chain_hash(k, j ^ salt) (j = 0 too: a page never shares a key with a block). The
//    trace's prefix property carries over: two prompts share page j of block b exactly when they
//    share block b. A prompt of L tokens has ceil(L / P) pages (of the blocks it has keys for), so
//    its partial last block's full pages become cacheable, as in the engine. A hit is counted in
//    pages: a trace block is hit page by page (an engine evicts pages, not trace blocks).
//  * prefix caching off: every request's pages get keys of their own (request index and page
//    index), so nothing is ever found again; freed pages are free as in the engine.
// The rewritten keys are held in memory (8 bytes a page plus 8 a request): the trace's own pages
// are read once here, which a mapped kvtb trace otherwise streams.
#pragma once

#include <cstdint>
#include <vector>

#include "kvtk/prefix/replay.hpp"

namespace kvtk::sim::des {

struct cluster_config;

namespace detail {

/// The rewritten trace: `view` is the original's with keys and offsets of its own.
struct paged_trace {
  std::vector<kvtk::block_key> keys;
  std::vector<std::uint64_t> offsets;
  kvtk::prefix::prefix_trace_view view;
};

/// True when `c` asks for pages other than the trace's blocks, or for prefix caching off.
[[nodiscard]] bool rewrites_pages(const kvtk::prefix::prefix_trace_view& t, const cluster_config& c);

/// The trace in pages of `page_tokens` (0 = the trace's block size), with prefix caching on or
/// off. Throws std::invalid_argument when page_tokens does not divide the trace's block size, for
/// unit or mixed-block-size traces, and when the pages exceed the memory budget.
/// Complexity: O(pages).
[[nodiscard]] paged_trace rewrite_pages(const kvtk::prefix::prefix_trace_view& t,
                                        std::uint32_t page_tokens, bool prefix_caching);

/// `c` with its block-sized capacities (local_cache, dram, pool) in pages of the rewritten trace.
/// Throws std::invalid_argument for what is sized in trace blocks and not rewritten (offload,
/// sparse) when the page size differs.
[[nodiscard]] cluster_config paged_config(const kvtk::prefix::prefix_trace_view& t,
                                          const cluster_config& c);

}  // namespace detail
}  // namespace kvtk::sim::des
