#include "api/cost.hpp"

#include <cmath>
#include <cstdio>

#include "api/options_json.hpp"
#include "api/text.hpp"
#include "api/trace_options.hpp"
#include "api/pricing.hpp"
#include "des/profiles.hpp"
#include "kvtk/cost/self_hosted.hpp"

namespace kvtk::sim {
namespace {

namespace kc = kvtk::cost;

std::string number_text(double v) {
  char got[32];
  std::snprintf(got, sizeof got, "%g", v);
  return got;
}

// The token counts of a run without a result, checked: {hit, miss, output}.
kc::token_counts counts_of(const cost_options& o) {
  double hit = o.hit_tokens.value_or(-1), miss = o.miss_tokens.value_or(-1);
  const double input = o.input_tokens.value_or(-1);
  if (o.hit_ratio) {
    if (o.hit_tokens || o.miss_tokens || !o.input_tokens) {
      throw usage_error("--hit-ratio goes with --input-tokens alone (not --hit-tokens or "
                        "--miss-tokens)");
    }
    if (!(*o.hit_ratio >= 0 && *o.hit_ratio <= 1)) {
      throw usage_error("--hit-ratio: must be in [0, 1], got " + std::to_string(*o.hit_ratio));
    }
    if (!(input >= 0) || !(input <= 1e18)) {
      throw usage_error("--input-tokens: token counts must be in [0, 1e18]");
    }
    hit = std::round(*o.hit_ratio * input);
  }
  if (!o.hit_tokens && !o.hit_ratio) {
    throw usage_error("give --hit-tokens (or --hit-ratio) and exactly one of --miss-tokens, "
                      "--input-tokens");
  }
  if (o.miss_tokens.has_value() == o.input_tokens.has_value()) {
    throw usage_error("give --hit-tokens and exactly one of --miss-tokens, --input-tokens");
  }
  const bool miss_given = o.miss_tokens.has_value();
  const std::pair<const char*, double> counts[] = {
      {"--hit-tokens", hit},
      {miss_given ? "--miss-tokens" : "--input-tokens", miss_given ? miss : input},
      {"--output-tokens", o.output_tokens}};
  for (const auto& [option, v] : counts) {
    // 1e18 tokens is a billion times a large provider's daily volume; beyond it the dollar
    // figures would overflow to inf.
    if (!(v >= 0) || !(v <= 1e18)) {
      throw usage_error(std::string(option) + ": token counts must be in [0, 1e18], got " +
                        number_text(v));
    }
    if (std::floor(v) != v) {  // "--hit-tokens 0.56" meant a ratio, not 0.56 tokens
      throw usage_error(std::string(option) + ": " + number_text(v) +
                        " is not a whole number of tokens (for a share of the input, give "
                        "--hit-ratio R with --input-tokens N)");
    }
  }
  if (o.input_tokens) {
    if (hit > input) {
      throw usage_error("--hit-tokens (" + std::to_string(hit) + ") exceeds --input-tokens (" +
                        std::to_string(input) + ")");
    }
    miss = input - hit;
  }
  return {hit, miss, o.output_tokens};
}

bool has_result(const cost_options& o) { return !o.from.empty() || !o.from_result.is_null(); }

kc::compute_profile compute_of(const cost_options& o) {
  const auto m = des::model_presets().find(o.model);
  if (m == des::model_presets().end()) throw usage_error("--model: unknown model '" + o.model + "'");
  const auto g = des::gpu_presets().find(o.gpu);
  if (g == des::gpu_presets().end()) throw usage_error("--gpu: unknown gpu '" + o.gpu + "'");
  kc::compute_profile c;
  c.active_params = m->second.active_params;
  c.layers = m->second.layers;
  c.hidden = m->second.hidden;
  c.tflops = g->second.tflops;
  c.efficiency = o.efficiency;
  c.usd_per_gpu_hour = o.gpu_hour;
  return c;
}

// What every estimate shares: the price table and, self-hosted, the compute profile.
struct pricer {
  const cost_options& o;
  kc::price_table table;
  std::vector<std::string> storage;  // the price file's strings
  bool self_hosted = false;
  kc::compute_profile cp;

  explicit pricer(const cost_options& opts) : o(opts) {
    table = load_price_table(o.pricing, storage);
    self_hosted = !o.model.empty();
    if (self_hosted) cp = compute_of(o);
  }

  // One estimate: API bill, plus the self-hosted view when asked. `days`: the period the counts
  // cover (tier rent is charged for it; 0 = unknown, not charged); `scale`: the factor applied
  // to the counts (--per-day), applied to transfer time too.
  nlohmann::json estimate(kc::token_counts t, double flops_saved, bool exact_flops,
                          const nlohmann::json* tiers, double days, double scale) const {
    nlohmann::json e = api_cost_json(table, t, o.offpeak_share);
    if (!self_hosted) return e;
    if (!exact_flops) flops_saved = 2.0 * cp.active_params * t.hit;  // linear term only
    const double gpu_s = kc::gpu_seconds(cp, flops_saved);
    const double saved_usd = gpu_s * kc::usd_per_gpu_second(cp);
    double tier_usd = 0, transfer_usd = 0;
    if (tiers != nullptr) {
      // A --tiers row's hierarchy, or an --offload row's engine tiers (priced rows carry
      // usd_per_month; an offload row has no load_time: its loads are not timed).
      if (const auto it = tiers->find("tiers"); it != tiers->end()) {
        for (const auto& row : *it) tier_usd += row.value("usd_per_month", 0.0);
      }
      if (const auto it = tiers->find("load_time"); it != tiers->end()) {
        transfer_usd = it->value("total_s", 0.0) * scale * kc::usd_per_gpu_second(cp);
      }
    }
    const double rent = tier_usd * days / 30.0;
    e["self_hosted"] = {
        {"model", o.model},
        {"gpu", o.gpu},
        {"usd_per_gpu_hour", o.gpu_hour},
        {"efficiency", o.efficiency},
        {"prefill_flops_saved", flops_saved},
        {"flops_exact", exact_flops},
        {"gpu_hours_saved", gpu_s / 3600},
        {"compute_usd_saved", saved_usd},
        {"tier_usd_per_month", tier_usd},
        {"days", days},
        {"tier_rent_usd", rent},
        {"transfer_usd", transfer_usd},
        {"net_usd", saved_usd - transfer_usd - rent},
        {"assumptions",
         {exact_flops ? "FLOPs saved computed per request (linear + attention by position)"
                      : "FLOPs saved = 2 x active params x hit tokens: the attention term is left "
                        "out (a lower bound); kvtk simulate output carries the exact figure",
          "GPU time at tflops x efficiency; USD at the GPU-hour price",
          "net = compute saved - transfer time the GPU waited - tier rent over the period "
          "(days; 0 when the trace has no times); SSD wear is reported by kvtk replay --tiers "
          "as a fraction of TBW, not priced"}}};
    return e;
  }

  nlohmann::json replay_estimates(const nlohmann::json& j, const nlohmann::json& trace,
                                  double span, double scale) const {
    const double out_tokens = trace.value("output_tokens", 0.0);
    nlohmann::json out;
    out["estimates"] = nlohmann::json::array();
    for (const auto& r : j["results"]) {
      const double th = r.at("token_hits").get<double>(), tr = r.at("token_refs").get<double>();
      const nlohmann::json* tiers = r.contains("tiers")     ? &r["tiers"]
                                    : r.contains("offload") ? &r["offload"]
                                                            : nullptr;
      nlohmann::json e = estimate({th * scale, (tr - th) * scale, out_tokens * scale}, 0, false,
                                  tiers, o.per_day ? 1.0 : span / 86400.0, scale);
      e["index"] = r["index"];
      e["policy"] = r["policy"];
      e["capacity_blocks"] = r["capacity_blocks"];
      out["estimates"].push_back(e);
    }
    return out;
  }

  nlohmann::json simulate_estimate(const nlohmann::json& r) const {
    const double th = r.at("token_hits").get<double>(), tr = r.at("token_refs").get<double>();
    const double span_sim = r.value("span_s", 0.0);
    const double s = o.per_day ? (span_sim > 0 ? 86400.0 / span_sim : 0.0) : 1.0;
    return estimate({th * s, (tr - th) * s, r.value("output_tokens", 0.0) * s},
                    r.value("prefill_flops_saved", 0.0) * s, true, nullptr,
                    o.per_day ? 1.0 : span_sim / 86400.0, s);
  }

  // kvtk mrc: the break-even capacity.
  nlohmann::json break_even(const nlohmann::json& j, const nlohmann::json& trace, double span) const {
    if (!self_hosted && o.usd_per_gb_month <= 0) {
      throw usage_error("break-even: give --usd-per-gb-month (and --model/--gpu for the "
                        "self-hosted value of a hit)");
    }
    const double token_refs = trace.at("token_refs").get<double>();
    const double bt = trace.at("block_tokens").get<double>();
    const double bytes_per_token =
        self_hosted ? static_cast<double>(des::model_presets().at(o.model).kv_bytes_per_token) : 0.0;
    if (bytes_per_token <= 0) throw usage_error("break-even: give --model and --gpu");
    const double days = span > 0 ? span / 86400.0 : 1.0;
    // Value of a hit token: the API's hit discount and, self-hosted, the GPU time saved.
    const double api_value = (table.miss - table.hit) / 1e6;
    const double gpu_value = kc::gpu_seconds(cp, 2.0 * cp.active_params) * kc::usd_per_gpu_second(cp);
    const double usd_per_block = bytes_per_token * bt / 1e9 * o.usd_per_gb_month * days / 30.0;
    std::vector<kc::curve_point> pts;
    for (const auto& row : j["curve"]) {
      pts.push_back({row.at("capacity_blocks").get<double>(),
                     row.at("token_hit_ratio").get<double>() * token_refs});
    }
    const double api_c = kc::break_even_capacity(pts, api_value, usd_per_block);
    const double gpu_c = kc::break_even_capacity(pts, gpu_value, usd_per_block);
    const double gb = bytes_per_token * bt / 1e9;
    return {{"pricing", std::string(table.name)},
            {"usd_per_gb_month", o.usd_per_gb_month},
            {"days", days},
            {"usd_per_hit_token", {{"api_discount", api_value}, {"gpu_time", gpu_value}}},
            {"break_even_capacity_blocks", {{"api_discount", api_c}, {"gpu_time", gpu_c}}},
            {"break_even_capacity_gb", {{"api_discount", api_c * gb}, {"gpu_time", gpu_c * gb}}},
            {"assumptions",
             {"break-even = the largest capacity on the curve at which the last step of capacity "
              "still paid for itself over the trace's span",
              "gpu_time values a hit token at 2 x active params FLOPs (attention left out)",
              "capacity priced at --usd-per-gb-month for the trace's span (1 day if unknown)"}}};
  }

  nlohmann::json from_result(const nlohmann::json& j, const std::string& name) const {
    if (!j.is_object() || (j.contains("trace") && !j["trace"].is_object())) {
      throw usage_error("--from: '" + name + "' is not a kvtk replay, simulate or mrc result");
    }
    const nlohmann::json trace = j.contains("trace") ? j["trace"] : nlohmann::json::object();
    // The time span: a replay or mrc result keeps it under "trace", a simulate result under
    // "result" (the simulated span, arrivals to the last completion).
    double span = trace.value("span_s", 0.0);
    if (!(span > 0) && j.contains("result") && j["result"].is_object()) {
      span = j["result"].value("span_s", 0.0);
    }
    const double scale = o.per_day ? (span > 0 ? 86400.0 / span : 0.0) : 1.0;
    if (o.per_day && !(span > 0)) {
      throw usage_error("--per-day: '" + name + "' has no time span (trace without times)");
    }
    if (o.usd_per_gb_month > 0 && !j.contains("curve")) {
      throw usage_error("--usd-per-gb-month prices the capacity of a kvtk mrc curve (break-even); "
                        "a tier's rent comes from its own price: --tiers "
                        "name:capacity:policy:USD_PER_GB_MONTH or usd_per_gb_month in "
                        "--tier-config");
    }
    if (j.contains("results") && (!j["results"].is_array() || j["results"].empty())) {
      throw usage_error("--from: '" + name + "' has no results to price");
    }
    if (j.contains("results")) return replay_estimates(j, trace, span, scale);
    if (j.contains("result")) return simulate_estimate(j["result"]);
    if (j.contains("curve")) return break_even(j, trace, span);
    throw usage_error("--from: '" + name + "' is not a kvtk replay, simulate or mrc result");
  }
};

}  // namespace

nlohmann::json to_json(const cost_options& o) {
  auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
  return {{"pricing", o.pricing},
          {"hit_tokens", opt(o.hit_tokens)},
          {"hit_ratio", opt(o.hit_ratio)},
          {"miss_tokens", opt(o.miss_tokens)},
          {"input_tokens", opt(o.input_tokens)},
          {"output_tokens", o.output_tokens},
          {"from", o.from},
          {"from_result", o.from_result},
          {"offpeak_share", o.offpeak_share},
          {"per_day", o.per_day},
          {"model", o.model},
          {"gpu", o.gpu},
          {"gpu_hour", o.gpu_hour},
          {"efficiency", o.efficiency},
          {"usd_per_gb_month", o.usd_per_gb_month}};
}

cost_options cost_options_from_json(const nlohmann::json& j) {
  cost_options o;
  detail::options_reader in(j, "cost options");
  in.get("pricing", o.pricing);
  in.get("hit_tokens", o.hit_tokens);
  in.get("hit_ratio", o.hit_ratio);
  in.get("miss_tokens", o.miss_tokens);
  in.get("input_tokens", o.input_tokens);
  in.get("output_tokens", o.output_tokens);
  in.get("from", o.from);
  in.get("offpeak_share", o.offpeak_share);
  in.get("per_day", o.per_day);
  in.get("model", o.model);
  in.get("gpu", o.gpu);
  in.get("gpu_hour", o.gpu_hour);
  in.get("efficiency", o.efficiency);
  in.get("usd_per_gb_month", o.usd_per_gb_month);
  in.get("from_result", o.from_result);
  in.finish();
  return o;
}

void validate(const cost_options& o) {
  std::vector<std::string> storage;
  (void)load_price_table(o.pricing, storage);
  const bool tokens = o.hit_tokens || o.hit_ratio || o.miss_tokens || o.input_tokens;
  if (tokens == has_result(o)) {
    throw usage_error("give either --hit-tokens with --miss-tokens or --input-tokens, "
                      "--hit-ratio with --input-tokens, or --from");
  }
  if (!o.from.empty() && !o.from_result.is_null()) {
    throw usage_error("give --from or a result, not both");
  }
  if (tokens) (void)counts_of(o);
  if (!(o.offpeak_share >= 0 && o.offpeak_share <= 1)) {
    throw usage_error("--offpeak-share must be in [0, 1]");
  }
  if (!(o.gpu_hour >= 0) || !(o.efficiency > 0 && o.efficiency <= 1) || !(o.usd_per_gb_month >= 0)) {
    throw usage_error("--gpu-hour >= 0, 0 < --efficiency <= 1, --usd-per-gb-month >= 0");
  }
  if (o.per_day && !has_result(o)) throw usage_error("--per-day needs --from");
  if (o.model.empty() != o.gpu.empty()) throw usage_error("--model and --gpu go together");
}

cost_result run(const cost_options& o) {
  validate(o);
  const pricer p(o);
  if (!has_result(o)) return {p.estimate(counts_of(o), 0, false, nullptr, 0.0, 1.0)};
  const std::string name = o.from.empty() ? "the result" : o.from;
  const nlohmann::json j = o.from.empty() ? o.from_result : read_json_file("--from", o.from);
  try {
    return {p.from_result(j, name)};
  } catch (const nlohmann::json::exception& e) {  // a field missing or of the wrong type
    throw std::runtime_error("--from: '" + name +
                             "' is not a complete kvtk replay, simulate or mrc result: " + e.what());
  }
}

nlohmann::json to_json(const cost_result& r) { return r.estimate; }

namespace {

std::string estimate_text(const nlohmann::json& e) {
  using detail::format;
  if (!e.contains("bill_usd")) return {};
  std::string s = format("pricing %s (%s), USD per 1M tokens hit %.4g / miss %.4g / output %.4g\n",
                         e["pricing"].get<std::string>().c_str(), e["valid"].get<std::string>().c_str(),
                         e["usd_per_m_tokens"]["hit"].get<double>(),
                         e["usd_per_m_tokens"]["miss"].get<double>(),
                         e["usd_per_m_tokens"]["output"].get<double>());
  s += format("  bill with cache    %16.2f USD\n  bill without cache %16.2f USD\n"
              "  saving             %16.2f USD (%.1f %%)\n  blended input price %15.4f USD/1M\n",
              e["bill_usd"].get<double>(), e["bill_without_cache_usd"].get<double>(),
              e["saving_usd"].get<double>(), 100 * e["saving_fraction"].get<double>(),
              e["blended_input_usd_per_m"].get<double>());
  if (e.contains("self_hosted")) {
    const auto& h = e["self_hosted"];
    s += format(
        "  self-hosted: %.4g GPU-hours saved = %.2f USD; transfer %.2f USD; tier rent %.2f USD "
        "over %.3g days; net %.2f USD\n",
        h["gpu_hours_saved"].get<double>(), h["compute_usd_saved"].get<double>(),
        h["transfer_usd"].get<double>(), h["tier_rent_usd"].get<double>(), h["days"].get<double>(),
        h["net_usd"].get<double>());
  }
  for (const auto& a : e["assumptions"]) s += format("  * %s\n", a.get<std::string>().c_str());
  return s;
}

}  // namespace

std::string to_text(const cost_result& r) {
  const auto& out = r.estimate;
  std::string s;
  if (out.contains("estimates")) {
    for (const auto& e : out["estimates"]) {
      s += detail::format("%s %s @ %llu blocks:\n", e["index"].get<std::string>().c_str(),
                          e["policy"].get<std::string>().c_str(),
                          e["capacity_blocks"].get<unsigned long long>());
      s += estimate_text(e);
    }
  } else if (out.contains("bill_usd")) {
    s = estimate_text(out);
  } else {
    s = out.dump(2) + "\n";
  }
  return s;
}

}  // namespace kvtk::sim
