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
//           The memory checks are PrefillAdder's (engine_schedule.cpp), batch_is_full included.
//           A decode that cannot get a page retracts the running request with the fewest
//           output tokens (ties: the longest prompt), back to the waiting queue.
//
// What kvtk's scheduler has, on every engine scheduler, with kvtk's generic semantics (the
// engines' own offload connectors are docs/simulate.md's next step):
//  dram_blocks  each instance's host-DRAM tier (LRU), written through with the full blocks of
//               every prompt the instance prefilled, when its first token is sampled. At an
//               admission, the run of the prompt's blocks held there right after the HBM hit
//               (capped as the hit is) is loaded, not computed: allocated and cached in HBM as
//               hit blocks (dram_block_hits), and the iteration takes max(compute, load) (or the
//               sum without overlap_load), the load over the host link as kvtk's scheduler's.
//  decode_instances  disaggregated prefill/decode: a prefill instance's request leaves when its
//               first token is sampled (its blocks freed into that instance's prefix cache, at
//               once also under async scheduling), its prompt's KV (input tokens x KV bytes per
//               token) crosses the P->D link, and it joins the waiting queue of the decode
//               instance with the fewest waiting and running requests, which admits it with its
//               prompt's KV loaded (hit: its own cache's, the rest transferred) and decodes it.
//               A preempted transferred request is recomputed there.
//  pool_blocks  one pool (LRU) shared by every instance, written with the full blocks of every
//               prompt prefilled anywhere (the blocks it lacks count as pool writes) and read as
//               the DRAM tier is, after it (a block both hold comes from DRAM), over the pool link
//               (pool_latency_s + bytes / pool_bytes_per_s per request).
//  cache-aware  the router of kvtk's scheduler: least w x (the request's blocks less the
//               instance's own cache's hit + its waiting prompts' tokens / block) + running
//               requests, or a softmax draw with router_temperature.
//  conductor    the least predicted time to first token: what is left of the instance's
//               iteration in progress + its waiting prompts' prefills without cache, one after
//               another + this prompt's prefill with the instance's own hit.
//  sparse     with `sparse`, a decoding request reads only its selected pages, and the
//             iteration's recalls and prefetches stall it on the instance's host link, as the
//             cluster's decode step (simulator.hpp; the iteration's whole compute hides the
//             previous prefetch). A preempted request's pages go with its blocks.
//  lmcache    vllm-v1: LMCache 0.5.6's CPU backend (`offload` "lmcache-cpu:..."): a lookup per
//             admission episode, its load before the forward and its stores after it, both
//             synchronous on the host link (the iteration waits). With its local disk (disk=),
//             the chunks on disk are read first (the disk link), then cross the host link;
//             disk writes are not waited for.
//  kvbm       vllm-v1: Dynamo KVBM 1.6.1's G2 host and G3 disk (`offload` "kvbm:..."),
//             kvtk::tier::kvbm_lower_tiers (the code replay --offload kvbm runs). A waiting
//             request's lookup past its GPU hit starts an asynchronous load as vLLM's connector
//             does (below): G2 blocks on the host link, G3 blocks straight from disk on the disk
//             link, the request waiting for both. After each step, a prefill's newly computed
//             full prompt blocks are one G1 -> G2 batch (then the G2 -> G3 worker, the
//             FrequencyFilter on the simulation's clock), ready at once.
//  offload    vllm-v1: vLLM 0.33's OffloadingConnector (CPU) under each instance's KV cache
//             (kvtk::tier::vllm_cpu_offload, the code replay --offload runs). A waiting request's
//             lookup past its GPU hit starts an asynchronous load: its blocks are allocated, it
//             keeps its place in the queue but is skipped until the load, queued on the
//             instance's host link, is done (WAITING_FOR_REMOTE_KVS); then it is scheduled from
//             its loaded tokens. An iteration's computed prompt chunks are offered for store
//             when it ends; the request's end is the connector's on_request_finished.
//             sglang: SGLang 0.5.23's HiCache (`offload` "host:..."): the KV accounting is the
//             device tree over a host pool (engine_kv_hicache.hpp); a host hit is loaded back at
//             admission over the host link, overlapping the admitting iteration's compute.
// Refused by name: chunk_tokens and reject_over_slo (kvtk's scheduler's one-prefill-at-a-time
// knobs).
#include "des/engine_sched.hpp"

#include <algorithm>
#include <stdexcept>
#include <type_traits>

#include "des/engine_sim.hpp"
#include "des/summary.hpp"

namespace kvtk::sim::des::detail {

template <class KV>
engine_sim<KV>::engine_sim(const kvtk::prefix::prefix_trace_view& t, const cluster_config& c,
                           std::uint32_t kv_blocks)
    : t_(t), c_(c), events_(t), routes_(c.seed), inst_(c.prefill_instances + c.decode_instances),
      timing_(c.model, c.gpu, c.gpus_per_instance, c.time_scale, c.iteration_overhead_s, c.timing,
              c.request_overhead_s),
      host_link_{c.host_link_latency_s, c.host_link_per_block_s,
                 c.gpu.host_link_bytes_per_s * c.gpus_per_instance},
      pool_link_{c.pool_latency_s, 0, c.pool_bytes_per_s},
      sched_(c.sched.kind()),
      router_(parse_router(c.router)),
      lpm_(schedule_policy_names.parse(c.sched.schedule_policy) == schedule_policy_kind::lpm) {
  bt_ = t.block_tokens;
  block_bytes_ = static_cast<double>(c.model.kv_bytes_per_token) * bt_;
  if constexpr (std::is_same_v<KV, sglang_hicache_kv>) {
    const kvtk::tier::sglang_hicache_config h = hicache_config(t, c, kv_blocks);
    for (std::size_t i = 0; i < inst_.size(); ++i) kv_.emplace_back(h, bt_, c.hicache_l3.enabled);
    kvtk::tier::hicache_storage_config sc;
    sc.max_bytes = c.hicache_l3.max_bytes;
    sc.page_bytes = std::max<std::uint64_t>(std::uint64_t{c.model.kv_bytes_per_token} * bt_, 1);
    sc.max_pages = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(distinct_pages(t, c), 1, (1u << 31) - 1));
    for (std::uint32_t i = 0; i < c.prefill_instances && c.hicache_l3.enabled; ++i) {
      inst_[i].l3 = std::make_unique<kvtk::tier::hicache_storage>(sc);
    }
  } else {
    for (std::size_t i = 0; i < inst_.size(); ++i) kv_.emplace_back(kv_blocks, bt_);
  }
  // A DRAM tier never holds more blocks than the trace references (as kvtk's scheduler's).
  const std::uint64_t dram = std::min<std::uint64_t>(c.dram_blocks, std::max<std::size_t>(t.keys.size(), 1));
  for (std::uint32_t i = 0; i < c.prefill_instances && dram > 0; ++i) {
    inst_[i].dram = make_tiers("lru", 0, dram);  // decode instances never prefill: no tier
  }
  const std::uint64_t pool = std::min<std::uint64_t>(c.pool_blocks, std::max<std::size_t>(t.keys.size(), 1));
  if (pool > 0) pool_ = make_pool(pool);
  route_cost_.resize(c.prefill_instances);
  route_weight_.resize(c.prefill_instances);
  kv_blocks_ = kv_blocks;
  prefill_n_ = c.prefill_instances;
  async_ = c.sched.async_scheduling && sched_ == scheduler_kind::vllm_v1;
  if (c.sparse.enabled) sparse_ = std::make_unique<sparse_decoder>(c, t.requests(), host_link_);
  const bool vllm_offload = !c.offload.empty() && (c.offload_medium.empty() || c.offload_medium == "cpu");
  for (std::uint32_t i = 0; i < c.prefill_instances && vllm_offload; ++i) {
    inst_[i].offload = std::make_unique<kvtk::tier::vllm_cpu_offload<>>(c.offload_cfg);
  }
  for (std::uint32_t i = 0; i < c.prefill_instances && c.offload_medium == "lmcache-cpu"; ++i) {
    inst_[i].lmcache = std::make_unique<kvtk::tier::lmcache_offload>(c.lmcache_cfg);
  }
  for (std::uint32_t i = 0; i < c.prefill_instances && c.offload_medium == "kvbm"; ++i) {
    inst_[i].kvbm = std::make_unique<kvtk::tier::kvbm_lower_tiers>(c.kvbm_cfg);
  }
  disk_link_ = {c.disk_latency_s, 0, c.disk_bytes_per_s};
}

template <class KV>
void engine_sim<KV>::handle(const event& e) {
  now_ = e.t;
  switch (e.kind) {
    case engine_event::arrival:
      arrive(e.request);
      break;
    case engine_event::iteration_end:
      end(e.instance);
      break;
    case engine_event::transfer_done:
      land(e.request);
      break;
    case engine_event::load_done:
      load_done(e.request);
      break;
    case engine_event::prefetch_wake:
      wake(e.instance);
      break;
    case engine_event::instance_start:
      start(e.instance);
      break;
  }
}

template <class KV>
void engine_sim<KV>::arrive(std::uint32_t r) {
  engine_request& q = w_.open(r).st;
  q.L = t_.input_tokens(r);
  q.out_total = output_tokens_of(t_, c_, r);
  q.kv.prompt_keys = t_.cacheable(r, kvtk::prefix::partial_block::skip);
  q.kv.id = r;
  // In the iterations the engine runs (chunks of the token budget): a whole long prompt as one
  // iteration could leave a timing table's reach although no real iteration does.
  if (router_ == router_kind::conductor) {
    q.cold_prefill_s = timing_.chunked_prefill_s(0, q.L, c_.sched.prefill_chunk());
  }
  const std::uint32_t i = route(q);
  q.inst = i;
  request_outcome& o = w_.out(r);
  o.arrival = now_;
  o.instance = i;
  o.input_tokens = q.L;
  o.blocks = q.kv.prompt_keys.size();
  push_waiting(i, r);
  l3_prefetch(i, r);
  wake(i);
}

template <class KV>
std::uint32_t engine_sim<KV>::route(const engine_request& q) {
  auto load = [&](std::uint32_t x) { return inst_[x].waiting.size() + inst_[x].running.size(); };
  if (router_ != router_kind::cache_aware && router_ != router_kind::conductor) {
    return routes_.pick(router_, prefill_n_, load);
  }
  if (router_ == router_kind::conductor) {
    // As kvtk's scheduler's: the predicted time to first token there, the iteration in
    // progress, then the waiting prefills without cache, then this one's with its hit there.
    for (std::uint32_t x = 0; x < prefill_n_; ++x) {
      const engine_instance& in = inst_[x];
      const std::uint64_t hit = kvtk::prefix::tokens_in_blocks(q.L, bt_, kv_[x].peek(q.kv, q.seq()));
      route_cost_[x] = std::max(0.0, in.busy_until - now_) + in.waiting_prefill_s +
                       timing_.chunked_prefill_s(hit, q.L, c_.sched.prefill_chunk());
    }
    return routes_.least_cost(route_cost_, 0, route_weight_);
  }
  // As kvtk's scheduler's: w x (blocks to prefill here + queued prompt tokens / block) + running,
  // the blocks to prefill being the request's less the instance's own cache's hit.
  for (std::uint32_t x = 0; x < prefill_n_; ++x) {
    const engine_instance& in = inst_[x];
    const std::uint64_t hit = kv_[x].peek(q.kv, q.seq());
    const double prefill_blocks = static_cast<double>(q.kv.prompt_keys.size() - hit) +
                                  static_cast<double>(in.waiting_tokens) / bt_;
    // Running requests that are done (async, not yet released) are not work.
    route_cost_[x] = c_.router_prefill_weight * prefill_blocks +
                     static_cast<double>(in.running.size() - in.finishing);
  }
  return routes_.least_cost(route_cost_, c_.router_temperature, route_weight_);
}

template <class KV>
std::uint64_t engine_sim<KV>::external_tokens(std::uint32_t i, engine_request& q,
                                              std::uint64_t hit_tokens, std::uint64_t seq) {
  if (q.remote) return seq - 1 > hit_tokens ? seq - 1 - hit_tokens : 0;  // all but the new token
  if (inst_[i].offload) return inst_[i].offload->lookup(q.offload, seq, hit_tokens, bt_);
  if (auto* kb = inst_[i].kvbm.get()) {  // get_num_new_matched_tokens: G2, then G3
    const std::uint64_t f = std::min<std::uint64_t>(q.L / bt_, q.kv.prompt_keys.size());
    q.kvbm = kb->lookup(q.kv.prompt_keys.first(f), hit_tokens / bt_, seq, bt_);
    return (q.kvbm.host + q.kvbm.disk) * bt_;
  }
  if (auto* lm = inst_[i].lmcache.get()) {  // get_num_new_matched_tokens
    // LMCache's lookup client keeps the hit H per request until vLLM allocates the blocks
    // (update_state_after_alloc): one lookup (and its touches) per admission episode; each call
    // computes need = H - the current GPU hit, one token less when H is the whole request.
    if (!q.lm_looked) {
      q.lm = lm->lookup_step(q.kv.prompt_keys, q.L, bt_, hit_tokens);
      q.lm_looked = true;
      q.lm_saved = q.lm.h;  // a store starts at the lookup's hit
    }
    const std::uint64_t H = q.lm.h * c_.lmcache_cfg.blocks_per_chunk * bt_;
    std::uint64_t need = H > hit_tokens ? H - hit_tokens : 0;
    if (H == seq && need > 0) --need;
    q.lm.need = need;
    q.lm_gpu_hit = hit_tokens;
    const std::uint64_t most = seq - 1 > hit_tokens ? seq - 1 - hit_tokens : 0;
    return std::min(need, most);
  }
  q.loading = q.pool_loading = 0;
  // A decode instance reads neither: a request it preempted is recomputed there.
  const auto* dram = inst_[i].dram.get();
  if (i >= prefill_n_ || (dram == nullptr && !pool_)) return 0;
  // The run after the HBM hit, capped as the hit is (never the last prompt token); the DRAM
  // tier serves a block before the pool (the faster holder, as in kvtk's scheduler).
  const std::uint64_t cap = std::min<std::uint64_t>((seq - 1) / bt_, q.kv.prompt_keys.size());
  for (std::uint64_t b = hit_tokens / bt_; b < cap; ++b) {
    const kvtk::block_key k = q.kv.prompt_keys[b];
    if (dram != nullptr && dram->holds(0, k)) {
      ++q.loading;
    } else if (pool_ && pool_->holds(0, k)) {
      ++q.pool_loading;
    } else {
      break;
    }
  }
  return (q.loading + q.pool_loading) * bt_;
}

// Admits waiting request r with at most `budget` new tokens (all of its tokens when `whole`).
template <class KV>
bool engine_sim<KV>::admit(std::uint32_t i, std::uint32_t r, std::uint64_t budget, bool whole,
                           std::uint64_t held, std::uint64_t taken_pages) {
  engine_request& q = w_.st(r);
  const admission a =
      kv_[i].admit(q.kv, q.seq(), budget, whole, {out_rest(r), held, taken_pages},
                   [&](std::uint64_t hit, std::uint64_t seq) { return external_tokens(i, q, hit, seq); });
  if (!a.ok) {
    q.loading = q.pool_loading = 0;
    return false;
  }
  if constexpr (std::is_same_v<KV, sglang_hicache_kv>) q.loading = a.loaded_tokens / bt_;  // H2D
  q.computed = a.hit_tokens;
  q.scheduled = a.new_tokens;
  q.lm_retrieve = inst_[i].lmcache && a.loaded_tokens > 0;  // start_load_kv this iteration
  q.lm_new = true;  // wait_for_save's order: this step's admissions first
  if (!q.started) {  // the first admission decides the reported hit
    q.started = true;
    w_.out(r).prefill_start = now_;
    w_.out(r).hit_blocks = a.hit_tokens / bt_;
    w_.out(r).hit_tokens = a.hit_tokens;
    w_.out(r).dram_blocks = q.loading + (inst_[i].lmcache ? a.loaded_tokens / bt_ : 0);
    w_.out(r).pool_blocks = q.pool_loading;
  }
  return true;
}

// vLLM offload, a waiting request in schedule_v1's loop. A request whose load is done is
// scheduled from its computed tokens, as vLLM schedules one back from WAITING_FOR_REMOTE_KVS.
// Else the lookup: a hit in the CPU tier starts an asynchronous load (blocks allocated, no
// tokens this iteration, skipped until the load is done), none admits it as without offload.
template <class KV>
typename engine_sim<KV>::offload_step engine_sim<KV>::admit_offload(std::uint32_t i, std::uint32_t r,
                                                                    std::uint64_t budget) {
  engine_request& q = w_.st(r);
  engine_instance& in = inst_[i];
  if (q.load == engine_request::load_phase::ready) {
    const std::uint64_t n = std::min(q.seq() - q.computed, budget);
    if (!kv_[i].grow(q.kv, q.computed + n)) return offload_step::stop;
    q.scheduled = n;
    q.load = engine_request::load_phase::none;
    return offload_step::admitted;
  }
  if (in.offload && q.offload.chunk_keys.empty()) {
    const std::uint64_t k = c_.offload_cfg.blocks_per_chunk;
    const std::uint64_t full = std::min<std::uint64_t>(q.L / bt_, q.kv.prompt_keys.size());
    for (std::uint64_t c = 0; c < full / k; ++c) q.offload.add_chunk(q.kv.prompt_keys[(c + 1) * k - 1]);
  }
  if constexpr (requires { kv_[i].admit_loading(q.kv, 0, no_external_kv{}); }) {
    const admission a = kv_[i].admit_loading(
        q.kv, q.seq(), [&](std::uint64_t hit, std::uint64_t seq) { return external_tokens(i, q, hit, seq); });
    if (!a.ok && a.loaded_tokens > 0) return offload_step::stop;  // its blocks are not there
    if (a.ok) {
      const std::uint64_t gpu_hit = q.kv.cached;
      if (in.offload) {
        in.offload->load(q.offload, gpu_hit, a.loaded_tokens, bt_);
        in.offload->hold_load(q.offload);
      }
      q.offload_lookup = gpu_hit * bt_ + a.loaded_tokens;
      q.computed = a.hit_tokens;
      q.scheduled = 0;
      q.load = engine_request::load_phase::loading;
      if (!q.started) {
        q.started = true;
        request_outcome& o = w_.out(r);
        o.prefill_start = now_;
        // The blocks it did not compute, as replay counts them: a load of the whole prompt
        // counts its last block too, though vLLM recomputes its last token.
        const std::uint64_t upto = gpu_hit * bt_ + a.loaded_tokens;
        o.hit_blocks = upto / bt_;
        o.hit_tokens = std::min(upto, q.L);
        o.dram_blocks = a.loaded_tokens / bt_;
      }
      double done = 0;
      if (in.kvbm) {
        in.kvbm->count_hits(gpu_hit, q.kvbm);
        q.kvbm_evaluated = std::max(q.kvbm_evaluated, (gpu_hit * bt_ + a.loaded_tokens) / bt_);
        done = kvbm_load(i, q);
      } else {
        // The load queues on the instance's host link behind the loads before it.
        const double bytes = static_cast<double>(a.loaded_tokens) * static_cast<double>(c_.model.kv_bytes_per_token);
        const double blocks = static_cast<double>(a.loaded_tokens / bt_);
        done = std::max(now_, in.load_link_free) + host_link_.predict(blocks, bytes);
        in.load_link_free = done;
        offload_load_bytes_ += bytes;
      }
      ++in.loads_in_flight;
      ++offload_loads_;
      offload_wait_s_ += done - now_;
      push(done, engine_event::load_done, r);
      return offload_step::loading;
    }
  }
  if (!admit(i, r, budget, false)) return offload_step::stop;
  if (in.offload) in.offload->load(q.offload, 0, 0, bt_);  // nothing loaded: stores from chunk 0
  if (in.kvbm) {
    in.kvbm->count_hits(q.computed / bt_, {});
    q.kvbm_evaluated = std::max(q.kvbm_evaluated, q.computed / bt_);
  }
  return offload_step::admitted;
}

// KVBM's onboarding: G2 -> G1 over the instance's host link and G3 -> G1 straight from disk,
// each queued behind the loads before it on its link; the request waits for both.
template <class KV>
double engine_sim<KV>::kvbm_load(std::uint32_t i, engine_request& q) {
  engine_instance& in = inst_[i];
  const double per_block = block_bytes_;
  double done = now_;
  if (q.kvbm.host > 0) {
    const auto n = static_cast<double>(q.kvbm.host);
    in.load_link_free = std::max(now_, in.load_link_free) + host_link_.predict(n, n * per_block);
    done = std::max(done, in.load_link_free);
    offload_load_bytes_ += n * per_block;
  }
  if (q.kvbm.disk > 0) {
    const auto n = static_cast<double>(q.kvbm.disk);
    in.disk_link_free = std::max(now_, in.disk_link_free) + disk_link_.predict(n, n * per_block);
    done = std::max(done, in.disk_link_free);
    offload_load_bytes_ += n * per_block;
    disk_load_bytes_ += n * per_block;
  }
  return done;
}

// KVBM's apply_scheduler_output, after the step: the request's full prompt blocks computed past
// those its slot evaluated are one G1 -> G2 batch (and the G2 -> G3 worker's queue), unfiltered;
// generated blocks are never offloaded (1.6.1). The filter's clock is the simulation's.
template <class KV>
void engine_sim<KV>::kvbm_store(std::uint32_t i, engine_request& q) {
  const std::uint64_t f = std::min<std::uint64_t>(q.L / bt_, q.kv.prompt_keys.size());
  const std::uint64_t upto = std::min(std::min(q.computed, q.L) / bt_, f);
  if (upto <= q.kvbm_evaluated) return;
  auto& kb = *inst_[i].kvbm;
  kb.set_time(now_);
  kb.offload(q.kv.prompt_keys.subspan(q.kvbm_evaluated, upto - q.kvbm_evaluated));
  q.kvbm_evaluated = upto;
}

template <class KV>
void engine_sim<KV>::load_done(std::uint32_t r) {
  engine_request& q = w_.st(r);
  --inst_[q.inst].loads_in_flight;
  if (inst_[q.inst].offload) inst_[q.inst].offload->release_load(q.offload);
  if constexpr (requires { kv_[0].loaded(q.kv, 0); }) kv_[q.inst].loaded(q.kv, q.offload_lookup);
  q.load = engine_request::load_phase::ready;
  wake(q.inst);
}

// The store of the chunks the request's computed prompt tokens complete (the connector's
// _build_store_jobs, prompt tokens only as offload_prompt_only's default), ready at once.
template <class KV>
void engine_sim<KV>::offload_store(std::uint32_t i, engine_request& q) {
  const std::uint64_t tpc = std::uint64_t{c_.offload_cfg.blocks_per_chunk} * bt_;
  const std::uint64_t upto = std::min<std::uint64_t>(std::min(q.computed, q.L) / tpc, q.offload.chunk_keys.size());
  if (upto <= q.offload.offered_end) return;
  kvtk::tier::vllm_offload_request out;
  inst_[i].offload->store(q.offload, upto, out);
  offload_store_bytes_ += static_cast<double>(out.stored_chunks) * static_cast<double>(tpc) *
                          static_cast<double>(c_.model.kv_bytes_per_token);
}

template <class KV>
std::uint32_t engine_sim<KV>::take_waiting(std::uint32_t i, std::size_t pos) {
  if (pos == 0) return pop_waiting(i);
  engine_instance& in = inst_[i];
  const std::uint32_t r = in.waiting[pos];
  in.waiting.erase(in.waiting.begin() + static_cast<std::ptrdiff_t>(pos));
  in.waiting_tokens -= w_.st(r).L;
  in.waiting_prefill_s -= w_.st(r).cold_prefill_s;
  return r;
}

template <class KV>
void engine_sim<KV>::preempt(std::uint32_t i, std::uint32_t r) {
  engine_request& q = w_.st(r);
  if (q.finishing) {
    // Async scheduling: r is done, its output not yet processed. Taking it as a victim frees
    // its blocks now, as release_finishing would after this schedule; it is not run again.
    finish_kv(i, q);
    q.finishing = false;
    --inst_[i].finishing;
    std::erase(inst_[i].running, r);
    ++inst_[i].left;
    w_.end(r);
    return;
  }
  kv_[i].preempt(q.kv);
  if (sparse_) sparse_->release(r);  // its pages leave HBM with its blocks
  q.computed = 0;
  q.scheduled = 0;
  q.loading = q.pool_loading = 0;
  q.remote = false;  // recompute: the transferred KV is gone
  q.lm_looked = q.lm_retrieve = false;  // LMCache looks up again at its next admission
  q.kvbm_evaluated = 0;  // KVBM's reset_after_preemption: recomputed blocks are offered again
  q.lm_resumed = true;
  auto& run = inst_[i].running;
  run.erase(std::find(run.begin(), run.end(), r));
  ++inst_[i].left;
  if (sched_ == scheduler_kind::sglang) {
    push_waiting(i, r);  // _add_request_to_queue: a retracted request queues again
    l3_prefetch(i, r);   // and prefetches again
  } else {
    push_waiting(i, r, true);
  }
  if (inst_[i].chunked == r) inst_[i].chunked = -1;
  ++preemptions_;
}

template <class KV>
void engine_sim<KV>::release_finishing(std::uint32_t i) {
  if (inst_[i].finishing == 0) return;  // most schedules: nothing finished in the last iteration
  inst_[i].finishing = 0;
  std::erase_if(inst_[i].running, [&](std::uint32_t r) {
    if (!w_.st(r).finishing) return false;
    finish_kv(i, w_.st(r));
    w_.st(r).finishing = false;
    w_.end(r);
    ++inst_[i].left;
    return true;
  });
}

template <class KV>
double engine_sim<KV>::iteration_s(std::uint32_t i) {
  parts_.clear();
  decode_batch d;
  std::uint64_t recalls = 0, prefetched = 0;  // sparse decode
  double load = 0;  // each request's load, one after another (as kvtk's scheduler's)
  for (const std::uint32_t r : inst_[i].batch) {
    engine_request& q = w_.st(r);
    if (q.loading > 0) {
      const auto n = static_cast<double>(q.loading);
      load += host_link_.predict(n, n * block_bytes_);
      dram_read_blocks_ += q.loading;
      q.loading = 0;
    }
    if (q.pool_loading > 0) {
      const auto n = static_cast<double>(q.pool_loading);
      load += pool_link_.predict(n, n * block_bytes_);
      pool_read_blocks_ += q.pool_loading;
      q.pool_loading = 0;
    }
    if (q.decoding() && q.scheduled == 1) {
      ++d.requests;
      d.context_tokens += static_cast<double>(q.computed);
      if (sparse_) {  // the step reads the selected pages only
        const auto k = sparse_->step(r, q.seq(), q.out_total - q.out_done, q.out_done - 1);
        d.kv_bytes += static_cast<double>(k.pages) * sparse_->page_bytes();
        recalls += k.recalls;
        prefetched += k.prefetched;
        w_.out(r).recalls += k.recalls;
      } else {
        d.kv_bytes += static_cast<double>(q.computed) * static_cast<double>(c_.model.kv_bytes_per_token);
      }
    } else {
      parts_.push_back({q.scheduled, q.computed});
    }
  }
  double compute = timing_.seconds(parts_, d);
  if (inst_[i].lmcache) compute += lmcache_step(i);  // synchronous, before and after the forward
  // Sparse: the decoding requests' recalls and the previous prefetch that compute did not hide
  // stall the iteration; an iteration without decodes still hides an earlier prefetch. The stall
  // is on the host link, as the DRAM loads are, so it never overlaps them.
  double stall = 0;
  if (sparse_ && d.requests > 0) {
    stall = sparse_->batch_step(inst_[i].decode_clock, recalls, prefetched, compute, d.kv_bytes);
    for (const std::uint32_t r : inst_[i].batch) {
      const engine_request& q = w_.st(r);
      if (q.decoding() && q.scheduled == 1) w_.out(r).stall_s += stall;
    }
  } else if (sparse_) {
    inst_[i].decode_clock.elapse(compute);
  }
  if (load == 0) return compute + stall;
  return (c_.overlap_load ? std::max(compute, load) : compute + load) + stall;
}

template <class KV>
void engine_sim<KV>::start(std::uint32_t i) {
  engine_instance& in = inst_[i];
  l3_land(i);    // storage writes acknowledged by this step's start
  l3_settle(i);  // queries and reads that ended by then are drained
  // A schedule can come back empty after preempting everything that ran (vLLM schedules again
  // at once); twice empty with nothing running means the queue's head does not fit even an
  // empty cache: it is refused (counted as unschedulable, as an engine would abort it).
  for (int empty = 0;;) {
    in.batch.clear();
    in.l3_gated = false;
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
    if (in.loads_in_flight > 0 || in.l3_gated) {  // a load's end or a held prefetch's wakes it
      in.busy = false;
      return;
    }
    // vLLM offload: the head cannot be admitted while a request behind it, its load done, holds
    // blocks (vLLM would wait forever): that one goes first.
    if (async_loads(i) && in.running.empty() && !w_.st(in.waiting.front()).kv.admitted) {
      const auto holder = std::find_if(in.waiting.begin() + 1, in.waiting.end(),
                                       [&](std::uint32_t r) { return w_.st(r).kv.admitted; });
      if (holder != in.waiting.end()) {
        const std::uint32_t r = *holder;
        in.waiting.erase(holder);
        in.waiting.push_front(r);
        empty = 0;
        continue;
      }
    }
    if (!in.running.empty()) {
      throw std::logic_error("engine scheduler stalled with requests running (a kvtk bug)");
    }
    const std::uint32_t r = pop_waiting(i);
    if (w_.st(r).kv.admitted) kv_[i].preempt(w_.st(r).kv);  // a loaded request's blocks
    if (w_.st(r).pf.open) l3_cut(i, r);  // its prefetch goes with it
    w_.out(r).rejected = true;
    w_.end(r);
    ++unschedulable_;
    ++ended_;
    empty = 0;
  }
  const double dur = iteration_s(i);
  if (c_.sched.log_iterations) {
    for (const std::uint32_t r : in.batch) {
      log_.push_back({i, in.iterations, now_, now_ + dur, r, w_.st(r).scheduled, w_.st(r).computed});
    }
  }
  ++in.iterations;
  in.busy = true;
  in.busy_until = now_ + dur;
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
    if (inst_[q.inst].dram || pool_) write_through(q);
  } else {
    gaps_.add(now_ - q.last_token);
    q.tbt_sum += now_ - q.last_token;
    ++q.tbt_n;
  }
  q.last_token = now_;
}

// Write-through: the prompt an instance prefilled enters its DRAM tier, and the pool (the
// blocks the pool lacks are written to it), in order. Out of line: sample() runs once per token
// and stays small.
template <class KV>
void engine_sim<KV>::write_through(const engine_request& q) {
  const auto keys = q.kv.prompt_keys;
  if (served_.size() < keys.size()) served_.resize(keys.size());
  auto tokens = [&](std::size_t) { return bt_; };
  if (auto* dram = inst_[q.inst].dram.get()) dram->process(keys, served_, {}, tokens);
  if (!pool_) return;
  for (const kvtk::block_key k : keys) pool_write_blocks_ += pool_->holds(0, k) ? 0 : 1;
  pool_->process(keys, served_, {}, tokens);
}

template <class KV>
void engine_sim<KV>::finished(std::uint32_t r) {
  const engine_request& q = w_.st(r);
  request_outcome& o = w_.out(r);
  o.done = now_;
  o.output_tokens = q.out_total;
  o.mean_tbt = q.tbt_n ? q.tbt_sum / static_cast<double>(q.tbt_n) : 0.0;
  if (sparse_) sparse_->release(r);
  ++ended_;
}

template <class KV>
void engine_sim<KV>::end(std::uint32_t i) {
  engine_instance& in = inst_[i];
  for (const std::uint32_t r : in.batch) {
    engine_request& q = w_.st(r);
    const bool prefill = !(q.decoding() && q.scheduled == 1);
    q.computed += q.scheduled;
    q.scheduled = 0;
    if (in.offload && prefill) offload_store(i, q);
    if (in.kvbm && prefill) kvbm_store(i, q);
    if (q.computed < q.seq()) {  // a prefill chunk
      kv_[i].checkpoint(q.kv, q.computed);
      continue;
    }
    sample(r);
    if (q.out_done < q.out_total) {
      if (i < prefill_n_ && inst_.size() > prefill_n_) {
        hand_off(i, r);
      } else if (prefill) {
        kv_[i].checkpoint(q.kv, q.computed);  // its prompt into the tree
      }
      continue;
    }
    if (async_) {
      q.finishing = true;  // released after the next schedule (async scheduling)
      ++in.finishing;
    } else {
      finish_kv(i, q);
      std::erase(in.running, r);
      ++in.left;
      w_.end(r);
    }
    finished(r);
  }
  l3_flush(i);  // the iteration's backups go to the L3 writer (the D2H acks)
  inst_[i].busy = false;
  wake(i);
}

template <class KV>
void engine_sim<KV>::hand_off(std::uint32_t i, std::uint32_t r) {
  engine_request& q = w_.st(r);
  finish_kv(i, q);
  std::erase(inst_[i].running, r);
  ++inst_[i].left;
  if (inst_[i].chunked == r) inst_[i].chunked = -1;
  const double bytes = static_cast<double>(q.L) * static_cast<double>(c_.model.kv_bytes_per_token);
  pd_bytes_ += bytes;
  push(now_ + (c_.pd_link_bytes_per_s > 0 ? bytes / c_.pd_link_bytes_per_s : 0.0),
       engine_event::transfer_done, r);
}

template <class KV>
void engine_sim<KV>::land(std::uint32_t r) {
  std::uint32_t best = prefill_n_;
  auto load = [&](std::uint32_t x) { return inst_[x].waiting.size() + inst_[x].running.size(); };
  for (auto d = prefill_n_ + 1; d < inst_.size(); ++d) {
    if (load(d) < load(best)) best = d;
  }
  engine_request& q = w_.st(r);
  q.inst = best;
  q.remote = true;
  q.computed = 0;
  push_waiting(best, r);
  wake(best);
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
  const outcome_totals& k = sink.totals;
  simulation_result res;
  res.summary = common_summary(k, gaps_,
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
  j["dram_block_hits"] = k.dram_hits;
  j["pool_block_hits"] = k.pool_hits;
  j["local_block_hits"] = k.hits - k.dram_hits - k.pool_hits;
  j["bytes"] = {{"dram_read", static_cast<double>(dram_read_blocks_) * block_bytes_},
                {"pool_read", static_cast<double>(pool_read_blocks_) * block_bytes_},
                {"pool_write", static_cast<double>(pool_write_blocks_) * block_bytes_},
                {"prefill_to_decode", pd_bytes_}};
  if (sparse_) j["sparse"] = sparse_->summary();
  if (inst_.front().offload) j["offload"] = offload_summary();
  if (inst_.front().lmcache) j["offload"] = lmcache_summary();
  if (inst_.front().kvbm) j["offload"] = kvbm_summary();
  if constexpr (std::is_same_v<KV, sglang_hicache_kv>) j["offload"] = hicache_summary();
  res.requests = std::move(sink.kept);
  res.iterations = std::move(log_);
  return res;
}

template <class KV>
nlohmann::json engine_sim<KV>::offload_summary() const {
  kvtk::tier::vllm_offload_counters t;
  std::uint64_t resident = 0;
  for (const auto& in : inst_) {
    if (!in.offload) continue;
    const auto& c = in.offload->counters();
    t.cpu_hit_blocks += c.cpu_hit_blocks;
    t.loaded_tokens += c.loaded_tokens;
    t.chunks_loaded += c.chunks_loaded;
    t.chunks_stored += c.chunks_stored;
    t.chunks_evicted += c.chunks_evicted;
    t.store_refusals += c.store_refusals;
    t.threshold_skips += c.threshold_skips;
    t.reused_chunks += c.reused_chunks;
    resident += in.offload->cpu_resident();
  }
  const auto& cfg = c_.offload_cfg;
  return {{"spec", c_.offload},
          {"engine", "vLLM 0.33.0 OffloadingConnector (CPU)"},
          {"policy", cfg.policy},
          {"cpu_chunks_per_instance", cfg.cpu_chunks},
          {"gpu_blocks_per_chunk", cfg.blocks_per_chunk},
          {"store_threshold", cfg.store_threshold},
          {"cpu_hit_blocks", t.cpu_hit_blocks},
          {"loaded_tokens", t.loaded_tokens},
          {"loads", offload_loads_},
          {"chunks_loaded", t.chunks_loaded},
          {"chunks_stored", t.chunks_stored},
          {"chunks_evicted", t.chunks_evicted},
          {"chunks_reused", t.reused_chunks},
          {"store_refusals", t.store_refusals},
          {"threshold_skips", t.threshold_skips},
          {"chunks_resident_at_end", resident},
          {"bytes_loaded", offload_load_bytes_},
          {"bytes_stored", offload_store_bytes_},
          {"load_wait_s_mean", offload_loads_ ? offload_wait_s_ / static_cast<double>(offload_loads_) : 0.0}};
}

// LMCache 0.5.6 behind vLLM (LMCacheConnectorV1, no layerwise, synchronous): the worker's
// start_load_kv reads each admitted request's chunks before the forward, and wait_for_save stores
// each prefill's newly completed full chunks after it, both on the host link; the step waits.
template <class KV>
double engine_sim<KV>::lmcache_step(std::uint32_t i) {
  auto& lm = *inst_[i].lmcache;
  const std::uint64_t k = c_.lmcache_cfg.blocks_per_chunk, chunk = k * bt_;
  const double chunk_bytes = static_cast<double>(chunk) * static_cast<double>(c_.model.kv_bytes_per_token);
  double s = 0;
  for (const std::uint32_t r : inst_[i].batch) {
    engine_request& q = w_.st(r);
    if (!q.lm_retrieve) continue;
    q.lm_retrieve = false;
    const std::uint64_t disk_before = lm.counters().disk_chunks_loaded;
    (void)lm.retrieve_step(q.kv.prompt_keys, q.L, bt_, q.lm_gpu_hit, q.lm);
    // Whole chunks are read, from the one holding the GPU hit's end (a chunk the GPU partly
    // holds is read whole); those on disk are read into the CPU first (local_disk's blocking
    // get), then every chunk crosses the host link.
    const std::uint64_t chunks = q.lm.h - q.lm_gpu_hit / chunk;
    const std::uint64_t from_disk = lm.counters().disk_chunks_loaded - disk_before;
    if (from_disk > 0) {
      const double bytes = static_cast<double>(from_disk) * chunk_bytes;
      s += disk_link_.predict(static_cast<double>(from_disk * k), bytes);
      disk_load_bytes_ += bytes;
    }
    s += host_link_.predict(static_cast<double>(chunks * k), static_cast<double>(chunks) * chunk_bytes);
    offload_load_bytes_ += static_cast<double>(chunks) * chunk_bytes;
  }
  // wait_for_save, in build_connector_meta's order: this step's new requests, the running ones,
  // then the resumed (preempted before) ones.
  auto store = [&](engine_request& q) {
    if (q.decoding() && q.scheduled == 1) return;  // save_decode_cache is off
    const std::uint64_t keyed = std::min<std::uint64_t>(q.L / chunk, q.kv.prompt_keys.size() / k);
    const std::uint64_t upto = std::min(std::min(q.computed + q.scheduled, q.L) / chunk, keyed);
    if (upto <= q.lm_saved) return;
    (void)lm.store_step(q.kv.prompt_keys, q.L, bt_, q.lm_saved, upto);
    const std::uint64_t chunks = upto - q.lm_saved;
    s += host_link_.predict(static_cast<double>(chunks * k), static_cast<double>(chunks) * chunk_bytes);
    offload_store_bytes_ += static_cast<double>(chunks) * chunk_bytes;
    q.lm_saved = upto;
  };
  for (const int pass : {0, 1, 2}) {
    for (const std::uint32_t r : inst_[i].batch) {
      engine_request& q = w_.st(r);
      const int order = !q.lm_new ? 1 : q.lm_resumed ? 2 : 0;
      if (order == pass) store(q);
    }
  }
  for (const std::uint32_t r : inst_[i].batch) w_.st(r).lm_new = false;
  lmcache_s_ += s;
  return s;
}

template <class KV>
nlohmann::json engine_sim<KV>::lmcache_summary() const {
  kvtk::tier::lmcache_offload_counters t;
  std::uint64_t resident = 0, disk_resident = 0;
  for (const auto& in : inst_) {
    if (!in.lmcache) continue;
    if (const char* e = in.lmcache->audit(); *e != 0) {
      throw std::logic_error(std::string("LMCache tiers inconsistent at the end (a kvtk bug): ") + e);
    }
    const auto& c = in.lmcache->counters();
    t.requests += c.requests;
    t.cpu_hit_blocks += c.cpu_hit_blocks;
    t.lookup_hit_tokens += c.lookup_hit_tokens;
    t.loaded_tokens += c.loaded_tokens;
    t.chunks_loaded += c.chunks_loaded;
    t.chunks_stored += c.chunks_stored;
    t.chunks_evicted += c.chunks_evicted;
    t.cut_stores += c.cut_stores;
    t.disk_hit_blocks += c.disk_hit_blocks;
    t.disk_lookup_chunks += c.disk_lookup_chunks;
    t.disk_chunks_loaded += c.disk_chunks_loaded;
    t.chunks_promoted += c.chunks_promoted;
    t.disk_chunks_stored += c.disk_chunks_stored;
    t.disk_chunks_evicted += c.disk_chunks_evicted;
    t.disk_lfu_key_errors += c.disk_lfu_key_errors;
    t.stalled_retrievals += c.stalled_retrievals;
    resident += in.lmcache->cpu_resident();
    disk_resident += in.lmcache->disk_resident();
  }
  const auto& cfg = c_.lmcache_cfg;
  nlohmann::json j = lmcache_cpu_summary(t, resident);
  if (cfg.disk_chunks == 0) return j;
  const double chunk_bytes = static_cast<double>(cfg.blocks_per_chunk) * block_bytes_;
  j["engine"] = "vLLM 0.33.0 + LMCache 0.5.6 (local CPU and local disk backends)";
  j["disk"] = {{"chunks_per_instance", cfg.disk_chunks},
               {"hit_blocks", t.disk_hit_blocks},
               {"lookup_chunks", t.disk_lookup_chunks},
               {"chunks_loaded", t.disk_chunks_loaded},
               {"chunks_promoted", t.chunks_promoted},
               {"chunks_stored", t.disk_chunks_stored},
               {"chunks_evicted", t.disk_chunks_evicted},
               {"lfu_key_errors", t.disk_lfu_key_errors},
               {"stalled_retrievals", t.stalled_retrievals},
               {"chunks_resident_at_end", disk_resident},
               {"bytes_read", disk_load_bytes_},
               {"bytes_written", static_cast<double>(t.disk_chunks_stored) * chunk_bytes},
               {"gb_per_s", c_.disk_bytes_per_s / 1e9},
               {"latency_us", c_.disk_latency_s * 1e6}};
  return j;
}

template <class KV>
nlohmann::json engine_sim<KV>::lmcache_cpu_summary(const kvtk::tier::lmcache_offload_counters& t,
                                                   std::uint64_t resident) const {
  const auto& cfg = c_.lmcache_cfg;
  return {{"spec", c_.offload},
          {"engine", "vLLM 0.33.0 + LMCache 0.5.6 (local CPU backend)"},
          {"policy", kvtk::tier::name_of(cfg.policy)},
          {"cpu_chunks_per_instance", cfg.cpu_chunks},
          {"gpu_blocks_per_chunk", cfg.blocks_per_chunk},
          {"lookups", t.requests},
          {"lookup_hit_tokens", t.lookup_hit_tokens},
          {"cpu_hit_blocks", t.cpu_hit_blocks},
          {"loaded_tokens", t.loaded_tokens},
          {"chunks_loaded", t.chunks_loaded},
          {"chunks_stored", t.chunks_stored},
          {"chunks_evicted", t.chunks_evicted},
          {"cut_stores", t.cut_stores},
          {"chunks_resident_at_end", resident},
          {"bytes_loaded", offload_load_bytes_},
          {"bytes_stored", offload_store_bytes_},
          {"load_store_s", lmcache_s_}};
}

template <class KV>
nlohmann::json engine_sim<KV>::kvbm_summary() const {
  kvtk::tier::dynamo_kvbm_counters t;
  std::uint64_t host_resident = 0, disk_resident = 0;
  for (const auto& in : inst_) {
    if (!in.kvbm) continue;
    const auto& c = in.kvbm->counters();
    t.gpu_hit_blocks += c.gpu_hit_blocks;
    t.host_hit_blocks += c.host_hit_blocks;
    t.disk_hit_blocks += c.disk_hit_blocks;
    t.offered_blocks += c.offered_blocks;
    t.host_stored_blocks += c.host_stored_blocks;
    t.host_duplicate_blocks += c.host_duplicate_blocks;
    t.host_dropped_batches += c.host_dropped_batches;
    t.host_dropped_blocks += c.host_dropped_blocks;
    t.host_evictions += c.host_evictions;
    t.disk_stored_blocks += c.disk_stored_blocks;
    t.disk_evictions += c.disk_evictions;
    t.disk_present_skips += c.disk_present_skips;
    t.filter_skips += c.filter_skips;
    t.disk_dropped_batches += c.disk_dropped_batches;
    t.disk_dropped_blocks += c.disk_dropped_blocks;
    host_resident += in.kvbm->host_resident();
    disk_resident += in.kvbm->disk_resident();
  }
  const auto& cfg = c_.kvbm_cfg;
  nlohmann::json j = {{"spec", c_.offload},
                      {"engine", kvtk::tier::dynamo_kvbm::engine_version},
                      {"gpu_hit_blocks", t.gpu_hit_blocks},
                      {"offered_blocks", t.offered_blocks},
                      {"loads", offload_loads_},
                      {"bytes_loaded", offload_load_bytes_},
                      {"load_wait_s_mean", offload_loads_ ? offload_wait_s_ / static_cast<double>(offload_loads_) : 0.0}};
  if (cfg.host_blocks > 0) {
    j["host"] = {{"blocks_per_instance", cfg.host_blocks},
                 {"hit_blocks", t.host_hit_blocks},
                 {"stored_blocks", t.host_stored_blocks},
                 {"duplicate_blocks", t.host_duplicate_blocks},
                 {"dropped_batches", t.host_dropped_batches},
                 {"dropped_blocks", t.host_dropped_blocks},
                 {"evictions", t.host_evictions},
                 {"blocks_resident_at_end", host_resident},
                 {"bytes_read", offload_load_bytes_ - disk_load_bytes_},
                 // KVBM copies the whole batch before registering it: duplicates cross too.
                 {"bytes_written", static_cast<double>(t.host_stored_blocks + t.host_duplicate_blocks) * block_bytes_}};
  }
  if (cfg.disk_blocks > 0) {
    j["disk"] = {{"blocks_per_instance", cfg.disk_blocks},
                 {"filter", cfg.host_blocks == 0 ? "bypass (unfiltered)" : cfg.disk_filter ? "frequency" : "off"},
                 {"hit_blocks", t.disk_hit_blocks},
                 {"stored_blocks", t.disk_stored_blocks},
                 {"present_skips", t.disk_present_skips},
                 {"filter_skips", t.filter_skips},
                 {"dropped_batches", t.disk_dropped_batches},
                 {"dropped_blocks", t.disk_dropped_blocks},
                 {"evictions", t.disk_evictions},
                 {"blocks_resident_at_end", disk_resident},
                 {"bytes_read", disk_load_bytes_},
                 {"bytes_written", static_cast<double>(t.disk_stored_blocks) * block_bytes_},
                 {"gb_per_s", c_.disk_bytes_per_s / 1e9},
                 {"latency_us", c_.disk_latency_s * 1e6}};
  }
  return j;
}

template <class KV>
nlohmann::json engine_sim<KV>::hicache_summary() const {
  kvtk::tier::sglang_hicache_counters t;
  std::uint64_t host_pages = 0;
  for (const auto& kv : kv_) {
    if constexpr (std::is_same_v<KV, sglang_hicache_kv>) {
      // Every request has ended: no lock, load or pin is left, and the pages add up.
      if (const char* e = kv.tree().audit(); *e != 0) {
        throw std::logic_error(std::string("HiCache tree inconsistent at the end (a kvtk bug): ") + e);
      }
      const auto& c = kv.tree().counters();
      host_pages = kv.tree().config().host_pages;
      t.requests += c.requests;
      t.device_hit_blocks += c.device_hit_blocks;
      t.host_hit_blocks += c.host_hit_blocks;
      t.host_stored_blocks += c.host_stored_blocks;
      t.host_evicted_blocks += c.host_evicted_blocks;
      t.device_evicted_blocks += c.device_evicted_blocks;
      t.declined_loads += c.declined_loads;
      t.failed_backups += c.failed_backups;
    }
  }
  return {{"spec", c_.offload},
          {"engine", "SGLang 0.5.23 HiCache (host pool)"},
          {"write_policy", kvtk::tier::name_of(c_.hicache_cfg.policy)},
          {"host_pages_per_instance", host_pages},
          {"admissions", t.requests},
          {"device_hit_blocks", t.device_hit_blocks},
          {"host_hit_blocks", t.host_hit_blocks},
          {"host_stored_blocks", t.host_stored_blocks},
          {"host_evicted_blocks", t.host_evicted_blocks},
          {"device_evicted_blocks", t.device_evicted_blocks},
          {"declined_loads", t.declined_loads},
          {"failed_backups", t.failed_backups},
          {"bytes_loaded", static_cast<double>(t.host_hit_blocks) * block_bytes_},
          {"bytes_stored", static_cast<double>(t.host_stored_blocks) * block_bytes_},
          {"l3", c_.hicache_l3.enabled ? l3_summary() : nlohmann::json(nullptr)}};
}

// Every member defined here, for the three accountings (engine_schedule.cpp instantiates the
// scheduling rules, which call admit and preempt).
template class engine_sim<vllm_kv>;
template class engine_sim<sglang_kv>;
template class engine_sim<sglang_hicache_kv>;

simulation_result simulate_engine(const kvtk::prefix::prefix_trace_view& t, const cluster_config& c,
                                  const simulation_hooks& hooks) {
  check_engine_config(t, c);
  const kv_capacity capacity = engine_kv_blocks(t, c);
  const std::uint32_t blocks = capacity.blocks;
  simulation_result res;
  if (c.sched.accounting() == "vllm") {
    engine_sim<vllm_kv> sim(t, c, blocks);
    res = run_events(sim, t, c, hooks);
  } else if (c.offload_medium == "host") {
    engine_sim<sglang_hicache_kv> sim(t, c, blocks);
    res = run_events(sim, t, c, hooks);
  } else {
    engine_sim<sglang_kv> sim(t, c, blocks);
    res = run_events(sim, t, c, hooks);
  }
  res.summary["kv_capacity"] = capacity.describe;
  return res;
}

}  // namespace kvtk::sim::des::detail
