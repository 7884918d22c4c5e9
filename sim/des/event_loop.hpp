// sim/des/event_loop.hpp — the one event loop of kvtk simulate. kvtk's own scheduler (the
// cluster, cluster.hpp) and the engine schedulers (engine_sched.cpp) are strategies on it: each
// names its event kinds in an enum and handles one event at a time; the loop owns the order of
// events, the merge with the trace's arrivals, retiring finished requests and progress.
//
// Order (pinned: runs are deterministic and results depend on it). Events are taken by time,
// then kind (the strategy's enum order: smaller first at one instant), then the order they were
// pushed in. Arrivals sorted by time are not queued: the trace gives them one at a time, and the
// next one goes before the queue's head exactly when (arrival time, Kind::arrival) is smaller
// than (head time, head kind), which is where it would be taken had it been queued (arrivals
// keep trace order among themselves). Unsorted arrivals (or hooks.queue_all_arrivals) are all
// queued up front, in trace order; both ways give the same sequence of events.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <queue>
#include <vector>

#include "des/closed_loop.hpp"
#include "des/outcomes.hpp"
#include "des/simulator.hpp"
#include "kvtk/prefix/replay.hpp"

namespace kvtk::sim::des::detail {

/// An event of a strategy whose kinds are the enum Kind (which must have a member `arrival`).
template <class Kind>
struct basic_event {
  double t = 0;
  Kind kind{};
  std::uint64_t seq = 0;  // push order: ties at one time and kind go first in, first out
  std::uint32_t instance = 0, request = 0;
  bool operator>(const basic_event& o) const noexcept {
    if (t != o.t) return t > o.t;
    if (kind != o.kind) return kind > o.kind;
    return seq > o.seq;
  }
};

/// The event queue merged with the trace's arrival stream (the order in the header comment).
/// Thread safety: none; one simulation owns it.
template <class Kind>
class event_queue {
 public:
  using event = basic_event<Kind>;

  explicit event_queue(const kvtk::prefix::prefix_trace_view& t) : t_(t) {}

  /// Effects: decides how arrivals enter (streamed when sorted, else all queued now). Reads the
  /// arrival column once (arrivals_sorted releases its pages behind it).  Complexity: O(requests).
  void start(const simulation_hooks& hooks) {
    if (closed_) {  // closed loop: the roots now, each child when its parent ends (ended())
      queued_arrivals_ = true;
      for (std::uint32_t r = 0; r < t_.requests(); ++r) {
        if (plan_.waits[r] == 0) push(t_.arrival_s[r], Kind::arrival, r, r);
      }
      return;
    }
    queued_arrivals_ = hooks.queue_all_arrivals || !arrivals_sorted(t_, hooks);
    if (!queued_arrivals_) return;
    for (std::uint32_t r = 0; r < t_.requests(); ++r) push(t_.arrival_s[r], Kind::arrival, r, r);
  }
  /// Effects: closed-loop arrivals with `plan` (des/closed_loop.hpp); call before start().
  void close_loop(closed_loop_plan plan) {
    plan_ = std::move(plan);
    release_at_.assign(plan_.waits.size(), -std::numeric_limits<double>::infinity());
    closed_ = true;
  }
  [[nodiscard]] bool closed() const noexcept { return closed_; }
  /// Effects: closed loop: request r ended at `now`; a child whose parents have all ended
  /// arrives at the latest of (a parent's end + that edge's delay).
  void ended(std::uint64_t r, double now) {
    for (std::uint32_t i = plan_.child_offset[r]; i < plan_.child_offset[r + 1]; ++i) {
      const std::uint32_t c = plan_.child[i];
      release_at_[c] = std::max(release_at_[c], now + plan_.edge_delay_s[i]);
      if (--plan_.waits[c] == 0) push(release_at_[c], Kind::arrival, c, c);
    }
  }
  /// Effects: queues an event at time t.  Requires: t >= the time of the last event taken.
  void push(double t, Kind kind, std::uint32_t instance, std::uint32_t request) {
    events_.push({t, kind, seq_++, instance, request});
  }
  /// Effects: takes the next event into e. Returns false when none is left.  Complexity: O(log n).
  bool next(event& e) {
    if (!queued_arrivals_ && next_arrival_ < t_.requests()) {
      const double a = t_.arrival_s[next_arrival_];
      if (events_.empty() || a < events_.top().t ||
          (a == events_.top().t && Kind::arrival < events_.top().kind)) {
        e = {a, Kind::arrival, 0, next_arrival_, next_arrival_};
        ++next_arrival_;
        return true;
      }
    }
    if (events_.empty()) return false;
    e = events_.top();
    events_.pop();
    return true;
  }

 private:
  const kvtk::prefix::prefix_trace_view& t_;
  std::priority_queue<event, std::vector<event>, std::greater<>> events_;
  std::uint64_t seq_ = 0;
  std::uint32_t next_arrival_ = 0;  // streamed arrivals: the next one the trace gives
  bool queued_arrivals_ = false;
  bool closed_ = false;
  closed_loop_plan plan_;
  std::vector<double> release_at_;  // closed loop: the latest parent end + delay so far
};

/// Reports (ended, total) to a progress callback about 256 times over a run, and at the end.
class progress_ticker {
 public:
  progress_ticker(const simulation_progress& fn, std::uint64_t total) : fn_(fn), total_(total) {}
  /// Effects: reports `ended` when it has passed the next mark or reached the total (once).
  void update(std::uint64_t ended) {
    if (!fn_ || ended == reported_ || (ended < next_ && ended < total_)) return;
    next_ = ended + std::max<std::uint64_t>(1, total_ / 256);
    reported_ = ended;
    fn_(ended, total_);
  }

 private:
  const simulation_progress& fn_;
  std::uint64_t total_, next_ = 0, reported_ = ~std::uint64_t{0};
};

/// Runs a simulation strategy to the end. The strategy provides
///   queue()             its event_queue<Kind>;
///   handle(const event&) the event at its time (it keeps the time as "now");
///   window()            its request_window (des/outcomes.hpp);
///   ended()             how many requests have ended (finished or refused);
///   summarize(sink)     the result, from the retired outcomes' totals.
/// Effects: every event in order; after each, finished requests retire to the caller's sinks in
/// trace order and progress is reported when due; at the end, requests still open (an engine
/// never released them) retire with their outcomes as they stand.
template <class Strategy>
simulation_result run_events(Strategy& sim, const kvtk::prefix::prefix_trace_view& t,
                             const cluster_config& c, const simulation_hooks& hooks) {
  outcome_stream sink(hooks, c);
  progress_ticker ticker(hooks.progress, t.requests());
  auto& queue = sim.queue();
  if (c.closed_loop) {
    const iteration_timing timing(c.model, c.gpu, c.gpus_per_instance, c.time_scale,
                                  c.iteration_overhead_s, c.timing, c.request_overhead_s);
    const double kv = static_cast<double>(c.model.kv_bytes_per_token);
    const std::uint64_t chunk =
        c.sched.engine_scheduler() ? c.sched.prefill_chunk() : c.chunk_tokens;
    queue.close_loop(closed_loop_plan::make(t, [&](std::uint32_t r) {
      if (!c.closed_latency_unloaded) return 0.0;
      return unloaded_latency_s(timing, kv, t.input_tokens(r), output_tokens_of(t, c, r), chunk);
    }));
    sim.window().log_ends();
  }
  queue.start(hooks);
  typename std::remove_reference_t<decltype(queue)>::event e{};
  double now = 0;
  const auto release = [&] {  // closed loop: children of the requests that just ended
    for (const std::uint64_t r : sim.window().ended_log()) queue.ended(r, now);
    sim.window().ended_log().clear();
  };
  for (;;) {
    while (queue.next(e)) {
      now = e.t;
      sim.handle(e);
      if (queue.closed()) release();
      sim.window().retire(sink);
      ticker.update(sim.ended());
    }
    // Requests an engine never released end now; in a closed loop their children then come.
    sim.window().end_all();
    if (!queue.closed() || sim.window().ended_log().empty()) break;
    release();
  }
  sim.window().retire(sink);
  return sim.summarize(sink);
}

}  // namespace kvtk::sim::des::detail
