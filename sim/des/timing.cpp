// sim/des/timing.cpp — iteration times from the formula or a table's grid (see des/timing.hpp);
// the table's parser is des/timing_table.cpp.
#include "des/timing.hpp"

#include <algorithm>

namespace kvtk::sim::des {

double timing_table::grid::at(const double x[3]) const noexcept {
  // Per dimension: the segment [a[i], a[i+1]] holding x, or the first / last one outside the
  // grid (linear extrapolation from the two nearest values); one value: constant.
  std::size_t lo[3];
  double t[3];
  for (int d = 0; d < 3; ++d) {
    const std::vector<double>& a = axis[d];
    lo[d] = 0;
    t[d] = 0;
    if (a.size() < 2) continue;
    const auto above =
        static_cast<std::size_t>(std::upper_bound(a.begin(), a.end(), x[d]) - a.begin());
    lo[d] = std::clamp<std::size_t>(above, 1, a.size() - 1) - 1;
    t[d] = (x[d] - a[lo[d]]) / (a[lo[d] + 1] - a[lo[d]]);
  }
  const std::size_t n1 = axis[1].size(), n2 = axis[2].size();
  double v = 0;
  for (unsigned corner = 0; corner < 8; ++corner) {
    double w = 1;
    std::size_t at[3] = {0, 0, 0};
    for (int d = 0; d < 3 && w != 0; ++d) {
      const bool up = ((corner >> d) & 1u) != 0;
      if (up && axis[d].size() < 2) w = 0;  // no upper neighbour: the lower one has weight 1
      at[d] = lo[d] + (up ? 1 : 0);
      w *= up ? t[d] : 1 - t[d];
    }
    if (w != 0) v += w * s[(at[0] * n1 + at[1]) * n2 + at[2]];
  }
  return std::max(v, 0.0);
}

double timing_table::prefill_s(double batch, double tokens, double context) const noexcept {
  const double x[3] = {batch, tokens, context};
  return prefill_.at(x);
}

double timing_table::decode_s(double batch, double context) const noexcept {
  const double x[3] = {batch, 1, context};
  return decode_.at(x);
}

nlohmann::json timing_table::describe() const {
  auto grid_json = [](const grid& g) {
    return nlohmann::json{
        {"batch", g.axis[0]}, {"tokens_per_request", g.axis[1]}, {"context_tokens", g.axis[2]}};
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
                                   std::shared_ptr<const timing_table> table)
    : model_(m),
      // The same products, in the same order, as before the efficiencies were split: with both
      // equal to the old `efficiency` and no overhead the times are bit for bit the old ones.
      flops_per_s_(g.tflops * 1e12 * g.compute_efficiency * gpus),
      bytes_per_s_(g.hbm_bytes_per_s * g.memory_efficiency * gpus),
      time_scale_(time_scale),
      overhead_s_(overhead_s),
      compute_efficiency_(g.compute_efficiency),
      memory_efficiency_(g.memory_efficiency),
      table_(std::move(table)) {}

double iteration_timing::seconds(std::span<const prefill_part> prefill,
                                 const decode_batch& decode) const noexcept {
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
  double s = 0;
  if (table_) {
    if (parts > 0) s += table_->prefill_s(n, tokens / n, context / n);
    if (decode.requests > 0) s += table_->decode_s(b, decode.context_tokens / b);
    return s * time_scale_;
  }
  s = overhead_s_;
  if (parts > 0) s += flops / flops_per_s_;
  if (decode.requests > 0) s += (2.0 * model_.active_params + decode.kv_bytes) / bytes_per_s_;
  return s * time_scale_;
}

double iteration_timing::prefill_s(std::uint64_t cached, std::uint64_t total) const noexcept {
  const prefill_part part{total > cached ? total - cached : 0, cached};
  return seconds({&part, 1}, {});
}

double iteration_timing::chunked_prefill_s(std::uint64_t cached, std::uint64_t total,
                                           std::uint64_t chunk) const noexcept {
  if (chunk == 0 || total <= cached) return prefill_s(cached, total);
  if (!table_) {  // FLOPs add up over chunks; each chunk is an iteration with its overhead
    const std::uint64_t chunks = (total - cached + chunk - 1) / chunk;
    return (static_cast<double>(chunks) * overhead_s_ +
            prefill_flops(model_, cached, total) / flops_per_s_) *
           time_scale_;
  }
  double s = 0;
  for (std::uint64_t pos = cached; pos < total; pos += std::min(chunk, total - pos)) {
    const std::uint64_t end = pos + std::min(chunk, total - pos);
    s += table_->prefill_s(1, static_cast<double>(end - pos), static_cast<double>(pos));
  }
  return s * time_scale_;
}

nlohmann::json iteration_timing::describe() const {
  if (table_) return table_->describe();
  return {{"source", "formula"},
          {"compute_efficiency", compute_efficiency_},
          {"memory_efficiency", memory_efficiency_},
          {"iteration_overhead_s", overhead_s_}};
}

}  // namespace kvtk::sim::des
