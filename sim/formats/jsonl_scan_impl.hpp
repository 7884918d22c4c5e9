// Implementation of jsonl_scan.hpp (header-only so the scanner inlines into each reader).
#pragma once

#include <bit>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>

namespace kvtk::sim::jsonl {
namespace detail {

struct cursor {
  const char* p;
  const char* end;
  const char* begin;
  std::string error;

  bool fail(const char* reason) {
    if (error.empty()) {
      error = std::string("invalid JSON: ") + reason + " at column " +
              std::to_string(static_cast<long>(p - begin) + 1);
    }
    return false;
  }
  void ws() noexcept {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) ++p;
  }
  bool expect(char c, const char* reason) {
    ws();
    if (p >= end || *p != c) return fail(reason);
    ++p;
    return true;
  }
  // The four hex digits after "\u" (p at the 'u'; after, p at the last digit).
  bool hex4(unsigned& unit) {
    for (int i = 0; i < 4; ++i) {
      if (++p >= end || !std::isxdigit(static_cast<unsigned char>(*p))) return false;
      const char h = *p;
      unit = unit * 16 + static_cast<unsigned>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
    }
    return true;
  }
  // A string whose opening quote is at p; result = the raw contents.
  bool string(std::string_view& out) {
    ++p;  // opening quote
    const char* start = p;
    while (p < end) {
      const unsigned char c = static_cast<unsigned char>(*p);
      if (c == '"') {
        out = std::string_view(start, static_cast<std::size_t>(p - start));
        ++p;
        return true;
      }
      if (c < 0x20) return fail("control character in string");
      if (c == '\\') {
        if (++p >= end) break;
        const char e = *p;
        if (e == 'u') {
          unsigned unit = 0;
          if (!hex4(unit)) return fail("bad \\u escape");
          // UTF-16 in \u escapes: a high surrogate must be followed by a low one, and a low one
          // cannot stand alone (it would decode to invalid UTF-8).
          if (unit >= 0xDC00 && unit <= 0xDFFF) return fail("lone low surrogate in \\u escape");
          if (unit >= 0xD800 && unit <= 0xDBFF) {
            unsigned low = 0;
            if (end - p < 3 || p[1] != '\\' || p[2] != 'u') {
              return fail("high surrogate in \\u escape without its low surrogate");
            }
            p += 2;
            if (!hex4(low) || low < 0xDC00 || low > 0xDFFF) {
              return fail("high surrogate in \\u escape without its low surrogate");
            }
          }
        } else if (!std::strchr("\"\\/bfnrt", e)) {
          return fail("bad escape");
        }
      }
      ++p;
    }
    return fail("unterminated string");
  }
  // True when the 8 bytes at q are all digits; then value = their number. Little-endian only
  // (the byte order the shifts below assume); elsewhere it declines and digits go one by one.
  static bool eight_digits(const char* q, std::uint64_t& value) noexcept {
    if constexpr (std::endian::native != std::endian::little) {
      return false;
    } else {
      std::uint64_t w;
      std::memcpy(&w, q, 8);
      // Every byte in '0'..'9': high nibble 3, and adding 6 does not carry out of the low nibble.
      if (((w & 0xF0F0F0F0F0F0F0F0ull) |
           (((w + 0x0606060606060606ull) & 0xF0F0F0F0F0F0F0F0ull) >> 4)) != 0x3333333333333333ull) {
        return false;
      }
      w -= 0x3030303030303030ull;                         // byte i = digit i
      w = (w * 10 + (w >> 8)) & 0x00FF00FF00FF00FFull;    // 2-digit lanes
      w = (w * 100 + (w >> 16)) & 0x0000FFFF0000FFFFull;  // 4-digit lanes
      value = (w * 10000 + (w >> 32)) & 0xFFFFFFFFull;    // 8 digits
      return true;
    }
  }
  // A number at p (JSON grammar), classified as integer when it has no fraction or exponent.
  bool number(value& v) {
    const char* start = p;
    if (p < end && *p == '-') ++p;
    if (p >= end || !std::isdigit(static_cast<unsigned char>(*p))) return fail("bad number");
    if (*p == '0' && p + 1 < end && std::isdigit(static_cast<unsigned char>(p[1]))) {
      return fail("leading zero in number");
    }
    const char* digits = p;
    // Hash ids are most of a trace's bytes: accumulate while scanning (one pass, no locale)
    // with overflow checks, and leave to from_chars only what does not fit in 64 bits.
    std::uint64_t magnitude = 0;
    bool fits = true;  // the digits make an integer below 2^64
    {
      const char* q = p;  // a local cursor: the member would be stored on every digit
      const char* const stop = end;
      bool overflow = false;
      // Eight digits at a time (SWAR), then one at a time.
      std::uint64_t chunk = 0;
      while (stop - q >= 8 && eight_digits(q, chunk)) {
        overflow |= __builtin_mul_overflow(magnitude, std::uint64_t{100000000}, &magnitude);
        overflow |= __builtin_add_overflow(magnitude, chunk, &magnitude);
        q += 8;
      }
      while (q < stop && static_cast<unsigned char>(*q - '0') < 10) {
        overflow |= __builtin_mul_overflow(magnitude, 10u, &magnitude);
        overflow |=
            __builtin_add_overflow(magnitude, static_cast<unsigned char>(*q - '0'), &magnitude);
        ++q;
      }
      p = q;
      fits = !overflow;
    }
    bool integral = true;
    if (p < end && *p == '.') {
      integral = false;
      ++p;
      if (p >= end || !std::isdigit(static_cast<unsigned char>(*p))) return fail("bad fraction");
      while (p < end && std::isdigit(static_cast<unsigned char>(*p))) ++p;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
      integral = false;
      ++p;
      if (p < end && (*p == '+' || *p == '-')) ++p;
      if (p >= end || !std::isdigit(static_cast<unsigned char>(*p))) return fail("bad exponent");
      while (p < end && std::isdigit(static_cast<unsigned char>(*p))) ++p;
    }
    v.negative = *start == '-';
    if (integral && fits) {
      v.magnitude = magnitude;
      v.type = kind::integer;
      v.number = v.negative ? -static_cast<double>(magnitude) : static_cast<double>(magnitude);
      return true;
    }
    if (integral) {
      const auto r = std::from_chars(digits, p, v.magnitude);
      if (r.ec == std::errc()) {
        v.type = kind::integer;
        v.number =
            v.negative ? -static_cast<double>(v.magnitude) : static_cast<double>(v.magnitude);
        return true;
      }
      // Too large for 64 bits: keep it as a number, as JSON allows.
    }
    const auto r = std::from_chars(start, p, v.number);
    if (r.ec != std::errc() && r.ec != std::errc::result_out_of_range) return fail("bad number");
    if (r.ec == std::errc::result_out_of_range) v.number = v.negative ? -HUGE_VAL : HUGE_VAL;
    v.type = kind::number;
    return true;
  }
  bool literal(const char* word, std::size_t n) {
    if (static_cast<std::size_t>(end - p) < n || std::memcmp(p, word, n) != 0) {
      return fail("bad literal");
    }
    p += n;
    return true;
  }
  // Skips any value; depth-limited and iterative for arrays and objects.
  bool skip_value(int depth) {
    ws();
    if (p >= end) return fail("missing value");
    value v;
    std::string_view s;
    switch (*p) {
      case '"':
        return string(s);
      case '{':
      case '[': {
        if (depth > 64) return fail("nesting deeper than 64");
        const char close = *p == '{' ? '}' : ']';
        const bool object = *p == '{';
        ++p;
        ws();
        if (p < end && *p == close) {
          ++p;
          return true;
        }
        for (;;) {
          if (object) {
            ws();
            if (p >= end || *p != '"') return fail("expected a member name");
            if (!string(s) || !expect(':', "expected ':'")) return false;
          }
          if (!skip_value(depth + 1)) return false;
          ws();
          if (p < end && *p == ',') {
            ++p;
            continue;
          }
          if (p < end && *p == close) {
            ++p;
            return true;
          }
          return fail(object ? "expected ',' or '}'" : "expected ',' or ']'");
        }
      }
      case 't':
        return literal("true", 4);
      case 'f':
        return literal("false", 5);
      case 'n':
        return literal("null", 4);
      default:
        return number(v);
    }
  }
  bool int_array(value& v, std::vector<std::uint64_t>& ints) {
    ++p;  // '['
    ints.clear();
    v.type = kind::int_array;
    ws();
    if (p < end && *p == ']') {
      ++p;
      return true;
    }
    for (;;) {
      ws();
      if (p >= end) return fail("unterminated array");
      if (v.bad_element == value::npos) {
        const char c = *p;
        // The common case first: a plain non-negative integer of at most 19 digits (token ids,
        // block ids) ends at a separator; anything else goes through number().
        if (c >= '0' && c <= '9') {
          const char* q = p;
          std::uint64_t n = 0;
          while (q < end && q - p < 19 && *q >= '0' && *q <= '9') n = n * 10 + static_cast<std::uint64_t>(*q++ - '0');
          const bool plain = q < end && (*q == ',' || *q == ']' || *q == ' ' || *q == '\t') &&
                             !(c == '0' && q - p > 1);
          if (plain) {
            ints.push_back(n);
            p = q;
            goto separator;
          }
        }
        if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
          value e;
          if (!number(e)) return false;
          if (e.type == kind::integer && !e.negative) {
            ints.push_back(e.magnitude);
          } else if (e.type == kind::integer && e.magnitude == 0) {
            ints.push_back(0);  // -0
          } else {
            v.bad_element = ints.size();
            v.bad_type = e.type == kind::integer ? "negative" : "number";
          }
        } else {
          v.bad_element = ints.size();
          v.bad_type = c == '"'   ? "string"
                       : c == '[' ? "array"
                       : c == '{' ? "object"
                       : c == 'n' ? "null"
                                  : "boolean";
          if (!skip_value(1)) return false;
        }
      } else if (!skip_value(1)) {
        return false;
      }
    separator:
      ws();
      if (p < end && *p == ',') {
        ++p;
        continue;
      }
      if (p < end && *p == ']') {
        ++p;
        return true;
      }
      return fail("expected ',' or ']'");
    }
  }
};

}  // namespace detail

template <class WantsInts, class OnMember>
std::string scan_object(std::string_view line, std::vector<std::uint64_t>& ints,
                        WantsInts&& wants_ints, OnMember&& on_member) {
  detail::cursor c{line.data(), line.data() + line.size(), line.data(), {}};
  if (!c.expect('{', "expected '{'")) return c.error;
  c.ws();
  if (c.p < c.end && *c.p == '}') {
    ++c.p;
  } else {
    for (;;) {
      c.ws();
      if (c.p >= c.end || *c.p != '"') {
        c.fail("expected a member name");
        return c.error;
      }
      std::string_view key;
      if (!c.string(key) || !c.expect(':', "expected ':'")) return c.error;
      c.ws();
      if (c.p >= c.end) {
        c.fail("missing value");
        return c.error;
      }
      value v;
      bool ok = true;
      const char ch = *c.p;
      v.first = ch;
      if (ch == '[' && wants_ints(key)) {
        ok = c.int_array(v, ints);
      } else if (ch == '"') {
        v.type = kind::string;
        ok = c.string(v.text);
      } else if (ch == '-' || std::isdigit(static_cast<unsigned char>(ch))) {
        ok = c.number(v);
      } else if (ch == 't' || ch == 'f') {
        v.type = kind::boolean;
        ok = c.literal(ch == 't' ? "true" : "false", ch == 't' ? 4 : 5);
      } else if (ch == 'n') {
        v.type = kind::null;
        ok = c.literal("null", 4);
      } else {
        v.type = kind::other;
        const char* from = c.p;
        ok = c.skip_value(1);
        if (ok) v.text = std::string_view(from, static_cast<std::size_t>(c.p - from));
      }
      if (!ok) return c.error;
      on_member(key, v);
      c.ws();
      if (c.p < c.end && *c.p == ',') {
        ++c.p;
        continue;
      }
      if (c.p < c.end && *c.p == '}') {
        ++c.p;
        break;
      }
      c.fail("expected ',' or '}'");
      return c.error;
    }
  }
  c.ws();
  if (c.p != c.end) c.fail("trailing characters after the object");
  return c.error;
}

}  // namespace kvtk::sim::jsonl
