// sim/des/timing.hpp — how long one engine iteration takes: the simulator's one timing component.
//
// Design. An iteration is what an engine runs in one forward pass: a set of prefill parts
// (requests adding `new_tokens` on top of `context_tokens` already cached) and a decode batch
// (requests decoding one token each at their context length). `iteration_timing` gives its
// seconds from one of two sources (docs/simulate.md, "Timing"):
//  * the formula — (overhead + prefill + decode) × time_scale with
//      overhead = iteration_overhead_s + request_overhead_s · (prefill parts + decode requests)
//      prefill  = Σ_parts prefill_flops(part) / (tflops · 10^12 · compute_efficiency · gpus)
//      decode   = (2 · active_params + KV bytes of the batch) / (hbm · memory_efficiency · gpus);
//    an empty iteration (no new token, no decode request) takes 0 and pays no overhead. With the
//    overheads 0 and both efficiencies equal to the old single `efficiency` this is the earlier
//    model bit for bit (tested);
//  * a measured timing table (CSV, `timing_table`) — scattered points per kind, as profilers
//    write them (no full grid needed), interpolated by nested piecewise-linear steps: within each
//    (batch, tokens_per_request) measured, linear in context_tokens; within each batch, linear
//    in tokens_per_request between the two measured values around the query; then linear across
//    the two measured batches around it. Each step extrapolates linearly from its two nearest
//    values outside the data; a dimension with one value in the whole kind is constant; the result
//    is clamped at >= 0. On a full grid this is exactly the multilinear interpolation (the same
//    lines, composed; tested against it). A query beyond twice the largest value measured in its
//    slice (a context slice of a single value: twice the kind's largest context; a dimension
//    the kind varies) is
//    "far": iteration_timing throws, naming the query,
//    the slice and the distance, rather than extrapolate into nonsense. Several prefill parts
//    are looked up as batch = parts, tokens_per_request = mean new tokens, context_tokens = mean
//    context. The overheads add to the table's times (0 by default: leave them 0 when the table
//    was measured on the whole engine step); the efficiencies are not applied; × time_scale is.
// A mixed iteration (prefill parts and a decode batch together) is costed as the sum of the two
// (formula: one iteration overhead; table: the prefill row + the decode row): an upper bound, as
// an engine overlaps some of the two. kvtk's own scheduler runs prefill chunks and decode steps as
// separate iterations; the engine schedulers run mixed ones.
// Lookups take spans and scalars and never allocate (the event loop calls them per iteration).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "des/profiles.hpp"

namespace kvtk::sim::des {

/// A bad timing table: what() is "file:line: reason" (line 0 = the file as a whole).
class timing_table_error : public std::runtime_error {
 public:
  timing_table_error(const std::string& file, std::uint64_t line, const std::string& reason)
      : std::runtime_error(file + ":" + std::to_string(line) + ": " + reason) {}
};

/// Where a table lookup left the measured data by too much (see the header comment): dimension
/// `dim` (0 batch, 1 tokens_per_request, 2 context_tokens) asked for `query` where the slice's
/// largest measured value is `largest`; `batch` and `tokens` name the slice (-1: every batch,
/// every tokens_per_request value).
struct table_far {
  int dim = -1;  ///< -1: the query is within reach
  double query = 0, largest = 0, batch = -1, tokens = -1;
};

/// Measured iteration times (docs/simulate.md "Timing"): CSV with the header
/// `kind,batch,tokens_per_request,context_tokens,ms`; `#` lines and blank lines are skipped.
class timing_table {
 public:
  /// How far past a slice's largest measured value a query may go: reach × that value.
  static constexpr double reach = 2.0;

  /// Throws timing_table_error naming `name`, the line and the reason: wrong header, wrong field
  /// count, an unknown kind, a non-numeric or negative value, decode tokens_per_request != 1, a
  /// duplicate point, no rows at all. Points need not form a grid.
  static timing_table parse(std::string_view text, const std::string& name);
  /// parse() of a file; also timing_table_error (line 0) when it cannot be read.
  static timing_table load(const std::string& path);

  [[nodiscard]] bool has_prefill() const noexcept { return !prefill_.s.empty(); }
  [[nodiscard]] bool has_decode() const noexcept { return !decode_.s.empty(); }
  /// Seconds of `batch` prefills each adding `tokens` new tokens on top of `context` cached ones.
  /// `far` (optional) is set where the query is beyond reach, else left alone.
  [[nodiscard]] double prefill_s(double batch, double tokens, double context,
                                 table_far* far = nullptr) const noexcept;
  /// Seconds of a decode step of `batch` requests at (mean) context `context`; `far` as above.
  [[nodiscard]] double decode_s(double batch, double context,
                                table_far* far = nullptr) const noexcept;
  [[nodiscard]] const std::string& source() const noexcept { return source_; }
  [[nodiscard]] std::size_t prefill_rows() const noexcept { return prefill_.s.size(); }
  [[nodiscard]] std::size_t decode_rows() const noexcept { return decode_.s.size(); }
  /// {"source": "table", "file", "prefill_rows", "decode_rows", "prefill_grid", "decode_grid"}
  /// (each grid: the distinct values of each dimension; "complete": whether every combination
  /// of them is a row).
  [[nodiscard]] nlohmann::json describe() const;

  /// A kind's rows nested as the lookup walks them. Layout: the distinct batches (sorted); for
  /// batch i, its tokens_per_request values are tokens[tokens_first[i] .. tokens_first[i+1]);
  /// for tokens slot k, its rows are (context[j], s[j]) for j in [rows_first[k], rows_first[k+1]),
  /// sorted by context. Invariants: every slice is non-empty, sorted, with distinct values.
  struct points {
    std::vector<double> batch, tokens, context, s;  // s in seconds
    std::vector<std::uint32_t> tokens_first, rows_first;
    bool varies[3] = {false, false, false};  ///< the kind has several values of a dimension
    double largest[3] = {0, 0, 0};           ///< the kind's largest value of each dimension
    bool complete = false;                   ///< every combination of the values is a row
    [[nodiscard]] double at(const double x[3], table_far* far) const noexcept;
  };

 private:
  std::string source_;
  points prefill_, decode_;
};

/// One prefill part of an iteration.
struct prefill_part {
  std::uint64_t new_tokens = 0;      ///< tokens computed in this iteration
  std::uint64_t context_tokens = 0;  ///< tokens of the request cached before them
};

/// The decode batch of an iteration (each request decodes one token).
struct decode_batch {
  std::uint64_t requests = 0;
  double context_tokens = 0;  ///< summed over the batch (the table uses the mean)
  double kv_bytes = 0;        ///< KV bytes the step reads (formula; sparse: the selected pages)
};

/// What a simulation's iterations cost (see the header comment).
class iteration_timing {
 public:
  iteration_timing() = default;
  /// `table` null = the formula.
  /// `table` null = the formula. `request_overhead_s`: seconds per request an iteration runs.
  iteration_timing(const model_profile& m, const gpu_profile& g, std::uint32_t gpus,
                   double time_scale, double overhead_s, std::shared_ptr<const timing_table> table,
                   double request_overhead_s = 0);

  /// Throws std::invalid_argument (a usage error: the table does not cover the workload) when a
  /// table lookup is far outside its data, naming the iteration, the slice and the distance.
  [[nodiscard]] double seconds(std::span<const prefill_part> prefill,
                               const decode_batch& decode) const;
  /// One request's prefill of tokens [cached, total) as one iteration.
  [[nodiscard]] double prefill_s(std::uint64_t cached, std::uint64_t total) const;
  /// The same prefill in iterations of at most `chunk` new tokens each (chunk 0 = one).
  [[nodiscard]] double chunked_prefill_s(std::uint64_t cached, std::uint64_t total,
                                         std::uint64_t chunk) const;
  [[nodiscard]] double decode_s(const decode_batch& d) const { return seconds({}, d); }
  [[nodiscard]] const timing_table* table() const noexcept { return table_.get(); }
  /// The "timing" object of the summary: the formula's numbers or the table's description.
  [[nodiscard]] nlohmann::json describe() const;

 private:
  model_profile model_;
  double flops_per_s_ = 1, bytes_per_s_ = 1, time_scale_ = 1, overhead_s_ = 0;
  double request_overhead_s_ = 0;
  double compute_efficiency_ = 0, memory_efficiency_ = 0;
  std::shared_ptr<const timing_table> table_;
};

}  // namespace kvtk::sim::des
