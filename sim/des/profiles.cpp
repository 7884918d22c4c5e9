// sim/des/profiles.cpp — the simulator's presets, built from the one table of models and GPUs
// (kvtk/cost/profiles.hpp).
#include "des/profiles.hpp"

namespace kvtk::sim::des {

const std::map<std::string, model_profile>& model_presets() {
  static const std::map<std::string, model_profile> m = [] {
    std::map<std::string, model_profile> out;
    for (const kvtk::cost::model_spec& s : kvtk::cost::model_specs) {
      const std::string name(s.name);
      out[name] = {name, s.layers, s.hidden, s.active_params, s.kv_bytes_per_token(), s.total_params};
    }
    return out;
  }();
  return m;
}

const std::map<std::string, gpu_profile>& gpu_presets() {
  // Efficiencies: the defaults of gpu_profile (profiles.hpp).
  static const std::map<std::string, gpu_profile> g = [] {
    std::map<std::string, gpu_profile> out;
    for (const kvtk::cost::gpu_spec& s : kvtk::cost::gpu_specs) {
      const std::string name(s.name);
      gpu_profile p;
      p.name = name;
      p.tflops = s.tflops;
      p.hbm_bytes_per_s = s.hbm_bytes_per_s;
      p.hbm_bytes = s.hbm_bytes;
      p.host_link_bytes_per_s = s.host_link_bytes_per_s;
      out[name] = p;
    }
    return out;
  }();
  return g;
}

}  // namespace kvtk::sim::des
