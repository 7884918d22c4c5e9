#include "cli/cost.hpp"

#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "cli/common.hpp"
#include "des/profiles.hpp"
#include "kvtk/cost/self_hosted.hpp"

namespace kvtk::sim {
namespace {

using cli::usage_error;
namespace kc = kvtk::cost;

int minutes_of(const std::string& hhmm, const std::string& what) {
  int h = 0, m = 0;
  char colon = 0;
  std::istringstream in(hhmm);
  if (!(in >> h >> colon >> m) || colon != ':' || h < 0 || h > 23 || m < 0 || m > 59) {
    throw usage_error(what + ": '" + hhmm + "' is not HH:MM");
  }
  return h * 60 + m;
}

kc::compute_profile compute_of(const std::string& model, const std::string& gpu, double usd_per_hour,
                               double efficiency) {
  const auto m = des::model_presets().find(model);
  if (m == des::model_presets().end()) throw usage_error("--model: unknown model '" + model + "'");
  const auto g = des::gpu_presets().find(gpu);
  if (g == des::gpu_presets().end()) throw usage_error("--gpu: unknown gpu '" + gpu + "'");
  kc::compute_profile c;
  c.active_params = m->second.active_params;
  c.layers = m->second.layers;
  c.hidden = m->second.hidden;
  c.tflops = g->second.tflops;
  c.efficiency = efficiency;
  c.usd_per_gpu_hour = usd_per_hour;
  return c;
}

}  // namespace

kc::price_table load_price_table(const std::string& name_or_file,
                                 std::vector<std::string>& storage) {
  if (auto p = kc::find_price_table(name_or_file)) return *p;
  if (name_or_file.size() < 5 || name_or_file.compare(name_or_file.size() - 5, 5, ".json") != 0) {
    std::string known;
    for (const auto& p : kc::price_presets) known += " " + std::string(p.name);
    throw usage_error("--pricing: unknown price table '" + name_or_file + "' (known:" + known +
                      ", or a .json file)");
  }
  const nlohmann::json j = cli::read_json_file("--pricing", name_or_file);
  kc::price_table p;
  storage.reserve(storage.size() + 4);
  auto str = [&](const char* key) -> std::string_view {
    storage.push_back(j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "");
    return storage.back();
  };
  auto price = [&](const char* key) {
    if (!j.contains(key) || !j[key].is_number() || !(j[key].get<double>() >= 0)) {
      throw usage_error("--pricing: '" + name_or_file + "' needs '" + key +
                        "' as a non-negative number (USD per 1M tokens)");
    }
    return j[key].get<double>();
  };
  p.hit = price("hit");
  p.miss = price("miss");
  p.output = price("output");
  if (p.hit > p.miss) throw usage_error("--pricing: a cache hit costs more than a miss");
  p.name = str("name");
  p.valid_from = str("valid_from");
  p.valid_to = str("valid_to");
  p.source = str("source");
  if (j.contains("offpeak_discount")) {
    p.offpeak_discount = price("offpeak_discount");
    if (p.offpeak_discount > 1) throw usage_error("--pricing: offpeak_discount must be <= 1");
    p.offpeak_start_min = minutes_of(j.value("offpeak_start_utc", "00:00"), "offpeak_start_utc");
    p.offpeak_end_min = minutes_of(j.value("offpeak_end_utc", "00:00"), "offpeak_end_utc");
  }
  return p;
}

nlohmann::json api_cost_json(const kc::price_table& p, const kc::token_counts& t,
                             double offpeak_share) {
  const kc::api_bill b = kc::bill(p, t, offpeak_share);
  return {{"pricing", std::string(p.name)},
          {"valid", std::string(p.valid_from) + " to " +
                        (p.valid_to.empty() ? std::string("now") : std::string(p.valid_to))},
          {"usd_per_m_tokens", {{"hit", p.hit}, {"miss", p.miss}, {"output", p.output}}},
          {"tokens", {{"hit", t.hit}, {"miss", t.miss}, {"output", t.output}}},
          {"offpeak_share", offpeak_share},
          {"bill_usd", b.with_cache_usd},
          {"bill_without_cache_usd", b.without_cache_usd},
          {"saving_usd", b.saving_usd},
          {"saving_fraction", b.saving_fraction},
          {"blended_input_usd_per_m", b.blended_input_usd_per_m},
          {"assumptions",
           {"input tokens of a hit are billed at the hit price, all others at the miss price",
            "without cache = every input token at the miss price; output tokens unchanged",
            "off-peak discount applies to off-peak_share of all tokens"}}};
}

int run_cost(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  po::options_description opts(
      "kvtk cost: what a cache hit ratio is worth. API view (a provider's bill with and without\n"
      "caching at a price table) and, with --model/--gpu/--gpu-hour, the self-hosted view\n"
      "(prefill GPU time and dollars saved; tier rent, wear and transfer time from a tiered\n"
      "replay; the net). Token counts come from flags or from kvtk replay / simulate JSON; a\n"
      "kvtk mrc JSON gives the break-even capacity.\nOptions");
  double hit = -1, hit_ratio = -1, miss = -1, input = -1, output = 0, offpeak = 0, gpu_hour = 2.0, efficiency = 0.5;
  double usd_gb_month = 0;
  std::string pricing, from, model, gpu, json_out;
  opts.add_options()("help,h", "show this help")(
      "pricing", po::value(&pricing)->default_value("deepseek-v3.2"),
      "price table: deepseek-v3, deepseek-r1, deepseek-v3.1, deepseek-v3.2, or a .json file")(
      "hit-tokens", po::value(&hit), "input tokens served from cache (a whole number)")(
      "hit-ratio", po::value(&hit_ratio),
      "share of --input-tokens served from cache, in [0, 1] (instead of --hit-tokens)")(
      "miss-tokens", po::value(&miss), "input tokens computed")(
      "input-tokens", po::value(&input), "all input tokens (instead of --miss-tokens)")(
      "output-tokens", po::value(&output)->default_value(0), "output tokens")(
      "from", po::value(&from), "a kvtk replay, simulate or mrc JSON result")(
      "offpeak-share", po::value(&offpeak)->default_value(0),
      "share of tokens in the price table's off-peak window (0..1)")(
      "per-day", "scale counts to one day using the trace's time span (needs --from)")(
      "model", po::value(&model), "self-hosted view: model preset")(
      "gpu", po::value(&gpu), "self-hosted view: GPU preset (h100 h200 h800 a800)")(
      "gpu-hour", po::value(&gpu_hour)->default_value(2.0), "USD per GPU-hour")(
      "efficiency", po::value(&efficiency)->default_value(0.5), "achieved fraction of peak FLOP/s")(
      "usd-per-gb-month", po::value(&usd_gb_month)->default_value(0),
      "break-even (mrc input): price of cache capacity, USD per GB-month")(
      "json", po::value(&json_out), "write JSON to a file, or - for stdout");
  po::variables_map vm;
  kc::price_table table;
  std::vector<std::string> storage;
  if (const int rc = cli::parse_command("cost", opts, args, vm, [&] {
        table = load_price_table(pricing, storage);
        const bool tokens = vm.count("hit-tokens") || vm.count("hit-ratio") ||
                            vm.count("miss-tokens") || vm.count("input-tokens");
        if (tokens == (vm.count("from") > 0)) {
          throw usage_error("give either --hit-tokens with --miss-tokens or --input-tokens, "
                            "--hit-ratio with --input-tokens, or --from");
        }
        if (tokens && vm.count("hit-ratio")) {
          if (vm.count("hit-tokens") || vm.count("miss-tokens") || !vm.count("input-tokens")) {
            throw usage_error("--hit-ratio goes with --input-tokens alone (not --hit-tokens or "
                              "--miss-tokens)");
          }
          if (!(hit_ratio >= 0 && hit_ratio <= 1)) {
            throw usage_error("--hit-ratio: must be in [0, 1], got " + std::to_string(hit_ratio));
          }
          if (!(input >= 0) || !(input <= 1e18)) {
            throw usage_error("--input-tokens: token counts must be in [0, 1e18]");
          }
          hit = std::round(hit_ratio * input);
        }
        if (tokens) {
          if (!vm.count("hit-tokens") && !vm.count("hit-ratio")) {
            throw usage_error("give --hit-tokens (or --hit-ratio) and exactly one of "
                              "--miss-tokens, --input-tokens");
          }
          if (vm.count("miss-tokens") == vm.count("input-tokens")) {
            throw usage_error("give --hit-tokens and exactly one of --miss-tokens, --input-tokens");
          }
          const bool miss_given = vm.count("miss-tokens") > 0;
          const std::pair<const char*, double> counts[] = {
              {"--hit-tokens", hit},
              {miss_given ? "--miss-tokens" : "--input-tokens", miss_given ? miss : input},
              {"--output-tokens", output}};
          for (const auto& [option, v] : counts) {
            // 1e18 tokens is a billion times a large provider's daily volume; beyond it the
            // dollar figures would overflow to inf.
            if (!(v >= 0) || !(v <= 1e18)) {
              char got[32];
              std::snprintf(got, sizeof got, "%g", v);
              throw usage_error(std::string(option) + ": token counts must be in [0, 1e18], got " + got);
            }
            if (std::floor(v) != v) {  // "--hit-tokens 0.56" meant a ratio, not 0.56 tokens
              char got[32];
              std::snprintf(got, sizeof got, "%g", v);
              throw usage_error(std::string(option) + ": " + got +
                                " is not a whole number of tokens (for a share of the input, "
                                "give --hit-ratio R with --input-tokens N)");
            }
          }
          if (vm.count("input-tokens")) {
            if (hit > input) {
              throw usage_error("--hit-tokens (" + std::to_string(hit) +
                                ") exceeds --input-tokens (" + std::to_string(input) + ")");
            }
            miss = input - hit;
          }
        }
        if (!(offpeak >= 0 && offpeak <= 1)) throw usage_error("--offpeak-share must be in [0, 1]");
        if (!(gpu_hour >= 0) || !(efficiency > 0 && efficiency <= 1) || !(usd_gb_month >= 0)) {
          throw usage_error("--gpu-hour >= 0, 0 < --efficiency <= 1, --usd-per-gb-month >= 0");
        }
        if (vm.count("per-day") && !vm.count("from")) throw usage_error("--per-day needs --from");
        if (vm.count("model") != vm.count("gpu")) throw usage_error("--model and --gpu go together");
      });
      rc >= 0) {
    return rc;
  }
  const bool self_hosted = vm.count("model") != 0;
  kc::compute_profile cp;
  if (self_hosted) cp = compute_of(model, gpu, gpu_hour, efficiency);
  nlohmann::json out;
  std::vector<std::string> assumptions;
  // One estimate: API bill, plus the self-hosted view when asked.
  // `days`: the period the counts cover (tier rent is charged for it; 0 = unknown, not charged);
  // `scale`: the factor applied to the counts (--per-day), applied to transfer time too.
  auto estimate = [&](kc::token_counts t, double flops_saved, bool exact_flops,
                      const nlohmann::json* tiers, double days, double scale) {
    nlohmann::json e = api_cost_json(table, t, offpeak);
    if (!self_hosted) return e;
    if (!exact_flops) flops_saved = 2.0 * cp.active_params * t.hit;  // linear term only
    const double gpu_s = kc::gpu_seconds(cp, flops_saved);
    const double saved_usd = gpu_s * kc::usd_per_gpu_second(cp);
    double tier_usd = 0, transfer_usd = 0;
    if (tiers != nullptr) {
      for (const auto& row : (*tiers)["tiers"]) tier_usd += row.value("usd_per_month", 0.0);
      transfer_usd =
          (*tiers)["load_time"].value("total_s", 0.0) * scale * kc::usd_per_gpu_second(cp);
    }
    const double rent = tier_usd * days / 30.0;
    e["self_hosted"] = {
        {"model", model},
        {"gpu", gpu},
        {"usd_per_gpu_hour", gpu_hour},
        {"efficiency", efficiency},
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
  };
  try {
    if (!vm.count("from")) {
      out = estimate({hit, miss, output}, 0, false, nullptr, 0.0, 1.0);
    } else {
      const nlohmann::json j = cli::read_json_file("--from", from);
      if (!j.is_object() || (j.contains("trace") && !j["trace"].is_object())) {
        throw usage_error("--from: '" + from + "' is not a kvtk replay, simulate or mrc result");
      }
      const nlohmann::json trace =
          j.contains("trace") ? j["trace"] : nlohmann::json::object();
      // The time span: a replay or mrc result keeps it under "trace", a simulate result under
      // "result" (the simulated span, arrivals to the last completion).
      double span = trace.value("span_s", 0.0);
      if (!(span > 0) && j.contains("result") && j["result"].is_object()) {
        span = j["result"].value("span_s", 0.0);
      }
      const double scale = vm.count("per-day") ? (span > 0 ? 86400.0 / span : 0.0) : 1.0;
      if (vm.count("per-day") && !(span > 0)) {
        throw usage_error("--per-day: '" + from + "' has no time span (trace without times)");
      }
      if (usd_gb_month > 0 && !j.contains("curve")) {
        throw usage_error("--usd-per-gb-month prices the capacity of a kvtk mrc curve (break-even); "
                          "a tier's rent comes from its own price: --tiers "
                          "name:capacity:policy:USD_PER_GB_MONTH or usd_per_gb_month in "
                          "--tier-config");
      }
      if (j.contains("results") && (!j["results"].is_array() || j["results"].empty())) {
        throw usage_error("--from: '" + from + "' has no results to price");
      }
      if (j.contains("results")) {  // kvtk replay
        const double out_tokens = trace.value("output_tokens", 0.0);
        out["estimates"] = nlohmann::json::array();
        for (const auto& r : j["results"]) {
          const double th = r.at("token_hits").get<double>(), tr = r.at("token_refs").get<double>();
          nlohmann::json e = estimate({th * scale, (tr - th) * scale, out_tokens * scale}, 0,
                                      false, r.contains("tiers") ? &r["tiers"] : nullptr,
                                      vm.count("per-day") ? 1.0 : span / 86400.0, scale);
          e["index"] = r["index"];
          e["policy"] = r["policy"];
          e["capacity_blocks"] = r["capacity_blocks"];
          out["estimates"].push_back(e);
        }
      } else if (j.contains("result")) {  // kvtk simulate
        const auto& r = j["result"];
        const double th = r.at("token_hits").get<double>(), tr = r.at("token_refs").get<double>();
        const double span_sim = r.value("span_s", 0.0);
        const double s = vm.count("per-day") ? (span_sim > 0 ? 86400.0 / span_sim : 0.0) : 1.0;
        out = estimate({th * s, (tr - th) * s, r.value("output_tokens", 0.0) * s},
                       r.value("prefill_flops_saved", 0.0) * s, true, nullptr,
                       vm.count("per-day") ? 1.0 : span_sim / 86400.0, s);
      } else if (j.contains("curve")) {  // kvtk mrc: break-even capacity
        if (!self_hosted && usd_gb_month <= 0) {
          throw usage_error("break-even: give --usd-per-gb-month (and --model/--gpu for the "
                            "self-hosted value of a hit)");
        }
        const double token_refs = trace.at("token_refs").get<double>();
        const double bt = trace.at("block_tokens").get<double>();
        const std::string m = self_hosted ? model : "";
        const double bytes_per_token =
            self_hosted ? static_cast<double>(des::model_presets().at(model).kv_bytes_per_token)
                        : 0.0;
        if (bytes_per_token <= 0) throw usage_error("break-even: give --model and --gpu");
        const double days = span > 0 ? span / 86400.0 : 1.0;
        // Value of a hit token: the API's hit discount and, self-hosted, the GPU time saved.
        const double api_value = (table.miss - table.hit) / 1e6;
        const double gpu_value =
            kc::gpu_seconds(cp, 2.0 * cp.active_params) * kc::usd_per_gpu_second(cp);
        const double usd_per_block = bytes_per_token * bt / 1e9 * usd_gb_month * days / 30.0;
        std::vector<kc::curve_point> pts;
        for (const auto& row : j["curve"]) {
          pts.push_back({row.at("capacity_blocks").get<double>(),
                         row.at("token_hit_ratio").get<double>() * token_refs});
        }
        const double api_c = kc::break_even_capacity(pts, api_value, usd_per_block);
        const double gpu_c = kc::break_even_capacity(pts, gpu_value, usd_per_block);
        const double gb = bytes_per_token * bt / 1e9;
        out = {{"pricing", std::string(table.name)},
               {"usd_per_gb_month", usd_gb_month},
               {"days", days},
               {"usd_per_hit_token", {{"api_discount", api_value}, {"gpu_time", gpu_value}}},
               {"break_even_capacity_blocks", {{"api_discount", api_c}, {"gpu_time", gpu_c}}},
               {"break_even_capacity_gb", {{"api_discount", api_c * gb}, {"gpu_time", gpu_c * gb}}},
               {"assumptions",
                {"break-even = the largest capacity on the curve at which the last step of "
                 "capacity still paid for itself over the trace's span",
                 "gpu_time values a hit token at 2 x active params FLOPs (attention left out)",
                 "capacity priced at --usd-per-gb-month for the trace's span (1 day if unknown)"}}};
      } else {
        throw usage_error("--from: '" + from + "' is not a kvtk replay, simulate or mrc result");
      }
    }
  } catch (const usage_error& e) {
    std::cerr << "kvtk cost: " << e.what() << "\n";
    return 2;
  } catch (const nlohmann::json::exception& e) {  // a field missing or of the wrong type
    std::cerr << "kvtk cost: --from: '" << from
              << "' is not a complete kvtk replay, simulate or mrc result: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "kvtk cost: " << e.what() << "\n";
    return 1;
  }
  try {
    if (vm.count("json")) {
      cli::write_to(json_out, out.dump(2) + "\n");
      return 0;
    }
  } catch (const std::exception& e) {
    std::cerr << "kvtk cost: " << e.what() << "\n";
    return 1;
  }
  auto show = [&](const nlohmann::json& e) {
    if (!e.contains("bill_usd")) return;
    std::printf("pricing %s (%s), USD per 1M tokens hit %.4g / miss %.4g / output %.4g\n",
                e["pricing"].get<std::string>().c_str(), e["valid"].get<std::string>().c_str(),
                e["usd_per_m_tokens"]["hit"].get<double>(), e["usd_per_m_tokens"]["miss"].get<double>(),
                e["usd_per_m_tokens"]["output"].get<double>());
    std::printf("  bill with cache    %16.2f USD\n  bill without cache %16.2f USD\n"
                "  saving             %16.2f USD (%.1f %%)\n  blended input price %15.4f USD/1M\n",
                e["bill_usd"].get<double>(), e["bill_without_cache_usd"].get<double>(),
                e["saving_usd"].get<double>(), 100 * e["saving_fraction"].get<double>(),
                e["blended_input_usd_per_m"].get<double>());
    if (e.contains("self_hosted")) {
      const auto& s = e["self_hosted"];
      std::printf(
          "  self-hosted: %.4g GPU-hours saved = %.2f USD; transfer %.2f USD; tier rent %.2f USD "
          "over %.3g days; net %.2f USD\n",
          s["gpu_hours_saved"].get<double>(), s["compute_usd_saved"].get<double>(),
          s["transfer_usd"].get<double>(), s["tier_rent_usd"].get<double>(),
          s["days"].get<double>(), s["net_usd"].get<double>());
    }
    for (const auto& a : e["assumptions"]) std::printf("  * %s\n", a.get<std::string>().c_str());
  };
  if (out.contains("estimates")) {
    for (const auto& e : out["estimates"]) {
      std::printf("%s %s @ %llu blocks:\n", e["index"].get<std::string>().c_str(),
                  e["policy"].get<std::string>().c_str(),
                  e["capacity_blocks"].get<unsigned long long>());
      show(e);
    }
  } else if (out.contains("bill_usd")) {
    show(out);
  } else {
    std::printf("%s\n", out.dump(2).c_str());
  }
  return 0;
}

}  // namespace kvtk::sim
