// sim/des/timing.hpp — how long one engine iteration takes: the simulator's one timing component.
//
// Design. An iteration is what an engine runs in one forward pass: a set of prefill parts
// (requests adding `new_tokens` on top of `context_tokens` already cached) and a decode batch
// (requests decoding one token each at their context length). `iteration_timing` gives its
// seconds from one of two sources (docs/simulate.md, "Timing"):
//  * the formula — (overhead + prefill + decode) × time_scale with
//      prefill = Σ_parts prefill_flops(part) / (tflops · 10^12 · compute_efficiency · gpus)
//      decode  = (2 · active_params + KV bytes of the batch) / (hbm · memory_efficiency · gpus);
//    an empty iteration (no new token, no decode request) takes 0 and pays no overhead. With the
//    overhead 0 and both efficiencies equal to the old single `efficiency` this is the earlier
//    model bit for bit (tested);
//  * a measured timing table (CSV, `timing_table`) — prefill and decode rows interpolated
//    multilinearly over each kind's grid, extrapolated linearly from the two nearest grid values
//    of a dimension outside it, clamped at >= 0; a dimension with one value is constant. Several
//    prefill parts are looked up as batch = parts, tokens_per_request = mean new tokens,
//    context_tokens = mean context. The table's times include the engine's own overhead:
//    `iteration_overhead_s` and the efficiencies are not applied. × time_scale still applies.
// A mixed iteration (prefill parts and a decode batch together) is costed as the sum of the two
// (formula: one overhead; table: the prefill row + the decode row): an upper bound, as an engine
// overlaps some of the two. The simulator itself runs prefill chunks and decode steps as
// separate iterations (chunked prefill alternates them), so it never asks for a mixed one.
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

/// Measured iteration times (docs/simulate.md "Timing"): CSV with the header
/// `kind,batch,tokens_per_request,context_tokens,ms`; `#` lines and blank lines are skipped.
class timing_table {
 public:
  /// Throws timing_table_error naming `name`, the line and the reason: wrong header, wrong field
  /// count, an unknown kind, a non-numeric or negative value, decode tokens_per_request != 1, a
  /// duplicate point, an incomplete grid, no rows at all.
  static timing_table parse(std::string_view text, const std::string& name);
  /// parse() of a file; also timing_table_error (line 0) when it cannot be read.
  static timing_table load(const std::string& path);

  [[nodiscard]] bool has_prefill() const noexcept { return !prefill_.s.empty(); }
  [[nodiscard]] bool has_decode() const noexcept { return !decode_.s.empty(); }
  /// Seconds of `batch` prefills each adding `tokens` new tokens on top of `context` cached ones.
  [[nodiscard]] double prefill_s(double batch, double tokens, double context) const noexcept;
  /// Seconds of a decode step of `batch` requests at (mean) context `context`.
  [[nodiscard]] double decode_s(double batch, double context) const noexcept;
  [[nodiscard]] const std::string& source() const noexcept { return source_; }
  [[nodiscard]] std::size_t prefill_rows() const noexcept { return prefill_.s.size(); }
  [[nodiscard]] std::size_t decode_rows() const noexcept { return decode_.s.size(); }
  /// {"source": "table", "file", "prefill_rows", "decode_rows", "prefill_grid", "decode_grid"}.
  [[nodiscard]] nlohmann::json describe() const;

  /// A kind's rows on the grid of its distinct values: s[(b · nt + t) · nc + c] (seconds).
  struct grid {
    std::vector<double> axis[3];  // batch, tokens_per_request, context_tokens; sorted, distinct
    std::vector<double> s;
    [[nodiscard]] double at(const double x[3]) const noexcept;
  };

 private:
  std::string source_;
  grid prefill_, decode_;
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
  iteration_timing(const model_profile& m, const gpu_profile& g, std::uint32_t gpus,
                   double time_scale, double overhead_s, std::shared_ptr<const timing_table> table);

  [[nodiscard]] double seconds(std::span<const prefill_part> prefill,
                               const decode_batch& decode) const noexcept;
  /// One request's prefill of tokens [cached, total) as one iteration.
  [[nodiscard]] double prefill_s(std::uint64_t cached, std::uint64_t total) const noexcept;
  /// The same prefill in iterations of at most `chunk` new tokens each (chunk 0 = one).
  [[nodiscard]] double chunked_prefill_s(std::uint64_t cached, std::uint64_t total,
                                         std::uint64_t chunk) const noexcept;
  [[nodiscard]] double decode_s(const decode_batch& d) const noexcept { return seconds({}, d); }
  [[nodiscard]] const timing_table* table() const noexcept { return table_.get(); }
  /// The "timing" object of the summary: the formula's numbers or the table's description.
  [[nodiscard]] nlohmann::json describe() const;

 private:
  model_profile model_;
  double flops_per_s_ = 1, bytes_per_s_ = 1, time_scale_ = 1, overhead_s_ = 0;
  double compute_efficiency_ = 0, memory_efficiency_ = 0;
  std::shared_ptr<const timing_table> table_;
};

}  // namespace kvtk::sim::des
