// sim/des/cluster_timing.cpp — compute and transfer times (see des/cluster.hpp).
#include "des/cluster.hpp"

namespace kvtk::sim::des::detail {

double cluster::compute_s(std::uint64_t cached_tokens, std::uint64_t total) const {
  return prefill_flops(c_.model, cached_tokens, total) / flops_per_s_ * c_.time_scale;
}

double cluster::load_s(const match_result& m) const {
  double s = 0;
  if (m.dram > 0) {
    // alpha + n*beta + bytes/B (a calibration fit; alpha = beta = 0 by default). Each of the
    // instance's GPUs moves its 1/TP share of every block over its own link.
    s += c_.host_link_latency_s + static_cast<double>(m.dram) * c_.host_link_per_block_s;
    if (c_.gpu.host_link_bytes_per_s > 0) {
      s += static_cast<double>(m.dram) * block_bytes_ /
           (c_.gpu.host_link_bytes_per_s * c_.gpus_per_instance);
    }
  }
  if (m.pool > 0) {
    s += c_.pool_latency_s;
    if (c_.pool_bytes_per_s > 0) s += static_cast<double>(m.pool) * block_bytes_ / c_.pool_bytes_per_s;
  }
  return s;
}

double cluster::prefill_s(const match_result& m, std::uint64_t L) const {
  const std::uint64_t cached = std::min<std::uint64_t>(m.hit * bt_, L);
  const double comp = compute_s(cached, L), load = load_s(m);
  return c_.overlap_load ? std::max(comp, load) : comp + load;
}

double cluster::link_s(std::uint64_t pages) const {
  if (pages == 0) return 0;
  double s = c_.host_link_latency_s + static_cast<double>(pages) * c_.host_link_per_block_s;
  if (c_.gpu.host_link_bytes_per_s > 0) {
    s += static_cast<double>(pages) * page_bytes_ /
         (c_.gpu.host_link_bytes_per_s * c_.gpus_per_instance);
  }
  return s;
}

}  // namespace kvtk::sim::des::detail
