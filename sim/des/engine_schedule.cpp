// sim/des/engine_schedule.cpp — the engine schedulers' scheduling rules: one iteration's batch
// of an instance under vllm-v1, vllm-v0 and sglang (the rules: the top of engine_sched.cpp;
// the class: des/engine_sim.hpp).
#include <algorithm>
#include <limits>

#include "des/engine_sim.hpp"

namespace kvtk::sim::des::detail {

template <class KV>
bool engine_sim<KV>::schedule_v1(std::uint32_t i) {
  engine_instance& in = inst_[i];
  std::uint64_t budget = c_.sched.max_num_batched_tokens;
  bool preempted = false;
  for (std::size_t k = 0; k < in.running.size() && budget > 0;) {
    const std::uint32_t r = in.running[k];
    engine_request& q = w_.st(r);
    if (q.finishing) {  // async: done, its output not yet processed
      ++k;
      continue;
    }
    const std::uint64_t n = std::min(q.seq() - q.computed, budget);
    while (!kv_[i].grow(q.kv, q.computed + n) && in.running.back() != r) {
      preempt(i, in.running.back());
      preempted = true;
    }
    if (!kv_[i].grow(q.kv, q.computed + n)) {  // r itself is the newest: it goes
      preempt(i, r);
      preempted = true;
      break;
    }
    q.scheduled = n;
    in.batch.push_back(r);
    budget -= n;
    ++k;
  }
  // With vLLM offload, a request whose load is in flight is skipped (it keeps its place), as
  // are those whose load starts here.
  for (std::size_t pos = 0; !preempted && budget > 0 && pos < in.waiting.size() &&
                            in.running.size() < c_.sched.max_num_seqs;) {
    const std::uint32_t r = in.waiting[pos];
    if (async_loads(i)) {
      if (w_.st(r).load == engine_request::load_phase::loading) {
        ++pos;
        continue;
      }
      const offload_step step = admit_offload(i, r, budget);
      if (step == offload_step::stop) break;
      if (step == offload_step::loading) {
        ++pos;
        continue;
      }
    } else if (!admit(i, r, budget, false)) {
      break;
    }
    take_waiting(i, pos);
    in.running.push_back(r);
    in.batch.push_back(r);
    budget -= w_.st(r).scheduled;
  }
  return !in.batch.empty();
}

template <class KV>
bool engine_sim<KV>::schedule_v0(std::uint32_t i) {
  engine_instance& in = inst_[i];
  std::uint64_t budget = c_.sched.max_num_batched_tokens;
  std::uint64_t longest = 0;  // padded_prefill_budget: the batch costs requests x its longest
  while (!in.waiting.empty() && in.running.size() < c_.sched.max_num_seqs) {
    const std::uint32_t r = in.waiting.front();
    // A prompt longer than the budget is admitted alone (V0 would refuse it outright).
    const bool alone = in.batch.empty();
    if (c_.sched.padded_prefill_budget && !alone) {
      const std::uint64_t tokens = w_.st(r).seq() - std::min(w_.st(r).seq(), peek_hit_tokens(i, r));
      if ((in.batch.size() + 1) * std::max(longest, tokens) > c_.sched.max_num_batched_tokens) break;
    }
    if (!v0_watermark_ok(i, r)) break;
    if (!admit(i, r, alone ? w_.st(r).seq() : budget, true)) break;
    pop_waiting(i);
    in.running.push_back(r);
    in.batch.push_back(r);
    budget -= std::min(budget, w_.st(r).scheduled);
    longest = std::max(longest, w_.st(r).scheduled);
  }
  if (!in.batch.empty()) return true;
  for (std::size_t k = 0; k < in.running.size();) {
    const std::uint32_t r = in.running[k];
    engine_request& q = w_.st(r);
    while (!kv_[i].grow(q.kv, q.seq()) && in.running.back() != r) preempt(i, in.running.back());
    if (!kv_[i].grow(q.kv, q.seq())) {
      preempt(i, r);
      break;
    }
    q.scheduled = 1;
    in.batch.push_back(r);
    ++k;
  }
  return !in.batch.empty();
}

// vLLM V0's watermark: the prompt's blocks (all of them, as V0's can_allocate and Vidur count
// them) must leave watermark_blocks_fraction x the blocks free (vLLM's accounting only).
template <class KV>
bool engine_sim<KV>::v0_watermark_ok(std::uint32_t i, std::uint32_t r) {
  if (c_.sched.watermark_blocks_fraction <= 0) return true;
  if constexpr (requires(KV k) { k.free_blocks(); }) {
    const engine_request& q = w_.st(r);
    const std::uint64_t need = blocks_for(q.seq(), bt_);
    const auto mark = static_cast<std::uint64_t>(c_.sched.watermark_blocks_fraction *
                                                 static_cast<double>(kv_[i].capacity()));
    return kv_[i].free_blocks() >= need + mark;
  } else {
    return true;
  }
}

// The tokens of request r's prompt cached at instance i (what an admission would hit).
template <class KV>
std::uint64_t engine_sim<KV>::peek_hit_tokens(std::uint32_t i, std::uint32_t r) {
  if constexpr (requires(KV k) { k.peek(w_.st(0).kv, 1); }) {
    return std::uint64_t{kv_[i].peek(w_.st(r).kv, w_.st(r).seq())} * bt_;
  } else {
    return 0;
  }
}

template <class KV>
bool engine_sim<KV>::schedule_sglang(std::uint32_t i) {
  engine_instance& in = inst_[i];
  const std::uint64_t page = bt_;
  auto page_up = [&](std::uint64_t n) { return (n + page - 1) / page * page; };
  std::uint64_t budget = c_.sched.max_num_batched_tokens;  // charged in whole pages
  // PrefillAdder's budget: `held` tokens reserved for what already runs and for this batch's
  // admissions (their pages, a spare page each and the outputs of those that finish their
  // prompt here); `taken` pages that those admissions took here, which SGLang allocates only
  // after the batch is chosen, so its checks still see them free.
  std::uint64_t held = 0, taken = 0;
  // batch_is_full holds until a request leaves the running batch (the chunked one is not in
  // it). Set while that batch is empty, it is lost: the next pass's running batch is the last
  // prefill batch, a new object.
  const bool running_before = in.running.size() > (in.chunked >= 0 ? 1u : 0u);
  const bool batch_full = running_before && in.full_at == static_cast<std::int64_t>(in.left);
  for (const std::uint32_t r : in.running) {
    if (static_cast<std::int64_t>(r) != in.chunked) held += out_rest(r);
  }
  auto remaining = [&]() -> std::int64_t {  // PrefillBudget.remaining_total
    if constexpr (requires(KV k) { k.available_pages(); }) {
      return static_cast<std::int64_t>((kv_[i].available_pages() + taken) * page) -
             static_cast<std::int64_t>(held);
    } else {
      return std::numeric_limits<std::int64_t>::max();  // vLLM's accounting: no such budget
    }
  };
  if (in.chunked >= 0) {  // add_chunked_req: the chunk is capped by the memory left, too
    const auto r = static_cast<std::uint32_t>(in.chunked);
    engine_request& q = w_.st(r);
    const std::uint64_t rest = q.seq() - q.computed;
    const std::int64_t room = remaining();
    const std::uint64_t cap = room > 0 ? std::min<std::uint64_t>(budget, room) : budget;
    const std::uint64_t n = std::min(rest, cap);
    const std::uint64_t own = q.kv.own;
    if (n > 0 && kv_[i].grow(q.kv, q.computed + n)) {
      taken += q.kv.own - own;
      q.scheduled = n;
      in.batch.push_back(r);
      budget -= std::min(budget, page_up(n));
      held += page_up(n) + page + (n == rest ? out_full(r) : 0);
      if (q.computed + n == q.seq()) in.chunked = -1;
    } else if (n > 0) {
      preempt(i, r);  // its next chunk does not fit: back to the queue, its pages freed
    }
  }
  if constexpr (requires(KV k) { k.peek(w_.st(0).kv, 1); }) {
    if (lpm_ && in.chunked < 0) {
      std::stable_sort(in.waiting.begin(), in.waiting.end(), [&](std::uint32_t a, std::uint32_t b) {
        return kv_[i].peek(w_.st(a).kv, w_.st(a).seq()) > kv_[i].peek(w_.st(b).kv, w_.st(b).seq());
      });
    }
  }
  for (std::size_t pos = 0; !batch_full && in.chunked < 0 && budget > 0 &&
                           pos < in.waiting.size() && in.running.size() < c_.sched.max_num_seqs;) {
    const std::uint32_t r = in.waiting[pos];
    if (!l3_gate(i, r)) {  // HiCache L3: its prefetch holds it; the requests behind may go
      ++pos;
      continue;
    }
    if (!admit(i, r, budget, false, held, taken)) {  // NO_TOKEN
      if (running_before) in.full_at = static_cast<std::int64_t>(in.left);
      break;
    }
    take_waiting(i, pos);
    in.running.push_back(r);
    in.batch.push_back(r);
    engine_request& q = w_.st(r);
    taken += q.kv.own;
    budget -= std::min(budget, page_up(q.scheduled));
    const bool cut = q.computed + q.scheduled < q.seq();
    held += page_up(q.scheduled) + page + (cut ? 0 : out_full(r));
    if (cut) in.chunked = r;
    if (remaining() <= 0) {  // add_one_req returns budget_state(): NO_TOKEN, however many wait
      if (running_before) in.full_at = static_cast<std::int64_t>(in.left);
      break;
    }
  }
  if (!in.batch.empty()) return true;
  // Decode: every running request needs a page for its next token; while one cannot get it,
  // retract the request with the fewest output tokens (ties: the longest prompt).
  for (bool short_of_pages = true; short_of_pages && !in.running.empty();) {
    short_of_pages = false;
    for (const std::uint32_t r : in.running) {
      if (!kv_[i].grow(w_.st(r).kv, w_.st(r).seq())) {
        short_of_pages = true;
        break;
      }
    }
    if (!short_of_pages) break;
    preempt(i, *std::min_element(in.running.begin(), in.running.end(), [&](auto a, auto b) {
      return w_.st(a).out_done != w_.st(b).out_done ? w_.st(a).out_done < w_.st(b).out_done
                                                : w_.st(a).L > w_.st(b).L;
    }));
  }
  for (const std::uint32_t r : in.running) {
    w_.st(r).scheduled = 1;
    in.batch.push_back(r);
  }
  return !in.batch.empty();
}

// The rules of both engines' accountings (engine_sched.cpp instantiates the rest).
template bool engine_sim<vllm_kv>::schedule_v1(std::uint32_t);
template bool engine_sim<vllm_kv>::schedule_v0(std::uint32_t);
template bool engine_sim<vllm_kv>::schedule_sglang(std::uint32_t);
template bool engine_sim<sglang_kv>::schedule_v1(std::uint32_t);
template bool engine_sim<sglang_kv>::schedule_v0(std::uint32_t);
template bool engine_sim<sglang_kv>::schedule_sglang(std::uint32_t);
template bool engine_sim<sglang_hicache_kv>::schedule_v1(std::uint32_t);
template bool engine_sim<sglang_hicache_kv>::schedule_v0(std::uint32_t);
template bool engine_sim<sglang_hicache_kv>::schedule_sglang(std::uint32_t);

}  // namespace kvtk::sim::des::detail
