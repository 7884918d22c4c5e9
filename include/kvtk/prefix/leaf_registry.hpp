// kvtk/prefix/leaf_registry.hpp — leaf-order and admission-rule names -> types, from one
// compile-time list each. A radix policy name is a leaf order, optionally followed by '+' and an
// admission rule (`lru+tinylfu`); the plain name admits every block (admit_all).
/// Thread safety: compile-time data; visit_leaf_policy is safe on any thread.
#pragma once

#include <array>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "kvtk/detail/visit_named.hpp"
#include "kvtk/names.hpp"
#include "kvtk/policy/policy_list.hpp"
#include "kvtk/prefix/admission.hpp"
#include "kvtk/prefix/leaf_policies.hpp"
#include "kvtk/prefix/leaf_reuse.hpp"
#include "kvtk/prefix/leaf_session.hpp"

namespace kvtk::prefix {

/// Every leaf order of prefix_tree, in registry order.
using all_leaf_policies =
    type_list<leaf_lru, leaf_fifo, leaf_lfu, leaf_priority_lru, leaf_slru, leaf_s3fifo, leaf_reuse,
              leaf_session_ttl, leaf_session_reuse, leaf_belady>;

/// Leaf-order names: lru fifo lfu priority-lru slru s3fifo reuse session-ttl session-reuse belady.
inline constexpr auto leaf_policy_names = kvtk::detail::names_of(all_leaf_policies{});

/// Calls f.template operator()<L>() for the leaf order named `name`.
/// Throws: unknown_name (kind "radix leaf policy") naming the bad name and listing the valid ones.
template <class F>
auto visit_leaf_policy(std::string_view name, F&& f) {
  return kvtk::detail::visit_named<all_leaf_policies>(name, "radix leaf policy",
                                                      std::forward<F>(f));
}

/// Every admission rule a radix policy name may add after '+', in registry order.
using all_admission_rules =
    type_list<admit_ghost, admit_adaptive, admit_tinylfu, admit_depth, admit_belady>;

/// Admission-rule names: ghost adaptive tinylfu depth belady.
inline constexpr auto admission_rule_names = kvtk::detail::names_of(all_admission_rules{});

/// Whether radix_index<L, A> is a policy kvtk offers: any leaf order admitting all; an online
/// leaf order with an online rule; leaf_belady with admit_belady (Belady with bypass).
template <class L, class A>
inline constexpr bool valid_radix_policy =
    std::is_same_v<A, admit_all> ||
    (requires { A::needs_belady_leaf; } ? std::is_same_v<L, leaf_belady>
                                         : !requires { L::offline; } && !requires { A::offline; });

/// Every radix policy name, in registry order: the leaf orders, then each online leaf order
/// with each online admission rule, then belady+belady.
/// Throws: std::bad_alloc (the list is built once).
inline const std::vector<std::string>& radix_policy_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out(leaf_policy_names.begin(), leaf_policy_names.end());
    [&]<class... Ls>(type_list<Ls...>) {
      auto with = [&]<class L>() {
        [&]<class... As>(type_list<As...>) {
          ((valid_radix_policy<L, As> ? (void)out.push_back(std::string(L::name) + "+" +
                                                            std::string(As::name))
                                      : (void)0),
           ...);
        }(all_admission_rules{});
      };
      (with.template operator()<Ls>(), ...);
    }(all_leaf_policies{});
    return out;
  }();
  return names;
}

/// Calls f.template operator()<L, A>() for the radix policy named `name` (a leaf order, or
/// `leaf+rule`), A = admit_all for a plain leaf-order name.
/// Throws: unknown_name (kind "radix policy") naming the bad name and listing the valid ones.
template <class F>
auto visit_radix_policy(std::string_view name, F&& f) {
  using result = decltype(f.template operator()<leaf_lru, admit_all>());
  using holder = std::conditional_t<std::is_void_v<result>, bool, result>;
  const std::size_t plus = name.find('+');
  const std::string_view leaf = name.substr(0, plus);
  const std::string_view rule = plus == std::string_view::npos ? "" : name.substr(plus + 1);
  [[maybe_unused]] holder out{};
  bool done = false;
  auto call = [&]<class L, class A>() {
    if constexpr (std::is_void_v<result>) {
      f.template operator()<L, A>();
    } else {
      out = f.template operator()<L, A>();
    }
    done = true;
  };
  auto with_leaf = [&]<class L>() {
    if (plus == std::string_view::npos) return call.template operator()<L, admit_all>();
    auto one = [&]<class A>() {
      if constexpr (valid_radix_policy<L, A>) {
        if (!done && A::name == rule) call.template operator()<L, A>();
      }
    };
    [&]<class... As>(type_list<As...>) { (one.template operator()<As>(), ...); }(
        all_admission_rules{});
  };
  [&]<class... Ls>(type_list<Ls...>) {
    ((!done && Ls::name == leaf ? with_leaf.template operator()<Ls>() : void()), ...);
  }(all_leaf_policies{});
  if (!done) throw unknown_name("radix policy", std::string(name), name_list(radix_policy_names()));
  if constexpr (!std::is_void_v<result>) return out;
}

}  // namespace kvtk::prefix
