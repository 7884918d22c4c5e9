// sim/des/cluster_timing.cpp — compute and transfer times (see des/cluster.hpp).
#include "des/cluster.hpp"

namespace kvtk::sim::des::detail {

double cluster::compute_s(std::uint64_t cached_tokens, std::uint64_t total) const {
  return timing_.chunked_prefill_s(cached_tokens, total, c_.chunk_tokens);
}

double cluster::load_s(const match_result& m) const {
  double s = 0;
  if (m.dram > 0) s += host_link_.predict(static_cast<double>(m.dram), static_cast<double>(m.dram) * block_bytes_);
  if (m.pool > 0) s += pool_link_.predict(static_cast<double>(m.pool), static_cast<double>(m.pool) * block_bytes_);
  return s;
}

double cluster::prefill_s(const match_result& m, std::uint64_t L) const {
  const std::uint64_t cached = kvtk::prefix::tokens_in_blocks(L, bt_, m.hit);
  const double comp = compute_s(cached, L), load = load_s(m);
  return c_.overlap_load ? std::max(comp, load) : comp + load;
}

}  // namespace kvtk::sim::des::detail
