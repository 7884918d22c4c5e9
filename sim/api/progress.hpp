// sim/api/progress.hpp — how a command's run() reports progress to its caller (the CLI's bar on
// stderr, a notebook's widget, a sweep's log).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>

namespace kvtk::sim {

/// Called as a command advances with (units done, units in all); the unit is the command's own
/// (block references for replay and mrc). Calls are serialised (never two at once, even when the
/// command runs on several threads), `done` never decreases, and the last call has done ==
/// total, except where the total is unknown (0: trace convert), when `done` simply counts. An
/// empty function is never called. The callback may throw to cancel the command: it stops at
/// that report and the exception propagates out of run().
using progress_callback = std::function<void(std::uint64_t done, std::uint64_t total)>;

namespace detail {

/// Accumulates work from many threads and forwards it to a progress_callback, one call at a time.
class progress_relay {
 public:
  progress_relay(const progress_callback& fn, std::uint64_t total) : fn_(fn), total_(total) {}
  /// Thread-safe: n more units are done.
  void add(std::uint64_t n) {
    if (!fn_) return;
    const std::lock_guard<std::mutex> hold(lock_);
    done_ += n;
    // total 0 = unknown (trace convert): report what is done; else never past the total.
    fn_(total_ == 0 || done_ < total_ ? done_ : total_, total_);
  }

 private:
  const progress_callback& fn_;
  std::uint64_t total_, done_ = 0;
  std::mutex lock_;
};

}  // namespace detail
}  // namespace kvtk::sim
