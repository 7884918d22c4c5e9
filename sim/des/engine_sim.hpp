// sim/des/engine_sim.hpp — the engine schedulers as a strategy on the one event loop
// (des/event_loop.hpp), internal to sim/des. engine_sched.cpp holds the request life cycle
// (arrive, admit, iterate, sample, finish, transfer); engine_schedule.cpp the three scheduling
// rules (vllm-v1, vllm-v0, sglang); both are explained at the top of engine_sched.cpp.
//
// Layout: instances [0, prefill_instances) take arrivals; with decode_instances, instances
// [prefill_instances, prefill_instances + decode_instances) take the requests whose prompt was
// prefilled elsewhere, their KV moved over the P->D link. Every instance has its own engine KV
// cache (KV: vllm_kv or sglang_kv, engine_kv.hpp) and, with dram_blocks, its own host-DRAM tier
// (kvtk's generic tier: LRU, written through with every prompt an instance prefilled; a
// request's run of blocks there after its HBM hit is loaded rather than computed); with
// pool_blocks, one pool (LRU) shared by all, written with every prompt prefilled anywhere and
// read like a DRAM tier, over the pool link. With sparse decode, an iteration's decoding
// requests read only their selected pages, and its recalls and prefetches stall it as the
// cluster's decode step (des/sparse_decode.hpp).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "des/cluster.hpp"
#include "des/engine_kv.hpp"
#include "des/engine_kv_hicache.hpp"
#include "des/event_loop.hpp"
#include "des/router.hpp"
#include "des/sparse_decode.hpp"
#include "des/timing.hpp"
#include "kvtk/move/timing_fit.hpp"
#include "kvtk/tier/hicache_storage.hpp"
#include "kvtk/tier/lmcache_offload.hpp"
#include "kvtk/tier/tier_hierarchy.hpp"

namespace kvtk::sim::des::detail {

struct engine_request {
  kv_request kv;
  std::uint64_t L = 0, out_total = 1, out_done = 0, computed = 0, scheduled = 0;
  std::uint64_t loading = 0;       // blocks loaded from the DRAM tier by this iteration
  std::uint64_t pool_loading = 0;  // and from the shared pool
  std::uint32_t inst = 0;
  bool started = false, chunked = false;
  bool finishing = false;  // async scheduling: finished, blocks not yet released
  bool remote = false;     // disaggregated: its prompt's KV came from a prefill instance
  double cold_prefill_s = 0;  // its prefill without cache (the conductor's queue estimate)
  // vLLM offload (`offload`): the connector's state for this request, and its asynchronous
  // load (WAITING_FOR_REMOTE_KVS): none, loading (blocks held, not schedulable) or ready.
  kvtk::tier::vllm_offload_state offload;
  std::uint64_t offload_lookup = 0;  // the lookup's H (tokens) at this admission attempt
  enum class load_phase : std::uint8_t { none, loading, ready } load = load_phase::none;
  // LMCache (`offload` "lmcache-cpu:..."): its lookup, once per admission episode (vLLM keeps the
  // connector's answer until the blocks are allocated), the GPU hit it saw, a load to run when
  // the iteration starts, and the chunks stored so far (from the lookup's hit on).
  bool lm_looked = false, lm_retrieve = false;
  bool lm_new = false;      // admitted in the iteration being built (stores first)
  bool lm_resumed = false;  // preempted before (stores last)
  kvtk::tier::lmcache_offload::lookup_result lm;
  std::uint64_t lm_gpu_hit = 0, lm_saved = 0;
  // Dynamo KVBM (`offload` "kvbm:..."): the last lookup's match past the GPU hit, and the blocks
  // its slot has evaluated (computed or offered for G1 -> G2; KVBM's evaluated_blocks, which
  // only grows until a preemption resets the slot).
  kvtk::tier::kvbm_lower_tiers::match kvbm;
  std::uint64_t kvbm_evaluated = 0;
  // HiCache L3 (`storage=file`): its prefetch from storage, issued when it was queued.
  struct prefetch_state {
    bool open = false;
    std::uint32_t from = 0;  // pages the match held at issue (the anchor's depth)
    std::uint32_t span = 0;  // pages asked for (to the prompt's last token, page-aligned)
    std::uint32_t hit = 0;   // pages L3 held from `from` on (0: revoked, below the threshold)
    double query_done = 0, read_start = 0;
    double read_done = 1e300;  // set when drained (a read's end, or the revocation)
    double first_poll = -1;  // the first admission poll it blocked (-1: none yet)
    double deadline = 0;     // timeout: when it is cut (first_poll + the policy's timeout)
    bool held = false;       // a poll skipped the request for it
    bool drained = false;    // its query was drained at a step start (reading, or revoked)
  } pf;
  double last_token = 0, tbt_sum = 0;
  std::uint64_t tbt_n = 0;
  [[nodiscard]] std::uint64_t seq() const { return L + out_done; }
  [[nodiscard]] bool decoding() const { return computed >= L && computed + 1 == seq(); }
};

struct engine_instance {
  // The waiting queue and its prompts' tokens (the cache-aware router's cost, O(1) per arrival).
  // Change it through push_waiting / pop_waiting only.
  std::deque<std::uint32_t> waiting;
  std::uint64_t waiting_tokens = 0;
  double waiting_prefill_s = 0;  // their prefills without cache, one after another (conductor)
  double busy_until = 0;         // the end of the iteration in progress
  std::vector<std::uint32_t> running, batch;
  std::int64_t chunked = -1;  // sglang: the request being prefilled in chunks
  std::uint64_t left = 0;     // requests that left `running` (finished, preempted, handed off)
  // sglang: running_batch.batch_is_full, set (to `left`'s value) when an admission found no
  // memory; SGLang tries no new request until one leaves the running batch.
  std::int64_t full_at = -1;
  std::uint32_t finishing = 0;  // async: running requests done, not yet released
  std::uint64_t iterations = 0;
  bool busy = false;
  double busy_s = 0;
  std::unique_ptr<kvtk::tier::tier_hierarchy<>> dram;  // null without dram_blocks
  kvtk::sparse::decode_clock decode_clock;  // sparse: the decode batch's stall and prefetch
  std::unique_ptr<kvtk::tier::vllm_cpu_offload<>> offload;  // null without `offload` "cpu:..."
  std::unique_ptr<kvtk::tier::lmcache_offload> lmcache;      // null without "lmcache-cpu:"
  std::unique_ptr<kvtk::tier::kvbm_lower_tiers> kvbm;        // null without "kvbm:"
  double load_link_free = 0;     // vLLM offload, KVBM: when the host link's last queued load ends
  double disk_link_free = 0;     // KVBM: when the disk's last queued read ends
  std::uint32_t loads_in_flight = 0;
  // HiCache L3 (`storage=file`): the storage, its reader's and writer's queues, and the prefetches.
  std::unique_ptr<kvtk::tier::hicache_storage> l3;  // null without storage=file
  double l3_read_free = 0, l3_write_free = 0;  // when the I/O thread's last read, the writer's last write end
  double l3_reader_busy = 0;    // the end of the batch a cut read still finishes
  bool l3_gated = false;        // this schedule pass skipped a request its prefetch holds
  std::uint64_t prefetch_occupied = 0;  // tokens asked for by open prefetches (SGLang's rate limit)
  std::vector<std::uint32_t> l3_querying;  // open prefetches not yet drained, in issue order
  std::vector<std::uint32_t> l3_reading;   // drained, reading or queued, in the I/O thread's order
  std::vector<kvtk::block_key> l3_writing;  // pages being written, in order
  std::vector<std::pair<double, std::size_t>> l3_jobs;  // write jobs: end time, pages
  std::size_t l3_writing_head = 0, l3_jobs_head = 0;
};

// At one instant: iterations end, then transferred KV lands, then requests arrive, then idle
// instances schedule, so that a schedule sees every request that reached it by then (as an
// engine's loop picks up its queue).
// A vLLM offload load that is done makes its request schedulable with this instant's arrivals.
enum class engine_event : std::uint8_t {
  iteration_end,
  transfer_done,
  load_done,
  prefetch_wake,
  arrival,
  instance_start
};

template <class KV>
class engine_sim {
 public:
  using event = basic_event<engine_event>;
  // Names are parsed here, once (check_engine_config validated them): the hot paths switch on
  // enums.
  engine_sim(const kvtk::prefix::prefix_trace_view& t, const cluster_config& c,
             std::uint32_t kv_blocks);

  // The strategy's side of run_events (des/event_loop.hpp).
  event_queue<engine_event>& queue() noexcept { return events_; }
  void handle(const event& e);
  request_window<engine_request>& window() noexcept { return w_; }
  [[nodiscard]] std::uint64_t ended() const noexcept { return ended_; }
  simulation_result summarize(outcome_stream& sink);

 private:
  void push(double t, engine_event kind, std::uint32_t who) { events_.push(t, kind, who, who); }
  void push_waiting(std::uint32_t i, std::uint32_t r, bool front = false) {
    engine_instance& in = inst_[i];
    front ? in.waiting.push_front(r) : in.waiting.push_back(r);
    in.waiting_tokens += w_.st(r).L;
    in.waiting_prefill_s += w_.st(r).cold_prefill_s;
  }
  std::uint32_t pop_waiting(std::uint32_t i) {
    engine_instance& in = inst_[i];
    const std::uint32_t r = in.waiting.front();
    in.waiting.pop_front();
    in.waiting_tokens -= w_.st(r).L;
    in.waiting_prefill_s -= w_.st(r).cold_prefill_s;
    if (in.waiting.empty()) in.waiting_prefill_s = 0;  // no drift from the sums' rounding
    return r;
  }
  void arrive(std::uint32_t r);
  void start(std::uint32_t i);
  void wake(std::uint32_t i) {  // an idle instance schedules after this instant's arrivals
    if (inst_[i].busy) return;
    inst_[i].busy = true;
    push(now_, engine_event::instance_start, i);
  }
  void end(std::uint32_t i);
  // Disaggregated: request r's prompt is done on prefill instance i; its KV moves to a decode
  // instance (transfer_done).
  void hand_off(std::uint32_t i, std::uint32_t r);
  void land(std::uint32_t r);
  void preempt(std::uint32_t i, std::uint32_t r);
  bool schedule_v1(std::uint32_t i);
  bool schedule_v0(std::uint32_t i);
  bool schedule_sglang(std::uint32_t i);
  bool v0_watermark_ok(std::uint32_t i, std::uint32_t r);
  std::uint64_t peek_hit_tokens(std::uint32_t i, std::uint32_t r);
  bool admit(std::uint32_t i, std::uint32_t r, std::uint64_t budget, bool whole,
             std::uint64_t held = 0, std::uint64_t taken_pages = 0);
  // vLLM offload and KVBM, whose connectors load asynchronously (schedule_v1's waiting loop):
  // what waiting request r does this schedule.
  [[nodiscard]] bool async_loads(std::uint32_t i) const { return inst_[i].offload || inst_[i].kvbm; }
  enum class offload_step : std::uint8_t { admitted, loading, stop };
  offload_step admit_offload(std::uint32_t i, std::uint32_t r, std::uint64_t budget);
  void load_done(std::uint32_t r);
  // vLLM offload: the chunks request r's computed prompt tokens complete, offered for store.
  void offload_store(std::uint32_t i, engine_request& q);
  // KVBM: the start of an asynchronous load of q's match (its end time), and the step's G1 -> G2
  // batch of q's newly computed prompt blocks.
  double kvbm_load(std::uint32_t i, engine_request& q);
  void kvbm_store(std::uint32_t i, engine_request& q);
  // The request's KV is done with (finished or handed off): freed into the cache, and the
  // connector told (on_request_finished).
  void finish_kv(std::uint32_t i, engine_request& q) {
    kv_[i].finish(q.kv, q.computed);
    if (inst_[i].offload) inst_[i].offload->finish(q.offload);
  }
  std::uint32_t take_waiting(std::uint32_t i, std::size_t pos);
  [[nodiscard]] nlohmann::json offload_summary() const;
  [[nodiscard]] nlohmann::json hicache_summary() const;
  [[nodiscard]] nlohmann::json lmcache_summary() const;
  [[nodiscard]] nlohmann::json kvbm_summary() const;
  [[nodiscard]] nlohmann::json lmcache_cpu_summary(const kvtk::tier::lmcache_offload_counters& t,
                                                   std::uint64_t resident) const;
  // LMCache: the load and the stores of the requests in the iteration that starts (synchronous:
  // start_load_kv before the forward, wait_for_save after it). Returns their seconds.
  double lmcache_step(std::uint32_t i);
  // HiCache L3 (engine_hicache_l3.cpp; no-ops for the other accountings).
  void l3_prefetch(std::uint32_t i, std::uint32_t r);     // when r is queued
  bool l3_gate(std::uint32_t i, std::uint32_t r);         // may r be admitted now?
  void l3_close(std::uint32_t i, engine_request& q, std::uint32_t pages);  // lands `pages` read
  void l3_land(std::uint32_t i);                          // writes done by now become visible
  void l3_flush(std::uint32_t i);                         // the iteration's backups go to the writer
  void l3_settle(std::uint32_t i);                        // prefetches done by now land
  void l3_retime(std::uint32_t i);                        // the reads queued behind a cut one
  void l3_cut(std::uint32_t i, std::uint32_t r);          // r's prefetch ends now
  void l3_wake(std::uint32_t i, double t) { push(t, engine_event::prefetch_wake, i); }
  [[nodiscard]] nlohmann::json l3_summary() const;
  // The KV request r takes from outside instance i beyond a hit of `hit_tokens` (tokens); the
  // blocks from the DRAM tier and the pool are counted in q.loading and q.pool_loading.
  std::uint64_t external_tokens(std::uint32_t i, engine_request& q, std::uint64_t hit_tokens,
                                std::uint64_t seq);
  // The instance a new request goes to (the router, parsed once).
  std::uint32_t route(const engine_request& q);
  // The iteration's seconds: its compute, and the DRAM loads of the requests admitted in it.
  double iteration_s(std::uint32_t i);
  // SGLang's PrefillAdder holds back each running request's remaining output (capped at 4096
  // tokens; ratio 1: a replay's output lengths are fixed, as with ignore_eos).
  // A prefill instance of a disaggregated pair samples one token and hands the request off.
  // SGLang's output reserve of an admitted prefill: min(max_new_tokens, 4096), however many
  // tokens a retracted request had already produced.
  std::uint64_t out_full(std::uint32_t r) const {
    const engine_request& q = w_.st(r);
    const std::uint64_t total = inst_.size() > prefill_n_ && q.inst < prefill_n_ ? 1 : q.out_total;
    return std::min<std::uint64_t>(total, 4096);
  }
  std::uint64_t out_rest(std::uint32_t r) const {
    const engine_request& q = w_.st(r);
    const std::uint64_t total = inst_.size() > prefill_n_ && q.inst < prefill_n_ ? 1 : q.out_total;
    return std::min<std::uint64_t>(total - std::min(total, q.out_done), 4096);
  }
  void sample(std::uint32_t r);
  [[gnu::noinline]] void write_through(const engine_request& q);
  void finished(std::uint32_t r);
  // Async scheduling: requests that finished in the last iteration stayed in `running` (holding
  // their blocks, counting toward max_num_seqs) through this schedule; now they go.
  void release_finishing(std::uint32_t i);

  const kvtk::prefix::prefix_trace_view& t_;
  const cluster_config& c_;
  event_queue<engine_event> events_;  // the event loop's queue (des/event_loop.hpp)
  basic_router routes_;               // the shared routers (des/router.hpp)
  request_window<engine_request> w_;  // the requests in flight (des/outcomes.hpp)
  std::vector<engine_instance> inst_;
  std::deque<KV> kv_;  // a deque: the caches cannot move
  iteration_timing timing_;
  kvtk::move::timing_model host_link_;  // the DRAM tier's loads (as kvtk's scheduler's)
  std::vector<prefill_part> parts_;
  std::vector<iteration_record> log_;
  std::vector<std::uint8_t> served_;  // the DRAM tier's and the pool's process() scratch
  std::unique_ptr<kvtk::tier::tier_hierarchy<>> pool_;  // null without pool_blocks
  std::unique_ptr<sparse_decoder> sparse_;              // null for dense decode
  kvtk::move::timing_model pool_link_;
  kvtk::move::timing_model disk_link_;  // KVBM's G3 and LMCache's disk reads
  std::vector<double> route_cost_, route_weight_;  // cache-aware routing, one per prefill instance
  latency_stats gaps_;                // every token gap (token_gap_s)
  scheduler_kind sched_;
  router_kind router_;
  bool lpm_;  // sglang: longest prefix first (else fcfs)
  double now_ = 0, block_bytes_ = 0, pd_bytes_ = 0;
  std::uint64_t preemptions_ = 0, iterations_ = 0, ended_ = 0, unschedulable_ = 0;
  std::uint64_t dram_read_blocks_ = 0, pool_read_blocks_ = 0, pool_write_blocks_ = 0;
  double offload_load_bytes_ = 0, offload_store_bytes_ = 0, offload_wait_s_ = 0;
  double lmcache_s_ = 0;  // LMCache: the seconds its loads and stores added to iterations
  double disk_load_bytes_ = 0;  // KVBM, LMCache: of offload_load_bytes_, read from disk
  struct l3_totals {
    std::uint64_t issued = 0, below_threshold = 0, anchor_not_backed_up = 0, rate_limited = 0;
    std::uint64_t revoked = 0, completed = 0, cut_best_effort = 0, cut_timeout = 0;
    std::uint64_t hit_pages = 0, read_pages = 0, inserted_pages = 0, held = 0;
    double hold_s = 0;
  } l3_;
  std::vector<kvtk::block_key> l3_keys_;  // scratch
  std::vector<std::uint32_t> l3_done_;    // scratch: prefetches drained at a step start
  std::uint64_t offload_loads_ = 0;
  std::uint32_t bt_ = 1, kv_blocks_ = 0, prefill_n_ = 1;
  bool async_ = false;  // vllm-v1 with async_scheduling
};

}  // namespace kvtk::sim::des::detail
