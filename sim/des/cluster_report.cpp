// sim/des/cluster_report.cpp — the summary JSON (see des/cluster.hpp).
#include "des/cluster.hpp"

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
  const std::uint64_t refs = k.refs, hits = k.hits, pool_hits = k.pool_hits;
  const std::uint64_t dram_hits = k.dram_hits, inflight = k.inflight, tok = k.tok;
  const std::uint64_t tok_hits = k.tok_hits, out_tokens = k.out_tokens, good = k.good;
  const double first = k.first, last = k.last;
  const double span = last - first;
  double busy = 0;
  for (const auto& in : prefill_) busy += in.busy_s;
  for (const auto& in : decode_) busy += in.busy_s;
  const double gpus = static_cast<double>(prefill_.size() + decode_.size());
  // FLOPs at compute_efficiency, or with a timing table its own prefill rows.
  const double saved_instance_s = c_.timing ? saved_table_s_ : saved_flops_ / flops_per_s_;
  auto ratio = [](std::uint64_t a, std::uint64_t b) {
    return b ? static_cast<double>(a) / static_cast<double>(b) : 0.0;
  };
  simulation_result res;
  res.summary = {
      {"requests", k.requests},
      {"block_refs", refs},
      {"block_hits", hits},
      {"block_hit_ratio", ratio(hits, refs)},
      {"token_refs", tok},
      {"token_hits", tok_hits},
      {"token_hit_ratio", ratio(tok_hits, tok)},
      {"rejected", rejected_},
      {"pool_block_hits", pool_hits},
      {"dram_block_hits", dram_hits},
      {"local_block_hits", hits - pool_hits - dram_hits},
      {"inflight_miss_blocks", inflight},
      {"ttft_s", k.ttft.json()},
      {"tbt_s", k.tbt.json()},
      {"token_gap_s", gaps_.json()},
      {"e2e_s", k.e2e.json()},
      {"queueing_s", k.queueing.json()},
      {"span_s", span},
      {"throughput_requests_per_s",
       span > 0 ? static_cast<double>(k.requests - rejected_) / span : 0.0},
      {"output_tokens", out_tokens},
      {"output_tokens_per_s", span > 0 ? static_cast<double>(out_tokens) / span : 0.0},
      {"goodput_requests_per_s", span > 0 ? static_cast<double>(good) / span : 0.0},
      {"gpu_busy_fraction", span > 0 && gpus > 0 ? busy / (span * gpus) : 0.0},
      {"prefill_flops_saved", saved_flops_},
      // Instance-seconds x GPUs per instance: the GPU-seconds an operator pays for.
      {"prefill_instance_s_saved", saved_instance_s},
      {"prefill_gpu_s_saved", saved_instance_s * c_.gpus_per_instance},
      {"timing", timing_.describe()},
      {"scheduler", c_.sched.describe()},
      {"preemptions", 0},  // kvtk's scheduler never preempts (HBM is not enforced for decode)
      {"bytes", {{"dram_read", static_cast<double>(dram_read_blocks_) * block_bytes_},
                 {"pool_read", static_cast<double>(pool_read_blocks_) * block_bytes_},
                 {"pool_write", static_cast<double>(pool_write_blocks_) * block_bytes_},
                 {"prefill_to_decode", pd_bytes_}}}};
  if (c_.sparse.enabled) res.summary["sparse"] = sparse_summary();
  res.summary["max_live_requests"] = w_.max_live();
  res.requests = std::move(sink.kept);
  return res;
}

}  // namespace kvtk::sim::des::detail
