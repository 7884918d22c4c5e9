// sim/formats/utf8.hpp — the one UTF-8 check of every reader: names read from a trace (sessions,
// tenants, models, salts) end up in JSON output, which must be valid UTF-8, so a reader refuses
// an invalid name where it reads it, naming the place (JSON readers and the kvtb tenant table).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kvtk::sim {

// True when `s` is valid UTF-8 (no overlongs, surrogates or code points above U+10FFFF): names
// read from a trace end up in JSON output, which must be valid UTF-8.
inline bool valid_utf8(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    for (std::size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return false;
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr std::uint32_t min_of[4] = {0, 0x80, 0x800, 0x10000};
    if (cp < min_of[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

}  // namespace kvtk::sim
