// sim/des/engine_sched.cpp — the engine schedulers of kvtk simulate (docs/simulate.md "Engine
// schedulers"). Each instance runs iterations back to back while it has work; an iteration's
// duration is iteration_timing's for its prefill parts and decode batch (timing.hpp). A request
// is routed at arrival and joins its instance's waiting queue. Its KV lives in the instance's
// KV cache (engine_kv.hpp), which is also the prefix cache. When an iteration ends, every
// scheduled request has its tokens computed; one that has computed all of its tokens samples
// one: its first token ends the time to first token, the last one finishes it (blocks freed
// into the cache). Queueing before admission therefore shows as time to first token, never as
// gaps between tokens.
//
//  vllm-v1  Scheduler.schedule of vLLM 0.33 (V1): a token budget per iteration
//           (max_num_batched_tokens). Running requests first, in order: each gets its
//           remaining tokens (a prefill chunk or one decode token) within the budget; when its
//           blocks cannot be allocated the newest running request is preempted (recompute: its
//           blocks freed, back to the front of the waiting queue) until they can, or until it is
//           itself the one preempted. Then, if nothing was preempted, waiting requests in order
//           while the budget lasts and fewer than max_num_seqs run: hit, then a chunk of at most
//           the budget (chunked prefill); stop at the first that cannot be allocated.
//  vllm-v0  prefill first (vLLM's V0 scheduler, on V1's block accounting): if waiting
//           requests can be admitted whole (the prompt's uncached tokens within the budget, at
//           most max_num_seqs running, blocks there), the iteration prefills them, in order;
//           otherwise it decodes every running request one token, preempting the newest
//           (recompute) when a block is short.
//  sglang   SGLang 0.5.23: a prefill iteration when a request can be admitted, else a decode
//           iteration. Waiting requests are ordered by longest cached prefix first (lpm, ties
//           by arrival) or by arrival (fcfs) and admitted while the prefill token budget
//           (max_num_batched_tokens, chunked_prefill_size) lasts; the last one may be chunked
//           (one chunked request at a time, continued first in the next prefill iteration).
//           A decode that cannot get a page retracts the running request with the fewest
//           output tokens (ties: the longest prompt), back to the waiting queue.
#include "des/engine_sched.hpp"

#include <algorithm>
#include <deque>
#include <stdexcept>

#include "des/cluster.hpp"
#include "des/engine_kv.hpp"
#include "des/event_loop.hpp"
#include "des/router.hpp"
#include "des/summary.hpp"
#include "des/timing.hpp"

namespace kvtk::sim::des {

namespace detail {
namespace {

struct engine_request {
  kv_request kv;
  std::uint64_t L = 0, out_total = 1, out_done = 0, computed = 0, scheduled = 0;
  std::uint32_t inst = 0;
  bool started = false, chunked = false;
  bool finishing = false;  // async scheduling: finished, blocks not yet released
  double last_token = 0, tbt_sum = 0;
  std::uint64_t tbt_n = 0;
  [[nodiscard]] std::uint64_t seq() const { return L + out_done; }
  [[nodiscard]] bool decoding() const { return computed >= L && computed + 1 == seq(); }
};

struct engine_instance {
  std::deque<std::uint32_t> waiting;
  std::vector<std::uint32_t> running, batch;
  std::int64_t chunked = -1;  // sglang: the request being prefilled in chunks
  std::uint64_t iterations = 0;
  bool busy = false;
  double busy_s = 0;
};

// At one instant: iterations end, then requests arrive, then idle instances schedule, so that a
// schedule sees every request that arrived by then (as an engine's loop picks up its queue).
enum class engine_event : std::uint8_t { iteration_end, arrival, instance_start };

template <class KV>
class engine_sim {
 public:
  using event = basic_event<engine_event>;
  // Names are parsed here, once (check_engine_config validated them): the hot paths switch on
  // enums.
  engine_sim(const kvtk::prefix::prefix_trace_view& t, const cluster_config& c,
             std::uint32_t kv_blocks)
      : t_(t), c_(c), events_(t), routes_(c.seed), inst_(c.prefill_instances),
        timing_(c.model, c.gpu, c.gpus_per_instance, c.time_scale, c.iteration_overhead_s,
                c.timing),
        sched_(c.sched.kind()), router_(parse_router(c.router)),
        lpm_(schedule_policy_names.parse(c.sched.schedule_policy) == schedule_policy_kind::lpm) {
    bt_ = t.block_tokens;
    for (std::uint32_t i = 0; i < c.prefill_instances; ++i) kv_.emplace_back(kv_blocks, bt_);
    kv_blocks_ = kv_blocks;
    async_ = c.sched.async_scheduling && sched_ == scheduler_kind::vllm_v1;
  }

  // The strategy's side of run_events (des/event_loop.hpp).
  event_queue<engine_event>& queue() noexcept { return events_; }
  void handle(const event& e) {
    now_ = e.t;
    switch (e.kind) {
      case engine_event::arrival:
        arrive(e.request);
        break;
      case engine_event::iteration_end:
        end(e.instance);
        break;
      case engine_event::instance_start:
        start(e.instance);
        break;
    }
  }
  request_window<engine_request>& window() noexcept { return w_; }
  [[nodiscard]] std::uint64_t ended() const noexcept { return ended_; }
  simulation_result summarize(outcome_stream& sink);

 private:
  void push(double t, engine_event kind, std::uint32_t who) { events_.push(t, kind, who, who); }
  void arrive(std::uint32_t r);
  void start(std::uint32_t i);
  void wake(std::uint32_t i) {  // an idle instance schedules after this instant's arrivals
    if (inst_[i].busy) return;
    inst_[i].busy = true;
    push(now_, engine_event::instance_start, i);
  }
  void end(std::uint32_t i);
  void preempt(std::uint32_t i, std::uint32_t r);
  bool schedule_v1(std::uint32_t i);
  bool schedule_v0(std::uint32_t i);
  bool schedule_sglang(std::uint32_t i);
  bool admit(std::uint32_t i, std::uint32_t r, std::uint64_t budget, bool whole,
             std::uint64_t held = 0);
  // SGLang's PrefillAdder holds back each running request's remaining output (capped at 4096
  // tokens; ratio 1: a replay's output lengths are fixed, as with ignore_eos).
  std::uint64_t out_rest(std::uint32_t r) const {
    return std::min<std::uint64_t>(w_.st(r).out_total - w_.st(r).out_done, 4096);
  }
  void sample(std::uint32_t r);
  // Async scheduling: requests that finished in the last iteration stayed in `running` (holding
  // their blocks, counting toward max_num_seqs) through this schedule; now they go.
  void release_finishing(std::uint32_t i) {
    std::erase_if(inst_[i].running, [&](std::uint32_t r) {
      if (!w_.st(r).finishing) return false;
      kv_[i].finish(w_.st(r).kv, w_.st(r).computed);
      w_.st(r).finishing = false;
      w_.end(r);
      return true;
    });
  }

  const kvtk::prefix::prefix_trace_view& t_;
  const cluster_config& c_;
  event_queue<engine_event> events_;  // the event loop's queue (des/event_loop.hpp)
  basic_router routes_;               // the shared routers (des/router.hpp)
  request_window<engine_request> w_;  // the requests in flight (des/outcomes.hpp)
  std::vector<engine_instance> inst_;
  std::deque<KV> kv_;  // a deque: the caches cannot move
  iteration_timing timing_;
  std::vector<prefill_part> parts_;
  std::vector<iteration_record> log_;
  latency_stats gaps_;  // every token gap (token_gap_s)
  scheduler_kind sched_;
  router_kind router_;
  bool lpm_;  // sglang: longest prefix first (else fcfs)
  double now_ = 0;
  std::uint64_t preemptions_ = 0, iterations_ = 0, ended_ = 0;
  std::uint64_t unschedulable_ = 0;
  std::uint32_t bt_ = 1, kv_blocks_ = 0;
  bool async_ = false;  // vllm-v1 with async_scheduling
};

template <class KV>
void engine_sim<KV>::arrive(std::uint32_t r) {
  engine_request& q = w_.open(r).st;
  q.L = t_.input_tokens(r);
  std::uint64_t out = t_.output_length.empty() ? 1 : t_.output_length[r];
  if (c_.max_output_tokens >= 0) out = std::min<std::uint64_t>(out, c_.max_output_tokens);
  q.out_total = std::max<std::uint64_t>(out, 1);  // an engine always samples a first token
  q.kv.prompt_keys = t_.cacheable(r, kvtk::prefix::partial_block::skip);
  q.kv.id = r;
  const std::uint32_t i =
      routes_.pick(router_, static_cast<std::uint32_t>(inst_.size()), [&](std::uint32_t x) {
        return inst_[x].waiting.size() + inst_[x].running.size();
      });
  q.inst = i;
  request_outcome& o = w_.out(r);
  o.arrival = now_;
  o.instance = i;
  o.input_tokens = q.L;
  o.blocks = q.kv.prompt_keys.size();
  inst_[i].waiting.push_back(r);
  wake(i);
}

// Admits waiting request r with at most `budget` new tokens (all of its tokens when `whole`).
template <class KV>
bool engine_sim<KV>::admit(std::uint32_t i, std::uint32_t r, std::uint64_t budget, bool whole,
                           std::uint64_t held) {
  engine_request& q = w_.st(r);
  const admission a = kv_[i].admit(q.kv, q.seq(), budget, whole, {out_rest(r), held});
  if (!a.ok) return false;
  q.computed = a.hit_tokens;
  q.scheduled = a.new_tokens;
  if (!q.started) {  // the first admission decides the reported hit
    q.started = true;
    w_.out(r).prefill_start = now_;
    w_.out(r).hit_blocks = a.hit_tokens / bt_;
    w_.out(r).hit_tokens = a.hit_tokens;
  }
  return true;
}

template <class KV>
void engine_sim<KV>::preempt(std::uint32_t i, std::uint32_t r) {
  engine_request& q = w_.st(r);
  kv_[i].preempt(q.kv);
  q.computed = 0;
  q.scheduled = 0;
  auto& run = inst_[i].running;
  run.erase(std::find(run.begin(), run.end(), r));
  if (sched_ == scheduler_kind::sglang) {
    inst_[i].waiting.push_back(r);  // _add_request_to_queue: a retracted request queues again
  } else {
    inst_[i].waiting.push_front(r);
  }
  if (inst_[i].chunked == r) inst_[i].chunked = -1;
  ++preemptions_;
}

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
  while (!preempted && budget > 0 && !in.waiting.empty() && in.running.size() < c_.sched.max_num_seqs) {
    const std::uint32_t r = in.waiting.front();
    if (!admit(i, r, budget, false)) break;
    in.waiting.pop_front();
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
  while (!in.waiting.empty() && in.running.size() < c_.sched.max_num_seqs) {
    const std::uint32_t r = in.waiting.front();
    // A prompt longer than the budget is admitted alone (V0 would refuse it outright).
    const bool alone = in.batch.empty();
    if (!admit(i, r, alone ? w_.st(r).seq() : budget, true)) break;
    in.waiting.pop_front();
    in.running.push_back(r);
    in.batch.push_back(r);
    budget -= std::min(budget, w_.st(r).scheduled);
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

template <class KV>
bool engine_sim<KV>::schedule_sglang(std::uint32_t i) {
  engine_instance& in = inst_[i];
  const std::uint64_t page = bt_;
  auto page_up = [&](std::uint64_t n) { return (n + page - 1) / page * page; };
  std::uint64_t budget = c_.sched.max_num_batched_tokens;  // charged in whole pages
  std::uint64_t held = 0;  // PrefillAdder's reserve for what already runs
  for (const std::uint32_t r : in.running) {
    if (static_cast<std::int64_t>(r) != in.chunked) held += out_rest(r);
  }
  if (in.chunked >= 0) {  // the chunked request continues first, its chunk ending on a page
    const auto r = static_cast<std::uint32_t>(in.chunked);
    engine_request& q = w_.st(r);
    const std::uint64_t rest = q.seq() - q.computed;
    const std::uint64_t n = rest <= budget ? rest : (q.computed + budget) / page * page - q.computed;
    if (n > 0 && kv_[i].grow(q.kv, q.computed + n)) {
      q.scheduled = n;
      in.batch.push_back(r);
      budget -= std::min(budget, page_up(n));
      held += page_up(n) + page + out_rest(r);
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
  while (in.chunked < 0 && budget > 0 && !in.waiting.empty() &&
         in.running.size() < c_.sched.max_num_seqs) {
    const std::uint32_t r = in.waiting.front();
    if (!admit(i, r, budget, false, held)) break;
    in.waiting.pop_front();
    in.running.push_back(r);
    in.batch.push_back(r);
    engine_request& q = w_.st(r);
    budget -= std::min(budget, page_up(q.scheduled));
    held += page_up(q.scheduled) + page + out_rest(r);
    if (q.computed + q.scheduled < q.seq()) in.chunked = r;
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

template <class KV>
void engine_sim<KV>::start(std::uint32_t i) {
  engine_instance& in = inst_[i];
  // A schedule can come back empty after preempting everything that ran (vLLM schedules again
  // at once); twice empty with nothing running means the queue's head does not fit even an
  // empty cache: it is refused (counted as unschedulable, as an engine would abort it).
  for (int empty = 0;;) {
    in.batch.clear();
    const bool any = sched_ == scheduler_kind::vllm_v1   ? schedule_v1(i)
                     : sched_ == scheduler_kind::vllm_v0 ? schedule_v0(i)
                                                         : schedule_sglang(i);
    if (async_) release_finishing(i);
    if (any) break;
    if (in.waiting.empty()) {
      in.busy = false;
      return;
    }
    if (++empty < 2) continue;
    if (!in.running.empty()) {
      throw std::logic_error("engine scheduler stalled with requests running (a kvtk bug)");
    }
    const std::uint32_t r = in.waiting.front();
    in.waiting.pop_front();
    w_.out(r).rejected = true;
    w_.end(r);
    ++unschedulable_;
    ++ended_;
    empty = 0;
  }
  parts_.clear();
  decode_batch d;
  for (const std::uint32_t r : in.batch) {
    const engine_request& q = w_.st(r);
    if (q.decoding() && q.scheduled == 1) {
      ++d.requests;
      d.context_tokens += static_cast<double>(q.computed);
      d.kv_bytes += static_cast<double>(q.computed) * static_cast<double>(c_.model.kv_bytes_per_token);
    } else {
      parts_.push_back({q.scheduled, q.computed});
    }
  }
  const double dur = timing_.seconds(parts_, d);
  if (c_.sched.log_iterations) {
    for (const std::uint32_t r : in.batch) {
      log_.push_back({i, in.iterations, now_, now_ + dur, r, w_.st(r).scheduled, w_.st(r).computed});
    }
  }
  ++in.iterations;
  in.busy = true;
  in.busy_s += dur;
  ++iterations_;
  push(now_ + dur, engine_event::iteration_end, i);
}

template <class KV>
void engine_sim<KV>::sample(std::uint32_t r) {
  engine_request& q = w_.st(r);
  request_outcome& o = w_.out(r);
  ++q.out_done;
  if (q.out_done == 1) {
    o.first_token = now_;
  } else {
    gaps_.add(now_ - q.last_token);
    q.tbt_sum += now_ - q.last_token;
    ++q.tbt_n;
  }
  q.last_token = now_;
}

template <class KV>
void engine_sim<KV>::end(std::uint32_t i) {
  engine_instance& in = inst_[i];
  for (const std::uint32_t r : in.batch) {
    engine_request& q = w_.st(r);
    const bool prefill = !(q.decoding() && q.scheduled == 1);
    q.computed += q.scheduled;
    q.scheduled = 0;
    if (q.computed < q.seq()) {  // a prefill chunk
      kv_[i].checkpoint(q.kv, q.computed);
      continue;
    }
    sample(r);
    if (q.out_done < q.out_total) {
      if (prefill) kv_[i].checkpoint(q.kv, q.computed);  // its prompt into the tree
      continue;
    }
    if (async_) {
      q.finishing = true;  // released after the next schedule (async scheduling)
    } else {
      kv_[i].finish(q.kv, q.computed);
      std::erase(in.running, r);
      w_.end(r);
    }
    request_outcome& o = w_.out(r);
    o.done = now_;
    o.output_tokens = q.out_total;
    o.mean_tbt = q.tbt_n ? q.tbt_sum / static_cast<double>(q.tbt_n) : 0.0;
    ++ended_;
  }
  inst_[i].busy = false;
  wake(i);
}


template <class KV>
simulation_result engine_sim<KV>::summarize(outcome_stream& sink) {
  double busy = 0;
  std::uint64_t evictions = 0, cached = 0;
  for (const auto& in : inst_) busy += in.busy_s;
  for (const auto& kv : kv_) {
    evictions += kv.evictions();
    cached += kv.cached_blocks();
  }
  simulation_result res;
  res.summary = common_summary(sink.totals, gaps_,
                               {.rejected = unschedulable_,
                                .preemptions = preemptions_,
                                .busy_s = busy,
                                .instances = static_cast<double>(inst_.size()),
                                .max_live = w_.max_live(),
                                .timing = timing_.describe(),
                                .scheduler = c_.sched.describe()});
  auto& j = res.summary;
  j["engine_version"] = KV::engine == std::string("vllm") ? "vLLM 0.33.0" : "SGLang 0.5.23";
  j["kv_blocks_per_instance"] = kv_blocks_;
  j["iterations"] = iterations_;
  j["evictions"] = evictions;
  j["cached_blocks_at_end"] = cached;
  res.requests = std::move(sink.kept);
  res.iterations = std::move(log_);
  return res;
}

}  // namespace

simulation_result simulate_engine(const kvtk::prefix::prefix_trace_view& t, const cluster_config& c,
                                  const simulation_hooks& hooks) {
  check_engine_config(t, c);
  const std::uint32_t blocks = engine_kv_blocks(t, c);
  if (c.sched.accounting() == "vllm") {
    engine_sim<vllm_kv> sim(t, c, blocks);
    return run_events(sim, t, c, hooks);
  }
  engine_sim<sglang_kv> sim(t, c, blocks);
  return run_events(sim, t, c, hooks);
}

}  // namespace detail
}  // namespace kvtk::sim::des
