// sim/formats/line_reader.hpp — the lines of a text trace, each at most limits::max_line_bytes.
//
// Why a cap: std::getline grows its string until it finds '\n', so a file with no newline
// (a binary file read as JSONL, a corrupted or truncated trace) would be read whole into one
// string. The reader's buffer starts at 64 KiB and doubles while a line needs it, up to the cap.
#pragma once

#include <cstdint>
#include <istream>
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "formats/requests.hpp"
#include "formats/trace_limits.hpp"

namespace kvtk::sim {

class line_reader {
 public:
  /// `name` names the file in errors; `first_line` is the number of the first line read.
  line_reader(std::istream& in, std::string name, std::uint64_t first_line = 1,
              std::size_t max_bytes = limits::max_line_bytes)
      : in_(in), name_(std::move(name)), lineno_(first_line - 1), max_(max_bytes),
        buf_(std::min<std::size_t>(max_bytes + 1, std::size_t{1} << 16)) {}

  /// Effects: reads the next line (without its '\n') into `line`, valid until the next call.
  /// Returns false at the end of the stream (a last line without '\n' is still a line).
  /// Throws: trace_error naming the file and line when a line is longer than the cap, or on a
  /// read error.
  bool next(std::string_view& line) {
    if (!in_.good()) return false;
    std::size_t len = 0;
    for (;;) {
      in_.getline(buf_.data() + len, static_cast<std::streamsize>(buf_.size() - len));
      const auto n = static_cast<std::size_t>(in_.gcount());
      if (in_.bad()) throw trace_error(name_, lineno_ + 1, "read error");
      if (in_.eof()) {  // the last line, without '\n'
        len += n;
        if (len == 0) return false;
        break;
      }
      if (!in_.fail()) {  // n counts the '\n' it extracted
        len += n - 1;
        break;
      }
      // The buffer filled before the line ended: grow it, or stop at the cap.
      len += n;
      if (buf_.size() > max_) {
        throw trace_error(name_, lineno_ + 1,
                          "line is longer than " + std::to_string(max_ >> 20) +
                              " MiB (the longest line a text trace may have; is this a binary "
                              "file or a trace without newlines?)");
      }
      in_.clear();
      buf_.resize(std::min(buf_.size() * 2, max_ + 1));
    }
    line = std::string_view(buf_.data(), len);
    ++lineno_;
    return true;
  }

  [[nodiscard]] std::uint64_t line_number() const noexcept { return lineno_; }

 private:
  std::istream& in_;
  std::string name_;
  std::uint64_t lineno_;
  std::size_t max_;
  std::vector<char> buf_;
};

}  // namespace kvtk::sim
