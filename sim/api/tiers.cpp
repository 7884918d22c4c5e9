#include "api/tiers.hpp"
#include "util/memory_budget.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "api/index_runs.hpp"
#include "api/trace_options.hpp"

namespace kvtk::sim {
namespace {

using kvtk::tier::admission;
using kvtk::tier::hierarchy_config;
using kvtk::tier::inclusion;
using kvtk::tier::tier_spec;
using kvtk::tier::write_policy;

double number(const std::string& text, const std::string& what) {
  std::size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos != text.size() || !std::isfinite(v) || v < 0) {
    throw usage_error(what + ": '" + text + "' is not a non-negative number");
  }
  return v;
}

write_policy parse_write(const std::string& text) {
  write_policy w;
  const auto parts = split(text, ':');
  if (parts[0] == "write-back" && parts.size() == 1) {
    w.kind = write_policy::write_back;
  } else if (parts[0] == "write-through" && parts.size() == 1) {
    w.kind = write_policy::write_through;
  } else if (parts[0] == "write-through-selective" && parts.size() <= 2) {
    w.kind = write_policy::write_through_selective;
    if (parts.size() == 2) {
      const double n = number(parts[1], "--write-policy");
      if (n < 1 || n != std::floor(n) || n > 1e9) {
        throw usage_error("--write-policy: write-through-selective:N needs a whole N >= 1");
      }
      w.selective_hits = static_cast<std::uint32_t>(n);
    }
  } else {
    throw usage_error("--write-policy: '" + text +
                      "' (use write-back, write-through or write-through-selective[:N])");
  }
  return w;
}

admission parse_admission(const std::string& text) {
  admission a;
  const auto parts = split(text, ':');
  const std::string& k = parts[0];
  auto arg = [&](std::size_t i, double fallback) {
    return parts.size() > i ? number(parts[i], "--admission") : fallback;
  };
  if (k == "always" && parts.size() == 1) {
    a.kind = admission::always;
  } else if ((k == "frequency" || k == "tinylfu") && parts.size() <= 2) {
    a.kind = k == "frequency" ? admission::frequency : admission::tinylfu;
    a.threshold = arg(1, 2);
  } else if (k == "decay" && parts.size() <= 3) {
    a.kind = admission::decaying;
    a.half_life_requests = arg(1, 1000);
    a.threshold = arg(2, 2);
    if (!(a.half_life_requests > 0)) throw usage_error("--admission: decay half-life must be > 0");
  } else {
    throw usage_error("--admission: '" + text +
                      "' (use always, frequency[:N], tinylfu[:N] or decay[:HALF_LIFE[:N]])");
  }
  return a;
}

inclusion parse_inclusion(const std::string& text) {
  if (text == "exclusive") return inclusion::exclusive;
  if (text == "inclusive") return inclusion::inclusive;
  throw usage_error("inclusion: '" + text + "' (use exclusive or inclusive)");
}

std::uint64_t block_bytes_of(std::uint32_t block_tokens, std::uint64_t bytes_per_token) {
  return bytes_per_token * block_tokens;
}

// Validates by building the hierarchy once (its constructor names the tier and the problem):
// a tier_hierarchy, with a radix top tier a radix_tier_hierarchy of the top tier's leaf order,
// with an engine top an engine_tier_hierarchy of that engine's GPU cache.
void check(const hierarchy_config& cfg, const std::string& where, const std::string& top) {
  try {
    // A small probe: the checks (policies, inclusion order, figures) do not depend on the
    // capacities' size, and capping each at 64 keeps their order.
    auto small = cfg;
    for (auto& t : small.tiers) t.capacity_blocks = std::min<std::uint64_t>(t.capacity_blocks, 64);
    for (const auto& t : cfg.tiers) {
      if (t.capacity_blocks == 0 || t.capacity_blocks >= (1ull << 31)) {
        throw std::invalid_argument("tier " + t.name + ": capacity must be in [1, 2^31) blocks");
      }
    }
    if (top == "radix") {
      kvtk::prefix::visit_leaf_policy(cfg.tiers[0].policy, [&]<class L>() {
        index_runs::check_radix_tiers<L>(small);
      });
    } else if (top == "vllm" || top == "sglang") {
      index_runs::check_engine_tiers(top, small);
    } else {
      kvtk::tier::tier_hierarchy<> probe(small);
    }
  } catch (const std::invalid_argument& e) {
    const std::string note = top == "radix" ? " (a radix top tier; --tier-top flat for a flat one)"
                             : top == "flat" ? ""
                                             : " (the " + top + " engine's GPU cache on top)";
    throw usage_error(where + note + ": " + e.what());
  }
}

}  // namespace

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);) out.push_back(item);
  if (!s.empty() && s.back() == sep) out.emplace_back();
  return out;
}

double parse_usd_per_gb_month(const std::string& where, const std::string& text) {
  std::size_t used = 0;
  double price = -1;
  try {
    price = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !std::isfinite(price) || price < 0 || price > 1e6) {
    throw usage_error(where + ": the price '" + text +
                      "' is not a number of USD per GB-month in [0, 1e6]");
  }
  return price;
}

void apply_tier_defaults(tier_spec& t, std::uint64_t block_bytes) {
  struct defaults {
    const char* name;
    double read, write, latency, dwpd;
  };
  // Planning figures (docs/tiers.md "Command line"): PCIe Gen5 pinned copies, one NVMe drive, 200 Gb/s
  // RDMA. Calibrate them with the CUDA backends on the target machine.
  static constexpr defaults table[] = {{"dram", 50e9, 50e9, 10e-6, 0},
                                       {"ssd", 7e9, 5e9, 100e-6, 1},
                                       {"remote", 25e9, 25e9, 50e-6, 0}};
  for (const auto& d : table) {
    if (t.name != d.name) continue;
    if (t.read_bytes_per_s == 0) t.read_bytes_per_s = d.read;
    if (t.write_bytes_per_s == 0) t.write_bytes_per_s = d.write;
    if (t.latency_s == 0) t.latency_s = d.latency;
    if (t.endurance_tbw == 0 && d.dwpd > 0 && block_bytes > 0) {
      // Rated TBW of a drive of this size at d.dwpd drive writes per day over 5 years.
      t.endurance_tbw = d.dwpd * static_cast<double>(t.capacity_blocks) *
                        static_cast<double>(block_bytes) * 365.0 * 5.0 / 1e12;
    }
  }
}

hierarchy_config parse_tier_spec(const std::string& spec, const tier_flags& flags,
                                 std::uint32_t block_tokens, std::uint64_t bytes_per_token,
                                 const std::string& top) {
  hierarchy_config cfg;
  cfg.mode = parse_inclusion(flags.inclusion);
  cfg.write = parse_write(flags.write_policy);
  cfg.block_bytes = block_bytes_of(block_tokens, bytes_per_token);
  const admission admit = parse_admission(flags.admission);
  for (const std::string& item : split(spec, ',')) {
    const auto f = split(item, ':');
    if (f.size() < 3 || f.size() > 4 || f[0].empty() || f[1].empty() || f[2].empty()) {
      throw usage_error("--tiers: '" + item + "' is not name:capacity:policy[:usd_per_gb_month]");
    }
    tier_spec t;
    t.name = f[0];
    t.capacity_blocks = parse_capacity(f[1], block_tokens, bytes_per_token);
    t.policy = f[2];
    t.admit = admit;
    apply_tier_defaults(t, cfg.block_bytes);
    if (f.size() == 4) {  // the tier's rent, USD per GB-month (priced in the per-tier report)
      t.usd_per_gb_month = parse_usd_per_gb_month("--tiers: '" + item + "'", f[3]);
    }
    cfg.tiers.push_back(t);
  }
  check(cfg, "--tiers '" + spec + "'", top);
  return cfg;
}

hierarchy_config load_tier_config(const std::string& path, std::uint32_t block_tokens,
                                  std::uint64_t bytes_per_token, const std::string& top) {
  const nlohmann::json j = read_json_file("--tier-config", path);
  const std::string where = "--tier-config '" + path + "'";
  auto text = [&](const nlohmann::json& o, const char* key, const std::string& fallback) {
    if (!o.contains(key)) return fallback;
    if (!o[key].is_string()) throw usage_error(where + ": '" + key + "' must be a string");
    return o[key].get<std::string>();
  };
  auto num = [&](const nlohmann::json& o, const char* key) {
    if (!o.contains(key)) return 0.0;
    if (!o[key].is_number() || !(o[key].get<double>() >= 0)) {
      throw usage_error(where + ": '" + key + "' must be a non-negative number");
    }
    return o[key].get<double>();
  };
  if (!j.is_object() || !j.contains("tiers") || !j["tiers"].is_array() || j["tiers"].empty()) {
    throw usage_error(where + ": needs an object with a non-empty 'tiers' array");
  }
  tier_flags flags;
  flags.inclusion = text(j, "inclusion", flags.inclusion);
  flags.write_policy = text(j, "write_policy", flags.write_policy);
  flags.admission = text(j, "admission", flags.admission);
  hierarchy_config cfg;
  cfg.mode = parse_inclusion(flags.inclusion);
  cfg.write = parse_write(flags.write_policy);
  cfg.block_bytes = block_bytes_of(block_tokens, bytes_per_token);
  for (const auto& o : j["tiers"]) {
    if (!o.is_object()) throw usage_error(where + ": every tier must be an object");
    tier_spec t;
    t.name = text(o, "name", "");
    if (t.name.empty()) throw usage_error(where + ": a tier lacks 'name'");
    if (!o.contains("capacity")) throw usage_error(where + ": tier " + t.name + " lacks 'capacity'");
    const std::string cap = o["capacity"].is_string() ? o["capacity"].get<std::string>()
                                                      : o["capacity"].dump();
    t.capacity_blocks = parse_capacity(cap, block_tokens, bytes_per_token);
    t.policy = text(o, "policy", "lru");
    t.read_bytes_per_s = num(o, "read_gb_per_s") * 1e9;
    t.write_bytes_per_s = num(o, "write_gb_per_s") * 1e9;
    t.latency_s = num(o, "latency_us") * 1e-6;
    t.read_per_block_s = num(o, "read_per_block_us") * 1e-6;
    t.write_per_block_s = num(o, "write_per_block_us") * 1e-6;
    t.write_latency_s = num(o, "write_latency_us") * 1e-6;
    t.usd_per_gb_month = num(o, "usd_per_gb_month");
    t.endurance_tbw = num(o, "endurance_tbw");
    if (o.contains("dwpd") && cfg.block_bytes > 0) {
      t.endurance_tbw = num(o, "dwpd") * static_cast<double>(t.capacity_blocks) *
                        static_cast<double>(cfg.block_bytes) * 365.0 * 5.0 / 1e12;
    }
    t.admit = parse_admission(text(o, "admission", flags.admission));
    apply_tier_defaults(t, cfg.block_bytes);
    cfg.tiers.push_back(t);
  }
  check(cfg, where, top);
  return cfg;
}

std::string describe(const hierarchy_config& cfg) {
  std::string out;
  for (const auto& t : cfg.tiers) {
    if (!out.empty()) out += ">";
    out += t.name + ":" + t.policy + ":" + std::to_string(t.capacity_blocks);
  }
  return out;
}

kvtk::tier::hierarchy_config allocation_config(kvtk::tier::hierarchy_config cfg,
                                               std::uint64_t refs) {
  double entries = 0;
  for (auto& t : cfg.tiers) {
    t.capacity_blocks = std::min(t.capacity_blocks, std::max<std::uint64_t>(refs, 1));
    entries += static_cast<double>(t.capacity_blocks);
  }
  check_memory("--tiers " + describe(cfg) + " (capacities capped at the trace's block references)",
               entries * cache_entry_bytes);
  return cfg;
}

nlohmann::json tier_report(const tier_state& h, const kvtk::tier::hierarchy_config& cfg,
                           const kvtk::prefix::prefix_counts& c, double trace_days) {
  const double bb = static_cast<double>(cfg.block_bytes);
  nlohmann::json tiers = nlohmann::json::array();
  std::uint64_t cumulative = 0;
  for (std::size_t t = 0; t < h.counters.size(); ++t) {
    const auto& k = h.counters[t];
    const auto& s = cfg.tiers[t];
    cumulative += k.hits;
    nlohmann::json row = {
        {"name", s.name},
        {"policy", s.policy},
        {"capacity_blocks", s.capacity_blocks},
        {"resident_blocks", h.resident[t]},
        {"hits", k.hits},
        {"hit_tokens", k.hit_tokens},
        {"cumulative_block_hit_ratio",
         c.block_refs ? static_cast<double>(cumulative) / static_cast<double>(c.block_refs) : 0.0},
        {"promotions", k.promotions},
        {"writes", k.writes},
        {"evictions", k.evictions},
        {"demotions", k.demotions},
        {"drops", k.drops},
        {"kept_copies", h.kept_copies[t]},
        {"admission_rejects", k.admission_rejects},
        {"no_room_rejects", k.no_room_rejects},
        {"superseded", k.superseded},
        {"bytes_read_up", static_cast<double>(k.promotions) * bb},
        {"bytes_written", static_cast<double>(k.writes) * bb}};
    if (t > 0) {
      row["link_from_above"] = {{"blocks_up", h.links[t].blocks_up},
                                {"blocks_down", h.links[t].blocks_down},
                                {"bytes_up", static_cast<double>(h.links[t].blocks_up) * bb},
                                {"bytes_down", static_cast<double>(h.links[t].blocks_down) * bb}};
      row["read_bytes_per_s"] = s.read_bytes_per_s;
      row["write_bytes_per_s"] = s.write_bytes_per_s;
      row["latency_s"] = s.latency_s;
      row["read_per_block_s"] = s.read_per_block_s;
      row["write_per_block_s"] = s.write_per_block_s;
      row["write_latency_s"] = s.write_latency_s;
    }
    if (s.usd_per_gb_month > 0 && bb > 0) {
      row["usd_per_month"] =
          static_cast<double>(s.capacity_blocks) * bb / 1e9 * s.usd_per_gb_month;
    }
    if (s.endurance_tbw > 0 && bb > 0) {
      const double written_tb = static_cast<double>(k.writes) * bb / 1e12;
      row["endurance_tbw"] = s.endurance_tbw;
      row["endurance_used"] = written_tb / s.endurance_tbw;
      if (trace_days > 0) row["endurance_used_per_day"] = written_tb / s.endurance_tbw / trace_days;
    }
    tiers.push_back(row);
  }
  const auto& lt = h.load;
  return {{"hierarchy", describe(cfg)},
          {"top_tier", h.top},
          {"inclusion", cfg.mode == inclusion::inclusive ? "inclusive" : "exclusive"},
          {"write_policy", cfg.write.kind == write_policy::write_back      ? "write-back"
                           : cfg.write.kind == write_policy::write_through ? "write-through"
                                                                           : "write-through-selective"},
          {"block_bytes", cfg.block_bytes},
          {"tiers", tiers},
          {"load_time", {{"total_s", lt.total_s},
                         {"mean_s", c.requests ? lt.total_s / static_cast<double>(c.requests) : 0.0},
                         {"max_s", lt.max_s},
                         {"requests_from_lower_tiers", lt.requests_from_lower}}}};
}

}  // namespace kvtk::sim
