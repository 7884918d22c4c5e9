// The flat index (flat_index<P>) for every core policy and the radix index (radix_index<Leaf,
// Admit>) for every radix policy (leaf order, or leaf order + admission rule): replay's and
// tune's runs.
#include <kvtk/prefix/leaf_registry.hpp>
#include <kvtk/registry.hpp>

#include "api/index_runs.hpp"
#include "api/next_uses.hpp"
#include "api/segments.hpp"

namespace kvtk::sim::index_runs {
namespace {

using kvtk::prefix::flat_index;
using kvtk::prefix::radix_index;

template <class Index>
prefix_counts sliced(std::uint32_t capacity_blocks, const loaded_trace& lt, partial_block p,
                     const next_use_column* next, detail::progress_relay& bar) {
  Index idx(capacity_blocks);
  return detail::replay_sliced(lt, idx, p, next, &bar);
}

template <class Index>
std::vector<prefix_counts> segments(std::uint32_t capacity_blocks,
                                    const kvtk::prefix::prefix_trace_view& t, partial_block p,
                                    std::span<const std::size_t> bounds) {
  Index idx(capacity_blocks);
  return replay_segments(t, idx, p, {}, bounds);
}

}  // namespace

prefix_counts replay_flat(std::string_view policy, std::uint32_t capacity_blocks,
                          const loaded_trace& lt, partial_block p, const next_use_column* next,
                          detail::progress_relay& bar) {
  return kvtk::visit_policy(policy, [&]<class P>() {
    return sliced<flat_index<P>>(capacity_blocks, lt, p, next, bar);
  });
}

prefix_counts replay_radix(std::string_view policy, std::uint32_t capacity_blocks,
                           const loaded_trace& lt, partial_block p, const next_use_column* next,
                           detail::progress_relay& bar) {
  return kvtk::prefix::visit_radix_policy(policy, [&]<class L, class A>() {
    return sliced<radix_index<L, A>>(capacity_blocks, lt, p, next, bar);
  });
}

std::vector<prefix_counts> replay_flat_segments(std::string_view policy,
                                                std::uint32_t capacity_blocks,
                                                const kvtk::prefix::prefix_trace_view& t,
                                                partial_block p,
                                                std::span<const std::size_t> bounds) {
  return kvtk::visit_policy(policy, [&]<class P>() {
    return segments<flat_index<P>>(capacity_blocks, t, p, bounds);
  });
}

std::vector<prefix_counts> replay_radix_segments(std::string_view policy,
                                                 std::uint32_t capacity_blocks,
                                                 const kvtk::prefix::prefix_trace_view& t,
                                                 partial_block p,
                                                 std::span<const std::size_t> bounds) {
  return kvtk::prefix::visit_radix_policy(policy, [&]<class L, class A>() {
    return segments<radix_index<L, A>>(capacity_blocks, t, p, bounds);
  });
}

bool flat_offline(std::string_view policy) {
  return kvtk::visit_policy(policy, []<class P>() { return flat_index<P>::offline; });
}

bool radix_offline(std::string_view policy) {
  return kvtk::prefix::visit_radix_policy(
      policy, []<class L, class A>() { return radix_index<L, A>::offline; });
}

}  // namespace kvtk::sim::index_runs
