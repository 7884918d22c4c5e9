// tests/schema_check.hpp — a JSON Schema checker for the subset kvtk's schemas use: type
// (a name or a list), enum, const, required, properties, items, oneOf, minimum, maximum,
// minLength. Enough to hold the schemas and the code to each other; not a general validator.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kvtk::test {

/// Returns "" when `v` satisfies `schema`, else the first violation with its JSON path.
inline std::string schema_violation(const nlohmann::json& schema, const nlohmann::json& v,
                                    const std::string& at = "$") {
  auto type_ok = [&](const std::string& t) {
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    if (t == "string") return v.is_string();
    if (t == "integer") return v.is_number_integer();
    if (t == "number") return v.is_number();
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    return false;
  };
  if (schema.contains("type")) {
    const auto& t = schema["type"];
    bool ok = false;
    if (t.is_string()) {
      ok = type_ok(t.get<std::string>());
    } else {
      for (const auto& x : t) ok = ok || type_ok(x.get<std::string>());
    }
    if (!ok) return at + ": expected type " + t.dump() + ", got " + v.dump();
  }
  if (schema.contains("enum")) {
    bool found = false;
    for (const auto& x : schema["enum"]) found = found || x == v;
    if (!found) return at + ": " + v.dump() + " not in " + schema["enum"].dump();
  }
  if (schema.contains("const") && schema["const"] != v) {
    return at + ": expected " + schema["const"].dump();
  }
  if (v.is_number()) {
    // Compare integers as integers: doubles lose precision near 2^64.
    auto below = [&](const nlohmann::json& bound) {
      if (v.is_number_unsigned() && bound.is_number_unsigned()) {
        return v.get<std::uint64_t>() < bound.get<std::uint64_t>();
      }
      return v.get<double>() < bound.get<double>();
    };
    auto above = [&](const nlohmann::json& bound) {
      if (v.is_number_unsigned() && bound.is_number_unsigned()) {
        return v.get<std::uint64_t>() > bound.get<std::uint64_t>();
      }
      return v.get<double>() > bound.get<double>();
    };
    if (schema.contains("minimum") && below(schema["minimum"])) return at + ": below minimum";
    if (schema.contains("maximum") && above(schema["maximum"])) return at + ": above maximum";
  }
  if (v.is_string() && schema.contains("minLength") &&
      v.get<std::string>().size() < schema["minLength"].get<std::size_t>()) {
    return at + ": string too short";
  }
  if (v.is_object()) {
    if (schema.contains("required")) {
      for (const auto& k : schema["required"]) {
        if (!v.contains(k.get<std::string>())) return at + ": missing " + k.get<std::string>();
      }
    }
    if (schema.contains("properties")) {
      for (const auto& [k, sub] : schema["properties"].items()) {
        if (v.contains(k)) {
          if (auto e = schema_violation(sub, v[k], at + "." + k); !e.empty()) return e;
        }
      }
    }
  }
  if (v.is_array() && schema.contains("items")) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (auto e = schema_violation(schema["items"], v[i], at + "[" + std::to_string(i) + "]");
          !e.empty()) {
        return e;
      }
    }
  }
  if (schema.contains("oneOf")) {
    int matches = 0;
    std::string why;
    for (const auto& sub : schema["oneOf"]) {
      const std::string e = schema_violation(sub, v, at);
      matches += e.empty();
      if (!e.empty() && why.empty()) why = e;
    }
    if (matches != 1) {
      return at + ": matches " + std::to_string(matches) + " of oneOf (first miss: " + why + ")";
    }
  }
  return {};
}

}  // namespace kvtk::test
