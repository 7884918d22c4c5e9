// sim/cli/progress.hpp — a progress bar with rate and ETA on stderr, drawn only when stderr is a
// terminal (so logs, pipes and CI output stay clean) and at most 5 times a second.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace kvtk::sim::cli {

class progress {
 public:
  /// `unit` names what is counted ("block refs"); total 0 = unknown (no bar, no ETA).
  progress(std::string label, std::string unit, std::uint64_t total);
  progress(const progress&) = delete;
  progress& operator=(const progress&) = delete;
  ~progress();
  /// Thread-safe: adds n units done and redraws when due.
  void add(std::uint64_t n) noexcept;
  /// Whether anything is drawn (stderr is a terminal and KVTK_PROGRESS is not 0).
  [[nodiscard]] bool enabled() const noexcept { return enabled_; }
  /// Whether stderr is a terminal and KVTK_PROGRESS is not "0" (or KVTK_PROGRESS is "1").
  static bool terminal() noexcept;

 private:
  void draw(bool final) noexcept;
  std::string label_, unit_;
  std::uint64_t total_;
  bool enabled_;
  std::atomic<std::uint64_t> done_{0};
  std::atomic<std::int64_t> next_draw_ns_{0};
  std::chrono::steady_clock::time_point start_;
  std::mutex draw_mutex_;
};

}  // namespace kvtk::sim::cli
