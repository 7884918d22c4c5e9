// kvtk/cost/profiles.hpp — the one table of models and GPUs. Everything kvtk derives from a
// model or a GPU comes from here: KV bytes per token (replay/mrc capacities in bytes, tier
// sizes), the KV layout of a block (real movement), prefill FLOPs (the simulator's time model
// and the cost model's savings), HBM size and bandwidth (the simulator's instances).
//
// Figures are public: the models' cards (layers, hidden size, parameters, KV heads, head size;
// bf16), the vendors' datasheets (dense bf16 tensor TFLOP/s, HBM); host links are practical
// pinned-copy planning numbers (PCIe Gen5 ~50 GB/s, Gen4 ~25 GB/s).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace kvtk::cost {

/// A model's shape. KV per token and layer: kv_parts (2: K and V; 1: an MLA latent) x kv_heads x
/// head_dim values of dtype_bytes each.
struct model_spec {
  std::string_view name;
  std::uint32_t layers = 0;
  std::uint32_t hidden = 0;
  double active_params = 0;  ///< parameters touched per token
  double total_params = 0;   ///< all parameters (the weights an engine keeps in HBM)
  std::uint32_t kv_parts = 2, kv_heads = 0, head_dim = 0, dtype_bytes = 2;

  /// KV bytes per token: layers x kv_parts x kv_heads x head_dim x dtype_bytes.
  [[nodiscard]] constexpr std::uint64_t kv_bytes_per_token() const noexcept {
    return std::uint64_t{layers} * kv_parts * kv_heads * head_dim * dtype_bytes;
  }
};

/// A GPU's public figures.
struct gpu_spec {
  std::string_view name;
  double tflops = 0;                 ///< dense bf16 TFLOP/s
  double hbm_bytes_per_s = 0;        ///< HBM bandwidth
  double hbm_bytes = 0;              ///< HBM capacity
  double host_link_bytes_per_s = 0;  ///< GPU <-> host DRAM (pinned copies)
};

/// DeepSeek-V3 caches one 512 + 64 MLA latent per layer and token; the mixtures of experts keep
/// all their parameters (671B, 235B) in HBM but touch only the active ones per token.
inline constexpr std::array<model_spec, 4> model_specs{{
    {"deepseek-v3", 61, 7168, 37e9, 671e9, 1, 1, 576, 2},
    {"llama-3-70b", 80, 8192, 70.6e9, 70.6e9, 2, 8, 128, 2},
    {"qwen2.5-7b", 28, 3584, 7.6e9, 7.6e9, 2, 4, 128, 2},
    {"qwen3-235b-a22b", 94, 4096, 22e9, 235e9, 2, 4, 128, 2},
}};

inline constexpr std::array<gpu_spec, 4> gpu_specs{{
    {"h100", 989, 3.35e12, 80e9, 50e9},
    {"h200", 989, 4.8e12, 141e9, 50e9},
    {"h800", 989, 3.35e12, 80e9, 50e9},
    {"a800", 312, 2.0e12, 80e9, 25e9},
}};

/// The model named `name`, or null.  Complexity: O(models).  Throws: nothing.
constexpr const model_spec* find_model(std::string_view name) noexcept {
  for (const model_spec& m : model_specs) {
    if (m.name == name) return &m;
  }
  return nullptr;
}
/// The GPU named `name`, or null.  Complexity: O(GPUs).  Throws: nothing.
constexpr const gpu_spec* find_gpu(std::string_view name) noexcept {
  for (const gpu_spec& g : gpu_specs) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

/// Prefill FLOPs of positions [cached, total) of one request, the one formula (docs/simulate.md
/// "Timing"): 2 · active_params per token (linear layers) + 4 · layers · hidden · j for the
/// attention of position j.  Throws: nothing.
/// Requires: cached and total whole numbers below 2^53 (exact as doubles).
inline double prefill_flops(double active_params, double layers, double hidden, double cached,
                            double total) noexcept {
  if (!(total > cached)) return 0;
  const double n = total - cached;
  // Σ j for j in [c, L) = (c + L − 1) · n / 2
  const double positions = (cached + total - 1.0) * n / 2;
  return 2.0 * active_params * n + 4.0 * layers * hidden * positions;
}

}  // namespace kvtk::cost
