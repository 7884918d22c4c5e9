// kvtk/names.hpp — names of every kind kvtk lets a user choose (eviction policies, radix leaf
// orders, engines, schedulers, routers, scorers, partial-block rules), and the one error for a
// name no registry knows. Every registry throws it the same way, with the valid names, so a caller
// catches one type and can show the choices.
//
// Two shapes of registry, one error:
//  * a type list (policy/policy_list.hpp, prefix/leaf_registry.hpp): visit_named<List>(name, f)
//    calls f.template operator()<T>() for the type whose ::name matches, so f compiles once per
//    type with static dispatch;
//  * an enum (name_table below): parse(name) turns a name into the enum once, at configuration
//    time, so no hot path compares strings.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvtk {

/// what() is "unknown <kind> '<name>' (known: a b c)".
/// Thread safety: immutable once constructed; what() may be read from any thread.
class unknown_name : public std::invalid_argument {
 public:
  /// Requires: nothing. Effects: keeps the parts and builds the message. Throws: std::bad_alloc.
  unknown_name(std::string kind, std::string name, std::vector<std::string> known)
      : std::invalid_argument(message(kind, name, known)),
        kind_(std::move(kind)),
        name_(std::move(name)),
        known_(std::move(known)) {}

  /// What was being named: "policy", "radix leaf policy", "router", ...
  [[nodiscard]] const std::string& kind() const noexcept { return kind_; }
  /// The name given.
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// The valid names, in registry order.
  [[nodiscard]] const std::vector<std::string>& known() const noexcept { return known_; }

 private:
  static std::string message(const std::string& kind, const std::string& name,
                             const std::vector<std::string>& known) {
    std::string m = "unknown " + kind + " '" + name + "' (known:";
    for (const auto& k : known) m += " " + k;
    return m + ")";
  }
  std::string kind_, name_;
  std::vector<std::string> known_;
};

/// The known names of a registry's name array, as strings (for unknown_name).
template <class Names>
std::vector<std::string> name_list(const Names& names) {
  std::vector<std::string> out;
  for (std::string_view n : names) out.emplace_back(n);
  return out;
}

/// The names of an enum whose values are 0, 1, ..., N-1, in that order: `names[i]` names value i.
/// A constexpr table per kind (engines, schedulers, routers, ...) is the one place its names are
/// spelled; parse() at configuration time, then switch on the enum.
/// Thread safety: immutable; every member is safe on any thread.
template <class Enum, std::size_t N>
struct name_table {
  std::string_view kind;                  ///< what is named, for errors: "engine", "router", ...
  std::array<std::string_view, N> names;  ///< names[i] names Enum(i)

  /// The value named `name`, or nullopt.  Complexity: O(N).  Throws: nothing.
  [[nodiscard]] constexpr std::optional<Enum> find(std::string_view name) const noexcept {
    for (std::size_t i = 0; i < N; ++i) {
      if (names[i] == name) return static_cast<Enum>(i);
    }
    return std::nullopt;
  }
  /// The value named `name`.  Throws: unknown_name of this kind, listing every name.
  [[nodiscard]] Enum parse(std::string_view name) const {
    if (const auto e = find(name)) return *e;
    throw unknown_name(std::string(kind), std::string(name), name_list(names));
  }
  /// The name of `e`.  Requires: e is one of the N values.  Throws: nothing.
  [[nodiscard]] constexpr std::string_view name(Enum e) const noexcept {
    return names[static_cast<std::size_t>(e)];
  }
  /// "a b c": the names, space-separated (for help texts and messages).
  [[nodiscard]] std::string joined() const {
    std::string out;
    for (std::string_view n : names) (out += out.empty() ? "" : " ") += n;
    return out;
  }
};

}  // namespace kvtk
