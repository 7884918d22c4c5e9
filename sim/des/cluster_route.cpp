// sim/des/cluster_route.cpp — kvtk's scheduler's routing: the shared routers (des/router.hpp)
// and the two that read its caches, cache-aware and conductor (see des/cluster.hpp).
#include "des/cluster.hpp"

namespace kvtk::sim::des::detail {

double cluster::predicted_ttft(std::uint32_t i, std::uint32_t r) {
  instance& in = prefill_[i];
  const auto m = match(in, t_.cacheable(r, p_));
  return std::max(0.0, in.busy_until - now_) + in.queued_prefill_s +
         prefill_s(m, t_.input_tokens(r));
}

std::uint32_t cluster::route(std::uint32_t r) {
  const std::size_t n = prefill_.size();
  if (router_ != router_kind::cache_aware && router_ != router_kind::conductor) {
    return routes_.pick(router_, static_cast<std::uint32_t>(n),
                        [&](std::uint32_t i) { return prefill_[i].queued_tokens; });
  }
  const auto b = t_.cacheable(r, p_);
  std::vector<double>& cost = route_cost_;  // sized once: no allocation per request
  for (std::size_t i = 0; i < n; ++i) {
    instance& in = prefill_[i];
    if (router_ == router_kind::cache_aware) {
      std::uint64_t overlap = 0;
      while (overlap < b.size() && local_has(in, b[overlap])) ++overlap;
      const double prefill_blocks = static_cast<double>(b.size() - overlap) +
                                    static_cast<double>(in.queued_tokens) / bt_;
      cost[i] = c_.router_prefill_weight * prefill_blocks + static_cast<double>(in.batch.size());
    } else {  // conductor: predicted TTFT
      cost[i] = predicted_ttft(static_cast<std::uint32_t>(i), r);
    }
  }
  return routes_.least_cost(cost, router_ == router_kind::cache_aware ? c_.router_temperature : 0,
                            route_weight_);
}

}  // namespace kvtk::sim::des::detail
