// sim/des/router.hpp — the routers of kvtk simulate: one name table for every scheduler (the
// `router` config key), parsed once per simulation into router_kind, and the choices every
// scheduler shares (random, round-robin, least-loaded). kvtk's scheduler adds the cache-aware
// and conductor routers, which read its caches (cluster_route.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>

#include "kvtk/names.hpp"

namespace kvtk::sim::des::detail {

enum class router_kind : std::uint8_t { random, round_robin, least_loaded, cache_aware, conductor };
inline constexpr kvtk::name_table<router_kind, 5> router_names{
    "router", {"random", "round-robin", "least-loaded", "cache-aware", "conductor"}};

/// The router named `name`.  Throws: kvtk::unknown_name (kind "router") listing the routers.
inline router_kind parse_router(std::string_view name) { return router_names.parse(name); }

/// The routers that need nothing but the instances' loads. One per simulation: its random
/// stream (seeded by the config's seed) and round-robin position persist across requests.
class basic_router {
 public:
  explicit basic_router(std::uint64_t seed) : rng_(seed) {}
  /// Requires: kind is random, round_robin or least_loaded; n >= 1.
  /// Effects: the instance in [0, n) for the next request; least-loaded takes the first of the
  /// smallest load(i).  Complexity: O(n) for least-loaded, O(1) otherwise.
  template <class Load>
  std::uint32_t pick(router_kind kind, std::uint32_t n, Load&& load) {
    if (kind == router_kind::random) return static_cast<std::uint32_t>(rng_() % n);
    if (kind == router_kind::round_robin) return static_cast<std::uint32_t>(rr_++ % n);
    std::uint32_t best = 0;
    for (std::uint32_t i = 1; i < n; ++i) {
      if (load(i) < load(best)) best = i;
    }
    return best;
  }
  /// Requires: cost non-empty, weights at least as long (scratch: no allocation of its own).
  /// Effects: the index of the least cost (the first of equals); with temperature > 0 a draw
  /// with weights exp(-(cost - least) / temperature) instead (the cache-aware router's softmax).
  std::uint32_t least_cost(std::span<const double> cost, double temperature,
                           std::span<double> weights) {
    const auto least = std::min_element(cost.begin(), cost.end());
    if (temperature <= 0) return static_cast<std::uint32_t>(least - cost.begin());
    for (std::size_t i = 0; i < cost.size(); ++i) {
      weights[i] = std::exp(-(cost[i] - *least) / temperature);
    }
    std::discrete_distribution<std::uint32_t> pick(weights.begin(), weights.begin() + cost.size());
    return pick(rng_);
  }

 private:
  std::mt19937_64 rng_;
  std::uint64_t rr_ = 0;
};

}  // namespace kvtk::sim::des::detail
