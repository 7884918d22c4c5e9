// sim/des/cluster_report.cpp — the summary JSON (see des/cluster.hpp).
#include "des/cluster.hpp"
#include "des/summary.hpp"

namespace kvtk::sim::des::detail {

nlohmann::json cluster::sparse_summary() {
  for (std::uint32_t r = 0; r < t_.requests(); ++r) sparse_->release(r);
  const auto& k = sparse_->totals();
  return {
      {"steps", k.steps},
      {"batch_steps", sparse_batch_steps_},
      {"selections", k.selections},
      {"hits", k.hits},
      {"recalls", k.recalls},
      {"recall_bytes", static_cast<double>(k.recalls) * sparse_link_.page_bytes},
      {"prefetches_issued", k.prefetches_issued},
      {"prefetch_hits", k.prefetch_hits},
      {"wasted_prefetches", k.wasted_prefetches},
      {"prefetches_dropped", k.prefetches_dropped},
      {"prefetch_bytes", static_cast<double>(k.prefetches_issued) * sparse_link_.page_bytes},
      {"evictions", k.evictions},
      {"stalled_steps", stalled_steps_},
      {"stall_s", stall_s_},
      {"mean_stall_per_stalled_step_s",
       stalled_steps_ ? stall_s_ / static_cast<double>(stalled_steps_) : 0.0},
      {"resident_pages",
       {{"mean",
         k.steps ? static_cast<double>(sparse_->resident_sum()) / static_cast<double>(k.steps)
                 : 0.0},
        {"max", sparse_->resident_max()}}},
      {"over_budget_steps", k.over_budget_steps},
      {"decode_kv_read_bytes", decode_kv_read_bytes_}};
}

simulation_result cluster::summarize(outcome_stream& sink) {
  const outcome_totals& k = sink.totals;
  double busy = 0;
  for (const auto& in : prefill_) busy += in.busy_s;
  for (const auto& in : decode_) busy += in.busy_s;
  // kvtk's scheduler never preempts (HBM is not enforced for decode).
  simulation_result res;
  res.summary = common_summary(
      k, gaps_,
      {.rejected = rejected_,
       .preemptions = 0,
       .busy_s = busy,
       .instances = static_cast<double>(prefill_.size() + decode_.size()),
       .max_live = w_.max_live(),
       .timing = timing_.describe(),
       .scheduler = c_.sched.describe()});
  // FLOPs at compute_efficiency, or with a timing table its own prefill rows.
  const double saved_instance_s = c_.timing ? saved_table_s_ : saved_flops_ / flops_per_s_;
  auto& j = res.summary;
  j["pool_block_hits"] = k.pool_hits;
  j["dram_block_hits"] = k.dram_hits;
  j["local_block_hits"] = k.hits - k.pool_hits - k.dram_hits;
  j["inflight_miss_blocks"] = k.inflight;
  j["prefill_flops_saved"] = saved_flops_;
  // Instance-seconds x GPUs per instance: the GPU-seconds an operator pays for.
  j["prefill_instance_s_saved"] = saved_instance_s;
  j["prefill_gpu_s_saved"] = saved_instance_s * c_.gpus_per_instance;
  j["bytes"] = {{"dram_read", static_cast<double>(dram_read_blocks_) * block_bytes_},
                {"pool_read", static_cast<double>(pool_read_blocks_) * block_bytes_},
                {"pool_write", static_cast<double>(pool_write_blocks_) * block_bytes_},
                {"prefill_to_decode", pd_bytes_}};
  if (c_.sparse.enabled) j["sparse"] = sparse_summary();
  res.requests = std::move(sink.kept);
  return res;
}

}  // namespace kvtk::sim::des::detail
