// tests/engine_vectors.hpp — tests/data/engine_hash_vectors.json (written by
// tools/engine-check/gen_hash_vectors.py with vLLM's and SGLang's own functions), shared by the
// hasher tests and the trace-import tests.
#pragma once

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef KVTK_ENGINE_VECTORS
#error "define KVTK_ENGINE_VECTORS as the path of tests/data/engine_hash_vectors.json"
#endif

namespace engine_vectors {

inline const nlohmann::json& vectors() {
  static const nlohmann::json j = [] {
    std::ifstream in(KVTK_ENGINE_VECTORS);
    if (!in) throw std::runtime_error("cannot open " + std::string(KVTK_ENGINE_VECTORS));
    return nlohmann::json::parse(in);
  }();
  return j;
}

/// A token sequence as the file gives it: a list, or {"affine": {n, a, b, mod}}.
inline std::vector<std::int64_t> expand(const nlohmann::json& spec) {
  std::vector<std::int64_t> out;
  if (spec.is_array()) {
    for (const auto& t : spec) out.push_back(t.get<std::int64_t>());
    return out;
  }
  const auto& p = spec.at("affine");
  const auto n = p.at("n").get<std::int64_t>(), a = p.at("a").get<std::int64_t>(),
             b = p.at("b").get<std::int64_t>(), mod = p.at("mod").get<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i) out.push_back((a * i + b) % mod);
  return out;
}

}  // namespace engine_vectors
