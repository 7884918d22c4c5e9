// sim/des/simulator.cpp — construction, validation and simulate() (the cluster: des/cluster.hpp).
#include "des/simulator.hpp"

#include "des/cluster.hpp"
#include "des/engine_pages.hpp"
#include "util/memory_budget.hpp"

namespace kvtk::sim::des {
namespace detail {

cluster::cluster(const kvtk::prefix::prefix_trace_view& t, const cluster_config& c)
    : t_(t), c_(c), routes_(c.seed), events_(t) {
  validate();
  router_ = parse_router(c.router);
  bt_ = t.block_tokens;
  block_bytes_ = static_cast<double>(c.model.kv_bytes_per_token) * bt_;
  host_link_ = {c.host_link_latency_s, c.host_link_per_block_s,
                c.gpu.host_link_bytes_per_s * c.gpus_per_instance};
  pool_link_ = {c.pool_latency_s, 0, c.pool_bytes_per_s};
  if (c.sparse.enabled) sparse_ = std::make_unique<sparse_decoder>(c, t.requests(), host_link_);
  flops_per_s_ = c.gpu.tflops * 1e12 * c.gpu.compute_efficiency * c.gpus_per_instance;
  timing_ = iteration_timing(c.model, c.gpu, c.gpus_per_instance, c.time_scale,
                             c.iteration_overhead_s, c.timing, c.request_overhead_s);
  check_timing_table();
  if (!c.offload.empty()) {
    throw std::invalid_argument("offload '" + c.offload + "' is an engine's own tier: it needs the "
                                "engine's scheduler (cpu, lmcache-cpu, kvbm: vllm-v1; host: "
                                "sglang; kvtk's scheduler has dram and pool)");
  }
  p_ = c.cache_partial_block ? kvtk::prefix::partial_block::cache
                             : kvtk::prefix::partial_block::skip;
  // A cache never holds more blocks than the trace references, and one that can hold them
  // all never evicts: allocating min(capacity, refs) gives the same results with memory that
  // grows with the trace rather than with the option.
  const std::uint64_t refs = std::max<std::uint64_t>(t.keys.size(), 1);
  const std::uint64_t local = std::min(c.local_cache_blocks, refs);
  const std::uint64_t dram = std::min(c.dram_blocks, refs);
  const std::uint64_t pool = std::min(c.pool_blocks, refs);
  check_memory("prefill_instances x (local_cache + dram) + pool (" +
                   std::to_string(c.prefill_instances) + " x (" + std::to_string(local) + " + " +
                   std::to_string(dram) + ") + " + std::to_string(pool) +
                   " blocks, each capped at the trace's block references)",
               (static_cast<double>(c.prefill_instances) * static_cast<double>(local + dram) +
                static_cast<double>(pool)) *
                   cache_entry_bytes);
  prefill_.resize(c.prefill_instances);
  route_cost_.resize(c.prefill_instances);
  route_weight_.resize(c.prefill_instances);
  if (local > 0 && dram > 0 && dram < local) {
    throw std::invalid_argument(
        "dram (" + std::to_string(dram) + " blocks) must be at least local_cache (" +
        std::to_string(local) + " blocks): the DRAM tier is inclusive, it keeps a copy of every "
        "block in HBM (docs/simulate.md)");
  }
  for (auto& in : prefill_) {
    in.tiers = make_tiers(c.local_policy, local, dram);
    in.hbm = local > 0;
  }
  // served_ (tier_hierarchy::process's scratch) grows to the longest request as requests come:
  // a pass over the trace here would make a mapped trace resident before the simulation.
  decode_.resize(c.decode_instances);
  if (pool > 0) pool_ = make_pool(pool);
}

void check_figures(const cluster_config& c) {
  for (double v : {c.host_link_latency_s, c.host_link_per_block_s, c.pool_bytes_per_s,
                   c.pool_latency_s, c.pd_link_bytes_per_s, c.time_scale, c.router_temperature,
                   c.ttft_slo_s, c.tbt_slo_s, c.router_prefill_weight, c.iteration_overhead_s,
                   c.request_overhead_s}) {
    if (!(v >= 0) || !std::isfinite(v)) {
      throw std::invalid_argument("times, bandwidths, weights and SLOs must be finite and >= 0");
    }
  }
}

void cluster::validate() const {
  if (c_.prefill_instances == 0) throw std::invalid_argument("prefill_instances must be >= 1");
  if (c_.gpus_per_instance == 0) throw std::invalid_argument("gpus_per_instance must be >= 1");
  if (c_.max_batch == 0) throw std::invalid_argument("max_batch must be >= 1");
  if (!kvtk::is_policy_name(c_.local_policy) || c_.local_policy == "belady") {
    throw std::invalid_argument("local_policy: unknown or offline policy '" + c_.local_policy +
                                "'");
  }
  check_figures(c_);
  if (!(c_.gpu.tflops > 0) || !(c_.gpu.hbm_bytes_per_s > 0) || !(c_.gpu.compute_efficiency > 0) ||
      !(c_.gpu.memory_efficiency > 0) || !std::isfinite(c_.gpu.compute_efficiency) ||
      !std::isfinite(c_.gpu.memory_efficiency)) {
    throw std::invalid_argument(
        "gpu: tflops, hbm bandwidth, compute_efficiency and memory_efficiency must be > 0");
  }
  if (t_.arrival_s.size() != t_.requests()) {
    throw std::invalid_argument("the trace has no arrival times (simulate needs them)");
  }
  check_every_arrival(t_);
  sparse_decoder::validate(c_.sparse);
}

void cluster::check_timing_table() const { check_table_kinds(t_, c_); }

}  // namespace detail

simulation_result simulate(const kvtk::prefix::prefix_trace_view& trace, const cluster_config& cfg,
                           const simulation_hooks& hooks) {
  cfg.sched.validate();
  if (detail::rewrites_pages(trace, cfg)) {
    const detail::paged_trace paged = detail::rewrite_pages(trace, cfg.page_tokens, cfg.prefix_caching);
    simulation_result res = simulate(paged.view, detail::paged_config(trace, cfg), hooks);
    res.summary["engine_pages"] = {{"page_tokens", paged.view.block_tokens},
                                   {"trace_block_tokens", trace.block_tokens},
                                   {"pages_per_trace_block", trace.block_tokens / paged.view.block_tokens},
                                   {"prefix_caching", cfg.prefix_caching}};
    return res;
  }
  if (cfg.sched.engine_scheduler()) return detail::simulate_engine(trace, cfg, hooks);
  detail::cluster c(trace, cfg);
  return c.run(hooks);
}

simulation_result simulate(const kvtk::prefix::prefix_trace_view& trace, const cluster_config& cfg,
                           const simulation_progress& progress) {
  simulation_hooks hooks;
  hooks.progress = progress;
  return simulate(trace, cfg, hooks);
}

}  // namespace kvtk::sim::des
