// sim/des/sparse_decode.hpp — the sparse-attention side of the simulator's decode steps: one
// offload + recall manager (kvtk/sparse/residency.hpp) and one growing selection pattern
// (kvtk/sparse/pattern_gen.hpp) per decoding request, created at its first decode step and
// released when it finishes. Each step is kvtk::sparse::decode_step, the component `kvtk sparse`
// uses too (kvtk/sparse/decode_step.hpp); the batch's stall is its decode_clock (semantics:
// simulator.hpp and docs/simulate.md, "sparse").
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "des/simulator.hpp"
#include "kvtk/sparse/decode_step.hpp"
#include "kvtk/sparse/residency.hpp"

namespace kvtk::sim::des {

struct sparse_request;  // per-request state (sparse_decode.cpp)

class sparse_decoder {
 public:
  /// Throws std::invalid_argument naming the first bad `sparse.*` value.
  static void validate(const sparse_config& s);

  /// `requests`: the trace's request count (state is indexed by request); c: the simulation's
  /// config (its sparse part, its model's KV bytes and layers); host_link: the link that recalls
  /// and prefetches cross (the instance's host link).
  sparse_decoder(const cluster_config& c, std::size_t requests,
                 const kvtk::move::timing_model& host_link);
  ~sparse_decoder();
  sparse_decoder(const sparse_decoder&) = delete;
  sparse_decoder& operator=(const sparse_decoder&) = delete;

  struct step_result {
    std::uint64_t pages = 0;       ///< pages the step reads (its selection)
    std::uint32_t recalls = 0;     ///< critical-path recalls
    std::uint64_t prefetched = 0;  ///< pages prefetched for the request's next step
  };
  /// One decode step of request r, whose context is `tokens` tokens, which has `remaining`
  /// output tokens to produce (this one included) and which is its decode step `index` (0 for
  /// the step after its prefill; recorded selections are taken at that index, also when a
  /// preempted request decodes again with fresh state).
  step_result step(std::uint32_t r, std::uint64_t tokens, std::uint64_t remaining,
                   std::uint64_t index);
  /// Adds r's counters to the totals and frees its state (no-op when it has none).
  void release(std::uint32_t r);
  /// KV bytes of one page (all layers).
  [[nodiscard]] double page_bytes() const noexcept { return link_.page_bytes; }
  /// One decode batch step of an instance (clock: that instance's), which recalled `recalls`
  /// pages, prefetched `prefetched` for its next step, computes for compute_s and reads
  /// kv_bytes: the batch's recalls and prefetches cross the host link together and the stall is
  /// kvtk::sparse::decode_clock's (kvtk sparse's model, with the batch as the stream). Returns
  /// the stall (the step's duration grows by it); counts it.
  double batch_step(kvtk::sparse::decode_clock& clock, std::uint64_t recalls,
                    std::uint64_t prefetched, double compute_s, double kv_bytes) noexcept;
  /// Releases every request's state; returns the totals as the summary's `sparse` object.
  nlohmann::json summary();

  /// Summed over released requests.
  [[nodiscard]] const kvtk::sparse::residency_counters& totals() const noexcept { return totals_; }
  [[nodiscard]] std::uint64_t resident_sum() const noexcept { return resident_sum_; }
  [[nodiscard]] std::uint32_t resident_max() const noexcept { return resident_max_; }

 private:
  sparse_request& state(std::uint32_t r, std::uint64_t tokens, std::uint64_t remaining);

  sparse_config s_;
  kvtk::sparse::decode_link link_;
  std::vector<std::unique_ptr<sparse_request>> state_;
  kvtk::sparse::residency_counters totals_{};
  std::uint64_t resident_sum_ = 0;
  std::uint32_t resident_max_ = 0;
  std::uint64_t batch_steps_ = 0, stalled_steps_ = 0;
  double stall_s_ = 0, decode_kv_read_bytes_ = 0;
};

}  // namespace kvtk::sim::des
