// sim/des/engine_sched.hpp — kvtk simulate's engine schedulers: iteration-level models of
// vLLM's and SGLang's schedulers over their own KV accounting (engine_kv.hpp). Rules of each in
// docs/simulate.md "Engine schedulers"; summary in the header of engine_sched.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "kvtk/names.hpp"
#include "kvtk/prefix/replay.hpp"
#include "kvtk/tier/sglang_hicache.hpp"

namespace kvtk::sim::des {

struct cluster_config;
struct simulation_result;
struct simulation_hooks;
using simulation_progress = std::function<void(std::uint64_t ended, std::uint64_t total)>;

/// The schedulers (the `scheduler` key): kvtk's own (the cluster) and the engine schedulers.
enum class scheduler_kind : std::uint8_t { kvtk, vllm_v0, vllm_v1, sglang };
inline constexpr kvtk::name_table<scheduler_kind, 4> scheduler_names{
    "scheduler", {"kvtk", "vllm-v0", "vllm-v1", "sglang"}};
/// SGLang's waiting-queue orders (the `schedule_policy` key).
enum class schedule_policy_kind : std::uint8_t { lpm, fcfs };
inline constexpr kvtk::name_table<schedule_policy_kind, 2> schedule_policy_names{"policy",
                                                                                 {"lpm", "fcfs"}};

/// Which scheduler runs each instance, and its parameters (config keys of the same names).
struct engine_scheduler_config {
  /// kvtk: kvtk's own model (one prefill at a time, decode batches; docs/simulate.md);
  /// vllm-v0 | vllm-v1 | sglang: the engine schedulers (engine_sched.cpp).
  std::string scheduler = "kvtk";
  /// The hit and occupancy accounting: auto = the scheduler's (kvtk: ideal; vllm-*: vllm;
  /// sglang: sglang). An engine scheduler runs on its own engine's accounting only.
  std::string engine = "auto";
  std::uint64_t max_num_batched_tokens = 8192;  ///< tokens per iteration (vLLM's default for
                                                ///< `vllm serve` on 70+ GB GPUs; SGLang's
                                                ///< chunked_prefill_size)
  std::uint32_t max_num_seqs = 1024;            ///< running requests per instance (vLLM
                                                ///< max_num_seqs; SGLang max_running_requests)
  std::string schedule_policy = "lpm";          ///< sglang: lpm (longest prefix first) | fcfs
  /// vllm-v0: a prefill batch's tokens counted as requests x its longest prompt (padded), as
  /// Vidur's vLLM scheduler counts them, instead of their sum.
  bool padded_prefill_budget = false;
  /// vllm-v0: admit a prompt only when this share of the KV blocks stays free after it (vLLM
  /// V0's BlockSpaceManager watermark, 0.01 there and in Vidur); 0 = none.
  double watermark_blocks_fraction = 0;
  double gpu_memory_utilization = 0.9;  ///< KV blocks = this share of HBM less the weights
                                        ///< and the reserves, when no block count is given
  /// KV blocks per instance as the engine logs them ("# GPU blocks"; vLLM's
  /// num_gpu_blocks_override), in engine pages (page_tokens); 0 = derived from the HBM.
  std::uint64_t num_gpu_blocks_override = 0;
  /// sglang: SGLang's mem_fraction_static (weights + KV pool as a share of HBM; its activations
  /// and CUDA graphs live outside it); 0 = gpu_memory_utilization with the reserves, as vLLM.
  double mem_fraction_static = 0;
  /// Per GPU, in GiB, subtracted from the fraction of HBM with the weights (vLLM's profile:
  /// torch peak activation, CUDA graphs, non-torch memory; SGLang: non-torch only, since its
  /// activations and graphs are outside mem_fraction_static). Default 0: give the engine's
  /// figures, or num_gpu_blocks_override from its log.
  double activation_reserve_gib = 0, cuda_graph_reserve_gib = 0, non_torch_reserve_gib = 0;
  /// vllm-v1: vLLM's async scheduling (its default on CUDA GPUs): the next iteration is
  /// scheduled before the last one's output is processed, so a request that finished keeps its
  /// blocks and its place in max_num_seqs through one more schedule. false = synchronous (vLLM
  /// on CPU, or --no-async-scheduling).
  bool async_scheduling = true;
  bool log_iterations = false;          ///< keep every iteration's batch (simulation_result)
  [[nodiscard]] bool engine_scheduler() const { return scheduler != "kvtk"; }
  /// The most new tokens one iteration gives a prompt (0 = all of it): vllm-v0 never chunks.
  [[nodiscard]] std::uint64_t prefill_chunk() const {
    return scheduler == "vllm-v0" ? 0 : max_num_batched_tokens;
  }
  /// The scheduler as an enum.  Throws: kvtk::unknown_name for an unknown name.
  [[nodiscard]] scheduler_kind kind() const { return scheduler_names.parse(scheduler); }
  /// The accounting in effect (engine resolved from auto).
  [[nodiscard]] std::string accounting() const;
  /// Throws std::invalid_argument naming the key for an unknown scheduler, engine or policy, a
  /// scheduler/engine pair that does not go together, or an impossible number.
  void validate() const;
  [[nodiscard]] nlohmann::json describe() const;
};

namespace detail {
/// The KV capacity of one instance and how it was derived (the summary's "kv_capacity").
struct kv_capacity {
  std::uint32_t blocks = 0;
  nlohmann::json describe;
};
/// KV blocks of one instance, in t's blocks (the engine's pages): num_gpu_blocks_override or
/// local_cache when given, else the fraction of HBM (gpu_memory_utilization, or SGLang's
/// mem_fraction_static) less the bf16 weights and the reserves. Throws std::invalid_argument
/// when nothing is left, or for reserves beside a given block count.
kv_capacity engine_kv_blocks(const kvtk::prefix::prefix_trace_view& t, const cluster_config& c);
/// SGLang HiCache (`offload` "host:..."): the tree over a device pool of device_pages pages, its
/// host pages as given or int(device tokens x ratio) / page + 1 (SGLang's HostKVCache), its
/// slots capped at the pages the run can name. Throws std::invalid_argument for 2^31 pages or more.
kvtk::tier::sglang_hicache_config hicache_config(const kvtk::prefix::prefix_trace_view& t,
                                                 const cluster_config& c, std::uint32_t device_pages);
/// The distinct pages a run can name: the prompts' block references and every request's
/// generated pages (a bound for the caches sized by keys).
std::uint64_t distinct_pages(const kvtk::prefix::prefix_trace_view& t, const cluster_config& c);
/// Throws std::invalid_argument for what the engine schedulers do not model (by name).
void check_engine_config(const kvtk::prefix::prefix_trace_view& t, const cluster_config& c);
/// Throws std::invalid_argument when c's timing table lacks a kind the trace needs: prefill rows
/// (any request), decode rows (a request with more than one output token). Every scheduler.
void check_table_kinds(const kvtk::prefix::prefix_trace_view& t, const cluster_config& c);
/// The simulation with an engine scheduler (cfg.sched.engine_scheduler()).
/// Throws std::invalid_argument for a config the engine schedulers do not model.
simulation_result simulate_engine(const kvtk::prefix::prefix_trace_view& t,
                                  const cluster_config& cfg, const simulation_hooks& hooks);
}  // namespace detail

}  // namespace kvtk::sim::des
