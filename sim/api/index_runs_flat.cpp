// The flat index (flat_index<P>) for every core policy: replay's and tune's runs.
#include <kvtk/registry.hpp>

#include "api/index_runs.hpp"
#include "api/next_uses.hpp"
#include "api/segments.hpp"

namespace kvtk::sim::index_runs {

using kvtk::prefix::flat_index;

prefix_counts replay_flat(std::string_view policy, std::uint32_t capacity_blocks,
                          const loaded_trace& lt, partial_block p, const next_use_column* next,
                          detail::progress_relay& bar) {
  return kvtk::visit_policy(policy, [&]<class P>() {
    flat_index<P> idx(capacity_blocks);
    return detail::replay_sliced(lt, idx, p, next, &bar);
  });
}

std::vector<prefix_counts> replay_flat_segments(std::string_view policy,
                                                std::uint32_t capacity_blocks,
                                                const kvtk::prefix::prefix_trace_view& t,
                                                partial_block p,
                                                std::span<const std::size_t> bounds) {
  return kvtk::visit_policy(policy, [&]<class P>() {
    flat_index<P> idx(capacity_blocks);
    return replay_segments(t, idx, p, {}, bounds);
  });
}

bool flat_offline(std::string_view policy) {
  return kvtk::visit_policy(policy, []<class P>() { return flat_index<P>::offline; });
}

}  // namespace kvtk::sim::index_runs
