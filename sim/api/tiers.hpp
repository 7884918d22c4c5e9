// sim/api/tiers.hpp — `kvtk replay --tiers …` / `--tier-config F.json`: parsing hierarchies and
// reporting their per-tier results.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvtk/prefix/replay.hpp"
#include "kvtk/prefix/leaf_registry.hpp"
#include "kvtk/tier/tier_index.hpp"

namespace kvtk::sim {

/// Hierarchy-wide flags of the command line (a config file may set them too).
struct tier_flags {
  std::string inclusion = "exclusive";   ///< exclusive | inclusive
  std::string write_policy = "write-back";  ///< write-back | write-through | write-through-selective[:N]
  std::string admission = "always";      ///< always | frequency[:N] | tinylfu[:N] | decay[:H[:N]]
};

/// "a,b,,c" -> {"a", "b", "", "c"} (a trailing separator gives a last empty field).
std::vector<std::string> split(const std::string& s, char sep);

/// A tier's rent from text: a number of USD per GB-month in [0, 1e6]. Throws usage_error
/// "WHERE: the price 'TEXT' is not ...".
double parse_usd_per_gb_month(const std::string& where, const std::string& text);

/// Fills link defaults from a tier's name when the figures are 0 (planning numbers, README):
/// dram 50 GB/s both ways, 10 us; ssd 7 GB/s read, 5 GB/s write, 100 us, 1 drive write per day
/// over 5 years; remote 25 GB/s, 50 us. Other names get none.
void apply_tier_defaults(kvtk::tier::tier_spec& t, std::uint64_t block_bytes);

/// "hbm:80GiB:lru,dram:1TiB:arc" plus the flags -> a validated config for the top tier `top`
/// (flat | radix | vllm | sglang: --tier-top). Capacities use --capacity's units. Throws
/// usage_error naming the tier and the problem.
kvtk::tier::hierarchy_config parse_tier_spec(const std::string& spec, const tier_flags& flags,
                                             std::uint32_t block_tokens,
                                             std::uint64_t bytes_per_token,
                                             const std::string& top = "flat");

/// A JSON hierarchy file (README "Tiers"). Throws usage_error naming the file and the problem.
kvtk::tier::hierarchy_config load_tier_config(const std::string& path, std::uint32_t block_tokens,
                                              std::uint64_t bytes_per_token,
                                              const std::string& top = "flat");

/// "hbm:lru:1000>dram:arc:5000 (exclusive, write-back)".
std::string describe(const kvtk::tier::hierarchy_config& cfg);

/// The configuration to allocate for replaying `refs` block references: every tier's capacity
/// capped at refs (a tier that can hold every reference never evicts, so the results are those
/// of the configuration asked for; the caps keep inclusive tiers in order). Throws
/// memory_budget_error when even the capped tiers do not fit this process's memory.
kvtk::tier::hierarchy_config allocation_config(kvtk::tier::hierarchy_config cfg,
                                               std::uint64_t refs);

/// A finished hierarchy's counters, whatever its top tier (flat or radix).
struct tier_state {
  std::string top = "flat";  ///< flat (tier_hierarchy) | radix (radix_tier_hierarchy)
  std::vector<kvtk::tier::tier_counters> counters;
  std::vector<kvtk::tier::link_counters> links;
  std::vector<std::size_t> resident;
  std::vector<std::uint64_t> kept_copies;
  kvtk::tier::load_time_counters load;
};

/// The state of a flat-top or radix-top tier index (anything with hierarchy() and load_time()).
template <class Index>
tier_state state_of(const Index& idx, std::string top) {
  tier_state s;
  s.top = std::move(top);
  const auto& h = idx.hierarchy();
  for (std::size_t t = 0; t < h.tiers(); ++t) {
    s.counters.push_back(h.counters(t));
    s.links.push_back(h.link(t));
    s.resident.push_back(h.resident(t));
    s.kept_copies.push_back(h.kept_copies(t));  // both tops answer it (0 for the radix top)
  }
  s.load = idx.load_time();
  return s;
}

/// The per-tier JSON of a finished replay. `requested` is the configuration asked for (its
/// capacities and prices are reported; the index may run a capped allocation_config of it).
/// trace_days <= 0: endurance per day is omitted.
nlohmann::json tier_report(const tier_state& st, const kvtk::tier::hierarchy_config& requested,
                           const kvtk::prefix::prefix_counts& c, double trace_days);

}  // namespace kvtk::sim
