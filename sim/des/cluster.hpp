// sim/des/cluster.hpp — the discrete-event simulator's cluster (internal to sim/des).
//
// Design: one `cluster` object replays a trace. Its state is the event queue (arrivals, prefill
// and transfer completions, decode steps; ordered by time, then kind, then sequence number, so
// runs are deterministic), the prefill and decode instances (each with its HBM cache, optional
// host-DRAM tier, waiting queue and decode batch), an optional cluster-wide pool, and one
// request_state / request_outcome per request in flight (des/outcomes.hpp). Its member
// functions live in one file per concern:
//   cluster_events.cpp  the event loop and the request life cycle (arrive, prefill, decode)
//   cluster_route.cpp   the router, parsed once per simulation
//   cluster_timing.cpp  compute and transfer times (iteration times: timing.hpp)
//   cluster_caches.cpp  cache lookups, matching, pinning and in-flight blocks
//   cluster_report.cpp  the summary JSON
//   simulator.cpp       construction, validation and simulate()
// Invariants: a request's pinned blocks stay resident until its prefill finishes; every event's
// time is >= now_; outcomes are written once per request, at the event that decides them.
#pragma once

#include <algorithm>
#include <cmath>
#include <deque>
#include <kvtk/tier/tier_hierarchy.hpp>
#include <memory>
#include <queue>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "des/event_loop.hpp"
#include "des/outcomes.hpp"
#include "des/router.hpp"
#include "des/simulator.hpp"
#include "kvtk/move/timing_fit.hpp"
#include "des/sparse_decode.hpp"

namespace kvtk::sim::des::detail {

// An instance's tiers: HBM (`policy`, hbm blocks) over DRAM (LRU, dram blocks), inclusive and
// written through; either may be 0 (absent); null when both are. Throws std::invalid_argument
// when a DRAM tier is smaller than the HBM cache above it (inclusion).
std::unique_ptr<kvtk::tier::tier_hierarchy<>> make_tiers(const std::string& policy,
                                                         std::uint64_t hbm, std::uint64_t dram);
// The cluster-wide pool: one LRU tier of `blocks` blocks (the same tier model as the instances').
std::unique_ptr<kvtk::tier::tier_hierarchy<>> make_pool(std::uint64_t blocks);

// kvtk's scheduler's events; at one instant they are taken in this order (des/event_loop.hpp).
enum class cluster_event : std::uint8_t { prefill_done, transfer_done, decode_done, arrival };

struct instance {
  // The instance's KV tiers, on the one tier model (kvtk::tier::tier_hierarchy): the HBM cache
  // (local_policy) over the host-DRAM tier (LRU), inclusive and written through, so a block
  // computed or loaded into HBM is also in DRAM. Null when there is neither.
  std::unique_ptr<kvtk::tier::tier_hierarchy<>> tiers;
  bool hbm = false;  // tier 0 is the HBM cache (else the DRAM tier is alone)
  std::deque<std::uint32_t> queue;   // waiting prefills
  std::vector<std::uint32_t> batch;  // decoding requests
  std::vector<std::uint32_t> stepping;  // the requests of the decode step in progress
  std::unordered_map<kvtk::block_key, std::uint32_t> in_flight;
  bool busy = false;
  double busy_s = 0;
  double queued_prefill_s = 0;  // predicted prefill time of the queue (conductor)
  double busy_until = 0;
  kvtk::sparse::decode_clock decode_clock;  // sparse: the batch's stall and unhidden prefetch
  std::int64_t prefilling = -1;  // chunked prefill in progress (request), or -1
  std::uint64_t prefill_pos = 0;  // tokens of it done
  std::uint64_t queued_tokens = 0;
};

struct request_state {
  std::uint64_t remaining = 0;  // output tokens still to produce
  double last_token = 0, tbt_sum = 0;
  std::uint64_t tbt_n = 0;
  std::vector<std::uint32_t> pinned;  // HBM slots pinned at arrival (a pinned entry never moves)
  double predicted_prefill_s = 0;
};

// Every scheduler's checks of the config's times, bandwidths, weights and SLOs: finite, >= 0.
// Throws std::invalid_argument.
void check_figures(const cluster_config& c);

class cluster {
 public:
  using event = basic_event<cluster_event>;
  cluster(const kvtk::prefix::prefix_trace_view& t, const cluster_config& c);

  simulation_result run(const simulation_hooks& hooks);

  // The strategy's side of run_events (des/event_loop.hpp).
  event_queue<cluster_event>& queue() noexcept { return events_; }
  void handle(const event& e);
  request_window<request_state>& window() noexcept { return w_; }
  [[nodiscard]] std::uint64_t ended() const noexcept { return ended_; }
  simulation_result summarize(outcome_stream& sink);

 private:
  void validate() const;
  // A timing table must have the rows the trace needs (prefill always, decode when a request
  // decodes). Throws std::invalid_argument.
  void check_timing_table() const;

  std::uint64_t output_tokens(std::uint32_t r) const;

  bool local_has(instance& in, kvtk::block_key k);
  bool pool_has(kvtk::block_key k);
  bool dram_has(instance& in, kvtk::block_key k);
  struct match_result {
    std::uint64_t hit = 0, dram = 0, pool = 0;  // the run, and the parts from DRAM and the pool
  };
  // Leading run resident in the instance's HBM cache, its DRAM tier or the pool (the fastest
  // holder serves each block).
  match_result match(instance& in, std::span<const kvtk::block_key> b);
  bool held_below(instance& in, kvtk::block_key k, match_result& m);
  // The prefill of tokens [cached, total): one iteration, or chunk_tokens-sized ones.
  double compute_s(std::uint64_t cached_tokens, std::uint64_t total) const;
  // Loading hits from DRAM (host link) and the pool, one after the other: alpha + n beta +
  // bytes / B each (host_link_, pool_link_).
  double load_s(const match_result& m) const;
  double prefill_s(const match_result& m, std::uint64_t L) const;
  // What the request would wait for on instance i: its remaining busy time, its queue's
  // predicted prefills, and this request's prefill with its hits there.
  double predicted_ttft(std::uint32_t i, std::uint32_t r);

  std::uint32_t route(std::uint32_t r);

  void on_arrival(std::uint32_t r);

  void try_start(std::uint32_t i);

  // Blocks being computed: per instance, or cluster-wide when a pool shares results.
  std::unordered_map<kvtk::block_key, std::uint32_t>& in_flight(std::uint32_t i);

  // At arrival: the hit run (local cache or pool), local hits pinned until the prefill finishes,
  // in-flight misses counted, and the request's own missing blocks marked in flight.
  void match_and_pin(std::uint32_t i, std::uint32_t r);
  match_result match_and_pin_hbm(instance& in, std::span<const kvtk::block_key> b,
                                 std::vector<std::uint32_t>& pinned);

  void start_prefill(std::uint32_t i, std::uint32_t r);

  // One chunk of a chunked prefill: the next chunk_tokens uncached tokens (the first chunk also
  // loads the DRAM and pool hits, overlapped or not as configured).
  void run_chunk(std::uint32_t i);

  void on_prefill_done(std::uint32_t i, std::uint32_t r);

  void on_transfer_done(std::uint32_t r);


  void start_decode_step(instance& in, std::uint32_t i, bool decode_pool);

  void on_decode_done(std::uint32_t tagged);

  void finish(std::uint32_t r);
  // Counts request r, which ended (finished or rejected).
  void ended(std::uint32_t r);


  static constexpr std::uint32_t decode_flag = 1u << 31;
  const kvtk::prefix::prefix_trace_view& t_;
  const cluster_config& c_;
  std::vector<std::uint8_t> served_;  // tier_hierarchy::process scratch (longest request)
  // The transfer-time model of the host link (a calibration fit, or latency + bytes/B; each of
  // an instance's GPUs moves its 1/TP share of a block over its own link, so B x TP) and of
  // the pool.
  kvtk::move::timing_model host_link_, pool_link_;
  iteration_timing timing_;  // every iteration's duration (formula or table)
  router_kind router_ = router_kind::round_robin;    // c_.router, parsed once
  basic_router routes_;  // the shared routers and the random stream (seeded by c_.seed)
  std::vector<double> route_cost_, route_weight_;     // one entry per prefill instance
  request_window<request_state> w_;  // the requests in flight (des/outcomes.hpp)
  std::vector<std::uint32_t> finished_;  // on_decode_done's scratch
  std::vector<instance> prefill_, decode_;
  std::unique_ptr<kvtk::tier::tier_hierarchy<>> pool_;  // null without a pool
  std::unordered_map<kvtk::block_key, std::uint32_t> pool_in_flight_;
  latency_stats gaps_;  // every token gap (token_gap_s)
  event_queue<cluster_event> events_;  // the event loop's queue (des/event_loop.hpp)
  kvtk::prefix::partial_block p_ = kvtk::prefix::partial_block::cache;
  double now_ = 0, block_bytes_ = 0, flops_per_s_ = 1, saved_flops_ = 0, pd_bytes_ = 0;
  double saved_table_s_ = 0;  // with a timing table: prefill seconds the hits saved
  std::uint64_t pool_read_blocks_ = 0, pool_write_blocks_ = 0;
  std::uint64_t dram_read_blocks_ = 0, rejected_ = 0;
  std::uint64_t ended_ = 0;
  std::uint32_t bt_ = 1;
  // Sparse attention: totals of released managers, and the batch-level stall accounting.
  std::unique_ptr<sparse_decoder> sparse_;  // null for dense decode
};

}  // namespace kvtk::sim::des::detail
