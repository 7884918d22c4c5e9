// The flat index (flat_index<P>) for every core policy and the radix index (radix_index<Leaf,
// Admit>) for every radix policy (leaf order, or leaf order + admission rule): replay's and
// tune's runs.
#include <kvtk/prefix/leaf_registry.hpp>
#include <kvtk/registry.hpp>

#include "api/index_runs_radix.ipp"

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

namespace {
// Calls f.template operator()<A>() for the admission rule that `policy` names after its '+'
// (admit_all without one); the leaf order is checked by radix_with<A>.
template <class F>
auto with_rule(std::string_view policy, F&& f) {
  const std::size_t plus = policy.find('+');
  if (plus == std::string_view::npos) return f.template operator()<kvtk::prefix::admit_all>();
  const std::string_view rule = policy.substr(plus + 1);
  using result = decltype(f.template operator()<kvtk::prefix::admit_all>());
  return [&]<class... As>(kvtk::type_list<As...>) -> result {
    result out{};
    if (!((As::name == rule ? (out = f.template operator()<As>(), true) : false) || ...)) {
      throw kvtk::unknown_name("radix policy", std::string(policy),
                               kvtk::name_list(kvtk::prefix::radix_policy_names()));
    }
    return out;
  }(kvtk::prefix::all_admission_rules{});
}
}  // namespace

prefix_counts replay_radix(std::string_view policy, std::uint32_t capacity_blocks,
                           const loaded_trace& lt, partial_block p, const next_use_column* next,
                           detail::progress_relay& bar) {
  return with_rule(policy, [&]<class A>() {
    return radix_with<A>::replay(policy, capacity_blocks, lt, p, next, bar);
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
  return with_rule(policy, [&]<class A>() {
    return radix_with<A>::segments(policy, capacity_blocks, t, p, bounds);
  });
}

bool flat_offline(std::string_view policy) {
  return kvtk::visit_policy(policy, []<class P>() { return flat_index<P>::offline; });
}

bool radix_offline(std::string_view policy) {
  return with_rule(policy, [&]<class A>() { return radix_with<A>::offline(policy); });
}

template struct radix_with<kvtk::prefix::admit_all>;
template struct radix_with<kvtk::prefix::admit_belady>;

}  // namespace kvtk::sim::index_runs
