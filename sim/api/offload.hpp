// sim/api/offload.hpp — `kvtk replay --offload`: an engine's own offload tier under its GPU
// cache (vLLM 0.33's OffloadingConnector with the CPU spec: kvtk/tier/vllm_offload.hpp), parsed
// from "medium:size[:policy[:usd_per_gb_month]][,key=value...]" and reported per tier.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "kvtk/tier/vllm_offload.hpp"

namespace kvtk::sim {

/// One --offload spec, checked (everything but the GPU capacity, which is --capacity's).
struct offload_spec {
  std::string text;                 ///< as given
  std::string medium = "cpu";       ///< cpu (the only tier vLLM 0.33's CPU spec has)
  std::string size_given;           ///< the size as written ("20000", "64GiB", "3Mtok")
  std::uint64_t size_blocks = 0;    ///< the size in GPU blocks
  double usd_per_gb_month = 0;      ///< the tier's rent (0: not priced)
  kvtk::tier::vllm_offload_config cfg;  ///< gpu_blocks unset
  std::uint64_t block_bytes = 0;    ///< bytes of one GPU block (0 without --model)
};

/// Parses one --offload spec for `--engine vllm` with GPU blocks of block_tokens tokens (bytes
/// per token from --model, 0 without one). Knobs: block_size (tokens, a multiple of
/// block_tokens; default block_tokens), store_threshold, max_tracker_size. Throws usage_error
/// naming the spec and the problem: an unknown medium or knob, a size below one offloaded block,
/// a policy vLLM's CPU spec cannot run, a bad number.
offload_spec parse_offload_spec(const std::string& text, std::uint32_t block_tokens,
                                std::uint64_t bytes_per_token);

/// The `vllm serve` flags that configure the spec (vLLM 0.33: --block-size and
/// --kv-transfer-config; a kvtk policy through kvtk.integrations.vllm). Without a model the byte
/// size is a placeholder that says what to multiply.
std::string vllm_flags(const offload_spec& s, std::uint32_t block_tokens);

/// "cpu:400x2:lru" style description of a spec (chunks x GPU blocks per chunk).
std::string describe(const offload_spec& s);

/// The per-tier report of one offload job (docs/tiers.md "Engine offload tiers").
nlohmann::json offload_report(const offload_spec& s,
                              const kvtk::tier::vllm_offload_counters& c,
                              std::uint32_t gpu_blocks, std::uint32_t block_tokens,
                              double trace_days);

}  // namespace kvtk::sim
