// kvtk/policy/policy_list.hpp — the one compile-time list of eviction policies.
//
// The registry (name -> policy type), the conformance and reference-model tests and the benchmarks
// all expand this list. Adding a policy = one header + one entry here.
#pragma once

#include <cstddef>
#include <tuple>

#include "kvtk/policy/arc.hpp"
#include "kvtk/policy/belady.hpp"
#include "kvtk/policy/clock.hpp"
#include "kvtk/policy/cost_aware.hpp"
#include "kvtk/policy/fifo.hpp"
#include "kvtk/policy/lfu.hpp"
#include "kvtk/policy/lru.hpp"
#include "kvtk/policy/priority_lru.hpp"
#include "kvtk/policy/s3fifo.hpp"
#include "kvtk/policy/sieve.hpp"
#include "kvtk/policy/two_q.hpp"
#include "kvtk/policy/w_tinylfu.hpp"

namespace kvtk {

/// Thread safety: compile-time lists only.
template <class... Ps>
struct type_list {
  static constexpr std::size_t size = sizeof...(Ps);
  /// Calls f.template operator()<P>() for every P, in order.
  template <class F>
  static constexpr void for_each(F&& f) {
    (f.template operator()<Ps>(), ...);
  }
  using tuple = std::tuple<Ps...>;
};

/// Every eviction policy, in registry order.
using all_policies =
    type_list<lru, fifo, clock, sieve, lfu, two_q, arc, s3fifo, w_tinylfu, priority_lru, belady,
              cost_aware>;

}  // namespace kvtk
