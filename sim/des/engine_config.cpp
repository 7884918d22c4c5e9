// sim/des/engine_config.cpp — the engine schedulers' config (engine_sched.hpp): names,
// pairings and limits checked, the KV blocks of an instance, and what the engine schedulers do
// not model refused by name.
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "des/cluster.hpp"
#include "des/engine_sched.hpp"
#include "des/outcomes.hpp"
#include "des/router.hpp"
#include "des/sparse_decode.hpp"
#include "kvtk/prefix/engine_index.hpp"
#include "util/memory_budget.hpp"
#include "des/simulator.hpp"

namespace kvtk::sim::des {

namespace {
using kvtk::prefix::engine_accounting;

std::string shown(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}
using kvtk::prefix::engine_names;

// The accounting each scheduler runs on.
engine_accounting accounting_of(scheduler_kind s) {
  switch (s) {
    case scheduler_kind::kvtk:
      return engine_accounting::ideal;
    case scheduler_kind::sglang:
      return engine_accounting::sglang;
    case scheduler_kind::vllm_v0:
    case scheduler_kind::vllm_v1:
      break;
  }
  return engine_accounting::vllm;
}
}  // namespace

std::string engine_scheduler_config::accounting() const {
  if (engine != "auto") return engine;
  return std::string(engine_names.name(accounting_of(kind())));
}

void engine_scheduler_config::validate() const {
  try {
    (void)kind();
    (void)schedule_policy_names.parse(schedule_policy);
  } catch (const kvtk::unknown_name& e) {
    throw std::invalid_argument((e.kind() == "policy" ? "schedule_policy: " : "scheduler: ") +
                                std::string(e.what()));
  }
  if (engine != "auto" && !engine_names.find(engine)) {
    throw std::invalid_argument("engine: unknown engine '" + engine + "' (known: auto " +
                                engine_names.joined() + ")");
  }
  const std::string want = engine_scheduler_config{scheduler}.accounting();
  if (accounting() != want) {
    throw std::invalid_argument("engine " + engine + " does not go with scheduler " + scheduler +
                                " (it runs on " + want + " accounting; --engine vllm selects "
                                "scheduler vllm-v1, --engine sglang scheduler sglang)");
  }
  if (max_num_batched_tokens == 0 || max_num_seqs == 0) {
    throw std::invalid_argument("max_num_batched_tokens and max_num_seqs must be >= 1");
  }
  if (!(gpu_memory_utilization > 0 && gpu_memory_utilization <= 1)) {
    throw std::invalid_argument("gpu_memory_utilization must be in (0, 1]");
  }
  if (!(mem_fraction_static >= 0 && mem_fraction_static <= 1)) {
    throw std::invalid_argument("mem_fraction_static must be in (0, 1] (0: not set)");
  }
  if (!(watermark_blocks_fraction >= 0 && watermark_blocks_fraction < 1)) {
    throw std::invalid_argument("watermark_blocks_fraction must be in [0, 1)");
  }
  if ((padded_prefill_budget || watermark_blocks_fraction > 0) &&
      kind() != scheduler_kind::vllm_v0) {
    throw std::invalid_argument("padded_prefill_budget and watermark_blocks_fraction are vLLM "
                                "V0's: they need scheduler vllm-v0");
  }
  if (mem_fraction_static > 0 && kind() != scheduler_kind::sglang) {
    throw std::invalid_argument("mem_fraction_static is SGLang's: it needs scheduler sglang "
                                "(vLLM's is gpu_memory_utilization)");
  }
  for (const double r : {activation_reserve_gib, cuda_graph_reserve_gib, non_torch_reserve_gib}) {
    if (!(r >= 0 && r <= 1e6)) {
      throw std::invalid_argument("activation_reserve_gib, cuda_graph_reserve_gib and "
                                  "non_torch_reserve_gib must be in [0, 1e6] GiB");
    }
  }
  // kvtk's own scheduler sizes its cache with local_cache alone: these would be ignored.
  if (!engine_scheduler() &&
      (num_gpu_blocks_override > 0 || activation_reserve_gib > 0 || cuda_graph_reserve_gib > 0 ||
       non_torch_reserve_gib > 0)) {
    throw std::invalid_argument("num_gpu_blocks_override and the *_reserve_gib keys size an "
                                "engine's KV cache: they need an engine scheduler (--engine "
                                "vllm|sglang); kvtk's scheduler takes local_cache");
  }
}

nlohmann::json engine_scheduler_config::describe() const {
  nlohmann::json j = {{"scheduler", scheduler}, {"engine", accounting()}};
  if (engine_scheduler()) {
    j["max_num_batched_tokens"] = max_num_batched_tokens;
    j["max_num_seqs"] = max_num_seqs;
    if (kind() == scheduler_kind::vllm_v1) j["async_scheduling"] = async_scheduling;
    if (kind() == scheduler_kind::sglang) j["schedule_policy"] = schedule_policy;
    if (kind() == scheduler_kind::vllm_v0) {
      j["padded_prefill_budget"] = padded_prefill_budget;
      j["watermark_blocks_fraction"] = watermark_blocks_fraction;
    }
  }
  return j;
}

namespace detail {

// KV blocks of one instance (engine_sched.hpp): a count given, or the engine's own arithmetic
// — vLLM: HBM × gpu_memory_utilization − weights − (activation + CUDA graph + non-torch
// reserves), over the bytes of a page; SGLang with mem_fraction_static: HBM × that fraction −
// weights − non-torch memory (its activations and graphs are outside the static fraction).
kv_capacity engine_kv_blocks(const kvtk::prefix::prefix_trace_view& t, const cluster_config& c) {
  const engine_scheduler_config& s = c.sched;
  const double gib = 1073741824.0, gpus = c.gpus_per_instance;
  const double page_bytes =
      static_cast<double>(c.model.kv_bytes_per_token) * static_cast<double>(t.block_tokens);
  const bool reserves =
      s.activation_reserve_gib > 0 || s.cuda_graph_reserve_gib > 0 || s.non_torch_reserve_gib > 0;
  kv_capacity k;
  double blocks = 0;
  if (s.num_gpu_blocks_override > 0 || c.local_cache_blocks > 0) {
    if (s.num_gpu_blocks_override > 0 && c.local_cache_blocks > 0) {
      throw std::invalid_argument("num_gpu_blocks_override and local_cache both give the KV "
                                  "blocks of an instance: give one");
    }
    if (reserves || s.mem_fraction_static > 0) {
      throw std::invalid_argument("the memory reserves and mem_fraction_static derive the KV "
                                  "blocks from the HBM: they do not combine with a block count "
                                  "(num_gpu_blocks_override or local_cache)");
    }
    const bool override = s.num_gpu_blocks_override > 0;
    blocks = static_cast<double>(override ? s.num_gpu_blocks_override : c.local_cache_blocks);
    k.describe = {{"source", override ? "num_gpu_blocks_override" : "local_cache"}};
  } else {
    const bool sglang_static = s.mem_fraction_static > 0;
    const double params = c.model.total_params > 0 ? c.model.total_params : c.model.active_params;
    const double hbm = c.gpu.hbm_bytes * gpus;
    const double fraction = sglang_static ? s.mem_fraction_static : s.gpu_memory_utilization;
    const double weights = 2.0 * params;
    const double activation = sglang_static ? 0 : s.activation_reserve_gib * gib * gpus;
    const double graphs = sglang_static ? 0 : s.cuda_graph_reserve_gib * gib * gpus;
    const double non_torch = s.non_torch_reserve_gib * gib * gpus;
    const double bytes = hbm * fraction - weights - activation - graphs - non_torch;
    blocks = page_bytes > 0 ? std::floor(bytes / page_bytes) : 0;
    k.describe = {{"source", sglang_static ? "mem_fraction_static" : "gpu_memory_utilization"},
                  {"hbm_bytes", hbm},
                  {"fraction", fraction},
                  {"weights_bytes", weights},
                  {"activation_reserve_bytes", activation},
                  {"cuda_graph_reserve_bytes", graphs},
                  {"non_torch_reserve_bytes", non_torch},
                  {"kv_bytes", bytes}};
    if (!(blocks >= 1)) {
      throw std::invalid_argument(
          "the engine scheduler has no KV blocks: " + std::to_string(c.gpus_per_instance) + " x " + c.gpu.name +
          " at " + (sglang_static ? "mem_fraction_static " : "gpu_memory_utilization ") +
          shown(fraction) + " leave " + shown(bytes / gib) +
          " GiB after the weights of " + c.model.name + " and the reserves (add "
          "gpus_per_instance, or give num_gpu_blocks_override)");
    }
  }
  k.blocks = static_cast<std::uint32_t>(std::min(blocks, 2147483647.0));
  k.describe["blocks"] = k.blocks;
  k.describe["block_tokens"] = t.block_tokens;
  k.describe["tokens"] = static_cast<double>(k.blocks) * t.block_tokens;
  k.describe["bytes"] = static_cast<double>(k.blocks) * page_bytes;
  return k;
}

std::uint64_t distinct_pages(const kvtk::prefix::prefix_trace_view& t, const cluster_config& c) {
  std::uint64_t names = t.keys.size();
  for (std::size_t r = 0; r < t.requests(); ++r) names += output_tokens_of(t, c, r) / t.block_tokens + 2;
  return names;
}

kvtk::tier::sglang_hicache_config hicache_config(const kvtk::prefix::prefix_trace_view& t,
                                                 const cluster_config& c, std::uint32_t device_pages) {
  kvtk::tier::sglang_hicache_config h = c.hicache_cfg;
  h.device_pages = device_pages;
  std::uint64_t host = h.host_pages;
  if (c.hicache_ratio > 0) {  // Python's int(D * ratio) on doubles, then SGLang's padding page
    const double tokens = std::floor(static_cast<double>(device_pages) * t.block_tokens * c.hicache_ratio);
    host = tokens / t.block_tokens < 2147483648.0
               ? static_cast<std::uint64_t>(tokens) / t.block_tokens + 1
               : std::uint64_t{1} << 31;
  }
  if (host + device_pages >= (std::uint64_t{1} << 31)) {
    throw std::invalid_argument("offload '" + c.offload + "': " + std::to_string(device_pages) +
                                " device + " + std::to_string(host) +
                                " host pages is 2^31 or more (SGLang HiCache's tree)");
  }
  h.host_pages = static_cast<std::uint32_t>(host);
  // The tree never holds two pages with one key.
  h.max_tree_pages = static_cast<std::uint32_t>(std::min<std::uint64_t>(distinct_pages(t, c), host + device_pages));
  return h;
}

void check_table_kinds(const kvtk::prefix::prefix_trace_view& t, const cluster_config& c) {
  if (!c.timing) return;
  const std::string& f = c.timing->source();
  if (!c.timing->has_prefill() && t.requests() > 0) {
    throw std::invalid_argument("timing table " + f + " has no prefill rows (every request "
                                "prefills; docs/simulate.md \"Timing\")");
  }
  if (c.timing->has_decode()) return;
  for (std::uint32_t r = 0; r < t.requests(); ++r) {
    if (output_tokens_of(t, c, r) > 1) {
      throw std::invalid_argument(
          "timing table " + f + " has no decode rows, and request " + std::to_string(r) +
          " (0-based) decodes " + std::to_string(output_tokens_of(t, c, r) - 1) +
          " tokens (add decode rows, or cap outputs with max_output_tokens=1)");
    }
  }
}

void check_engine_config(const kvtk::prefix::prefix_trace_view& t, const cluster_config& c) {
  c.sched.validate();
  auto refuse = [&](const std::string& what) {
    throw std::invalid_argument("scheduler " + c.sched.scheduler + " does not combine with " +
                                what + " (kvtk's scheduler has it: scheduler kvtk)");
  };
  sparse_decoder::validate(c.sparse);
  if (c.chunk_tokens > 0) refuse("chunk_tokens (use max_num_batched_tokens)");
  if (c.reject_over_slo) refuse("reject_over_slo");
  (void)parse_router(c.router);  // every router combines (an unknown name: unknown_name)
  if (c.prefill_instances == 0) throw std::invalid_argument("prefill_instances must be >= 1");
  check_figures(c);
  check_table_kinds(t, c);
  // The DRAM tiers (prefill instances only: decode instances never prefill a prompt to write)
  // and the pool.
  const std::uint64_t refs = std::max<std::size_t>(t.keys.size(), 1);
  const std::uint64_t dram = std::min<std::uint64_t>(c.dram_blocks, refs);
  const std::uint64_t pool = std::min<std::uint64_t>(c.pool_blocks, refs);
  check_memory("prefill_instances x dram + pool (" + std::to_string(c.prefill_instances) + " x " +
                   std::to_string(dram) + " + " + std::to_string(pool) +
                   " blocks, each capped at the trace's block references)",
               (static_cast<double>(c.prefill_instances) * static_cast<double>(dram) +
                static_cast<double>(pool)) *
                   cache_entry_bytes);
  if (!c.offload.empty()) {
    const bool host = c.offload_medium == "host";
    const bool lmcache = c.offload_medium == "lmcache-cpu";
    const bool kvbm = c.offload_medium == "kvbm";
    const bool vllm_cpu = c.offload_medium.empty() || c.offload_medium == "cpu";
    if (!host && !lmcache && !kvbm && !vllm_cpu) {
      throw std::invalid_argument("offload '" + c.offload + "': medium '" + c.offload_medium +
                                  "' does not run under simulate (cpu, lmcache-cpu, kvbm, host do)");
    }
    auto refuse_offload = [&](const std::string& why) {
      throw std::invalid_argument("offload '" + c.offload + "' (" +
                                  (host ? "SGLang's HiCache" : lmcache ? "LMCache" : kvbm ? "Dynamo KVBM"
                                                                      : "vLLM's OffloadingConnector") +
                                  ") " + why);
    };
    if (!host && c.sched.kind() != scheduler_kind::vllm_v1) refuse_offload("needs scheduler vllm-v1");
    if (host && c.sched.kind() != scheduler_kind::sglang) refuse_offload("needs scheduler sglang");
    if (c.dram_blocks > 0 || c.pool_blocks > 0) {
      refuse_offload("does not combine with dram or pool (kvtk's generic tiers): give one or the other");
    }
    if (c.decode_instances > 0) refuse_offload("does not combine with decode_instances");
    if (c.sparse.enabled) refuse_offload("does not combine with sparse (both would use the host link)");
    if (!(c.disk_bytes_per_s > 0) || !(c.disk_latency_s >= 0)) {
      refuse_offload("needs a positive disk rate and a latency of at least 0");
    }
    if (vllm_cpu && c.offload_cfg.secondary_fs) {
      refuse_offload("has vLLM's fs secondary tier (secondary=fs), which runs in kvtk replay only, "
                     "for now (its promotions' steps are not timed)");
    }
    if (vllm_cpu) {
      kvtk::tier::validate_cpu(c.offload_cfg);
      check_memory("prefill_instances x offload (" + std::to_string(c.prefill_instances) + " x " +
                       std::to_string(c.offload_cfg.cpu_chunks) + " chunks)",
                   static_cast<double>(c.prefill_instances) * c.offload_cfg.cpu_chunks * cache_entry_bytes);
    }
    if (lmcache && (c.lmcache_cfg.cpu_chunks == 0 || c.lmcache_cfg.blocks_per_chunk == 0)) {
      refuse_offload("needs a CPU tier of at least one chunk");
    }
    if (lmcache) {
      check_memory("prefill_instances x offload (" + std::to_string(c.prefill_instances) + " x (" +
                       std::to_string(c.lmcache_cfg.cpu_chunks) + " + " +
                       std::to_string(c.lmcache_cfg.disk_chunks) + ") chunks)",
                   static_cast<double>(c.prefill_instances) *
                       (static_cast<double>(c.lmcache_cfg.cpu_chunks) + c.lmcache_cfg.disk_chunks) *
                       cache_entry_bytes);
    }
    if (kvbm) {
      auto k = c.kvbm_cfg;
      k.gpu_blocks = 1;
      kvtk::tier::validate(k);
      check_memory("prefill_instances x offload (" + std::to_string(c.prefill_instances) + " x (" +
                       std::to_string(k.host_blocks) + " + " + std::to_string(k.disk_blocks) + ") blocks)",
                   static_cast<double>(c.prefill_instances) *
                       (static_cast<double>(k.host_blocks) + k.disk_blocks) * cache_entry_bytes);
    }
  }
  if (t.arrival_s.size() != t.requests()) {
    throw std::invalid_argument("the trace has no arrival times (simulate needs them)");
  }
  check_every_arrival(t);
  if (c.sched.kind() == scheduler_kind::sglang && c.sched.max_num_batched_tokens < t.block_tokens) {
    throw std::invalid_argument("max_num_batched_tokens (" +
                                std::to_string(c.sched.max_num_batched_tokens) +
                                ") must be at least a page (" + std::to_string(t.block_tokens) +
                                " tokens) for scheduler sglang: its chunks end on whole pages");
  }
  if (t.unit_requests() || !t.request_block_tokens.empty()) {
    throw std::invalid_argument("the engine schedulers need whole requests with one block size");
  }
}

}  // namespace detail
}  // namespace kvtk::sim::des
