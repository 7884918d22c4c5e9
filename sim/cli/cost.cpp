#include "cli/cost.hpp"

#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "api/cost.hpp"
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

// The command line of `kvtk cost` over the library call (api/cost.hpp).
int run_cost(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  po::options_description opts(
      "kvtk cost: what a cache hit ratio is worth. API view (a provider's bill with and without\n"
      "caching at a price table) and, with --model/--gpu/--gpu-hour, the self-hosted view\n"
      "(prefill GPU time and dollars saved; tier rent, wear and transfer time from a tiered\n"
      "replay; the net). Token counts come from flags or from kvtk replay / simulate JSON; a\n"
      "kvtk mrc JSON gives the break-even capacity.\nOptions");
  cost_options o;
  std::string json_out;
  opts.add_options()("help,h", "show this help")(
      "pricing", po::value(&o.pricing)->default_value("deepseek-v3.2"),
      "price table: deepseek-v3, deepseek-r1, deepseek-v3.1, deepseek-v3.2, or a .json file")(
      "hit-tokens", po::value<double>(), "input tokens served from cache (a whole number)")(
      "hit-ratio", po::value<double>(),
      "share of --input-tokens served from cache, in [0, 1] (instead of --hit-tokens)")(
      "miss-tokens", po::value<double>(), "input tokens computed")(
      "input-tokens", po::value<double>(), "all input tokens (instead of --miss-tokens)")(
      "output-tokens", po::value(&o.output_tokens)->default_value(0), "output tokens")(
      "from", po::value(&o.from), "a kvtk replay, simulate or mrc JSON result")(
      "offpeak-share", po::value(&o.offpeak_share)->default_value(0),
      "share of tokens in the price table's off-peak window (0..1)")(
      "per-day", "scale counts to one day using the trace's time span (needs --from)")(
      "model", po::value(&o.model), "self-hosted view: model preset")(
      "gpu", po::value(&o.gpu), "self-hosted view: GPU preset (h100 h200 h800 a800)")(
      "gpu-hour", po::value(&o.gpu_hour)->default_value(2.0), "USD per GPU-hour")(
      "efficiency", po::value(&o.efficiency)->default_value(0.5), "achieved fraction of peak FLOP/s")(
      "usd-per-gb-month", po::value(&o.usd_per_gb_month)->default_value(0),
      "break-even (mrc input): price of cache capacity, USD per GB-month")(
      "json", po::value(&json_out), "write JSON to a file, or - for stdout");
  po::variables_map vm;
  if (const int rc = cli::parse_command("cost", opts, args, vm, [&] {
        auto given = [&](const char* name) -> std::optional<double> {
          if (!vm.count(name)) return std::nullopt;
          return vm[name].as<double>();
        };
        o.hit_tokens = given("hit-tokens");
        o.hit_ratio = given("hit-ratio");
        o.miss_tokens = given("miss-tokens");
        o.input_tokens = given("input-tokens");
        o.per_day = vm.count("per-day") != 0;
        validate(o);
      });
      rc >= 0) {
    return rc;
  }
  const cost_result r = run(o);
  try {
    if (vm.count("json")) {
      cli::write_to(json_out, to_json(r).dump(2) + "\n");
      return 0;
    }
  } catch (const std::exception& e) {
    std::cerr << "kvtk cost: " << e.what() << "\n";
    return 1;
  }
  std::fputs(to_text(r).c_str(), stdout);
  return 0;
}

}  // namespace kvtk::sim
