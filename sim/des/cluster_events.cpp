// sim/des/cluster_events.cpp — kvtk's scheduler on the event loop (des/event_loop.hpp): the
// request life cycle, arrive, prefill, transfer, decode (see des/cluster.hpp).
#include "des/cluster.hpp"

namespace kvtk::sim::des::detail {

simulation_result cluster::run(const simulation_hooks& hooks) {
  return run_events(*this, t_, c_, hooks);
}

void cluster::handle(const event& e) {
  now_ = e.t;
  switch (e.kind) {
    case cluster_event::arrival:
      on_arrival(e.request);
      break;
    case cluster_event::prefill_done:
      on_prefill_done(e.instance, e.request);
      break;
    case cluster_event::transfer_done:
      on_transfer_done(e.request);
      break;
    case cluster_event::decode_done:
      on_decode_done(e.instance);
      break;
  }
}

std::uint64_t cluster::output_tokens(std::uint32_t r) const { return output_tokens_of(t_, c_, r); }

void cluster::on_arrival(std::uint32_t r) {
  w_.open(r);
  w_.out(r).arrival = now_;
  w_.out(r).input_tokens = t_.input_tokens(r);
  w_.out(r).blocks = t_.cacheable(r, p_).size();
  const std::uint32_t i = route(r);
  w_.out(r).instance = i;
  instance& in = prefill_[i];
  if (c_.reject_over_slo && c_.ttft_slo_s > 0 && predicted_ttft(i, r) > c_.ttft_slo_s) {
    w_.out(r).rejected = true;  // admission control: it would miss its TTFT SLO
    w_.out(r).prefill_start = w_.out(r).first_token = w_.out(r).done = now_;
    ++rejected_;
    ended(r);
    return;
  }
  match_and_pin(i, r);
  // Conductor's queue estimate: the request's prefill without cache as an upper bound.
  w_.st(r).predicted_prefill_s = compute_s(0, t_.input_tokens(r));
  in.queued_prefill_s += w_.st(r).predicted_prefill_s;
  in.queued_tokens += t_.input_tokens(r);
  in.queue.push_back(r);
  try_start(i);
}

void cluster::try_start(std::uint32_t i) {
  instance& in = prefill_[i];
  if (in.busy) return;
  if (in.prefilling >= 0) {
    run_chunk(i);  // resume the chunked prefill after the decode step
    return;
  }
  if (!in.queue.empty()) {
    const std::uint32_t r = in.queue.front();
    in.queue.pop_front();
    in.queued_prefill_s -= w_.st(r).predicted_prefill_s;
    start_prefill(i, r);
  } else if (c_.decode_instances == 0 && !in.batch.empty()) {
    start_decode_step(in, i, /*decode pool*/ false);
  }
}

void cluster::start_prefill(std::uint32_t i, std::uint32_t r) {
  instance& in = prefill_[i];
  const std::uint64_t L = t_.input_tokens(r);
  request_outcome& o = w_.out(r);
  o.prefill_start = now_;
  pool_read_blocks_ += o.pool_blocks;
  dram_read_blocks_ += o.dram_blocks;
  saved_flops_ += prefill_flops(c_.model, 0, L) - prefill_flops(c_.model, o.hit_tokens, L);
  if (c_.timing && o.hit_tokens > 0) {  // the table's seconds, not time-scaled (as FLOPs)
    const double cold = c_.timing->prefill_s(1, static_cast<double>(L), 0);
    const double warm =
        o.hit_tokens >= L ? 0.0
                          : c_.timing->prefill_s(1, static_cast<double>(L - o.hit_tokens),
                                                 static_cast<double>(o.hit_tokens));
    saved_table_s_ += std::max(0.0, cold - warm);
  }
  in.queued_tokens -= L;
  if (c_.chunk_tokens > 0) {
    in.prefilling = r;
    in.prefill_pos = o.hit_tokens;
    run_chunk(i);
    return;
  }
  const double dur = prefill_s({o.hit_blocks, o.dram_blocks, o.pool_blocks}, L);
  in.busy = true;
  in.busy_s += dur;
  in.busy_until = now_ + dur;
  events_.push(now_ + dur, cluster_event::prefill_done, i, r);
}

void cluster::run_chunk(std::uint32_t i) {
  instance& in = prefill_[i];
  const auto r = static_cast<std::uint32_t>(in.prefilling);
  const std::uint64_t L = t_.input_tokens(r);
  const request_outcome& o = w_.out(r);
  const std::uint64_t end = std::min<std::uint64_t>(L, in.prefill_pos + c_.chunk_tokens);
  double dur = timing_.prefill_s(in.prefill_pos, end);
  if (in.prefill_pos == o.hit_tokens) {
    const double load = load_s({o.hit_blocks, o.dram_blocks, o.pool_blocks});
    dur = c_.overlap_load ? std::max(dur, load) : dur + load;
  }
  in.prefill_pos = end;
  in.busy = true;
  in.busy_s += dur;
  in.busy_until = now_ + dur;
  events_.push(now_ + dur, cluster_event::prefill_done, i, r);
}

void cluster::on_prefill_done(std::uint32_t i, std::uint32_t r) {
  instance& in = prefill_[i];
  if (in.prefilling >= 0 && in.prefill_pos < t_.input_tokens(r)) {
    // A chunk ended: decode gets a step in between (colocated), then the prefill resumes.
    in.busy = false;
    if (c_.decode_instances == 0 && !in.batch.empty()) {
      start_decode_step(in, i, false);
    } else {
      run_chunk(i);
    }
    return;
  }
  in.prefilling = -1;
  const auto b = t_.cacheable(r, p_);
  kvtk::access_hint hint;
  // The prefill is done: its hits are no longer pinned (unpinned before the update, so the
  // update evicts as an unpinned replay would), and the instance's tiers take the request as
  // tier_hierarchy::process does (kvtk replay --tiers's semantics): the blocks enter HBM in
  // order, written through to DRAM.
  if (auto& pinned = w_.st(r).pinned; !pinned.empty()) {
    in.tiers->with_top([&](auto& top) {
      for (const std::uint32_t slot : pinned) top.unpin_slot(slot);
    });
    pinned.clear();
  }
  if (served_.size() < b.size()) served_.resize(b.size());
  if (in.tiers) in.tiers->process(b, served_, hint, [&](std::uint32_t) { return bt_; });
  if (pool_) {  // the prefill's results are shared: every block the pool lacks is written to it
    for (const kvtk::block_key k : b) pool_write_blocks_ += pool_has(k) ? 0 : 1;
    pool_->process(b, served_, hint, [&](std::uint32_t) { return bt_; });
  }
  auto& flying = in_flight(i);
  for (std::size_t k = w_.out(r).hit_blocks; k < b.size(); ++k) {
    auto it = flying.find(b[k]);
    if (it != flying.end() && --it->second == 0) flying.erase(it);
  }
  request_outcome& o = w_.out(r);
  o.first_token = now_;
  w_.st(r).last_token = now_;
  w_.st(r).remaining = output_tokens(r) - 1;
  o.output_tokens = 1;
  in.busy = false;
  if (w_.st(r).remaining == 0) {
    finish(r);
  } else if (c_.decode_instances == 0) {
    in.batch.push_back(r);
  } else {
    const double bytes = static_cast<double>(t_.input_tokens(r)) * c_.model.kv_bytes_per_token;
    pd_bytes_ += bytes;
    const double dt = c_.pd_link_bytes_per_s > 0 ? bytes / c_.pd_link_bytes_per_s : 0.0;
    events_.push(now_ + dt, cluster_event::transfer_done, 0, r);
  }
  try_start(i);
}

void cluster::on_transfer_done(std::uint32_t r) {
  std::uint32_t best = 0;
  for (std::uint32_t d = 1; d < decode_.size(); ++d) {
    if (decode_[d].batch.size() < decode_[best].batch.size()) best = d;
  }
  decode_[best].batch.push_back(r);
  if (!decode_[best].busy) start_decode_step(decode_[best], best, true);
}

void cluster::start_decode_step(instance& in, std::uint32_t i, bool decode_pool) {
  in.stepping.assign(in.batch.begin(),
                     in.batch.begin() + std::min<std::size_t>(in.batch.size(), c_.max_batch));
  double kv_bytes = 0, context = 0;
  std::uint64_t recalls = 0, prefetched = 0;
  for (std::uint32_t r : in.stepping) {
    auto& e = w_.at(r);
    const std::uint64_t tokens = e.out.input_tokens + e.out.output_tokens;  // not the trace's page
    context += static_cast<double>(tokens);
    if (c_.sparse.enabled) {
      // The prefill gave the first token: this is decode step output_tokens - 1.
      const auto k = sparse_->step(r, tokens, e.st.remaining, e.out.output_tokens - 1);
      kv_bytes += static_cast<double>(k.pages) * sparse_->page_bytes();
      recalls += k.recalls;
      prefetched += k.prefetched;
      e.out.recalls += k.recalls;
    } else {
      kv_bytes += static_cast<double>(tokens) * c_.model.kv_bytes_per_token;
    }
  }
  // Sparse: the formula reads the selected pages; a table takes the row at the mean context.
  double dur = timing_.decode_s({in.stepping.size(), context, kv_bytes});
  if (c_.sparse.enabled) {
    const double stall = sparse_->batch_step(in.decode_clock, recalls, prefetched, dur, kv_bytes);
    if (stall > 0) {
      for (std::uint32_t r : in.stepping) w_.out(r).stall_s += stall;
    }
    dur += stall;
  }
  in.busy = true;
  in.busy_s += dur;
  in.busy_until = now_ + dur;
  events_.push(now_ + dur, cluster_event::decode_done, i + (decode_pool ? decode_flag : 0), 0);
}

void cluster::on_decode_done(std::uint32_t tagged) {
  const bool decode_pool = (tagged & decode_flag) != 0;
  const std::uint32_t i = tagged & ~decode_flag;
  instance& in = decode_pool ? decode_[i] : prefill_[i];
  std::vector<std::uint32_t>& finished = finished_;  // scratch: no allocation per step
  finished.clear();
  for (std::uint32_t r : in.stepping) {
    auto& e = w_.at(r);
    ++e.out.output_tokens;
    e.st.tbt_sum += now_ - e.st.last_token;
    gaps_.add(now_ - e.st.last_token);
    ++e.st.tbt_n;
    e.st.last_token = now_;
    if (--e.st.remaining == 0) finished.push_back(r);
  }
  for (std::uint32_t r : finished) {
    in.batch.erase(std::find(in.batch.begin(), in.batch.end(), r));
    finish(r);
  }
  in.stepping.clear();
  in.busy = false;
  if (decode_pool) {
    if (!in.batch.empty()) start_decode_step(in, i, true);
  } else {
    try_start(i);
  }
}

void cluster::finish(std::uint32_t r) {
  if (sparse_) sparse_->release(r);
  w_.out(r).done = now_;
  w_.out(r).mean_tbt = w_.st(r).tbt_n ? w_.st(r).tbt_sum / static_cast<double>(w_.st(r).tbt_n) : 0.0;
  ended(r);
}

void cluster::ended(std::uint32_t r) {
  w_.end(r);
  ++ended_;
}

}  // namespace kvtk::sim::des::detail
