// kvtk/detail/cbor.hpp — the bytes of cbor2.dumps(value, canonical=True) for None, int, bytes,
// str and tuples of them.
//
// vLLM's sha256_cbor and xxhash_cbor prefix-caching hashes digest this encoding, so it must match
// cbor2 byte for byte: tuples are definite-length arrays, every head takes its shortest form and
// None is the simple value 0xf6. Only the shapes vLLM hashes are written; nothing here decodes.
//
// The interface is detail/pickle.hpp's (str's `tag` flag is accepted and ignored: CBOR has no
// object identity), so one template writes a value in either encoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace kvtk::detail {

/// Writes one CBOR data item, element by element, in the order of a depth-first walk.
/// Thread safety: one writer per thread.
class cbor_writer {
 public:
  void none() { out_.push_back(0xf6); }
  void integer(std::int64_t v) {
    if (v >= 0) {
      head(0, static_cast<std::uint64_t>(v));
    } else {
      head(1, ~static_cast<std::uint64_t>(v));  // -1 - v
    }
  }
  void bytes(std::span<const std::uint8_t> b) {
    head(2, b.size());
    out_.insert(out_.end(), b.begin(), b.end());
  }
  void str(std::string_view s, bool /*tag*/ = false) {
    head(3, s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }
  /// A tuple of n elements: call tuple_begin(n), write the n elements, then tuple_end(n).
  void tuple_begin(std::size_t n) { head(4, n); }
  void tuple_end(std::size_t /*n*/) {}  // definite length: nothing closes the array
  /// Returns: the encoded item.
  std::vector<std::uint8_t> finish() && { return std::move(out_); }

 private:
  // Major type and argument: in the initial byte below 24, else in 1, 2, 4 or 8 big-endian bytes.
  void head(std::uint8_t major, std::uint64_t v) {
    const auto m = static_cast<std::uint8_t>(major << 5);
    if (v < 24) {
      out_.push_back(static_cast<std::uint8_t>(m | v));
      return;
    }
    const std::size_t n = v <= 0xff ? 1 : v <= 0xffff ? 2 : v <= 0xffffffffu ? 4 : 8;
    out_.push_back(static_cast<std::uint8_t>(m | (n == 1 ? 24 : n == 2 ? 25 : n == 4 ? 26 : 27)));
    for (std::size_t i = n; i-- > 0;) out_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }

  std::vector<std::uint8_t> out_;
};

}  // namespace kvtk::detail
