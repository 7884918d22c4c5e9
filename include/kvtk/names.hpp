// kvtk/names.hpp — the one error for a name no registry knows: an eviction policy, a radix leaf
// order, a router, a scorer. Every registry throws it the same way, with the valid names, so a
// caller catches one type and can show the choices.
#pragma once

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

}  // namespace kvtk
