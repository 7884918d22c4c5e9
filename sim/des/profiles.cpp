#include "des/profiles.hpp"

namespace kvtk::sim::des {

const std::map<std::string, model_profile>& model_presets() {
  // KV bytes per token: bf16; DeepSeek-V3 caches one 576-wide MLA latent per layer. Total
  // parameters (the weights an engine keeps in HBM): the models' cards (671B / 235B for the
  // mixtures of experts).
  static const std::map<std::string, model_profile> m = {
      {"deepseek-v3", {"deepseek-v3", 61, 7168, 37e9, 70272, 671e9}},
      {"llama-3-70b", {"llama-3-70b", 80, 8192, 70.6e9, 327680, 70.6e9}},
      {"qwen2.5-7b", {"qwen2.5-7b", 28, 3584, 7.6e9, 57344, 7.6e9}},
      {"qwen3-235b-a22b", {"qwen3-235b-a22b", 94, 4096, 22e9, 192512, 235e9}},
  };
  return m;
}

const std::map<std::string, gpu_profile>& gpu_presets() {
  // Dense bf16 tensor TFLOP/s and HBM from the vendors' datasheets; host links are practical
  // pinned-copy figures (PCIe Gen5 ~50 GB/s, Gen4 ~25 GB/s). Efficiencies: profiles.hpp.
  static const std::map<std::string, gpu_profile> g = {
      {"h100", {"h100", 989, 3.35e12, 80e9, 50e9, 0.67, 0.8}},
      {"h200", {"h200", 989, 4.8e12, 141e9, 50e9, 0.67, 0.8}},
      {"h800", {"h800", 989, 3.35e12, 80e9, 50e9, 0.67, 0.8}},
      {"a800", {"a800", 312, 2.0e12, 80e9, 25e9, 0.67, 0.8}},
  };
  return g;
}

}  // namespace kvtk::sim::des
