#include "cli/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kvtk::sim::cli {

bool progress::terminal() noexcept {
  const char* env = std::getenv("KVTK_PROGRESS");
  if (env != nullptr && std::strcmp(env, "1") == 0) return true;  // tests force it on
  if (env != nullptr && std::strcmp(env, "0") == 0) return false;
  return ::isatty(STDERR_FILENO) == 1;
}

progress::progress(std::string label, std::string unit, std::uint64_t total)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      enabled_(terminal()),
      start_(std::chrono::steady_clock::now()) {}

progress::~progress() {
  if (enabled_ && done_.load() > 0) draw(true);
}

void progress::add(std::uint64_t n) noexcept {
  if (!enabled_) return;
  done_.fetch_add(n, std::memory_order_relaxed);
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now() - start_)
                       .count();
  std::int64_t due = next_draw_ns_.load(std::memory_order_relaxed);
  if (now >= due && next_draw_ns_.compare_exchange_strong(due, now + 200'000'000)) draw(false);
}

void progress::draw(bool final) noexcept {
  std::lock_guard<std::mutex> lock(draw_mutex_);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const auto done = done_.load(std::memory_order_relaxed);
  const double rate = secs > 0 ? static_cast<double>(done) / secs : 0.0;
  char line[256];
  if (total_ > 0) {
    const double frac = std::min(1.0, static_cast<double>(done) / static_cast<double>(total_));
    char bar[31];
    const int filled = static_cast<int>(frac * 30);
    for (int i = 0; i < 30; ++i) bar[i] = i < filled ? '#' : '.';
    bar[30] = 0;
    const double eta = rate > 0 ? static_cast<double>(total_ - std::min(done, total_)) / rate : 0;
    std::snprintf(line, sizeof line, "\r%s [%s] %5.1f%%  %.3g M %s/s  ETA %.0fs ", label_.c_str(),
                  bar, frac * 100, rate / 1e6, unit_.c_str(), eta);
  } else {
    std::snprintf(line, sizeof line, "\r%s  %.3g M %s  %.3g M/s ", label_.c_str(),
                  static_cast<double>(done) / 1e6, unit_.c_str(), rate / 1e6);
  }
  std::fputs(line, stderr);
  if (final) std::fputs("\n", stderr);
  std::fflush(stderr);
}

}  // namespace kvtk::sim::cli
