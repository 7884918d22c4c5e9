// kvtk/registry.hpp — policy name -> policy type, generated from all_policies.
//
// visit_policy(name, f) calls f.template operator()<P>() for the policy P named `name`, so the code
// inside f is compiled once per policy with static dispatch (no virtual call on any hot path).
#pragma once

#include <array>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "kvtk/detail/visit_named.hpp"
#include "kvtk/names.hpp"
#include "kvtk/policy/policy_list.hpp"

namespace kvtk {

/// Thrown for a policy name that is not in the registry; what() lists the valid names (an
/// unknown_name of kind "policy").
class unknown_policy : public unknown_name {
 public:
  using unknown_name::unknown_name;
};

/// Registry names in list order: lru fifo clock sieve lfu 2q arc s3fifo wtinylfu priority-lru
/// belady cost-aware.
/// Thread safety: compile-time data; every function of the registry is safe on any thread.
inline constexpr auto policy_names = detail::names_of(all_policies{});

/// Whether `name` names a registered policy.
constexpr bool is_policy_name(std::string_view name) noexcept {
  for (std::string_view n : policy_names) {
    if (n == name) return true;
  }
  return false;
}

[[noreturn]] inline void throw_unknown_policy(std::string_view name) {
  throw unknown_policy("policy", std::string(name), name_list(policy_names));
}

/// Requires: nothing.  Effects: calls f.template operator()<P>() for the policy named `name` and
/// returns its result (which must be default-constructible when not void).
/// Throws: unknown_policy naming the bad name and listing the valid ones; whatever f throws.
template <class F>
auto visit_policy(std::string_view name, F&& f) {
  return detail::visit_named<all_policies, unknown_policy>(name, "policy", std::forward<F>(f));
}

}  // namespace kvtk
