// sim/des/outcomes.hpp — per-request outcomes in memory bounded by what is in flight
// (internal to sim/des; both simulators, the cluster and the engine schedulers, use it).
//
// Design: a simulation used to keep one outcome and one state record per request of the trace
// and sort latency vectors at the end: about 260 bytes a request, 2.6 GB for 10^7 requests.
// Now:
//  * request_window<State> holds the records of requests [base, base + size): those that have
//    arrived and not yet retired. A request retires once it and every earlier request have
//    ended, so the window spans the requests in flight (plus any finished ones waiting on an
//    earlier, slower request). Its outcome then goes to an outcome_stream, in trace order.
//  * outcome_stream adds it to the totals (the same additions in the same order as the old
//    end-of-run loop, so sums and means are bit-identical), hands it to the caller's
//    on_request sink (the streamed CSV), keeps it only when asked (keep_requests), and every
//    release_every retired requests tells the caller that their trace data is no longer needed
//    (the pages of a mapped kvtb file are dropped).
//  * latency_stats is the one latency distribution of every summary (TTFT, TBT, end-to-end,
//    queueing, and the token gaps). It keeps values exactly up to exact_limit, then in a
//    log-bucketed histogram. The one rank rule: quantile p is the value at 0-based rank
//    min(n-1, floor(p·n)) of the sorted values, exact up to exact_limit values and beyond that
//    the upper edge of its 1 %-wide bucket clamped to [min, max]: for a true value v >= 1 us the
//    answer is in [v, 1.01·v]; below 1 us it is within 1 us above. The mean is exact (sum /
//    count in arrival order), as are min, max and count.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include "des/simulator.hpp"

namespace kvtk::sim::des::detail {

class latency_stats {
 public:
  static constexpr std::size_t exact_limit = 65536;  // values kept before the histogram
  static constexpr double lo = 1e-6;                 // upper edge of bucket 0, seconds
  static constexpr double ratio = 1.01;              // bucket width: 1 %
  static constexpr std::size_t buckets = 3500;       // up to 1e-6 · 1.01^3499 ≈ 1.3e9 s

  // Token gaps add millions of values: the common path is a few instructions.
  void add(double s) {
    sum_ += s;
    min_ = std::min(min_, s);  // min_ starts at +inf and max_ at -inf (min()/max(): 0 if empty)
    max_ = std::max(max_, s);
    ++n_;
    // The requests of one decode step share their token gap: one logarithm per step, not per
    // token (the last value's bucket is kept).
    if (hist_.empty() || s != last_s_) [[unlikely]] {
      add_slow(s);
      return;
    }
    ++hist_[last_b_];
  }
  [[nodiscard]] std::uint64_t count() const noexcept { return n_; }
  [[nodiscard]] double mean() const noexcept {
    return n_ ? sum_ / static_cast<double>(n_) : 0.0;
  }
  [[nodiscard]] double min() const noexcept { return n_ ? min_ : 0.0; }
  [[nodiscard]] double max() const noexcept { return n_ ? max_ : 0.0; }
  [[nodiscard]] bool exact() const noexcept { return hist_.empty(); }

  /// The value at 0-based rank min(n-1, floor(p·n)) (see the header comment); 0 when empty.
  [[nodiscard]] double quantile(double p) const {
    if (n_ == 0) return 0;
    const auto rank = std::min<std::uint64_t>(
        n_ - 1, static_cast<std::uint64_t>(p * static_cast<double>(n_)));
    if (hist_.empty()) {
      std::vector<double> v(exact_);
      std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(rank), v.end());
      return v[rank];
    }
    std::uint64_t seen = 0;
    for (std::size_t b = 0; b < buckets; ++b) {
      seen += hist_[b];
      if (seen > rank) return std::clamp(edge(b), min_, max_);
    }
    return max_;
  }
  /// {"mean", "p50", "p90", "p99"}: the summaries' per-request latency distributions.
  [[nodiscard]] nlohmann::json json() const {
    return {{"mean", mean()}, {"p50", quantile(0.5)}, {"p90", quantile(0.9)},
            {"p99", quantile(0.99)}};
  }
  /// {"p50", "p90", "p99", "p999", "max", "count"}: the token gaps' tail (token_gap_s).
  [[nodiscard]] nlohmann::json tail_json() const {
    return {{"p50", quantile(0.5)},   {"p90", quantile(0.9)}, {"p99", quantile(0.99)},
            {"p999", quantile(0.999)}, {"max", max()},        {"count", n_}};
  }

  /// The bucket holding s: 0 for s <= lo, else the b with edge(b-1) < s <= edge(b) (the last
  /// bucket also takes everything larger).
  static std::size_t bucket(double s) noexcept {
    if (!(s > lo)) return 0;
    if (!(s <= edge(buckets - 2))) return buckets - 1;  // beyond the last edge, +inf included
    // A first guess from the exponent and the top 8 mantissa bits (a table of log2(1 + j/256)):
    // below the true log2(s) by less than log2(1 + 1/256), under half a bucket, so the two
    // loops below move it by at most one. No logarithm: token gaps bin millions of values.
    const auto bits = std::bit_cast<std::uint64_t>(s);
    const double log2_s = static_cast<double>(static_cast<int>((bits >> 52) & 0x7ff) - 1023) +
                          log2_mantissa()[(bits >> 44) & 0xff];
    // Constants need not be exact either: only the first guess depends on them.
    constexpr double log2_lo = -19.931568569324174, per_log2 = 1 / 0.014355292977070041;
    const double guess = (log2_s - log2_lo) * per_log2;
    auto b = guess < 1 ? std::size_t{1}
                       : std::min(static_cast<std::size_t>(guess) + 1, buckets - 1);
    while (b > 1 && edge(b - 1) >= s) --b;
    while (b + 1 < buckets && edge(b) < s) ++b;
    return b;
  }
  /// lo · ratio^b, from a table made once (token gaps bin millions of values: no pow per value).
  static double edge(std::size_t b) noexcept { return edges()[b]; }

 private:
  // Out of line, so that add() stays small enough to inline into the schedulers' loops.
  [[gnu::noinline]] void add_slow(double s) {
    if (hist_.empty()) {
      exact_.push_back(s);
      if (exact_.size() > exact_limit) spill();
      return;
    }
    last_s_ = s;
    last_b_ = bucket(s);
    ++hist_[last_b_];
  }
  static const std::array<double, 256>& log2_mantissa() noexcept {
    static const std::array<double, 256> table = [] {
      std::array<double, 256> t{};
      for (std::size_t j = 0; j < 256; ++j) t[j] = std::log2(1.0 + static_cast<double>(j) / 256);
      return t;
    }();
    return table;
  }
  static const std::array<double, buckets>& edges() noexcept {
    static const std::array<double, buckets> table = [] {
      std::array<double, buckets> t{};
      for (std::size_t b = 0; b < buckets; ++b) t[b] = lo * std::pow(ratio, static_cast<double>(b));
      return t;
    }();
    return table;
  }
  void spill() {
    hist_.assign(buckets, 0);
    for (double v : exact_) ++hist_[bucket(v)];
    std::vector<double>().swap(exact_);
  }

  std::vector<double> exact_;
  std::vector<std::uint64_t> hist_;  // empty while exact
  std::uint64_t n_ = 0;
  double sum_ = 0;
  double min_ = std::numeric_limits<double>::infinity();
  double max_ = -std::numeric_limits<double>::infinity();
  double last_s_ = 0;        // the last value binned, and its bucket (bucket(0) == 0)
  std::size_t last_b_ = 0;
};

/// True when the trace's arrival times never decrease. Reads the arrival column in stretches of
/// 65,536 requests and releases each (hooks.release) once read, so that a mapped trace does not
/// become resident before the simulation starts.
inline bool arrivals_sorted(const kvtk::prefix::prefix_trace_view& t, const simulation_hooks& h) {
  constexpr std::size_t stretch = 65536;
  bool sorted = true;
  for (std::size_t a = 0; a < t.arrival_s.size(); a += stretch) {
    const std::size_t b = std::min(t.arrival_s.size(), a + stretch);
    if (sorted) {
      for (std::size_t r = std::max<std::size_t>(a, 1); r < b; ++r) {
        if (t.arrival_s[r] < t.arrival_s[r - 1]) sorted = false;
      }
    }
    if (h.release) h.release(a, b);
  }
  return sorted;
}

/// Request r's output tokens, whichever scheduler runs it: the trace's (1 without an output
/// column), capped at max_output_tokens when that is set, and at least 1 (the prefill samples
/// the first token).
inline std::uint64_t output_tokens_of(const kvtk::prefix::prefix_trace_view& t,
                                      const cluster_config& c, std::uint64_t r) {
  std::uint64_t o = t.output_length.empty() ? 1 : t.output_length[r];
  if (c.max_output_tokens >= 0) o = std::min<std::uint64_t>(o, c.max_output_tokens);
  return std::max<std::uint64_t>(o, 1);
}

/// The summary's per-request totals, added in trace order.
struct outcome_totals {
  std::uint64_t requests = 0, rejected = 0;
  std::uint64_t refs = 0, hits = 0, pool_hits = 0, dram_hits = 0, inflight = 0;
  std::uint64_t tok = 0, tok_hits = 0, out_tokens = 0, good = 0;
  latency_stats ttft, tbt, e2e, queueing;
  double first = 0, last = 0;

  void add(std::uint64_t r, const request_outcome& o, double ttft_slo_s, double tbt_slo_s) {
    ++requests;
    if (o.rejected) {  // counted in "rejected"; no latency, no goodput
      ++rejected;
      return;
    }
    refs += o.blocks;
    hits += o.hit_blocks;
    pool_hits += o.pool_blocks;
    dram_hits += o.dram_blocks;
    inflight += o.inflight_miss_blocks;
    tok += o.input_tokens;
    tok_hits += o.hit_tokens;
    out_tokens += o.output_tokens;
    ttft.add(o.first_token - o.arrival);
    if (o.output_tokens > 1) tbt.add(o.mean_tbt);
    e2e.add(o.done - o.arrival);
    queueing.add(o.prefill_start - o.arrival);
    good += (ttft_slo_s == 0 || o.first_token - o.arrival <= ttft_slo_s) &&
            (tbt_slo_s == 0 || o.mean_tbt <= tbt_slo_s);
    if (r == 0 || o.arrival < first) first = o.arrival;
    last = std::max(last, o.done);
  }
};

/// Where retired outcomes go (see the header comment).
class outcome_stream {
 public:
  static constexpr std::size_t release_every = 65536;  // requests per trace-page release

  outcome_stream(const simulation_hooks& h, const cluster_config& c) : h_(h), c_(c) {}

  void take(std::uint64_t r, const request_outcome& o) {
    totals.add(r, o, c_.ttft_slo_s, c_.tbt_slo_s);
    if (h_.on_request) h_.on_request(r, o);
    if (h_.keep_requests) kept.push_back(o);
    if (r + 1 - released_ >= release_every && h_.release) {
      h_.release(released_, r + 1);
      released_ = r + 1;
    }
  }

  outcome_totals totals;
  std::vector<request_outcome> kept;  // with keep_requests

 private:
  const simulation_hooks& h_;
  const cluster_config& c_;
  std::uint64_t released_ = 0;
};

/// The records of the requests in flight: request r's outcome and State live from its arrival
/// (open) until it and every earlier request have ended (retire). Requires: r >= base() for
/// every access (a retired request is never touched again: handlers run before retire()).
template <class State>
class request_window {
 public:
  struct entry {
    request_outcome out;
    State st;
    bool ended = false;
    bool arrived = false;  ///< opened for itself (not a slot skipped on the way to a later one)
  };

  /// Effects: makes room for request r (and any skipped before it: unsorted arrivals).
  /// Amortized O(1); the ring doubles when full.
  entry& open(std::uint64_t r) {
    while (base_ + size_ <= r) {
      if (size_ == ring_.size()) grow();
      ring_[(base_ + size_) & mask_] = entry{};
      ++size_;
    }
    max_live_ = std::max<std::uint64_t>(max_live_, size_);
    at(r).arrived = true;
    return at(r);
  }
  entry& at(std::uint64_t r) { return ring_[r & mask_]; }
  const entry& at(std::uint64_t r) const { return ring_[r & mask_]; }
  request_outcome& out(std::uint64_t r) { return at(r).out; }
  State& st(std::uint64_t r) { return at(r).st; }
  const State& st(std::uint64_t r) const { return at(r).st; }
  /// Effects: marks request r ended: its outcome is final and its state no longer needed.
  void end(std::uint64_t r) {
    if (log_ends_ && !at(r).ended) ended_log_.push_back(r);
    at(r).ended = true;
  }
  /// Effects: marks every request in the window that has arrived ended (at the end of a run: a
  /// request an engine never released still counts, with its outcome as it stands).
  void end_all() {
    for (std::uint64_t r = base_; r < base_ + size_; ++r) {
      if (at(r).arrived) end(r);  // a skipped slot is a request yet to arrive (closed loop)
    }
  }
  /// Effects: from now on, every request that ends is also logged (closed-loop arrivals release
  /// its children: des/event_loop.hpp).
  void log_ends() { log_ends_ = true; }
  [[nodiscard]] std::vector<std::uint64_t>& ended_log() noexcept { return ended_log_; }
  /// Effects: hands every leading ended request to `sink` in trace order and frees its state.
  void retire(outcome_stream& sink) {
    while (size_ > 0 && at(base_).ended) {
      entry& e = at(base_);
      sink.take(base_, e.out);
      e.st = State{};  // frees what the state holds (pinned keys, ...)
      ++base_;
      --size_;
    }
  }
  [[nodiscard]] std::uint64_t max_live() const noexcept { return max_live_; }

 private:
  // Entry r lives at ring_[r & mask_]: no division, and requests never move between slots
  // except when the ring doubles.
  void grow() {
    std::vector<entry> bigger(std::max<std::size_t>(64, ring_.size() * 2));
    const std::uint64_t mask = bigger.size() - 1;
    for (std::uint64_t r = base_; r < base_ + size_; ++r) bigger[r & mask] = std::move(at(r));
    ring_ = std::move(bigger);
    mask_ = mask;
  }

  std::vector<entry> ring_;
  std::uint64_t mask_ = 0, base_ = 0, size_ = 0, max_live_ = 0;
  bool log_ends_ = false;
  std::vector<std::uint64_t> ended_log_;
};

}  // namespace kvtk::sim::des::detail
