// kvtk/sparse/decode_step.hpp — one decode step of a sparse-attention request, as `kvtk sparse`
// and the simulator both model it (one component, so the two cannot drift apart):
//
//   decode_step(m, sel, next, ...)   the request's page traffic: grow the manager's context to
//                                    the step's, run the selection (recalls = selected pages not
//                                    in HBM), then prefetch the predicted next selection.
//   decode_clock::step(link, ...)    what that traffic costs on the critical path of a stream of
//                                    steps (one request in kvtk sparse, one instance's decode
//                                    batch in the simulator):
//
//     stall(t) = recall(t) + max(0, prefetch(t-1) - compute(t-1))
//
//   recall(t)    the link time of step t's recalls, one transfer: alpha + n beta + n bytes / B
//                (kvtk::move::timing_model). With layer-ahead loading each layer's share of the
//                recalls loads while the previous layer computes, so only layer_ahead_stall() of
//                it is exposed.
//   prefetch(t-1) the link time of the pages prefetched at step t-1 for step t. They load while
//                step t-1 computes, and not during its stall (the link carries step t-1's
//                recalls then), so what compute(t-1) does not hide stalls step t.
//
// Semantics of the managers (recall, prefetch, shielding): residency.hpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "kvtk/move/timing_fit.hpp"
#include "kvtk/sparse/pattern_gen.hpp"
#include "kvtk/sparse/residency_core.hpp"

namespace kvtk::sparse {

/// Exposed time of a step's recalls when its selected pages load one layer ahead: each layer's
/// share costs x = alpha + (transfer_s - alpha) / layers (every layer's copy pays the fixed
/// cost); the first share is exposed, each later one only by what exceeds a layer's compute:
///   stall = x + (layers - 1) * max(0, x - compute_s / layers).
/// transfer_s = the whole step's recall transfer (alpha included); 0 -> 0.
/// Requires: layers >= 1.  Complexity: O(1).  Throws: nothing.
[[nodiscard]] inline double layer_ahead_stall(double transfer_s, double alpha_s, double compute_s,
                                              std::uint32_t layers) noexcept {
  if (transfer_s <= 0) return 0;
  const double n = layers;
  const double x = alpha_s + (transfer_s - alpha_s) / n;
  return x + (n - 1) * std::max(0.0, x - compute_s / n);
}

/// The host -> HBM link that recalls and prefetches cross.
struct decode_link {
  kvtk::move::timing_model link{10e-6, 0, 50e9};  ///< alpha s, beta s per page, bytes/s
  double page_bytes = 0;                          ///< KV bytes of one page (all layers)
  bool layer_ahead = false;                       ///< recalls load one layer ahead of compute
  std::uint32_t layers = 1;                       ///< model layers (layer_ahead), >= 1

  /// One transfer of `pages` pages; 0 pages cost nothing.  Throws: nothing.
  [[nodiscard]] double transfer_s(std::uint64_t pages) const noexcept {
    if (pages == 0) return 0;
    const double n = static_cast<double>(pages);
    return link.predict(n, n * page_bytes);
  }
};

/// The critical path of one stream of decode steps (the formula in the header comment).
/// Thread safety: as block_cache (one clock per stream of steps).
class decode_clock {
 public:
  struct step_time {
    double stall_s = 0;          ///< recall(t) exposed + the previous prefetch compute did not hide
    double recall_link_s = 0;    ///< link time of step t's recalls (exposed or not)
    double prefetch_link_s = 0;  ///< link time of the prefetch issued at step t for step t+1
  };
  /// Effects: accounts step t, whose selection recalled `recalls` pages, which prefetched
  /// `prefetched` pages for step t+1 and whose compute takes compute_s.
  /// Complexity: O(1).  Throws: nothing.
  step_time step(const decode_link& l, std::uint64_t recalls, std::uint64_t prefetched,
                 double compute_s) noexcept {
    step_time t;
    t.recall_link_s = l.transfer_s(recalls);
    const double exposed =
        l.layer_ahead
            ? layer_ahead_stall(t.recall_link_s, l.link.alpha_s, compute_s, std::max(1u, l.layers))
            : t.recall_link_s;
    t.stall_s = exposed + unhidden_prefetch_s_;
    t.prefetch_link_s = l.transfer_s(prefetched);
    unhidden_prefetch_s_ = std::max(0.0, t.prefetch_link_s - compute_s);
    return t;
  }
  /// Effects: compute_s of other work (no decode step) passes: it hides as much of the prefetch
  /// still in flight.  Complexity: O(1).  Throws: nothing.
  void elapse(double compute_s) noexcept {
    unhidden_prefetch_s_ = std::max(0.0, unhidden_prefetch_s_ - compute_s);
  }

 private:
  double unhidden_prefetch_s_ = 0;
};

/// The selection a next-step prefetch acts on: the true next selection with each page replaced,
/// with probability 1 - accuracy, by a uniformly random page of the context (a deterministic,
/// seeded stand-in for a predictor that is sometimes wrong). accuracy >= 1 copies it.
/// Complexity: O(|next|); allocates only while `out` grows.  Throws: std::bad_alloc.
inline void predict_selection(const step_selection& next, double accuracy, splitmix64& rng,
                              std::vector<std::uint32_t>& out) {
  out.assign(next.blocks.begin(), next.blocks.end());
  if (accuracy >= 1.0 || next.context_blocks == 0) return;
  for (auto& b : out) {
    const double u = static_cast<double>(rng.next() >> 11) * 0x1.0p-53;
    if (u >= accuracy) b = static_cast<std::uint32_t>(rng.next() % next.context_blocks);
  }
}

/// Grows m's context to `blocks` pages (decode wrote new pages; they start resident).
template <class Manager>
void grow_context(Manager& m, std::uint32_t blocks) noexcept {
  while (m.context_blocks() < blocks && m.append_block() != no_block) {
  }
}

/// One step's page traffic.
struct decode_pages {
  std::uint64_t selected = 0;    ///< pages the step reads (its selection)
  std::uint64_t recalls = 0;     ///< critical-path loads
  std::uint64_t prefetched = 0;  ///< pages loaded for the next step
};

/// The prefetch of a step: the next step's selection and how well the predictor knows it.
struct next_selection {
  step_selection selection;
  double accuracy = 1.0;  ///< predict_selection()
};

/// Effects: one decode step of a request on its manager `m`: grows the context to sel's, runs the
/// selection, then (when `next` is given and m prefetches) grows the context to the next step's
/// and prefetches its predicted selection. `scratch` holds the prediction.
/// Complexity: the manager's step and prefetch.  Throws: std::bad_alloc (scratch growth).
template <class Manager>
decode_pages decode_step(Manager& m, const step_selection& sel, const next_selection* next,
                         splitmix64& rng, std::vector<std::uint32_t>& scratch) {
  decode_pages out;
  grow_context(m, sel.context_blocks);
  const std::uint64_t before = m.counters().recalls;
  m.step(sel.blocks, sel.weights);
  out.selected = sel.blocks.size();
  out.recalls = m.counters().recalls - before;
  if constexpr (requires { m.prefetch(std::span<const std::uint32_t>{}); }) {
    if (next != nullptr) {
      grow_context(m, next->selection.context_blocks);
      predict_selection(next->selection, next->accuracy, rng, scratch);
      out.prefetched = m.prefetch(scratch);
    }
  }
  return out;
}

}  // namespace kvtk::sparse
