// kvtk/prefix/leaf_registry.hpp — leaf-order name -> type, from one compile-time list.
/// Thread safety: compile-time data; visit_leaf_policy is safe on any thread.
#pragma once

#include <array>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "kvtk/names.hpp"
#include "kvtk/policy/policy_list.hpp"
#include "kvtk/prefix/leaf_policies.hpp"
#include "kvtk/prefix/leaf_reuse.hpp"

namespace kvtk::prefix {

/// Every leaf order of prefix_tree, in registry order.
using all_leaf_policies = type_list<leaf_lru, leaf_fifo, leaf_lfu, leaf_priority_lru, leaf_slru,
                                    leaf_s3fifo, leaf_reuse, leaf_belady>;

namespace detail_registry {
template <class... Ls>
constexpr auto names_of(type_list<Ls...>) {
  return std::array<std::string_view, sizeof...(Ls)>{Ls::name...};
}
}  // namespace detail_registry

/// Leaf-order names: lru fifo lfu priority-lru slru s3fifo reuse belady.
inline constexpr auto leaf_policy_names = detail_registry::names_of(all_leaf_policies{});

/// Calls f.template operator()<L>() for the leaf order named `name`.
/// Throws: unknown_name (kind "radix leaf policy") naming the bad name and listing the valid ones.
template <class F>
auto visit_leaf_policy(std::string_view name, F&& f) {
  using result = decltype(f.template operator()<leaf_lru>());
  return [&]<class... Ls>(type_list<Ls...>) -> result {
    auto fail = [&] {
      throw unknown_name("radix leaf policy", std::string(name), name_list(leaf_policy_names));
    };
    if constexpr (std::is_void_v<result>) {
      if (!((Ls::name == name ? (f.template operator()<Ls>(), true) : false) || ...)) fail();
    } else {
      result out{};
      if (!((Ls::name == name ? (out = f.template operator()<Ls>(), true) : false) || ...)) fail();
      return out;
    }
  }(all_leaf_policies{});
}

}  // namespace kvtk::prefix
