// sim/des/engine_hicache_l3.cpp — SGLang 0.5.23 HiCache's L3 storage (`file` backend) and its
// prefetch under kvtk simulate's sglang scheduler (`offload` "host:...,storage=file"). The rules,
// from SGLang's code (docs/engines/sglang-0.5.23-hicache.md section 11; docs/simulate.md):
//  * Writes: every page the tree backs up to the host (write-through backups, write_back's
//    eviction copies) is written to L3 by one FIFO writer, per iteration's batch, after the
//    iteration ends (the D2H ack); the pages become readable when the write ends. A page already
//    stored is touched, not written; prefetched pages are never written back.
//  * Prefetch, when a request is queued (arrival, re-queue after retraction): a touching match;
//    issued when the deepest matched node is backed up (or the root), the span (from the match
//    to the prompt's last token, whole pages) is at least prefetch_threshold tokens and the open
//    prefetches ask for less than half the host pool. The query (one storage operation) finds
//    the leading pages L3 holds.
//  * Each step start, whether or not the scheduler reaches the request: a query that ended is
//    drained (fewer pages than the threshold revoke it; else the I/O thread, FIFO, reads them in
//    128-page batches, from now at the earliest), and a read that ended lands its pages in the
//    host under the anchor (refilling walked nodes without a host copy).
//  * Admission: each time the scheduler reaches a request whose prefetch is still open:
//    best_effort cuts it now (the whole batches read so far land; the reader finishes the batch
//    in progress and the reads queued behind move up), wait_complete skips it (the requests
//    behind it may go first), timeout skips it until prefetch_timeout_base +
//    prefetch_timeout_per_ki_token x span / 1,024 s have passed since the first poll, then cuts
//    it. The admission's host hit then loads the pages back.
// Simplifications (docs/simulate.md): the query sees L3 as it is at issue; the retries SGLang
// arms after a miss are not modelled; the anchor's host pin and the storage write's host pin
// are not held (a lost anchor drops the prefetch); one storage speed for reads and writes.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "des/engine_sim.hpp"

namespace kvtk::sim::des::detail {

namespace {

// Whether `pages` pages of `page_tokens` tokens reach SGLang's prefetch_threshold (tokens).
bool reaches_threshold(const kvtk::tier::hicache_l3_config& c, std::uint64_t pages, std::uint64_t page_tokens) {
  return pages * page_tokens >= std::max<std::uint64_t>(c.prefetch_threshold_tokens, 1);
}

// Moves the leading ids of `fifo` whose time (done_at(id)) is at most `now` into `due`: the FIFOs
// are ordered by that time.
template <class DoneAt>
void take_due(std::vector<std::uint32_t>& fifo, double now, DoneAt done_at, std::vector<std::uint32_t>& due) {
  std::size_t n = 0;
  while (n < fifo.size() && done_at(fifo[n]) <= now) ++n;
  due.assign(fifo.begin(), fifo.begin() + static_cast<std::ptrdiff_t>(n));
  fifo.erase(fifo.begin(), fifo.begin() + static_cast<std::ptrdiff_t>(n));
}

// Seconds to move `pages` pages of `page_bytes` in 128-page batches, one operation each.
double storage_s(const kvtk::tier::hicache_l3_config& c, std::uint64_t pages, double page_bytes) {
  const double batches = std::ceil(static_cast<double>(pages) / 128.0);
  return batches * c.latency_s + static_cast<double>(pages) * page_bytes / c.bytes_per_s;
}

}  // namespace

template <class KV>
void engine_sim<KV>::l3_prefetch(std::uint32_t i, std::uint32_t r) {
  if constexpr (std::is_same_v<KV, sglang_hicache_kv>) {
    engine_instance& in = inst_[i];
    engine_request& q = w_.st(r);
    if (!in.l3 || q.pf.open) return;
    l3_land(i);  // the query sees every write done by now
    const auto& c = c_.hicache_l3;
    const auto v = kv_[i].prefetch_match(q.kv, q.seq());
    if (!v.anchor_backed_up) {  // SGLang checks the anchor first, then the span
      ++l3_.anchor_not_backed_up;
      return;
    }
    const auto cap = static_cast<std::uint32_t>((q.seq() - 1) / bt_);
    const std::uint32_t span = cap > v.matched ? cap - v.matched : 0;
    if (!reaches_threshold(c, span, bt_)) {
      ++l3_.below_threshold;
      return;
    }
    const std::uint64_t host_tokens = std::uint64_t{kv_[i].tree().config().host_pages} * bt_;
    if (in.prefetch_occupied >= host_tokens / 2) {  // int(0.5 x host tokens)
      ++l3_.rate_limited;
      return;
    }
    ++l3_.issued;
    in.prefetch_occupied += std::uint64_t{span} * bt_;
    l3_keys_.clear();
    for (std::uint32_t k = v.matched; k < cap; ++k) l3_keys_.push_back(key_at(q.kv, k));
    auto& p = q.pf;
    p = {};
    p.open = true;
    p.from = v.matched;
    p.span = span;
    p.hit = in.l3->leading(l3_keys_);
    p.query_done = now_ + c.latency_s;
    in.l3_querying.push_back(r);
    l3_wake(i, p.query_done);
  }
}

// At a step start, as SGLang's _drain_and_alloc_storage_hit and _drain_ack_prefetch, whether or
// not the scheduler reaches the request: a query that ended by now is drained (below the
// threshold: revoked; else its read joins the I/O thread's queue, starting now at the earliest),
// and a read that ended by now lands its pages in the host; either frees its span from the rate
// limit.
template <class KV>
void engine_sim<KV>::l3_settle(std::uint32_t i) {
  if constexpr (std::is_same_v<KV, sglang_hicache_kv>) {
    engine_instance& in = inst_[i];
    if (!in.l3) return;
    const auto& c = c_.hicache_l3;
    take_due(in.l3_querying, now_, [&](std::uint32_t r) { return w_.st(r).pf.query_done; }, l3_done_);
    for (const std::uint32_t r : l3_done_) {
      auto& p = w_.st(r).pf;
      p.drained = true;
      if (!reaches_threshold(c, p.hit, bt_)) {
        ++l3_.revoked;
        p.read_done = now_;
        l3_close(i, w_.st(r), 0);
        continue;
      }
      l3_.hit_pages += p.hit;
      p.read_start = std::max(now_, in.l3_read_free);
      p.read_done = p.read_start + storage_s(c, p.hit, block_bytes_);
      in.l3_read_free = p.read_done;
      in.l3_reading.push_back(r);
      l3_wake(i, p.read_done);
    }
    take_due(in.l3_reading, now_, [&](std::uint32_t r) { return w_.st(r).pf.read_done; }, l3_done_);
    for (const std::uint32_t r : l3_done_) {
      ++l3_.completed;
      l3_close(i, w_.st(r), w_.st(r).pf.hit);
    }
  }
}

template <class KV>
bool engine_sim<KV>::l3_gate(std::uint32_t i, std::uint32_t r) {
  if constexpr (std::is_same_v<KV, sglang_hicache_kv>) {
    engine_instance& in = inst_[i];
    engine_request& q = w_.st(r);
    auto& p = q.pf;
    if (!in.l3 || !p.open) return true;  // none, or done and drained at this step's start
    using kvtk::tier::hicache_prefetch_policy;
    const auto& c = c_.hicache_l3;
    const bool timed = c.policy == hicache_prefetch_policy::timeout;
    if (p.first_poll < 0) {  // SGLang's timer starts at the first poll: base + per 1,024 tokens
      p.first_poll = now_;
      p.deadline = now_ + c.timeout_base_s + c.timeout_per_ki_token_s * p.span * bt_ / 1024.0;
      if (timed) l3_wake(i, p.deadline);
    }
    const bool cut = c.policy == hicache_prefetch_policy::best_effort || (timed && now_ >= p.deadline);
    if (!cut) {
      if (!p.held) {
        p.held = true;
        ++l3_.held;
      }
      in.l3_gated = true;
      return false;
    }
    if (reaches_threshold(c, p.hit, bt_)) {
      ++(timed ? l3_.cut_timeout : l3_.cut_best_effort);
    }
    l3_cut(i, r);
    return true;
  }
  return true;
}

// Cuts request r's open prefetch now (terminate_prefetch): the whole batches read so far land;
// nothing when its query has not been drained. The reader finishes the batch in progress, and
// the reads queued behind move up.
template <class KV>
void engine_sim<KV>::l3_cut(std::uint32_t i, std::uint32_t r) {
  if constexpr (std::is_same_v<KV, sglang_hicache_kv>) {
    engine_instance& in = inst_[i];
    engine_request& q = w_.st(r);
    auto& p = q.pf;
    std::uint32_t done = 0;
    if (!p.drained) {
      std::erase(in.l3_querying, r);
    } else {
      if (now_ >= p.read_start) {
        double t = p.read_start;
        for (std::uint32_t left = p.hit; left > 0;) {
          const std::uint32_t n = std::min<std::uint32_t>(left, 128);
          t += storage_s(c_.hicache_l3, n, block_bytes_);
          if (t > now_) break;
          done += n;
          left -= n;
        }
        in.l3_reader_busy = std::max({in.l3_reader_busy, std::min(t, p.read_done), now_});
      }
      std::erase(in.l3_reading, r);
      l3_retime(i);
    }
    p.read_done = std::min(p.read_done, now_);
    l3_close(i, q, done);
  }
}

// A read was cut: the reads queued behind it start as soon as the reader is free, never before now.
template <class KV>
void engine_sim<KV>::l3_retime(std::uint32_t i) {
  if constexpr (std::is_same_v<KV, sglang_hicache_kv>) {
    engine_instance& in = inst_[i];
    double free = std::max(in.l3_reader_busy, now_);
    for (const std::uint32_t r : in.l3_reading) {
      auto& p = w_.st(r).pf;
      if (p.read_start > now_ && free < p.read_start) {  // not started: it moves up
        p.read_start = free;
        p.read_done = free + storage_s(c_.hicache_l3, p.hit, block_bytes_);
        l3_wake(i, p.read_done);
      }
      free = std::max(free, p.read_done);
    }
    in.l3_read_free = free;
  }
}

template <class KV>
void engine_sim<KV>::l3_close(std::uint32_t i, engine_request& q, std::uint32_t pages) {
  if constexpr (std::is_same_v<KV, sglang_hicache_kv>) {
    engine_instance& in = inst_[i];
    auto& p = q.pf;
    if (pages > 0) {
      l3_.read_pages += pages;
      for (std::uint32_t k = p.from; k < p.from + pages; ++k) (void)in.l3->read(key_at(q.kv, k));
      const auto min_pages = static_cast<std::uint32_t>((c_.hicache_l3.prefetch_threshold_tokens + bt_ - 1) / bt_);
      l3_.inserted_pages += kv_[i].insert_prefetched(q.kv, p.from, p.from + pages, min_pages);
    }
    // Held by the prefetch: from the first poll it blocked until its read ended or it was cut
    // (not the queueing after the read, when the scheduler did not reach it).
    if (p.held) l3_.hold_s += std::max(0.0, std::min(now_, p.read_done) - p.first_poll);
    in.prefetch_occupied -= std::uint64_t{p.span} * bt_;
    p.open = false;
  }
}

template <class KV>
void engine_sim<KV>::l3_land(std::uint32_t i) {
  if constexpr (std::is_same_v<KV, sglang_hicache_kv>) {
    engine_instance& in = inst_[i];
    if (!in.l3) return;
    while (in.l3_jobs_head < in.l3_jobs.size() && in.l3_jobs[in.l3_jobs_head].first <= now_) {
      for (std::size_t n = in.l3_jobs[in.l3_jobs_head].second; n > 0; --n) {
        (void)in.l3->write(in.l3_writing[in.l3_writing_head++]);
      }
      ++in.l3_jobs_head;
    }
    // Drop what landed once it is half the buffers (all of it when all landed), so that a
    // writer that stays behind does not grow them for the whole run.
    if (in.l3_jobs_head * 2 >= in.l3_jobs.size() && in.l3_jobs_head > 0) {
      in.l3_jobs.erase(in.l3_jobs.begin(), in.l3_jobs.begin() + static_cast<std::ptrdiff_t>(in.l3_jobs_head));
      in.l3_writing.erase(in.l3_writing.begin(),
                          in.l3_writing.begin() + static_cast<std::ptrdiff_t>(in.l3_writing_head));
      in.l3_jobs_head = in.l3_writing_head = 0;
    }
  }
}

template <class KV>
void engine_sim<KV>::l3_flush(std::uint32_t i) {
  if constexpr (std::is_same_v<KV, sglang_hicache_kv>) {
    engine_instance& in = inst_[i];
    if (!in.l3) return;
    const std::size_t before = in.l3_writing.size();
    kv_[i].take_backups([&](kvtk::block_key k) { in.l3_writing.push_back(k); });
    const std::size_t n = in.l3_writing.size() - before;
    if (n == 0) return;
    const double start = std::max(now_, in.l3_write_free);
    in.l3_write_free = start + storage_s(c_.hicache_l3, n, block_bytes_);
    in.l3_jobs.emplace_back(in.l3_write_free, n);
  }
}

template <class KV>
nlohmann::json engine_sim<KV>::l3_summary() const {
  kvtk::tier::hicache_storage_counters s;
  std::uint64_t resident = 0;
  for (const auto& in : inst_) {
    if (!in.l3) continue;
    const auto& c = in.l3->counters();
    s.written_pages += c.written_pages;
    s.rewritten_pages += c.rewritten_pages;
    s.refused_pages += c.refused_pages;
    s.evicted_pages += c.evicted_pages;
    resident += in.l3->pages();
  }
  const auto& c = c_.hicache_l3;
  return {{"backend", "file"},
          {"prefetch_policy", kvtk::tier::name_of(c.policy)},
          {"max_bytes_per_instance", c.max_bytes},
          {"prefetch_threshold_tokens", c.prefetch_threshold_tokens},
          {"storage_bytes_per_s", c.bytes_per_s},
          {"storage_latency_s", c.latency_s},
          {"pages_written", s.written_pages},
          {"pages_rewritten", s.rewritten_pages},
          {"pages_refused", s.refused_pages},
          {"pages_evicted", s.evicted_pages},
          {"pages_resident_at_end", resident},
          {"prefetches", l3_.issued},
          {"declined_below_threshold", l3_.below_threshold},
          {"declined_anchor_not_backed_up", l3_.anchor_not_backed_up},
          {"declined_rate_limit", l3_.rate_limited},
          {"revoked_below_threshold", l3_.revoked},
          {"completed", l3_.completed},
          {"cut_best_effort", l3_.cut_best_effort},
          {"cut_timeout", l3_.cut_timeout},
          {"hit_pages", l3_.hit_pages},
          {"read_pages", l3_.read_pages},
          {"inserted_host_pages", l3_.inserted_pages},
          {"held_prefetches", l3_.held},
          {"hold_s_mean", l3_.held ? l3_.hold_s / static_cast<double>(l3_.held) : 0.0}};
}

#define KVTK_L3_MEMBERS(KV)                                                          \
  template void engine_sim<KV>::l3_prefetch(std::uint32_t, std::uint32_t);           \
  template bool engine_sim<KV>::l3_gate(std::uint32_t, std::uint32_t);               \
  template void engine_sim<KV>::l3_close(std::uint32_t, engine_request&, std::uint32_t); \
  template void engine_sim<KV>::l3_settle(std::uint32_t);                            \
  template void engine_sim<KV>::l3_retime(std::uint32_t);                            \
  template void engine_sim<KV>::l3_cut(std::uint32_t, std::uint32_t);                \
  template void engine_sim<KV>::l3_land(std::uint32_t);                              \
  template void engine_sim<KV>::l3_flush(std::uint32_t);                             \
  template nlohmann::json engine_sim<KV>::l3_summary() const;
KVTK_L3_MEMBERS(vllm_kv)
KVTK_L3_MEMBERS(sglang_kv)
KVTK_L3_MEMBERS(sglang_hicache_kv)
#undef KVTK_L3_MEMBERS

}  // namespace kvtk::sim::des::detail
