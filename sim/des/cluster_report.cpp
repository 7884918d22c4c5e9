// sim/des/cluster_report.cpp — the summary JSON (see des/cluster.hpp).
#include "des/cluster.hpp"
#include "des/summary.hpp"

namespace kvtk::sim::des::detail {

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
  if (c_.sparse.enabled) j["sparse"] = sparse_->summary();
  j["kv_capacity"] = {{"source", "local_cache"},
                      {"blocks", c_.local_cache_blocks},
                      {"block_tokens", bt_},
                      {"tokens", static_cast<double>(c_.local_cache_blocks) * bt_},
                      {"bytes", static_cast<double>(c_.local_cache_blocks) * block_bytes_}};
  res.requests = std::move(sink.kept);
  return res;
}

}  // namespace kvtk::sim::des::detail
