// sim/api/replay_plan.cpp — `kvtk replay`'s options checked and turned into a plan
// (api/replay_plan.hpp).
#include "api/replay_plan.hpp"

#include "api/trace_options.hpp"
#include "api/pricing.hpp"
#include "api/tiers.hpp"
#include "kvtk/prefix/engine_index.hpp"
#include "move/calibration.hpp"

namespace kvtk::sim::replay_detail {
namespace {

using namespace kvtk::prefix;

bool known_for(const std::string& index, const std::string& policy) {
  if (index == "flat") return is_policy_name(policy);
  if (index == "radix") {
    for (const auto& n : radix_policy_names()) {
      if (n == policy) return true;
    }
    return false;
  }
  return index == "hashchain" && policy == "vllm";
}

std::string known_list(const std::string& index) {
  std::string out;
  if (index == "flat") {
    for (auto n : policy_names) out += " " + std::string(n);
  } else if (index == "radix") {
    for (const auto& n : radix_policy_names()) out += " " + n;
  } else {
    out = " vllm";
  }
  return out;
}

std::vector<std::string> policies_for(const std::string& index, const std::vector<std::string>& asked,
                                      bool all) {
  std::vector<std::string> names;
  if (index == "hashchain") {
    names = {"vllm"};  // the hash-chain index is vLLM's block pool: one policy
  } else if (all) {
    if (index == "flat") {
      for (auto n : policy_names) names.emplace_back(n);
    } else {
      for (const auto& n : radix_policy_names()) names.emplace_back(n);
    }
  } else {
    for (const auto& p : asked) {
      if (known_for(index, p)) names.push_back(p);
    }
  }
  return names;
}

std::string leaf_names() {
  std::string s;
  for (const auto n : kvtk::prefix::leaf_policy_names) s += " " + std::string(n);
  return s;
}

// The tier hierarchies of --tiers / --tier-config, calibrated when asked; one job each.
void plan_hierarchies(const replay_options& o, std::uint64_t bytes_per_token, plan& p) {
  if (o.inclusion != "exclusive" && o.inclusion != "inclusive") {
    throw usage_error("--inclusive/--exclusive: unknown inclusion '" + o.inclusion + "'");
  }
  if (o.tier_top != "flat" && o.tier_top != "radix" && o.tier_top != "vllm" &&
      o.tier_top != "sglang") {
    throw usage_error("--tier-top: unknown top tier '" + o.tier_top +
                      "' (known: flat radix vllm sglang)");
  }
  const bool engine_top = o.tier_top == "vllm" || o.tier_top == "sglang";
  if (engine_top && p.pb == partial_block::cache && !(o.tiers.empty() && o.tier_config.empty())) {
    throw usage_error("--tier-top " + o.tier_top +
                      ": the engine caches full blocks only; drop --partial-block cache");
  }
  const tier_flags flags{o.inclusion, o.write_policy, o.admission};
  for (const auto& spec : o.tiers) {
    p.hierarchies.push_back(
        parse_tier_spec(spec, flags, o.block_tokens, bytes_per_token, o.tier_top));
  }
  for (const auto& file : o.tier_config) {
    p.hierarchies.push_back(
        load_tier_config(file, o.block_tokens, bytes_per_token, o.tier_top));
  }
  p.tier_top = o.tier_top;
  if (o.tier_top == "radix") {
    for (const auto& h : p.hierarchies) {
      const std::string what = "--tier-top radix: " + describe(h);
      if (h.mode != kvtk::tier::inclusion::exclusive ||
          h.write.kind != kvtk::tier::write_policy::write_back) {
        throw usage_error(what + ": a radix top tier supports --exclusive write-back only");
      }
      const std::string& top = h.tiers[0].policy;
      bool known = false;
      for (const auto n : kvtk::prefix::leaf_policy_names) known |= n == top;
      if (!known) {
        throw usage_error(what + ": the top tier's policy '" + top +
                          "' is not a radix leaf order (known:" + leaf_names() + ")");
      }
      const bool offline = kvtk::prefix::visit_leaf_policy(
          top, []<class L>() { return kvtk::prefix::radix_index<L>::offline; });
      if (offline) {
        throw usage_error(what + ": the top tier's policy '" + top +
                          "' is offline (it needs next uses); choose an online leaf order");
      }
    }
  }
  if (!o.calibration_mechanism.empty() && o.calibration.empty()) {
    throw usage_error("--calibration-mechanism needs --calibration");
  }
  if (!o.calibration.empty()) {
    if (p.hierarchies.empty()) throw usage_error("--calibration needs --tiers or --tier-config");
    try {
      const auto cal = kvtk::sim::move::calibration::load(o.calibration);
      for (auto& h : p.hierarchies) {
        p.calibration_reports.push_back(
            kvtk::sim::move::apply_calibration(h, cal, o.calibration_mechanism));
      }
    } catch (const std::runtime_error& e) {
      throw usage_error(std::string("--calibration ") + e.what());
    }
  }
  for (std::size_t h = 0; h < p.hierarchies.size(); ++h) {
    std::uint64_t total = 0;
    for (const auto& tier : p.hierarchies[h].tiers) total += tier.capacity_blocks;
    // A hierarchy with an engine's GPU cache on top counts hits as that engine.
    p.jobs.push_back({"tiers", describe(p.hierarchies[h]), total, static_cast<int>(h), "",
                      engine_top ? o.tier_top : "ideal"});
  }
}

// Every valid index x policy pair runs: "all" is each index's whole list, and a policy only some
// of the indexes know runs with those. Only a name that no listed index knows is an error.
void plan_grid(const replay_options& o, std::uint64_t bytes_per_token, plan& p) {
  const auto& caps_given = o.capacity.empty() ? default_capacities() : o.capacity;
  std::vector<std::uint64_t> caps;
  for (const auto& c : caps_given) {
    if (c.empty()) throw usage_error("--capacity: empty item in the list");
    caps.push_back(parse_capacity(c, o.block_tokens, bytes_per_token));
  }
  if (caps.empty()) throw usage_error("--capacity: empty list");
  if (o.index.empty()) throw usage_error("--index: empty list");
  if (o.policy.empty()) throw usage_error("--policy: empty list");
  for (const auto& i : o.index) {
    if (i != "radix" && i != "flat" && i != "hashchain") {
      throw usage_error("--index: unknown index '" + i + "' (known: radix flat hashchain)");
    }
  }
  const bool all = o.policy.size() == 1 && o.policy[0] == "all";
  for (const auto& pol : o.policy) {
    if (all) break;
    bool anywhere = false;
    for (const auto& i : o.index) anywhere |= i == "hashchain" || known_for(i, pol);
    if (!anywhere) {
      std::string known;
      for (const auto& i : o.index) known += " " + i + ":" + known_list(i) + ";";
      throw usage_error("--policy: unknown policy '" + pol + "' (known per index:" + known +
                        " or all)");
    }
  }
  for (const auto& i : o.index) {
    for (const auto& pol : policies_for(i, o.policy, all)) {
      for (std::size_t k = 0; k < caps.size(); ++k) {
        p.jobs.push_back({i, pol, caps[k], -1, caps_given[k]});
      }
    }
  }
}

// The engine modes (--engine): one job per capacity each, on the engine's own index; "ideal" is
// the grid. Engines cache full blocks only, so --partial-block cache contradicts them.
bool plan_engines(const replay_options& o, std::uint64_t bytes_per_token, plan& p) {
  if (o.engine.empty()) throw usage_error("--engine: empty list");
  bool ideal = false, vllm = false, sglang = false;
  for (const auto& e : o.engine) {
    vllm |= parse_engine(e) == engine_accounting::vllm;
    sglang |= parse_engine(e) == engine_accounting::sglang;
  }
  for (const auto& spec : o.offload) {
    p.offloads.push_back(parse_offload_spec(spec, o.block_tokens, bytes_per_token));
    const std::string& engine = p.offloads.back().engine;
    if (p.offloads.back().hicache_l3.enabled) {
      throw usage_error("--offload '" + spec + "': HiCache's L3 storage (storage=file) runs in kvtk "
                        "simulate only: its prefetch policies are about time (--set offload=...)");
    }
    if (p.offloads.back().disk_link_given) {
      throw usage_error("--offload '" + spec + "': disk_gb_per_s and disk_latency_us time the disk's "
                        "reads in kvtk simulate (--set offload=...); replay counts blocks, not time");
    }
    if ((engine == "vllm" && !vllm) || (engine == "sglang" && !sglang)) {
      throw usage_error("--offload '" + spec + "': an engine's offload tier runs under its GPU "
                        "cache: add --engine " + engine + " (cpu: vLLM's OffloadingConnector, "
                        "lmcache-cpu: LMCache's CPU backend, kvbm: Dynamo KVBM, under vLLM; host: SGLang's "
                        "HiCache)");
    }
  }
  for (const auto& e : o.engine) {
    const engine_accounting engine = parse_engine(e);
    if (engine == engine_accounting::ideal) {
      ideal = true;
      continue;
    }
    if (p.pb == partial_block::cache) {
      throw usage_error("--engine " + e +
                        ": the engine caches full blocks only; drop --partial-block cache");
    }
    const auto& caps_given = o.capacity.empty() ? default_capacities() : o.capacity;
    for (const auto& c : caps_given) {
      if (c.empty()) throw usage_error("--capacity: empty item in the list");
      const std::uint64_t cap = parse_capacity(c, o.block_tokens, bytes_per_token);
      const char* name = engine == engine_accounting::vllm ? "vllm" : "sglang";
      if (engine == engine_accounting::vllm) {
        p.jobs.push_back({"hashchain", "vllm", cap, -1, c, e});
      } else {
        p.jobs.push_back({"radix", "lru", cap, -1, c, e});
      }
      for (std::size_t k = 0; k < p.offloads.size(); ++k) {
        if (p.offloads[k].engine != name) continue;
        if (p.offloads[k].engine == "sglang" &&
            cap + hicache_host_pages(p.offloads[k], cap, o.block_tokens) >= (1ull << 31)) {
          throw usage_error("--offload '" + p.offloads[k].text + "' with --capacity " + c +
                            ": device and host pages must be below 2^31 together");
        }
        p.jobs.push_back({"offload", describe(p.offloads[k]), cap, -1, c, e, static_cast<int>(k)});
      }
    }
  }
  return ideal;
}

}  // namespace

const std::vector<std::string>& default_capacities() {
  static const std::vector<std::string> caps = {"1000", "10000", "100000"};
  return caps;
}

plan make_plan(const replay_options& o) {
  plan p;
  p.pb = parse_partial_block(o.partial_block) == 1 ? partial_block::cache : partial_block::skip;
  if (o.threads == 0 || o.threads > 256) throw usage_error("--threads: must be in [1, 256]");
  const std::uint64_t bytes_per_token = o.model.empty() ? 0 : bytes_per_token_of(o.model);
  if (!o.pricing.empty()) {
    p.table = load_price_table(o.pricing, p.price_storage);
    p.priced = true;
  }
  plan_hierarchies(o, bytes_per_token, p);
  const bool ideal = plan_engines(o, bytes_per_token, p);
  // With tiers, the index x policy x capacity grid runs only when capacities are given.
  if (ideal && (p.hierarchies.empty() || !o.capacity.empty())) plan_grid(o, bytes_per_token, p);
  return p;
}

}  // namespace kvtk::sim::replay_detail
