// The cluster config of `kvtk simulate` from JSON (docs/simulate.md): every key checked and
// named in errors.
#include "api/simulate.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>

#include "api/trace_options.hpp"
#include "api/pricing.hpp"
#include "api/offload.hpp"
#include "formats/decode_records.hpp"
#include "move/calibration.hpp"

namespace kvtk::sim {
namespace {


const char* const known_keys[] = {
    "model", "gpu", "gpus_per_instance", "prefill_instances", "decode_instances", "local_cache", "local_policy",
    "dram", "pool", "offload", "reject_over_slo", "pool_gb_per_s", "pool_latency_us", "overlap_load", "pd_link_gb_per_s", "max_batch", "chunk_tokens",
    "max_output_tokens", "time_scale", "router", "router_prefill_weight", "router_temperature",
    "ttft_slo_ms", "tbt_slo_ms", "seed", "partial_block", "calibration", "calibration_mechanism",
    "sparse", "efficiency", "compute_efficiency", "memory_efficiency", "iteration_overhead_s",
    "request_overhead_s",
    "timing_table", "scheduler", "engine", "max_num_batched_tokens", "max_num_seqs",
    "schedule_policy", "gpu_memory_utilization", "async_scheduling", "padded_prefill_budget",
    "watermark_blocks_fraction", "arrivals", "closed_latency",
    "num_gpu_blocks_override", "mem_fraction_static", "activation_reserve_gib",
    "cuda_graph_reserve_gib", "non_torch_reserve_gib", "page_tokens", "enable_prefix_caching"};

const char* const sparse_keys[] = {"pattern",  "page_tokens", "top_k_pages", "budget", "scorer",
                                   "prefetch", "persistence", "drift",       "zipf",   "seed"};

double number(const nlohmann::json& j, const char* key) {
  if (!j[key].is_number()) throw usage_error(std::string("config: '") + key + "' must be a number");
  const double v = j[key].get<double>();
  if (!(v >= 0) || !std::isfinite(v)) {
    throw usage_error(std::string("config: '") + key + "' must be finite and >= 0");
  }
  return v;
}

std::uint64_t whole(const nlohmann::json& j, const char* key, std::uint64_t max) {
  const double v = number(j, key);
  if (v != std::floor(v) || v > static_cast<double>(max)) {
    throw usage_error(std::string("config: '") + key + "' must be a whole number <= " +
                      std::to_string(max));
  }
  return static_cast<std::uint64_t>(v);
}

// An efficiency: a fraction of peak in (0, 1].
double efficiency(const nlohmann::json& j, const char* key) {
  const double v = j[key].is_number() ? j[key].get<double>() : -1.0;
  if (!(v > 0 && v <= 1)) {
    throw usage_error(std::string("config: '") + key + "' must be a number in (0, 1]");
  }
  return v;
}

// `efficiency` (the one knob of old configs) sets both; a separate key wins over it.
void read_efficiencies(const nlohmann::json& j, des::gpu_profile& g) {
  if (j.contains("efficiency")) {
    g.compute_efficiency = g.memory_efficiency = efficiency(j, "efficiency");
  }
  if (j.contains("compute_efficiency")) g.compute_efficiency = efficiency(j, "compute_efficiency");
  if (j.contains("memory_efficiency")) g.memory_efficiency = efficiency(j, "memory_efficiency");
}

// Iteration timing (docs/simulate.md "Timing"): efficiencies over the gpu's, the per-iteration
// overhead, and a measured timing table (null = none). A bad table is a usage error naming
// its file, line and reason.
void read_timing(const nlohmann::json& j, des::cluster_config& c) {
  read_efficiencies(j, c.gpu);
  if (j.contains("iteration_overhead_s")) {
    c.iteration_overhead_s = number(j, "iteration_overhead_s");
    if (c.iteration_overhead_s > 10) {
      throw usage_error("config: 'iteration_overhead_s' must be in [0, 10] seconds");
    }
  }
  if (j.contains("request_overhead_s")) {
    c.request_overhead_s = number(j, "request_overhead_s");
    if (c.request_overhead_s > 1) {
      throw usage_error("config: 'request_overhead_s' must be in [0, 1] seconds");
    }
  }
  if (!j.contains("timing_table") || j["timing_table"].is_null()) return;
  if (!j["timing_table"].is_string() || j["timing_table"].get<std::string>().empty()) {
    throw usage_error("config: 'timing_table' must be a file name");
  }
  try {
    c.timing = std::make_shared<const des::timing_table>(
        des::timing_table::load(j["timing_table"].get<std::string>()));
  } catch (const des::timing_table_error& e) {
    throw usage_error(std::string("timing table ") + e.what());
  }
}

// sparse.budget: pages (a number), "<N>tok" or "<P>%".
kvtk::sparse::hbm_budget sparse_budget(const nlohmann::json& b) {
    const char* what =
      "config: 'sparse.budget' must be pages (a whole number >= 1), \"<N>tok\" "
      "(1 <= N <= 10^15) or \"<P>%\" (0 < P <= 100)";
  if (b.is_number()) {
    const double v = b.get<double>();
    if (!(v >= 1) || v != std::floor(v) || v > 4e9) throw usage_error(what);
    return kvtk::sparse::hbm_budget::in_blocks(static_cast<std::uint32_t>(v));
  } else if (b.is_string()) {
    const std::string t = b.get<std::string>();
    const bool tok = t.size() > 3 && t.ends_with("tok"), pct = t.size() > 1 && t.ends_with('%');
    if (!tok && !pct) throw usage_error(what);
    const std::string n = t.substr(0, t.size() - (tok ? 3 : 1));
    double v = 0;
    std::size_t used = 0;
    try {
      v = std::stod(n, &used);
    } catch (const std::exception&) {
      throw usage_error(what);
    }
    if (used != n.size() || !std::isfinite(v)) throw usage_error(what);
    if (tok) {
      // Bounded before the cast: a double beyond 2^64 does not convert (the fuzzer's 4e56tok).
      if (!(v >= 1) || v != std::floor(v) || v > 1e15) throw usage_error(what);
      return kvtk::sparse::hbm_budget::in_tokens(static_cast<std::uint64_t>(v));
    } else {
      if (!(v > 0 && v <= 100)) throw usage_error(what);
      return kvtk::sparse::hbm_budget::fraction_of_context(v / 100);
    }
  } else {
    throw usage_error(what);
  }
}

// Reads j[key] into out when present; another type is a usage error naming the key.
void read_bool(const nlohmann::json& j, const char* key, bool& out) {
  if (!j.contains(key)) return;
  if (!j[key].is_boolean()) throw usage_error(std::string("config: '") + key + "' must be true or false");
  out = j[key].get<bool>();
}
void read_string(const nlohmann::json& j, const char* key, std::string& out) {
  if (!j.contains(key)) return;
  if (!j[key].is_string()) throw usage_error(std::string("config: '") + key + "' must be a string");
  out = j[key].get<std::string>();
}

// The optional "sparse" object (docs/simulate.md); errors name the key as sparse.<key>.
des::sparse_config sparse_from_json(const nlohmann::json& s) {
  if (!s.is_object()) throw usage_error("config: 'sparse' must be an object");
  for (const auto& [key, v] : s.items()) {
    if (std::find(std::begin(sparse_keys), std::end(sparse_keys), key) == std::end(sparse_keys)) {
      throw usage_error("config: unknown key 'sparse." + key + "'");
    }
  }
  auto text = [&](const char* key) {
    if (!s[key].is_string()) {
      throw usage_error(std::string("config: 'sparse.") + key + "' must be a string");
    }
    return s[key].get<std::string>();
  };
  auto num = [&](const char* key) {
    try {
      return number(s, key);
    } catch (const usage_error& e) {
      std::string m = e.what();
      const auto at = m.find('\'');
      throw usage_error(m.insert(at + 1, "sparse."));
    }
  };
  auto whole_num = [&](const char* key, std::uint64_t max) {
    const double v = num(key);
    if (v != std::floor(v) || v > static_cast<double>(max)) {
      throw usage_error(std::string("config: 'sparse.") + key +
                        "' must be a whole number <= " + std::to_string(max));
    }
    return static_cast<std::uint64_t>(v);
  };
  des::sparse_config c;
  c.enabled = true;
  if (s.contains("pattern")) c.pattern = text("pattern");
  if (c.pattern != "dsa" && c.pattern != "quest") {
    throw usage_error("config: 'sparse.pattern': unknown pattern '" + c.pattern + "' (dsa quest)");
  }
  c.page_tokens = c.pattern == "quest" ? 16 : 64;
  if (s.contains("page_tokens")) {
    c.page_tokens = static_cast<std::uint32_t>(whole_num("page_tokens", 1u << 20));
    if (c.page_tokens == 0) throw usage_error("config: 'sparse.page_tokens' must be >= 1");
  }
  if (s.contains("top_k_pages")) {
    c.top_k_pages = static_cast<std::uint32_t>(whole_num("top_k_pages", 1u << 20));
    if (c.top_k_pages == 0) throw usage_error("config: 'sparse.top_k_pages' must be >= 1");
  }
  if (s.contains("budget")) c.budget = sparse_budget(s["budget"]);
  if (s.contains("scorer")) c.scorer = text("scorer");
  if (kvtk::sparse::all_scorers::index_of(c.scorer) == kvtk::sparse::all_scorers::npos) {
    std::string names;
    for (const auto n : kvtk::sparse::all_scorers::names) {
      names += (names.empty() ? "" : " ") + std::string(n);
    }
    throw usage_error("config: 'sparse.scorer': unknown scorer '" + c.scorer + "' (" + names + ")");
  }
  if (s.contains("prefetch")) {
    const std::string p = text("prefetch");
    if (p != "none" && p != "next-step" && p != "layer-ahead") {
      throw usage_error("config: 'sparse.prefetch': unknown mode '" + p +
                        "' (none next-step layer-ahead)");
    }
    c.prefetch_next_step = p == "next-step";
    c.prefetch_layer_ahead = p == "layer-ahead";
  }
  for (const char* key : {"persistence", "drift"}) {
    if (!s.contains(key)) continue;
    const double v = s[key].is_number() ? s[key].get<double>() : -1.0;
    if (!(v >= 0 && v <= 1)) {
      throw usage_error(std::string("config: 'sparse.") + key + "' must be a number in [0, 1]");
    }
    (std::string(key) == "drift" ? c.drift : c.persistence) = v;
  }
  if (s.contains("zipf")) c.zipf = num("zipf");
  if (s.contains("seed")) c.seed = whole_num("seed", ~0ull >> 11);
  return c;
}

// --set key=value (a JSON value, or else a string); "sparse.<key>" sets one key of "sparse".
void apply_overrides(nlohmann::json& j, const std::vector<std::string>& overrides) {
  for (const auto& o : overrides) {
    const auto eq = o.find('=');
    if (eq == std::string::npos || eq == 0) throw usage_error("--set: '" + o + "' is not key=value");
    const std::string key = o.substr(0, eq), value = o.substr(eq + 1);
    nlohmann::json v;
    try {
      v = nlohmann::json::parse(value);
    } catch (const nlohmann::json::exception&) {
      v = value;
    }
    if (key.starts_with("sparse.") && key.size() > 7) {  // one key inside the sparse object
      if (!j.contains("sparse") || !j["sparse"].is_object()) j["sparse"] = nlohmann::json::object();
      j["sparse"][key.substr(7)] = v;
    } else {
      j[key] = v;
    }
  }
}

// "model": a preset name or an object with layers, hidden, active_params, kv_bytes_per_token.
des::model_profile model_from_json(const nlohmann::json& m) {
  des::model_profile model;
  if (m.is_string()) {
    const auto it = des::model_presets().find(m.get<std::string>());
    if (it == des::model_presets().end()) {
      throw usage_error("config: unknown model '" + m.get<std::string>() +
                        "' (deepseek-v3 llama-3-70b qwen2.5-7b qwen3-235b-a22b, or an object)");
    }
    model = it->second;
  } else if (m.is_object()) {
      for (const char* k : {"layers", "hidden", "active_params", "kv_bytes_per_token"}) {
      if (!m.contains(k)) throw usage_error(std::string("config: model lacks '") + k + "'");
    }
    model.name = "custom";
    if (m.contains("name") && !m["name"].is_string()) {
      throw usage_error("config: the model's 'name' must be a string");
    }
    read_string(m, "name", model.name);
    model.layers = static_cast<std::uint32_t>(whole(m, "layers", 100000));
    model.hidden = static_cast<std::uint32_t>(whole(m, "hidden", 1u << 24));
    model.active_params = number(m, "active_params");
    model.kv_bytes_per_token = whole(m, "kv_bytes_per_token", 1ull << 40);
    if (m.contains("total_params")) model.total_params = number(m, "total_params");
  } else {
    throw usage_error("config: 'model' must be a preset name or an object");
  }
  return model;
}

// "gpu": a preset name or an object with tflops, hbm_gb_per_s, hbm_gb, host_link_gb_per_s and
// optionally efficiency, compute_efficiency, memory_efficiency.
des::gpu_profile gpu_from_json(const nlohmann::json& g) {
  des::gpu_profile gpu;
  if (g.is_string()) {
    const auto it = des::gpu_presets().find(g.get<std::string>());
    if (it == des::gpu_presets().end()) {
      throw usage_error("config: unknown gpu '" + g.get<std::string>() +
                        "' (h100 h200 h800 a800, or an object)");
    }
    gpu = it->second;
  } else if (g.is_object()) {
      for (const char* k : {"tflops", "hbm_gb_per_s", "hbm_gb", "host_link_gb_per_s"}) {
      if (!g.contains(k)) throw usage_error(std::string("config: gpu lacks '") + k + "'");
    }
    gpu.name = "custom";
    if (g.contains("name") && !g["name"].is_string()) {
      throw usage_error("config: the gpu's 'name' must be a string");
    }
    read_string(g, "name", gpu.name);
    gpu.tflops = number(g, "tflops");
    gpu.hbm_bytes_per_s = number(g, "hbm_gb_per_s") * 1e9;
    gpu.hbm_bytes = number(g, "hbm_gb") * 1e9;
    gpu.host_link_bytes_per_s = number(g, "host_link_gb_per_s") * 1e9;
    read_efficiencies(g, gpu);
  } else {
    throw usage_error("config: 'gpu' must be a preset name or an object");
  }
  return gpu;
}

// "offload": vLLM 0.33's OffloadingConnector (CPU spec), LMCache 0.5.6's CPU backend (and its
// local disk), Dynamo KVBM 1.6.1's host and disk tiers, or SGLang 0.5.23's HiCache host pool
// under each instance's KV cache, in `replay --offload`'s syntax.
void read_offload(const nlohmann::json& j, std::uint32_t block_tokens, des::cluster_config& c) {
  if (!j.contains("offload") || j["offload"].is_null()) return;
  if (!j["offload"].is_string()) {
    throw usage_error("config: 'offload' must be a string such as \"cpu:20000:lru\"");
  }
  const std::string text = j["offload"].get<std::string>();
  offload_spec s;
  try {
    s = parse_offload_spec(text, block_tokens, c.model.kv_bytes_per_token);
  } catch (const usage_error& e) {
    throw usage_error(std::string("config: 'offload': ") + e.what());
  }
  if (s.medium != "cpu" && s.medium != "host" && s.medium != "lmcache-cpu" && s.medium != "kvbm") {
    throw usage_error("config: 'offload' '" + text + "': simulate models vLLM's OffloadingConnector "
                      "(medium cpu), LMCache (lmcache-cpu), Dynamo KVBM (kvbm) and SGLang's HiCache "
                      "(medium host); " + s.medium + " is kvtk replay's only");
  }
  c.offload = text;
  c.offload_medium = s.medium;
  c.offload_cfg = s.cfg;
  c.hicache_cfg = s.hicache;
  c.hicache_ratio = s.hicache_ratio;
  c.lmcache_cfg = s.lmcache;
  c.lmcache_cfg.gpu_blocks = 1;  // the engine scheduler's own pool is the GPU's
  c.kvbm_cfg = s.kvbm;
  c.kvbm_cfg.gpu_blocks = 1;
  c.disk_bytes_per_s = s.disk_bytes_per_s;
  c.disk_latency_s = s.disk_latency_s;
  c.hicache_l3 = s.hicache_l3;
  if (s.storage_pages > 0) {
    // In the engine's page bytes (at least 1: a model without KV bytes caps in pages).
    c.hicache_l3.max_bytes =
        s.storage_pages * std::max<std::uint64_t>(std::uint64_t{block_tokens} * c.model.kv_bytes_per_token, 1);
  }
}

// "calibration" (+ "calibration_mechanism"): the DRAM tier's host link from a measured
// dram->hbm fit (cuda/validate.sh's h2d).
void calibrate_host_link(const nlohmann::json& j, std::uint32_t block_tokens,
                         des::cluster_config& c) {
  if (j.contains("calibration_mechanism") && !j.contains("calibration")) {
    throw usage_error("config: 'calibration_mechanism' needs 'calibration'");
  }
  if (j.contains("calibration")) {
    if (!j["calibration"].is_string()) throw usage_error("config: 'calibration' must be a file name");
    std::string mech;
    if (j.contains("calibration_mechanism")) {
      if (!j["calibration_mechanism"].is_string()) {
        throw usage_error("config: 'calibration_mechanism' must be a string");
      }
      mech = j["calibration_mechanism"].get<std::string>();
    }
    try {
      const auto cal = move::calibration::load(j["calibration"].get<std::string>());
      const auto bb = c.model.kv_bytes_per_token * (block_tokens ? block_tokens : 512u);
      const auto fit = cal.find("dram", "hbm", bb, mech);
      if (!fit) {
        throw std::runtime_error(cal.source + ": no dram->hbm (h2d) fit" +
                                 (mech.empty() ? std::string() : " for mechanism " + mech));
      }
      c.host_link_latency_s = fit->model.alpha_s;
      c.host_link_per_block_s = fit->model.beta_s;
      c.gpu.host_link_bytes_per_s = fit->model.bytes_per_s;
      c.host_link_calibration = {{"file", cal.source}, {"path", "dram->hbm"},
                                 {"mechanism", fit->mechanism}, {"alpha_s", fit->model.alpha_s},
                                 {"beta_s", fit->model.beta_s},
                                 {"bytes_per_s", fit->model.bytes_per_s},
                                 {"clamped", fit->clamped}};
    } catch (const std::runtime_error& e) {
      throw usage_error(std::string("config 'calibration': ") + e.what());
    }
  }
}

// The engine scheduler keys (docs/simulate.md "Engine schedulers"), checked by name.
void read_scheduler(const nlohmann::json& j, des::engine_scheduler_config& s) {
  read_string(j, "scheduler", s.scheduler);
  read_string(j, "engine", s.engine);
  if (!j.contains("scheduler")) {  // an engine picks its scheduler
    if (s.engine == "vllm") s.scheduler = "vllm-v1";
    if (s.engine == "sglang") s.scheduler = "sglang";
  }
  read_string(j, "schedule_policy", s.schedule_policy);
  read_bool(j, "async_scheduling", s.async_scheduling);
  read_bool(j, "padded_prefill_budget", s.padded_prefill_budget);
  if (j.contains("watermark_blocks_fraction")) {
    s.watermark_blocks_fraction = number(j, "watermark_blocks_fraction");
    if (s.watermark_blocks_fraction >= 1) {
      throw usage_error("config: 'watermark_blocks_fraction' must be in [0, 1)");
    }
  }
  if (j.contains("max_num_batched_tokens")) {
    s.max_num_batched_tokens = whole(j, "max_num_batched_tokens", 1ull << 32);
  }
  if (j.contains("max_num_seqs")) {
    s.max_num_seqs = static_cast<std::uint32_t>(whole(j, "max_num_seqs", 1u << 24));
  }
  if (j.contains("gpu_memory_utilization")) {
    s.gpu_memory_utilization = efficiency(j, "gpu_memory_utilization");
  }
  if (j.contains("mem_fraction_static")) {
    s.mem_fraction_static = efficiency(j, "mem_fraction_static");
  }
  if (j.contains("num_gpu_blocks_override")) {
    s.num_gpu_blocks_override = whole(j, "num_gpu_blocks_override", 2147483647);
  }
  for (auto [key, field] : {std::pair{"activation_reserve_gib", &s.activation_reserve_gib},
                            std::pair{"cuda_graph_reserve_gib", &s.cuda_graph_reserve_gib},
                            std::pair{"non_torch_reserve_gib", &s.non_torch_reserve_gib}}) {
    if (!j.contains(key)) continue;
    *field = number(j, key);
    if (*field > 1e6) throw usage_error(std::string("config: '") + key + "' must be in [0, 1e6] GiB");
  }
  try {
    s.validate();
  } catch (const std::invalid_argument& e) {
    throw usage_error(std::string("config: ") + e.what());
  }
}

}  // namespace

des::cluster_config cluster_config_from_json(nlohmann::json& j, std::uint32_t block_tokens,
                                             const std::vector<std::string>& overrides) {
  if (!j.is_object()) throw usage_error("config: must be a JSON object");
  apply_overrides(j, overrides);
  for (const auto& [key, v] : j.items()) {
    if (std::find(std::begin(known_keys), std::end(known_keys), key) == std::end(known_keys)) {
      throw usage_error("config: unknown key '" + key + "'");
    }
  }
  des::cluster_config c;
  if (j.contains("model")) c.model = model_from_json(j["model"]);
  if (j.contains("gpu")) c.gpu = gpu_from_json(j["gpu"]);
  auto capacity = [&](const char* key) -> std::uint64_t {
    if (!j.contains(key)) return 0;
    const std::string text = j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
    if (text == "0") return 0;
    try {
      return parse_capacity(text, block_tokens, c.model.kv_bytes_per_token);
    } catch (const usage_error& e) {
      throw usage_error(std::string("config: '") + key + "': " + e.what());
    }
  };
  c.local_cache_blocks = capacity("local_cache");
  if (j.contains("page_tokens")) {
    c.page_tokens = static_cast<std::uint32_t>(whole(j, "page_tokens", 1u << 24));
    if (c.page_tokens == 0 || block_tokens % c.page_tokens != 0) {
      throw usage_error("config: 'page_tokens' (" + std::to_string(c.page_tokens) +
                        ") must divide the trace's block size (" + std::to_string(block_tokens) +
                        " tokens): a trace block is a whole number of engine pages");
    }
  }
  read_bool(j, "enable_prefix_caching", c.prefix_caching);
  c.pool_blocks = capacity("pool");
  c.dram_blocks = capacity("dram");
  read_offload(j, block_tokens, c);
  read_bool(j, "reject_over_slo", c.reject_over_slo);
  if (j.contains("gpus_per_instance")) {
    c.gpus_per_instance = static_cast<std::uint32_t>(whole(j, "gpus_per_instance", 1024));
  }
  if (j.contains("prefill_instances")) {
    c.prefill_instances = static_cast<std::uint32_t>(whole(j, "prefill_instances", 100000));
  }
  if (j.contains("decode_instances")) {
    c.decode_instances = static_cast<std::uint32_t>(whole(j, "decode_instances", 100000));
  }
  // A number here once reached get<std::string>() and ended as an internal error (fuzz smoke).
  read_string(j, "local_policy", c.local_policy);
  if (j.contains("pool_gb_per_s")) c.pool_bytes_per_s = number(j, "pool_gb_per_s") * 1e9;
  if (j.contains("pool_latency_us")) c.pool_latency_s = number(j, "pool_latency_us") * 1e-6;
  read_bool(j, "overlap_load", c.overlap_load);
  if (j.contains("pd_link_gb_per_s")) c.pd_link_bytes_per_s = number(j, "pd_link_gb_per_s") * 1e9;
  if (j.contains("max_batch")) c.max_batch = static_cast<std::uint32_t>(whole(j, "max_batch", 1u << 20));
  if (j.contains("chunk_tokens")) c.chunk_tokens = whole(j, "chunk_tokens", 1ull << 32);
  if (j.contains("max_output_tokens")) {
    c.max_output_tokens = static_cast<std::int64_t>(whole(j, "max_output_tokens", 1ull << 40));
  }
  if (j.contains("time_scale")) {
    c.time_scale = number(j, "time_scale");
    // 0 is "no time" (order-only, as kvtk replay); above 1e6 every duration overflows the
    // reported figures to null.
    if (c.time_scale > 1e6) throw usage_error("config: 'time_scale' must be in [0, 1e6]");
  }
  if (j.contains("arrivals")) {
    if (!j["arrivals"].is_string() || (j["arrivals"] != "open" && j["arrivals"] != "closed")) {
      throw usage_error("config: 'arrivals' must be \"open\" or \"closed\"");
    }
    c.closed_loop = j["arrivals"] == "closed";
  }
  if (j.contains("closed_latency")) {
    if (!j["closed_latency"].is_string() || (j["closed_latency"] != "unloaded" && j["closed_latency"] != "zero")) {
      throw usage_error("config: 'closed_latency' must be \"unloaded\" or \"zero\"");
    }
    c.closed_latency_unloaded = j["closed_latency"] == "unloaded";
    if (!c.closed_loop) throw usage_error("config: 'closed_latency' is for \"arrivals\": \"closed\"");
  }
  read_scheduler(j, c.sched);
  read_string(j, "router", c.router);
  if (j.contains("router_prefill_weight")) c.router_prefill_weight = number(j, "router_prefill_weight");
  if (j.contains("router_temperature")) c.router_temperature = number(j, "router_temperature");
  if (j.contains("ttft_slo_ms")) c.ttft_slo_s = number(j, "ttft_slo_ms") * 1e-3;
  if (j.contains("tbt_slo_ms")) c.tbt_slo_s = number(j, "tbt_slo_ms") * 1e-3;
  if (j.contains("seed")) c.seed = whole(j, "seed", ~0ull >> 11);
  read_timing(j, c);
  calibrate_host_link(j, block_tokens, c);
  if (j.contains("sparse") && !j["sparse"].is_null()) c.sparse = sparse_from_json(j["sparse"]);
  if (j.contains("partial_block")) {
    if (!j["partial_block"].is_string()) {
      throw usage_error("config: 'partial_block' must be \"skip\" or \"cache\"");
    }
    c.cache_partial_block = parse_partial_block(j["partial_block"].get<std::string>()) == 1;
  }
  return c;
}

}  // namespace kvtk::sim
