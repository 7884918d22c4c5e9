// sim/des/simulator.hpp — `kvtk simulate`: a discrete-event simulator of an LLM serving cluster
// (prefill instances with their own KV caches, an optional global pool, optional decode
// instances, a router) that predicts hit ratios and the latencies they buy.
//
// Semantics (pinned; docs/simulate.md):
//  * Events are processed in (time, kind, sequence) order; at equal times: prefill done <
//    transfer done < decode step done < arrival, so work finishing at t is visible to a request
//    arriving at t. Arrivals keep trace order. Everything is deterministic for a seed.
//  * A request is matched when it *arrives* (after routing): its hit is the longest leading run
//    of blocks resident in its instance's cache or the global pool. Blocks after the hit run that
//    an earlier request is still going to produce (routed, prefill not finished: on the same
//    instance, or anywhere when a pool shares results) are in-flight misses: recomputed, counted
//    apart. Local hit blocks are pinned from the match until the prefill finishes; the request's
//    blocks are inserted (local cache, then write-through to the pool) when its prefill
//    finishes, in forward order, as a flat replay does.
//  * Every iteration's time (a whole-prompt prefill, a chunk, a decode step) is
//    des::iteration_timing's (timing.hpp): the formula with compute_efficiency,
//    memory_efficiency and iteration_overhead_s, or a measured timing table.
//  * Prefill time = compute for the uncached tokens (timing.hpp) and the load of DRAM hits
//    (host link) and pool hits (bytes / pool bandwidth + latency), overlapped (max) or not
//    (sum). One prefill at a time per instance, FIFO; with chunk_tokens, in chunks between
//    which a colocated instance runs one decode step of its batch. With reject_over_slo, a request whose
//    predicted TTFT on its instance exceeds the TTFT SLO is rejected at arrival.
//  * Decode: colocated (no decode instances) — an idle instance runs a queued prefill first, else
//    one decode step for its batch (up to max_batch requests); disaggregated — after prefill the
//    KV moves over the P->D link to the decode instance with the fewest active requests, which
//    steps its batch continuously. A request's first token comes from its prefill; outputs are
//    capped at max_output_tokens when set.
//  * Sparse attention (cluster_config::sparse set): every request gets, when its first decode
//    step starts, a kvtk::sparse::offload_recall_manager (scorer by name) and a
//    pattern_generator (context = ceil((input_length + tokens generated so far) / page_tokens)
//    pages, growing by one page every page_tokens steps; seed = sparse.seed mixed with the
//    request index), both released when it finishes. The prefill's KV is all in HBM at first:
//    every prompt page is appended as resident and the first step's eviction offloads it down
//    to the budget. Each decode step, per request in the batch: generate its selection (or take
//    the one generated ahead for prefetch), manager.step(), count its recalls; with prefetch
//    next-step, generate the next step's selection now (the generator cannot peek: it is kept
//    and used next step, so the prediction is exact) and prefetch it. The step reads the
//    weights and, per request, only its selected pages (pages × page_tokens × KV bytes/token)
//    instead of its whole context. Link time of n pages L(n) = n > 0 ? host_link_latency_s +
//    n·host_link_per_block_s + n·page_bytes / (gpu.host_link_bytes_per_s × gpus_per_instance)
//    : 0 (bandwidth 0 = not a bottleneck). Stall of a step = L(recalls of the batch) + the
//    previous step's prefetch excess, added to the step's duration (critical path). Prefetches
//    issued during a step (for the next one) have L(prefetched) to fit within that step's
//    duration; the excess is stall of the instance's next decode step.
//  With time_scale 0, no pool bandwidth limit and one instance, the hit counts equal
//  `kvtk replay --index flat` with the same policy and capacity (tested).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "des/engine_sched.hpp"
#include "des/profiles.hpp"
#include "des/timing.hpp"
#include "kvtk/prefix/replay.hpp"
#include "kvtk/sparse/pattern_gen.hpp"
#include "kvtk/sparse/residency.hpp"
#include "kvtk/tier/dynamo_kvbm.hpp"
#include "kvtk/tier/hicache_storage.hpp"
#include "kvtk/tier/lmcache_offload.hpp"
#include "kvtk/tier/sglang_hicache.hpp"
#include "kvtk/tier/vllm_offload.hpp"

namespace kvtk::sim::des {

/// Throws std::invalid_argument naming the first request without an arrival time (NaN: a trace
/// may leave some untimed, docs/formats.md), which simulate cannot place in time.
inline void check_every_arrival(const kvtk::prefix::prefix_trace_view& t) {
  for (std::size_t r = 0; r < t.arrival_s.size(); ++r) {
    if (std::isnan(t.arrival_s[r])) {
      throw std::invalid_argument("request " + std::to_string(r) + " of the trace (counting from 0) "
                                  "has no arrival time, though others have one: simulate needs "
                                  "every request's");
    }
  }
}

/// One request's recorded decode-step selections (kvtk JSONL "type": "decode" records), in step
/// order: step[i] is the decode step of pattern.step(i). Decode step k uses the last record with
/// step <= k (the first record before it): a trace may record every k-th step.
struct recorded_selection {
  std::vector<std::uint64_t> step;
  kvtk::sparse::pattern_trace pattern;
};

/// Sparse-attention decode with KV offload and recall (see the header comment).
struct sparse_config {
  bool enabled = false;            ///< false = dense decode (every key below ignored)
  std::string pattern = "dsa";     ///< dsa | quest (kvtk::sparse::pattern_config presets)
  std::uint32_t page_tokens = 64;  ///< tokens per page (dsa 64, quest 16)
  std::uint32_t top_k_pages = 32;  ///< pages selected per step (sinks + recent + heavy)
  kvtk::sparse::hbm_budget budget = kvtk::sparse::hbm_budget::in_tokens(4096);  ///< per request
  std::string scorer = "selection-lru";  ///< any name in kvtk::sparse::all_scorers
  bool prefetch_next_step = false;       ///< prefetch the next step's selection
  bool prefetch_layer_ahead = false;     ///< recalls load one layer ahead (model.layers shares)
  double persistence = 0.9;              ///< heavy-hitter persistence, [0, 1]
  double drift = 0.02;                   ///< per-step drift probability, [0, 1]
  double zipf = 1.0;                     ///< Zipf exponent of heavy-hitter draws, >= 0
  std::uint64_t seed = 1;                ///< mixed with the request index
  /// Recorded selections by request index (empty entries, or no vector: generated patterns).
  std::shared_ptr<const std::vector<recorded_selection>> recorded;
};

struct cluster_config {
  model_profile model = model_presets().at("deepseek-v3");
  gpu_profile gpu = gpu_presets().at("h800");
  std::uint32_t gpus_per_instance = 1;  ///< tensor parallelism: compute and HBM bandwidth scale
  std::uint32_t prefill_instances = 1;
  std::uint32_t decode_instances = 0;  ///< 0 = colocated prefill and decode
  std::uint64_t local_cache_blocks = 0;  ///< per prefill instance; 0 = none
  /// The engine's page size in tokens (vLLM block_size, SGLang page_size): it divides the
  /// trace's block size; 0 = the trace's block (des/engine_pages.hpp).
  std::uint32_t page_tokens = 0;
  bool prefix_caching = true;            ///< false: no request reuses another's KV (engine_pages.hpp)
  std::string local_policy = "lru";
  std::uint64_t dram_blocks = 0;         ///< per-instance host DRAM tier (LRU, write-through,
                                         ///< read over the GPU's host link); 0 = none
  std::uint64_t pool_blocks = 0;         ///< global pool shared by all instances; 0 = none
  /// An engine's own offload tier under each instance's engine KV cache (engine_sched.cpp): the
  /// config's `offload`, in `replay --offload`'s syntax: vLLM 0.33's OffloadingConnector (medium
  /// cpu, scheduler vllm-v1), LMCache 0.5.6's CPU backend behind vLLM (medium lmcache-cpu,
  /// scheduler vllm-v1, with its local disk), Dynamo KVBM 1.6.1's G2/G3 behind vLLM (medium
  /// kvbm, scheduler vllm-v1) or SGLang 0.5.23's HiCache host pool (medium host, scheduler sglang).
  std::string offload;                   ///< the spec as given; empty = none
  std::string offload_medium;            ///< cpu | lmcache-cpu | kvbm | host ("" = cpu when offload is set)
  kvtk::tier::vllm_offload_config offload_cfg;  ///< cpu: parsed (gpu_blocks unused)
  kvtk::tier::sglang_hicache_config hicache_cfg;  ///< host: parsed (device_pages unset; host
                                                  ///< pages unless given as a ratio)
  double hicache_ratio = 0;              ///< host: the size as "Nx" of the device pool, else 0
  kvtk::tier::lmcache_offload_config lmcache_cfg;  ///< lmcache-cpu: parsed (gpu_blocks unused)
  kvtk::tier::hicache_l3_config hicache_l3;  ///< host: the L3 tier and its prefetch (storage=file)
  kvtk::tier::dynamo_kvbm_config kvbm_cfg;   ///< kvbm: parsed (gpu_blocks unused)
  double disk_bytes_per_s = 2e9;         ///< kvbm's G3, LMCache's disk: read rate (disk_gb_per_s)
  double disk_latency_s = 100e-6;        ///< and the cost per read (disk_latency_us)
  double host_link_latency_s = 0;        ///< DRAM-tier load: fixed cost per request's load
  double host_link_per_block_s = 0;      ///< DRAM-tier load: cost per block (calibration beta)
  double pool_bytes_per_s = 25e9;        ///< 0 = not a bottleneck
  double pool_latency_s = 50e-6;
  bool overlap_load = true;              ///< pool loads overlap prefill compute
  double pd_link_bytes_per_s = 50e9;     ///< prefill -> decode KV transfer; 0 = instant
  std::uint32_t max_batch = 256;         ///< decode batch limit
  std::uint64_t chunk_tokens = 0;        ///< chunked prefill: tokens per chunk (0 = whole prompt);
                                         ///< colocated decode steps run between chunks
  std::int64_t max_output_tokens = -1;   ///< cap on output tokens (-1 = the trace's)
  double time_scale = 1.0;               ///< multiplies iteration times (0 = free compute)
  bool closed_loop = false;              ///< arrivals: closed (des/closed_loop.hpp) | open
  bool closed_latency_unloaded = true;   ///< closed: subtract the parent's unloaded latency
                                         ///< from the recorded gap ("unloaded"), or not ("zero")
  double iteration_overhead_s = 0;       ///< fixed seconds per iteration (x time_scale)
  double request_overhead_s = 0;         ///< seconds per request an iteration runs (x time_scale)
  std::shared_ptr<const timing_table> timing;  ///< measured iteration times; null = the formula
  std::string router = "round-robin";    ///< random | round-robin | least-loaded | cache-aware | conductor
  double router_prefill_weight = 1.0;    ///< cache-aware: w in w·prefill_blocks + decode_blocks
  double router_temperature = 0.0;       ///< cache-aware: softmax temperature (0 = argmin)
  double ttft_slo_s = 0;                 ///< goodput: TTFT limit (0 = none)
  double tbt_slo_s = 0;                  ///< goodput: mean time between tokens limit (0 = none)
  bool reject_over_slo = false;          ///< reject a request whose predicted TTFT exceeds ttft_slo
  std::uint64_t seed = 1;
  bool cache_partial_block = false;      ///< cache the partial last block (Mooncake's counting)
                                         ///< or, the default of every command, only full blocks
  nlohmann::json host_link_calibration;  ///< what a calibration file set (reports only)
  sparse_config sparse;                  ///< sparse-attention decode; disabled by default
  engine_scheduler_config sched;         ///< kvtk's scheduler, or an engine's (engine_sched.hpp)
};

/// Per-request outcome (the optional CSV).
struct request_outcome {
  double arrival = 0, prefill_start = 0, first_token = 0, done = 0, mean_tbt = 0;
  std::uint32_t instance = 0;
  std::uint64_t blocks = 0, hit_blocks = 0, dram_blocks = 0, pool_blocks = 0;
  std::uint64_t inflight_miss_blocks = 0;
  bool rejected = false;
  std::uint64_t input_tokens = 0, hit_tokens = 0, output_tokens = 0;
  std::uint64_t recalls = 0;  ///< sparse: this request's recalled pages
  double stall_s = 0;         ///< sparse: stall of the decode steps it took part in
};

/// One request's part in one iteration of an engine scheduler (the iteration log).
struct iteration_record {
  std::uint32_t instance = 0;
  std::uint64_t iteration = 0;  ///< the instance's iteration number, from 0
  double start = 0, end = 0;
  std::uint32_t request = 0;
  std::uint64_t new_tokens = 0, context_tokens = 0;
};

struct simulation_result {
  nlohmann::json summary;
  std::vector<request_outcome> requests;
  std::vector<iteration_record> iterations;  ///< engine schedulers with sched.log_iterations
};

/// Progress of a simulation: (requests ended, requests in all); a request ends when it finishes
/// or is rejected. Called about every 1/256 of the requests and once at the end; it may throw to
/// stop the simulation (the exception propagates out of simulate()).
using simulation_progress = std::function<void(std::uint64_t ended, std::uint64_t total)>;

/// What a caller does with a simulation as it runs, so that memory stays bounded by what is in
/// flight rather than by the trace (des/outcomes.hpp).
struct simulation_hooks {
  simulation_progress progress;  ///< see simulation_progress; empty = none
  /// Called once per request, in trace order, as soon as it and every earlier request have
  /// ended (finished or rejected), with its final outcome (the streamed CSV). May throw.
  std::function<void(std::uint64_t request, const request_outcome&)> on_request;
  /// Called with [first, last) when those requests' trace data will not be read again (every
  /// 65,536 requests; the pages of a mapped trace can be dropped). Must not throw.
  std::function<void(std::size_t first, std::size_t last)> release;
  /// Keep every outcome in simulation_result::requests (about 136 bytes a request).
  bool keep_requests = true;
  /// Queue every arrival up front even when they are sorted (what unsorted arrivals get): the
  /// same results with more memory; for tests of that equivalence.
  bool queue_all_arrivals = false;
};

/// Runs the simulation. Throws std::invalid_argument for an impossible config (zero instances,
/// an unknown router or policy, negative figures) and when the trace has no arrival times.
/// Memory: the caches, the requests in flight and the latency histograms (and the outcomes
/// with keep_requests); the summary's "max_live_requests" is the most requests held at once.
/// Arrivals sorted by time are taken from the trace as they come; unsorted ones are all queued
/// up front (about 40 bytes a request).
simulation_result simulate(const kvtk::prefix::prefix_trace_view& trace, const cluster_config& cfg,
                           const simulation_hooks& hooks);
simulation_result simulate(const kvtk::prefix::prefix_trace_view& trace, const cluster_config& cfg,
                           const simulation_progress& progress = {});

}  // namespace kvtk::sim::des
