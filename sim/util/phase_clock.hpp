// sim/util/phase_clock.hpp — where a command's time went: wall time per phase, the process's CPU
// time and its peak RSS (`kvtk replay --timings`, `kvtk trace stats --timings`,
// bench/end_to_end.sh).
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace kvtk::sim {

class phase_clock {
 public:
  phase_clock() : start_(std::chrono::steady_clock::now()), last_(start_) {}

  /// Ends the current phase under `name` and starts the next one.
  void lap(const char* name);

  /// {"<phase>_s": seconds, ..., "total_s", "cpu_s" (user + system, whole process),
  ///  "peak_rss_mib"}; `extra` are further named figures (e.g. optimum_s, inside replay_s).
  [[nodiscard]] nlohmann::json json(
      const std::vector<std::pair<const char*, double>>& extra = {}) const;
  /// One line: "timings: read 0.12 s, ..., total 0.5 s, cpu 0.5 s, peak RSS 120 MiB".
  [[nodiscard]] std::string text(
      const std::vector<std::pair<const char*, double>>& extra = {}) const;

 private:
  std::chrono::steady_clock::time_point start_, last_;
  std::vector<std::pair<const char*, double>> phases_;
};

/// The process's user + system CPU seconds and peak resident set (MiB), from getrusage.
double process_cpu_seconds();
double peak_rss_mib();

}  // namespace kvtk::sim
