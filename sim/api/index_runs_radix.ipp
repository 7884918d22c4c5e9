// The definitions behind index_runs.hpp's radix_with<Admit> templates, included by the units that
// instantiate them: index_runs_prefix.cpp (admit_all, admit_belady) and index_runs_admit_*.cpp
// (one online admission rule each, over every online leaf order), so that no unit compiles the
// whole radix grid.
#pragma once

#include <kvtk/prefix/leaf_registry.hpp>

#include "api/index_runs.hpp"
#include "api/next_uses.hpp"
#include "api/segments.hpp"

namespace kvtk::sim::index_runs {

namespace detail_radix {
// Calls f.template operator()<L>() for the leaf order that `policy` names before its '+', when
// radix_index<L, Admit> is a policy kvtk offers; else throws as visit_radix_policy.
template <class Admit, class result, class F>
result with_leaf(std::string_view policy, F&& f) {
  return kvtk::prefix::visit_leaf_policy(policy.substr(0, policy.find('+')),
                                         [&]<class L>() -> result {
                                           if constexpr (kvtk::prefix::valid_radix_policy<L, Admit>) {
                                             return f.template operator()<L>();
                                           } else {
                                             throw kvtk::unknown_name(
                                                 "radix policy", std::string(policy),
                                                 kvtk::name_list(kvtk::prefix::radix_policy_names()));
                                           }
                                         });
}
}  // namespace detail_radix

template <class Admit>
prefix_counts radix_with<Admit>::replay(std::string_view policy, std::uint32_t capacity_blocks,
                                        const loaded_trace& lt, partial_block p,
                                        const next_use_column* next, detail::progress_relay& bar) {
  return detail_radix::with_leaf<Admit, prefix_counts>(policy, [&]<class L>() {
    kvtk::prefix::radix_index<L, Admit> idx(capacity_blocks);
    return detail::replay_sliced(lt, idx, p, next, &bar);
  });
}

template <class Admit>
std::vector<prefix_counts> radix_with<Admit>::segments(std::string_view policy,
                                                       std::uint32_t capacity_blocks,
                                                       const kvtk::prefix::prefix_trace_view& t,
                                                       partial_block p,
                                                       std::span<const std::size_t> bounds) {
  return detail_radix::with_leaf<Admit, std::vector<prefix_counts>>(policy, [&]<class L>() {
    kvtk::prefix::radix_index<L, Admit> idx(capacity_blocks);
    return replay_segments(t, idx, p, {}, bounds);
  });
}

template <class Admit>
bool radix_with<Admit>::offline(std::string_view policy) {
  return detail_radix::with_leaf<Admit, bool>(
      policy, [&]<class L>() { return kvtk::prefix::radix_index<L, Admit>::offline; });
}

}  // namespace kvtk::sim::index_runs
