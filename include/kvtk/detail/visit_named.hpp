// kvtk/detail/visit_named.hpp — name -> type for a compile-time list of named types (policies,
// leaf orders, admission rules): the one implementation every type-list registry uses, so each
// registry is its list, its kind of name and nothing else.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <type_traits>

#include "kvtk/names.hpp"
#include "kvtk/policy/policy_list.hpp"

namespace kvtk::detail {

/// The ::name of every type of a type_list, in list order.
template <class... Ts>
constexpr auto names_of(type_list<Ts...>) {
  return std::array<std::string_view, sizeof...(Ts)>{Ts::name...};
}

template <class List>
struct front_of;
template <class T, class... Rest>
struct front_of<type_list<T, Rest...>> {
  using type = T;
};

/// Requires: every type of List has a static `name` convertible to std::string_view.
/// Effects: calls f.template operator()<T>() for the T of List named `name` and returns its
/// result (which must be default-constructible when not void).
/// Throws: Error(kind, name, every name) when no type has that name; whatever f throws.
/// Complexity: O(list length) name comparisons; f is compiled once per type (static dispatch).
template <class List, class Error = unknown_name, class F>
auto visit_named(std::string_view name, std::string_view kind, F&& f) {
  using result = decltype(f.template operator()<typename front_of<List>::type>());
  auto fail = [&] {
    throw Error(std::string(kind), std::string(name), name_list(names_of(List{})));
  };
  return [&]<class... Ts>(type_list<Ts...>) -> result {
    if constexpr (std::is_void_v<result>) {
      if (!((Ts::name == name ? (f.template operator()<Ts>(), true) : false) || ...)) fail();
    } else {
      result out{};
      if (!((Ts::name == name ? (out = f.template operator()<Ts>(), true) : false) || ...)) fail();
      return out;
    }
  }(List{});
}

}  // namespace kvtk::detail
