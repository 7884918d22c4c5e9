// sim/des/timing.cpp — iteration times from the formula or a table's grid (see des/timing.hpp);
// the table's parser is des/timing_table.cpp.
#include "des/timing.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace kvtk::sim::des {

namespace {

// The two values of sorted a[0, n) a query x is interpolated between: the segment holding x, or
// the first / last one when x is outside (linear extrapolation); w is the upper value's weight.
// One value: w = 0 (constant).
struct segment {
  std::size_t lo;
  double w;
};

segment locate(const double* a, std::size_t n, double x) noexcept {
  if (n < 2) return {0, 0};
  const auto above = static_cast<std::size_t>(std::upper_bound(a, a + n, x) - a);
  const std::size_t lo = std::clamp<std::size_t>(above, 1, n - 1) - 1;
  return {lo, (x - a[lo]) / (a[lo + 1] - a[lo])};
}

std::string show(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

constexpr const char* dim_name[] = {"batch", "tokens_per_request", "context_tokens"};

[[noreturn]] void throw_far(const std::string& file, const char* kind, const double x[3],
                            const table_far& f) {
  std::string where = kind;
  where += f.batch < 0 ? " rows" : " rows of batch " + show(f.batch);
  if (f.tokens >= 0) where += ", tokens_per_request " + show(f.tokens);
  std::string how_far = f.largest > 0 ? show(f.query / f.largest) + "x" : "any amount";
  throw std::invalid_argument(
      "timing table " + file + ": a " + kind + " iteration of batch " + show(x[0]) +
      (x[1] != 1 || kind[0] == 'p' ? ", " + show(x[1]) + " tokens per request" : std::string()) +
      " at context " + show(x[2]) + " is far outside the measured points: " +
      dim_name[f.dim] + " " + show(f.query) + " is " + how_far + " the largest measured in the " +
      where + " (" + show(f.largest) + "; a query may reach " + show(timing_table::reach) +
      "x); add rows that cover it (docs/simulate.md \"Timing\")");
}

}  // namespace

double timing_table::points::at(const double x[3], table_far* far) const noexcept {
  if (s.empty()) return 0;  // a kind without rows (the configs refuse the runs that need it)
  // Nested: context within a (batch, tokens) slice, tokens within a batch, then across batches.
  auto check = [&](int d, const double* a, std::size_t n, double b, double t) {
    // A tokens slot measured at one context is constant in context: it is far only beyond the
    // kind's reach (a profile's longest chunk is often measured at context 0 alone). Batches
    // and tokens keep their slice's own reach: a batch measured at one short prompt must not
    // price long ones.
    const double top = n > 1 || d != 2 ? a[n - 1] : largest[d];
    if (far != nullptr && far->dim < 0 && varies[d] && x[d] > reach * top) {
      *far = n > 1 ? table_far{d, x[d], top, b, t} : table_far{d, x[d], top, -1, -1};
    }
  };
  auto in_slot = [&](std::size_t k, double b) {
    const std::size_t first = rows_first[k], n = rows_first[k + 1] - first;
    check(2, context.data() + first, n, b, tokens[k]);
    const segment g = locate(context.data() + first, n, x[2]);
    const double* v = s.data() + first + g.lo;
    return g.w == 0 ? v[0] : g.w == 1 ? v[1] : (1 - g.w) * v[0] + g.w * v[1];
  };
  auto in_batch = [&](std::size_t i) {
    const std::size_t first = tokens_first[i], n = tokens_first[i + 1] - first;
    check(1, tokens.data() + first, n, batch[i], -1);
    const segment g = locate(tokens.data() + first, n, x[1]);
    // A side of weight 0 is not looked at (nor checked for reach).
    if (g.w == 1) return in_slot(first + g.lo + 1, batch[i]);
    const double lo = in_slot(first + g.lo, batch[i]);
    return g.w == 0 ? lo : (1 - g.w) * lo + g.w * in_slot(first + g.lo + 1, batch[i]);
  };
  check(0, batch.data(), batch.size(), -1, -1);
  const segment g = locate(batch.data(), batch.size(), x[0]);
  double v;
  if (g.w == 1) {
    v = in_batch(g.lo + 1);
  } else {
    const double lo = in_batch(g.lo);
    v = g.w == 0 ? lo : (1 - g.w) * lo + g.w * in_batch(g.lo + 1);
  }
  return std::max(v, 0.0);
}

double timing_table::prefill_s(double batch, double tokens, double context,
                               table_far* far) const noexcept {
  const double x[3] = {batch, tokens, context};
  return prefill_.at(x, far);
}

double timing_table::decode_s(double batch, double context, table_far* far) const noexcept {
  const double x[3] = {batch, 1, context};
  return decode_.at(x, far);
}

nlohmann::json timing_table::describe() const {
  auto grid_json = [](const points& p) {
    auto distinct = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end()), v.end());
      return v;
    };
    return nlohmann::json{{"batch", p.batch},
                          {"tokens_per_request", distinct(p.tokens)},
                          {"context_tokens", distinct(p.context)},
                          {"complete", p.complete}};
  };
  nlohmann::json j = {{"source", "table"},
                      {"file", source_},
                      {"prefill_rows", prefill_rows()},
                      {"decode_rows", decode_rows()}};
  if (has_prefill()) j["prefill_grid"] = grid_json(prefill_);
  if (has_decode()) j["decode_grid"] = grid_json(decode_);
  return j;
}

iteration_timing::iteration_timing(const model_profile& m, const gpu_profile& g, std::uint32_t gpus,
                                   double time_scale, double overhead_s,
                                   std::shared_ptr<const timing_table> table,
                                   double request_overhead_s)
    : model_(m),
      // The same products, in the same order, as before the efficiencies were split: with both
      // equal to the old `efficiency` and no overhead the times are bit for bit the old ones.
      flops_per_s_(g.tflops * 1e12 * g.compute_efficiency * gpus),
      bytes_per_s_(g.hbm_bytes_per_s * g.memory_efficiency * gpus),
      time_scale_(time_scale),
      overhead_s_(overhead_s),
      request_overhead_s_(request_overhead_s),
      compute_efficiency_(g.compute_efficiency),
      memory_efficiency_(g.memory_efficiency),
      table_(std::move(table)) {}

double iteration_timing::seconds(std::span<const prefill_part> prefill,
                                 const decode_batch& decode) const {
  std::uint64_t parts = 0;
  double flops = 0, tokens = 0, context = 0;
  for (const prefill_part& p : prefill) {
    if (p.new_tokens == 0) continue;  // nothing to compute: not part of the iteration
    ++parts;
    tokens += static_cast<double>(p.new_tokens);
    context += static_cast<double>(p.context_tokens);
    if (!table_) flops += prefill_flops(model_, p.context_tokens, p.context_tokens + p.new_tokens);
  }
  if (parts == 0 && decode.requests == 0) return 0;  // no iteration runs
  const auto n = static_cast<double>(parts), b = static_cast<double>(decode.requests);
  double s = overhead_s_;
  if (request_overhead_s_ != 0) s += request_overhead_s_ * (n + b);
  if (table_) {
    table_far far;
    if (parts > 0) {
      s += table_->prefill_s(n, tokens / n, context / n, &far);
      if (far.dim >= 0) {
        const double x[3] = {n, tokens / n, context / n};
        throw_far(table_->source(), "prefill", x, far);
      }
    }
    if (decode.requests > 0) {
      s += table_->decode_s(b, decode.context_tokens / b, &far);
      if (far.dim >= 0) {
        const double x[3] = {b, 1, decode.context_tokens / b};
        throw_far(table_->source(), "decode", x, far);
      }
    }
    return s * time_scale_;
  }
  if (parts > 0) s += flops / flops_per_s_;
  if (decode.requests > 0) s += (2.0 * model_.active_params + decode.kv_bytes) / bytes_per_s_;
  return s * time_scale_;
}

double iteration_timing::prefill_s(std::uint64_t cached, std::uint64_t total) const {
  const prefill_part part{total > cached ? total - cached : 0, cached};
  return seconds({&part, 1}, {});
}

double iteration_timing::chunked_prefill_s(std::uint64_t cached, std::uint64_t total,
                                           std::uint64_t chunk) const {
  if (chunk == 0 || total <= cached) return prefill_s(cached, total);
  const std::uint64_t chunks = (total - cached + chunk - 1) / chunk;
  if (!table_) {  // FLOPs add up over chunks; each chunk is an iteration with its overheads
    return (static_cast<double>(chunks) * (overhead_s_ + request_overhead_s_) +
            prefill_flops(model_, cached, total) / flops_per_s_) *
           time_scale_;
  }
  double s = 0;
  for (std::uint64_t pos = cached; pos < total; pos += std::min(chunk, total - pos)) {
    const prefill_part part{std::min(chunk, total - pos), pos};
    s += seconds({&part, 1}, {});
  }
  return s;
}

nlohmann::json iteration_timing::describe() const {
  if (table_) {
    nlohmann::json j = table_->describe();
    j["iteration_overhead_s"] = overhead_s_;
    j["request_overhead_s"] = request_overhead_s_;
    return j;
  }
  return {{"source", "formula"},
          {"compute_efficiency", compute_efficiency_},
          {"memory_efficiency", memory_efficiency_},
          {"iteration_overhead_s", overhead_s_},
          {"request_overhead_s", request_overhead_s_}};
}

}  // namespace kvtk::sim::des
