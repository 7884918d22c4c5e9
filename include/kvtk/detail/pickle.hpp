// kvtk/detail/pickle.hpp — the bytes of pickle.dumps(obj, protocol=5) for None, int, bytes, str
// and tuples of them, as CPython's C pickler writes them.
//
// vLLM's default prefix-caching hashes (sha256, xxhash) digest a pickle, so a block key equals
// vLLM's only if every byte of the pickle does: that includes the protocol-5 framing (a frame is
// committed at the start of an object's save once it holds >= 64 KiB; a frame under 4 bytes has no
// FRAME header; bytes/str payloads >= 64 KiB bypass framing) and the memo (MEMOIZE after every
// bytes, str and non-empty tuple; BINGET when the same Python object is saved again). Only the
// object kinds vLLM hashes are written; nothing here reads pickles.
//
// The writer interface (none, integer, bytes, str, tuple_begin/tuple_end, finish) is shared with
// detail/cbor.hpp so one template writes a value in either encoding.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvtk::detail {

/// Returns: how many bytes LONG1 gives the int64 whose two's complement is `u`: the minimal
/// little-endian two's complement (5..8 bytes for the ints that need LONG1).
constexpr std::size_t long1_bytes(std::uint64_t u) noexcept {
  std::size_t n = 8;
  while (n > 1) {
    const auto top = static_cast<std::uint8_t>(u >> (8 * (n - 1)));
    const auto next_bit = static_cast<std::uint8_t>((u >> (8 * (n - 1) - 1)) & 1);
    if (!((top == 0 && next_bit == 0) || (top == 0xff && next_bit == 1))) break;
    --n;
  }
  return n;
}

/// Writes one pickle, object by object, in the order of a depth-first walk of the value.
/// Thread safety: one writer per thread.
class pickler {
 public:
  pickler() { out_ = {0x80, 0x05}; }  // PROTO 5

  void none() {
    start_save();
    put(0x4e);  // NONE
  }
  /// Effects: saves a Python int in the smallest opcode CPython picks for it.
  void integer(std::int64_t v) {
    start_save();
    if (v >= 0 && v < 256) {
      put(0x4b);  // BININT1
      put(static_cast<std::uint8_t>(v));
    } else if (v >= 0 && v < 65536) {
      put(0x4d);  // BININT2
      le(static_cast<std::uint64_t>(v), 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      put(0x4a);  // BININT
      le(static_cast<std::uint64_t>(v), 4);
    } else {
      long1(static_cast<std::uint64_t>(v));
    }
  }
  void bytes(std::span<const std::uint8_t> b) {
    start_save();
    payload(sized_header(0x43, 0x42, 0x8e, b.size()), b);  // SHORT_BINBYTES, BINBYTES, BINBYTES8
    memoize();
  }
  /// Effects: saves a str object. `tag` marks an interned constant (one Python object however
  /// often it is saved): the second save of an equal tag within this pickle is a memo reference.
  /// Complexity: O(s.size() + tags saved so far).
  void str(std::string_view s, bool tag = false) {
    start_save();
    if (tag && memo_get(s)) return;
    // SHORT_BINUNICODE, BINUNICODE, BINUNICODE8
    payload(sized_header(0x8c, 0x58, 0x8d, s.size()),
            std::span(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()));
    if (tag) tags_.emplace_back(std::string(s), memo_);
    memoize();
  }
  /// A tuple of n elements: call tuple_begin(n), save the n elements, then tuple_end(n).
  void tuple_begin(std::size_t n) {
    start_save();
    if (n == 0) {
      put(0x29);  // EMPTY_TUPLE
    } else if (n > 3) {
      put(0x28);  // MARK
    }
  }
  void tuple_end(std::size_t n) {
    if (n == 0) return;
    put(n == 1 ? 0x85 : n == 2 ? 0x86 : n == 3 ? 0x87 : 0x74);  // TUPLE1/2/3, TUPLE
    memoize();
  }
  /// Returns: the complete pickle (STOP appended, last frame committed).
  std::vector<std::uint8_t> finish() && {
    put(0x2e);  // STOP
    commit_frame();
    return std::move(out_);
  }

 private:
  static constexpr std::size_t frame_target = 64 * 1024, frame_header = 9;

  struct header {
    std::array<std::uint8_t, 9> b{};
    std::size_t n = 0;
  };
  // The opcode and little-endian length of a bytes/str object in its size class.
  static header sized_header(std::uint8_t op1, std::uint8_t op4, std::uint8_t op8,
                             std::size_t size) {
    header h;
    const std::size_t width = size < 256 ? 1 : size <= 0xffffffffu ? 4 : 8;
    h.b[h.n++] = width == 1 ? op1 : width == 4 ? op4 : op8;
    for (std::size_t i = 0; i < width; ++i) {
      h.b[h.n++] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(size) >> (8 * i));
    }
    return h;
  }
  void long1(std::uint64_t u) {
    const std::size_t n = long1_bytes(u);
    put(0x8a);
    put(static_cast<std::uint8_t>(n));
    le(u, n);
  }
  // BINGET / LONG_BINGET of an earlier tag equal to s; false when there is none.
  bool memo_get(std::string_view s) {
    for (const auto& [t, idx] : tags_) {
      if (t != s) continue;
      if (idx < 256) {
        put(0x68);  // BINGET
        put(static_cast<std::uint8_t>(idx));
      } else {
        put(0x6a);  // LONG_BINGET
        le(idx, 4);
      }
      return true;
    }
    return false;
  }
  void ensure_frame() {
    if (framing_ && !frame_open_) {
      frame_start_ = out_.size();
      out_.resize(out_.size() + frame_header, 0);
      frame_open_ = true;
    }
  }
  void put(std::uint8_t b) {
    ensure_frame();
    out_.push_back(b);
  }
  void le(std::uint64_t v, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) put(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  // The FRAME header's room was reserved when the frame opened; a frame too small to be worth a
  // header gives the room back, as CPython's commit_frame does.
  void commit_frame() {
    // The header's room is always there while a frame is open; saying so also keeps GCC 12's
    // -Wstringop-overflow from assuming an empty buffer once this is inlined at -O3.
    if (!frame_open_ || out_.size() < frame_start_ + frame_header) return;
    const std::size_t len = out_.size() - frame_start_ - frame_header;
    if (len >= 4) {
      out_[frame_start_] = 0x95;  // FRAME
      for (std::size_t i = 0; i < 8; ++i) {
        out_[frame_start_ + 1 + i] =
            static_cast<std::uint8_t>(static_cast<std::uint64_t>(len) >> (8 * i));
      }
    } else {
      out_.erase(out_.begin() + static_cast<std::ptrdiff_t>(frame_start_),
                 out_.begin() + static_cast<std::ptrdiff_t>(frame_start_ + frame_header));
    }
    frame_open_ = false;
  }
  void start_save() {  // the opcode boundary CPython checks when it starts saving an object
    if (frame_open_ && out_.size() - frame_start_ - frame_header >= frame_target) commit_frame();
  }
  // A payload >= 64 KiB and its header are written outside any frame (_Pickler_write_bytes):
  // the open frame is committed first and the next save opens a new one.
  void payload(const header& h, std::span<const std::uint8_t> data) {
    if (data.size() >= frame_target) {
      commit_frame();
      framing_ = false;
    }
    for (std::size_t i = 0; i < h.n; ++i) put(h.b[i]);
    ensure_frame();
    out_.insert(out_.end(), data.begin(), data.end());
    framing_ = true;
  }
  void memoize() {
    put(0x94);  // MEMOIZE
    ++memo_;
  }

  std::vector<std::uint8_t> out_;
  std::size_t frame_start_ = 0;
  bool frame_open_ = false, framing_ = true;
  std::uint64_t memo_ = 0;
  std::vector<std::pair<std::string, std::uint64_t>> tags_;
};

}  // namespace kvtk::detail
