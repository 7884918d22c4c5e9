// sim/api/text.hpp — printf-style formatting into a std::string, for the text tables of the
// commands' results.
#pragma once

#include <cstdio>
#include <string>

namespace kvtk::sim::detail {

template <class... Args>
std::string format(const char* fmt, Args... args) {
  const int n = std::snprintf(nullptr, 0, fmt, args...);
  if (n <= 0) return {};
  std::string s(static_cast<std::size_t>(n), '\0');
  std::snprintf(s.data(), s.size() + 1, fmt, args...);
  return s;
}

}  // namespace kvtk::sim::detail
