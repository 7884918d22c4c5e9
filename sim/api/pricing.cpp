// sim/api/pricing.cpp — price tables from presets or JSON files, and the API-bill JSON object.
#include "api/pricing.hpp"

#include <sstream>

#include "api/trace_options.hpp"
#include "api/usage_error.hpp"

namespace kvtk::sim {
namespace {

namespace kc = kvtk::cost;

// The key's "HH:MM" (default 00:00); anything else, a string or not, is refused by name.
int minutes_of(const nlohmann::json& j, const std::string& what) {
  if (j.contains(what) && !j[what].is_string()) {
    throw usage_error("--pricing: '" + what + "' must be a string \"HH:MM\"");
  }
  const std::string hhmm = j.contains(what) ? j[what].get<std::string>() : "00:00";
  int h = 0, m = 0;
  char colon = 0;
  std::istringstream in(hhmm);
  if (!(in >> h >> colon >> m) || colon != ':' || h < 0 || h > 23 || m < 0 || m > 59) {
    throw usage_error("--pricing: " + what + ": '" + hhmm + "' is not HH:MM");
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
  const nlohmann::json j = read_json_file("--pricing", name_or_file);
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
    p.offpeak_start_min = minutes_of(j, "offpeak_start_utc");
    p.offpeak_end_min = minutes_of(j, "offpeak_end_utc");
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

}  // namespace kvtk::sim
