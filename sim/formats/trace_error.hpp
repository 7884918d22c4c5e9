// sim/formats/trace_error.hpp — the one exception type trace readers throw.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace kvtk::sim {

/// A malformed or unreadable trace. what() is "file:line: reason" (line 0 = the file as a whole).
class trace_error : public std::runtime_error {
 public:
  trace_error(std::string file, std::uint64_t line, const std::string& reason)
      : std::runtime_error(file + ":" + std::to_string(line) + ": " + reason),
        file_(std::move(file)),
        line_(line) {}
  [[nodiscard]] const std::string& file() const noexcept { return file_; }
  [[nodiscard]] std::uint64_t line() const noexcept { return line_; }

 private:
  std::string file_;
  std::uint64_t line_;
};

}  // namespace kvtk::sim
