// sim/formats/jsonl_scan.hpp — a small, fast scanner for one JSON object per line.
//
// Trace lines are flat objects of numbers, strings and integer arrays. A general DOM parser
// (nlohmann/json) spends most of its time building and freeing the DOM; this scanner walks the
// line once, hands each top-level member to a callback, parses integer arrays straight into a
// caller-owned vector, and skips anything else (nested objects and arrays, with a depth limit).
// It validates JSON structure (quotes, commas, colons, literals, number syntax, control characters
// in strings, trailing garbage); it does not validate UTF-8 inside strings, which trace readers
// never interpret. Errors are returned as a reason with the 1-based column.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvtk::sim::jsonl {

enum class kind : std::uint8_t { null, boolean, integer, number, string, int_array, other };

struct value {
  kind type = kind::other;
  bool negative = false;        ///< integer: the sign
  std::uint64_t magnitude = 0;  ///< integer: |value|
  double number = 0;            ///< integer or number: the value as a double
  std::string_view text;        ///< string: the raw contents between the quotes; other (an
                                ///< object or an array not parsed as integers): its raw JSON
  /// int_array: the element at which the array stopped being one of non-negative integers
  /// (npos if it is one); the caller's vector holds the elements before it.
  std::size_t bad_element = npos;
  std::string_view bad_type;  ///< int_array: JSON type name of that element
  char first = 0;             ///< the value's first character (tells arrays from objects)
  static constexpr std::size_t npos = ~std::size_t{0};

  /// JSON type name: number, string, boolean, null, array or object.
  [[nodiscard]] std::string_view type_name() const noexcept {
    switch (type) {
      case kind::integer:
      case kind::number:
        return "number";
      case kind::string:
        return "string";
      case kind::boolean:
        return "boolean";
      case kind::null:
        return "null";
      case kind::int_array:
        return "array";
      case kind::other:
        return first == '[' ? "array" : "object";
    }
    return "value";
  }
};

/// Scans `line`. For each top-level member, wants_ints(key) says whether an array value should be
/// parsed into `ints` (cleared first) as non-negative integers; then on_member(key, value) is
/// called. Returns an empty string on success, else "invalid JSON: <reason> at column N".
template <class WantsInts, class OnMember>
std::string scan_object(std::string_view line, std::vector<std::uint64_t>& ints,
                        WantsInts&& wants_ints, OnMember&& on_member);

}  // namespace kvtk::sim::jsonl

#include "formats/jsonl_scan_impl.hpp"
