// sim/des/engine_pages.cpp — engine pages and prefix caching off as a rewrite of the prompts'
// keys (des/engine_pages.hpp).
#include "des/engine_pages.hpp"

#include <stdexcept>
#include <string>

#include "des/simulator.hpp"
#include "kvtk/prefix/block_keys.hpp"
#include "util/memory_budget.hpp"

namespace kvtk::sim::des::detail {
namespace {

constexpr std::uint64_t page_salt = 0x7061676573ULL;      // "pages"
constexpr std::uint64_t private_salt = 0x6e6f2d7063ULL;   // "no-pc"

std::uint32_t page_of(const kvtk::prefix::prefix_trace_view& t, std::uint32_t page_tokens) {
  return page_tokens == 0 ? t.block_tokens : page_tokens;
}

}  // namespace

bool rewrites_pages(const kvtk::prefix::prefix_trace_view& t, const cluster_config& c) {
  return !c.prefix_caching || (c.page_tokens != 0 && c.page_tokens != t.block_tokens);
}

paged_trace rewrite_pages(const kvtk::prefix::prefix_trace_view& t, std::uint32_t page_tokens,
                          bool prefix_caching) {
  const std::uint32_t block = t.block_tokens, page = page_of(t, page_tokens);
  if (page == 0 || block % page != 0) {
    throw std::invalid_argument("page_tokens (" + std::to_string(page) +
                                ") must divide the trace's block size (" + std::to_string(block) +
                                " tokens): a trace block is a whole number of engine pages");
  }
  if (t.unit_requests() || !t.request_block_tokens.empty()) {
    throw std::invalid_argument("page_tokens and enable_prefix_caching need whole requests with "
                                "one block size");
  }
  const std::uint64_t per_block = block / page;
  std::uint64_t pages = 0;
  for (std::size_t r = 0; r < t.requests(); ++r) {
    const std::uint64_t covered = std::min<std::uint64_t>(
        t.input_tokens(r), static_cast<std::uint64_t>(t.blocks(r).size()) * block);
    pages += (covered + page - 1) / page;
  }
  check_memory("the trace in engine pages (" + std::to_string(pages) + " pages of " +
                   std::to_string(page) + " tokens)",
               static_cast<double>(pages) * 8.0 + static_cast<double>(t.requests()) * 8.0);
  paged_trace p;
  p.keys.reserve(pages);
  p.offsets.reserve(t.requests() + 1);
  p.offsets.push_back(0);
  const kvtk::prefix::chain_hash hash;
  for (std::size_t r = 0; r < t.requests(); ++r) {
    const auto keys = t.blocks(r);
    const std::uint64_t input = t.input_tokens(r);
    const kvtk::block_key own = hash(private_salt, r);
    std::uint64_t n = 0;
    for (std::size_t b = 0; b < keys.size(); ++b) {
      for (std::uint64_t j = 0; j < per_block; ++j, ++n) {
        if (b * block + j * page >= input) break;
        if (!prefix_caching) {
          p.keys.push_back(hash(own, n));
        } else {
          p.keys.push_back(per_block == 1 ? keys[b] : hash(keys[b], j ^ page_salt));
        }
      }
    }
    p.offsets.push_back(p.keys.size());
  }
  p.view = t;
  p.view.block_tokens = page;
  p.view.keys = p.keys;
  p.view.offsets = p.offsets;
  return p;
}

cluster_config paged_config(const kvtk::prefix::prefix_trace_view& t, const cluster_config& c) {
  cluster_config paged = c;
  paged.page_tokens = 0;
  paged.prefix_caching = true;
  const std::uint32_t page = page_of(t, c.page_tokens);
  if (page == t.block_tokens || page == 0 || t.block_tokens % page != 0) return paged;
  const std::uint64_t per_block = t.block_tokens / page;
  if (!c.offload.empty()) {
    throw std::invalid_argument("page_tokens (" + std::to_string(page) + ") with offload '" +
                                c.offload + "': not modelled yet (the offload tiers are sized "
                                "and keyed in trace blocks); leave page_tokens at the trace's "
                                "block size");
  }
  if (c.sparse.enabled) {
    throw std::invalid_argument("page_tokens with sparse: sparse attention has its own "
                                "page_tokens (sparse.page_tokens); leave the engine's at the "
                                "trace's block size");
  }
  auto scale = [&](std::uint64_t blocks) {
    if (blocks > ~std::uint64_t{0} / per_block) {
      throw std::invalid_argument("a capacity in pages exceeds 2^64");
    }
    return blocks * per_block;
  };
  paged.local_cache_blocks = scale(c.local_cache_blocks);
  paged.dram_blocks = scale(c.dram_blocks);
  paged.pool_blocks = scale(c.pool_blocks);
  return paged;
}

}  // namespace kvtk::sim::des::detail
