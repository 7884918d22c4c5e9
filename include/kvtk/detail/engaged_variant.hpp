// kvtk/detail/engaged_variant.hpp — the one "holder" of kvtk's run-time choices: a
// std::variant<std::monostate, Ts...> whose first alternative means "not built yet" (so the
// holder can be default-constructed and then emplaced with a type chosen by name), and a visit
// that calls f only with the engaged Ts. The tier hierarchy's tiers and the simulator's
// per-request sparse managers are such holders.
#pragma once

#include <type_traits>
#include <utility>
#include <variant>

namespace kvtk::detail {

/// Calls f(x) with the held alternative x (by reference, const if v is const).
/// Requires: v holds one of Ts (not the monostate); violating this is undefined behaviour.
/// Complexity: one std::visit.  Throws: what f throws.
template <class Variant, class F>
decltype(auto) visit_engaged(Variant& v, F&& f) {
  return std::visit(
      [&](auto& x) -> decltype(auto) {
        if constexpr (std::is_same_v<std::remove_const_t<std::remove_reference_t<decltype(x)>>,
                                     std::monostate>) {
          __builtin_unreachable();
          return f(std::get<1>(v));  // never runs: names the return type
        } else {
          return f(x);
        }
      },
      v);
}

}  // namespace kvtk::detail
