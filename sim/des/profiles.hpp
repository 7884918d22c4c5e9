// sim/des/profiles.hpp — model and GPU profiles for the discrete-event simulator, with presets.
//
// Time model (docs/simulate.md "Timing"; the iteration times themselves: des/timing.hpp):
//  * prefill FLOPs of tokens [c, L) of a request = 2 · active_params · (L − c)      (linear layers)
//                                               + 4 · layers · hidden · Σ_{j=c}^{L−1} j  (attention)
//    seconds = FLOPs / (tflops · 10^12 · compute_efficiency);
//  * a decode step of a batch = (2 · active_params bytes of bf16 weights + the batch's KV bytes)
//    / (hbm_bytes_per_s · memory_efficiency): decoding is memory-bound;
//  * moving KV: bytes / link bandwidth (+ latency).
// The efficiencies' defaults, 0.67 (compute) and 0.8 (memory), are what made kvtk match a
// profiled simulator of Qwen2-7B on an A30 (prefill and decode); one efficiency (0.5, the
// earlier model) left prefill 1.31-1.40x and decode 1.52-1.64x too slow, and no single value
// fits both.
// Presets come from the one table of models and GPUs (kvtk/cost/profiles.hpp); calibrate them
// with the CUDA backends.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "kvtk/cost/profiles.hpp"

namespace kvtk::sim::des {

struct model_profile {
  std::string name;
  std::uint32_t layers = 0;
  std::uint32_t hidden = 0;
  double active_params = 0;          ///< parameters touched per token
  std::uint64_t kv_bytes_per_token = 0;
  double total_params = 0;  ///< all parameters (the weights in HBM); 0 = active_params
};

struct gpu_profile {
  std::string name;
  double tflops = 0;               ///< dense bf16 TFLOP/s
  double hbm_bytes_per_s = 0;      ///< HBM bandwidth
  double hbm_bytes = 0;            ///< HBM capacity
  double host_link_bytes_per_s = 0;  ///< GPU <-> host DRAM (pinned copies)
  double compute_efficiency = 0.67;  ///< fraction of peak FLOP/s achieved by prefill
  double memory_efficiency = 0.8;    ///< fraction of peak HBM bandwidth achieved by decode
};

/// Presets: kvtk::cost::model_specs (deepseek-v3, llama-3-70b, qwen2.5-7b, qwen3-235b-a22b).
const std::map<std::string, model_profile>& model_presets();
/// Presets: kvtk::cost::gpu_specs (h100, h200, h800, a800) with the default efficiencies.
const std::map<std::string, gpu_profile>& gpu_presets();

/// Prefill FLOPs for positions [cached, total) of one request (kvtk/cost/profiles.hpp).
inline double prefill_flops(const model_profile& m, std::uint64_t cached, std::uint64_t total) {
  return kvtk::cost::prefill_flops(m.active_params, m.layers, static_cast<double>(m.hidden),
                                   static_cast<double>(cached), static_cast<double>(total));
}

}  // namespace kvtk::sim::des
