// The radix index (radix_index<Leaf>) for every leaf order: replay's and tune's runs.
#include <kvtk/prefix/leaf_registry.hpp>

#include "api/index_runs.hpp"
#include "api/next_uses.hpp"
#include "api/segments.hpp"

namespace kvtk::sim::index_runs {

using kvtk::prefix::radix_index;

prefix_counts replay_radix(std::string_view policy, std::uint32_t capacity_blocks,
                           const loaded_trace& lt, partial_block p, const next_use_column* next,
                           detail::progress_relay& bar) {
  return kvtk::prefix::visit_leaf_policy(policy, [&]<class L>() {
    radix_index<L> idx(capacity_blocks);
    return detail::replay_sliced(lt, idx, p, next, &bar);
  });
}

std::vector<prefix_counts> replay_radix_segments(std::string_view policy,
                                                 std::uint32_t capacity_blocks,
                                                 const kvtk::prefix::prefix_trace_view& t,
                                                 partial_block p,
                                                 std::span<const std::size_t> bounds) {
  return kvtk::prefix::visit_leaf_policy(policy, [&]<class L>() {
    radix_index<L> idx(capacity_blocks);
    return replay_segments(t, idx, p, {}, bounds);
  });
}

bool radix_offline(std::string_view policy) {
  return kvtk::prefix::visit_leaf_policy(policy,
                                         []<class L>() { return radix_index<L>::offline; });
}

}  // namespace kvtk::sim::index_runs
