#include "util/phase_clock.hpp"

#include <sys/resource.h>

#include <cstdio>

namespace kvtk::sim {

void phase_clock::lap(const char* name) {
  const auto now = std::chrono::steady_clock::now();
  phases_.emplace_back(name, std::chrono::duration<double>(now - last_).count());
  last_ = now;
}

nlohmann::json phase_clock::json(const std::vector<std::pair<const char*, double>>& extra) const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, s] : phases_) j[std::string(name) + "_s"] = s;
  for (const auto& [name, s] : extra) j[std::string(name) + "_s"] = s;
  j["total_s"] = std::chrono::duration<double>(last_ - start_).count();
  j["cpu_s"] = process_cpu_seconds();
  j["peak_rss_mib"] = peak_rss_mib();
  return j;
}

std::string phase_clock::text(const std::vector<std::pair<const char*, double>>& extra) const {
  std::string out = "timings:";
  char buf[96];
  for (const auto& list : {phases_, extra}) {
    for (const auto& [name, s] : list) {
      std::snprintf(buf, sizeof buf, " %s %.3f s,", name, s);
      out += buf;
    }
  }
  std::snprintf(buf, sizeof buf, " total %.3f s, cpu %.3f s, peak RSS %.0f MiB",
                std::chrono::duration<double>(last_ - start_).count(), process_cpu_seconds(),
                peak_rss_mib());
  return out + buf;
}

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
  };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux reports KiB
}

}  // namespace kvtk::sim
