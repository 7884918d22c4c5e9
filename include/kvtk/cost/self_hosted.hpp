// kvtk/cost/self_hosted.hpp — what a cache saves an operator: prefill compute avoided, minus what
// the cache tiers and their transfers cost; and the break-even capacity off a miss-ratio curve.
//
// Definitions (pinned; tests use them):
//  * prefill FLOPs of positions [c, L) = 2 · active_params · (L − c)
//                                      + 4 · layers · hidden · Σ_{j=c}^{L−1} j   (attention);
//    a hit of the first c tokens saves flops(0, L) − flops(c, L).
//  * GPU-seconds saved = FLOPs saved / (tflops · 10^12 · efficiency); USD = GPU-hours · $/GPU-hour.
//  * a tier costs capacity_GB · $/GB-month · (days / 30) over `days`; SSD wear costs
//    (TB written / rated TBW) · replacement USD when a replacement price is given.
//  * transfer cost = seconds requests spent loading from lower tiers (not overlapped) ·
//    $/GPU-second (the GPU waits).
//  * net saving = compute USD saved − tier USD − wear USD − transfer USD.
//  * break-even capacity (per tier): on a curve of hit tokens H(c) over `days`, the largest
//    capacity c at which one more step of capacity still pays, i.e. where
//    (H(c_next) − H(c)) · USD per hit token ≥ (c_next − c) · USD per block over `days`.
/// Thread safety: values and pure functions.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>

#include "kvtk/cost/profiles.hpp"

namespace kvtk::cost {

struct compute_profile {
  double active_params = 0;  ///< parameters per token
  double layers = 0, hidden = 0;
  double tflops = 0;         ///< dense bf16 TFLOP/s per GPU
  double efficiency = 0.5;   ///< achieved fraction of peak
  double usd_per_gpu_hour = 2.0;
};

/// FLOPs of prefilling positions [cached, total) (the one formula: kvtk/cost/profiles.hpp).
inline double prefill_flops(const compute_profile& m, double cached, double total) noexcept {
  return kvtk::cost::prefill_flops(m.active_params, m.layers, m.hidden, cached, total);
}

/// USD per GPU-second of a profile.
inline double usd_per_gpu_second(const compute_profile& m) noexcept {
  return m.usd_per_gpu_hour / 3600.0;
}

/// GPU-seconds for `flops`.  Throws std::invalid_argument for a non-positive throughput.
inline double gpu_seconds(const compute_profile& m, double flops) {
  if (!(m.tflops > 0) || !(m.efficiency > 0)) {
    throw std::invalid_argument("compute profile: tflops and efficiency must be > 0");
  }
  return flops / (m.tflops * 1e12 * m.efficiency);
}

struct tier_cost_input {
  double capacity_bytes = 0;
  double usd_per_gb_month = 0;
  double bytes_written = 0;
  double endurance_tbw = 0;       ///< 0 = not tracked
  double replacement_usd = 0;     ///< what a worn-out drive costs to replace (0 = not priced)
};

/// USD a tier costs over `days` (capacity rent plus wear).
inline double tier_usd(const tier_cost_input& t, double days) noexcept {
  double usd = t.capacity_bytes / 1e9 * t.usd_per_gb_month * days / 30.0;
  if (t.endurance_tbw > 0 && t.replacement_usd > 0) {
    usd += t.bytes_written / 1e12 / t.endurance_tbw * t.replacement_usd;
  }
  return usd;
}

struct curve_point {
  double capacity_blocks = 0;
  double hit_tokens = 0;
};

/// The break-even capacity on a curve sorted by capacity (see the header comment); the first
/// point's capacity when even the first step does not pay, the last point's when every step
/// pays.  Requires: at least one point, increasing capacities.  Throws std::invalid_argument.
inline double break_even_capacity(std::span<const curve_point> curve, double usd_per_hit_token,
                                  double usd_per_block) {
  if (curve.empty()) throw std::invalid_argument("break-even: empty curve");
  double best = curve.front().capacity_blocks;
  for (std::size_t i = 1; i < curve.size(); ++i) {
    const double dc = curve[i].capacity_blocks - curve[i - 1].capacity_blocks;
    if (!(dc > 0)) throw std::invalid_argument("break-even: capacities must increase");
    const double gain = (curve[i].hit_tokens - curve[i - 1].hit_tokens) * usd_per_hit_token;
    if (gain >= dc * usd_per_block) best = curve[i].capacity_blocks;
  }
  return best;
}

}  // namespace kvtk::cost
