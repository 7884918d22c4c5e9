// sim/api/options_json.hpp — reading a command's options from JSON: every key known, every
// value of the right type, and an error naming the key otherwise (never a silent default).
#pragma once

#include <nlohmann/json.hpp>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <type_traits>
#include <vector>
#include <string>

#include "api/trace_options.hpp"

namespace kvtk::sim::detail {

class options_reader {
 public:
  /// `what` names the options in messages ("replay options").
  options_reader(const nlohmann::json& j, std::string what) : j_(j), what_(std::move(what)) {
    if (!j_.is_object()) throw usage_error(what_ + ": expected a JSON object");
  }
  /// Sets `out` from key when present. Throws usage_error "WHAT: KEY: expected T" otherwise.
  /// An optional number: absent or null = nullopt.
  void get(const char* key, std::optional<double>& out) {
    seen_.insert(key);
    const auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return;
    if (!it->is_number()) {
      throw usage_error(what_ + ": '" + key + "': expected a number or null, got " + it->dump());
    }
    out = it->template get<double>();
  }

  /// An optional whole number: absent or null = nullopt.
  void get(const char* key, std::optional<std::uint32_t>& out) {
    const auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) {
      seen_.insert(key);
      return;
    }
    std::uint32_t v = 0;
    get(key, v);
    out = v;
  }

  template <class T>
  void get(const char* key, T& out) {
    seen_.insert(key);
    const auto it = j_.find(key);
    if (it == j_.end()) return;
    try {
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        // nlohmann converts -1 or 1.5 to an unsigned silently; a whole number in range only.
        if (!it->is_number_unsigned() || it->template get<std::uint64_t>() >
                                             static_cast<std::uint64_t>(std::numeric_limits<T>::max())) {
          throw nlohmann::json::type_error::create(302, "not a whole number in range", nullptr);
        }
      }
      if constexpr (std::is_same_v<T, nlohmann::json>) {
        if (it->is_null()) return;  // null = the default
        if (!it->is_object()) {
          throw nlohmann::json::type_error::create(302, "not an object", nullptr);
        }
      }
      out = it->template get<T>();
    } catch (const nlohmann::json::exception&) {
      throw usage_error(what_ + ": '" + key + "': expected " + type_name(out) + ", got " +
                             it->dump());
    }
  }
  /// Throws usage_error naming the first key that no get() asked for.
  void finish() const {
    for (const auto& [k, v] : j_.items()) {
      if (!seen_.count(k)) {
        std::string known;
        for (const auto& s : seen_) known += " " + s;
        throw usage_error(what_ + ": unknown key '" + k + "' (known:" + known + ")");
      }
    }
  }

 private:
  static const char* type_name(const std::string&) { return "a string"; }
  static const char* type_name(bool) { return "true or false"; }
  static const char* type_name(std::uint32_t) { return "a whole number in [0, 2^32)"; }
  static const char* type_name(std::uint64_t) { return "a whole number"; }
  static const char* type_name(double) { return "a number"; }
  static const char* type_name(const std::vector<std::string>&) { return "a list of strings"; }
  static const char* type_name(const nlohmann::json&) { return "a JSON object"; }

  const nlohmann::json& j_;
  std::string what_;
  std::set<std::string> seen_;
};

}  // namespace kvtk::sim::detail
