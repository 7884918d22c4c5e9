// sim/api/offload.hpp — `kvtk replay --offload`: an engine's own offload tier under its GPU
// cache, parsed from "medium:size[:policy[:usd_per_gb_month]][,key=value...]" and reported per
// tier. The medium names the engine: `cpu` is vLLM 0.33's OffloadingConnector with the CPU spec
// (kvtk/tier/vllm_offload.hpp), `host` SGLang 0.5.23's HiCache host pool
// (kvtk/tier/sglang_hicache.hpp), `lmcache-cpu` LMCache 0.5.6's CPU (and, with disk=SIZE, local
// disk) backend behind vLLM (kvtk/tier/lmcache_offload.hpp), `kvbm` Dynamo KVBM 1.6.1's host and
// disk tiers behind vLLM (kvtk/tier/dynamo_kvbm.hpp).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "kvtk/tier/dynamo_kvbm.hpp"
#include "kvtk/tier/hicache_storage.hpp"
#include "kvtk/tier/lmcache_offload.hpp"
#include "kvtk/tier/sglang_hicache.hpp"
#include "kvtk/tier/vllm_offload.hpp"

namespace kvtk::sim {

/// One --offload spec, checked (everything but the GPU capacity, which is --capacity's).
struct offload_spec {
  std::string text;                 ///< as given
  std::string medium = "cpu";       ///< cpu (vLLM's CPU spec), lmcache-cpu (LMCache's local CPU
                                    ///< backend under vLLM), kvbm (Dynamo KVBM) or host (SGLang's
                                    ///< HiCache)
  std::string engine = "vllm";      ///< vllm (medium cpu) or sglang (medium host)
  std::string size_given;           ///< the size as written ("20000", "64GiB", "3Mtok")
  std::uint64_t size_blocks = 0;    ///< the size in GPU blocks
  double usd_per_gb_month = 0;      ///< the tier's rent (0: not priced)
  kvtk::tier::vllm_offload_config cfg;  ///< vllm: gpu_blocks unset
  kvtk::tier::sglang_hicache_config hicache;  ///< sglang: device_pages unset; host_pages unless
                                              ///< given as a ratio
  double hicache_ratio = 0;         ///< sglang: the size as "Nx" (--hicache-ratio), else 0
  kvtk::tier::hicache_l3_config hicache_l3;  ///< sglang: the L3 tier (storage=file; simulate only)
  std::uint64_t storage_pages = 0;  ///< sglang: storage_size in pages (0 = unbounded)
  bool l3_knobs_given = false;      ///< sglang: any L3 knob was given
  kvtk::tier::lmcache_offload_config lmcache;  ///< lmcache-cpu: gpu_blocks unset
  kvtk::tier::dynamo_kvbm_config kvbm;  ///< kvbm: gpu_blocks unset
  std::string disk_given;               ///< kvbm, lmcache-cpu: the disk size as written ("" = none)
  double disk_usd_per_gb_month = 0;     ///< kvbm, lmcache-cpu: the disk's rent (disk_usd=; 0: not priced)
  double disk_bytes_per_s = 2e9;        ///< kvbm, lmcache-cpu: the disk's read rate (disk_gb_per_s=; simulate)
  double disk_latency_s = 100e-6;       ///< kvbm, lmcache-cpu: per read (disk_latency_us=; simulate)
  bool disk_link_given = false;         ///< disk_gb_per_s or disk_latency_us was given
  std::uint64_t block_bytes = 0;    ///< bytes of one GPU block (0 without --model)
};

/// Parses one --offload spec with GPU blocks of block_tokens tokens (bytes per token from --model,
/// 0 without one). vLLM (cpu) knobs: block_size (tokens, a multiple of block_tokens; default
/// block_tokens), store_threshold, max_tracker_size. SGLang (host): the size may be a ratio of
/// the device pool ("2x", --hicache-ratio); the policy is lru (its radix eviction); knob
/// write_policy. Throws usage_error naming the spec and the problem: an unknown medium or knob, a
/// size below one offloaded block, a policy the engine cannot run, a bad number.
offload_spec parse_offload_spec(const std::string& text, std::uint32_t block_tokens,
                                std::uint64_t bytes_per_token);

/// The `vllm serve` flags that configure the spec (vLLM 0.33: --block-size and
/// --kv-transfer-config; a kvtk policy through kvtk.integrations.vllm). Without a model the byte
/// size is a placeholder that says what to multiply.
std::string vllm_flags(const offload_spec& s, std::uint32_t block_tokens);

/// The `python -m sglang.launch_server` flags that configure an SGLang spec over a device pool of
/// device_pages pages (--page-size, --enable-hierarchical-cache, --hicache-ratio or -size,
/// --hicache-write-policy).
std::string sglang_flags(const offload_spec& s, std::uint64_t device_pages, std::uint32_t block_tokens);

/// The host pages of an SGLang spec over a device pool of device_pages pages: as given, or
/// int(device tokens x ratio) / page + 1 (SGLang's HostKVCache, its padding page included).
std::uint64_t hicache_host_pages(const offload_spec& s, std::uint64_t device_pages,
                                 std::uint32_t block_tokens);

/// "cpu:400x2:lru" style description of a spec (chunks x GPU blocks per chunk).
std::string describe(const offload_spec& s);

/// The per-tier report of one offload job (docs/tiers.md "Engine offload tiers").
nlohmann::json offload_report(const offload_spec& s,
                              const kvtk::tier::vllm_offload_counters& c,
                              std::uint32_t gpu_blocks, std::uint32_t block_tokens,
                              double trace_days);
/// The per-tier report of one LMCache job (vLLM's LMCacheConnectorV1, the local CPU backend).
nlohmann::json lmcache_report(const offload_spec& s, const kvtk::tier::lmcache_offload_counters& c,
                              std::uint32_t gpu_blocks, std::uint32_t block_tokens, double trace_days);
/// The per-tier report of one Dynamo KVBM job (G1 GPU, G2 host, G3 disk).
nlohmann::json kvbm_report(const offload_spec& s, const kvtk::tier::dynamo_kvbm_counters& c,
                           std::uint32_t gpu_blocks, std::uint32_t block_tokens, double trace_days);
/// The per-tier report of one SGLang HiCache job.
nlohmann::json hicache_report(const offload_spec& s, const kvtk::tier::sglang_hicache_counters& c,
                              std::uint64_t device_pages, std::uint64_t host_pages,
                              std::uint32_t block_tokens, double trace_days);

}  // namespace kvtk::sim
