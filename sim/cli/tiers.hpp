// sim/cli/tiers.hpp — `kvtk replay --tiers …` / `--tier-config F.json`: parsing hierarchies and
// reporting their per-tier results.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "kvtk/prefix/replay.hpp"
#include "kvtk/tier/tier.hpp"

namespace kvtk::sim::cli {

/// Hierarchy-wide flags of the command line (a config file may set them too).
struct tier_flags {
  std::string inclusion = "exclusive";   ///< exclusive | inclusive
  std::string write_policy = "write-back";  ///< write-back | write-through | write-through-selective[:N]
  std::string admission = "always";      ///< always | frequency[:N] | tinylfu[:N] | decay[:H[:N]]
};

/// Fills link defaults from a tier's name when the figures are 0 (planning numbers, README):
/// dram 50 GB/s both ways, 10 us; ssd 7 GB/s read, 5 GB/s write, 100 us, 1 drive write per day
/// over 5 years; remote 25 GB/s, 50 us. Other names get none.
void apply_tier_defaults(kvtk::tier::tier_spec& t, std::uint64_t block_bytes);

/// "hbm:80GiB:lru,dram:1TiB:arc" plus the flags -> a validated config. Capacities use
/// --capacity's units. Throws usage_error naming the tier and the problem.
kvtk::tier::hierarchy_config parse_tier_spec(const std::string& spec, const tier_flags& flags,
                                             std::uint32_t block_tokens,
                                             std::uint64_t bytes_per_token);

/// A JSON hierarchy file (README "Tiers"). Throws usage_error naming the file and the problem.
kvtk::tier::hierarchy_config load_tier_config(const std::string& path, std::uint32_t block_tokens,
                                              std::uint64_t bytes_per_token);

/// "hbm:lru:1000>dram:arc:5000 (exclusive, write-back)".
std::string describe(const kvtk::tier::hierarchy_config& cfg);

/// The configuration to allocate for replaying `refs` block references: every tier's capacity
/// capped at refs (a tier that can hold every reference never evicts, so the results are those
/// of the configuration asked for; the caps keep inclusive tiers in order). Throws
/// memory_budget_error when even the capped tiers do not fit this process's memory.
kvtk::tier::hierarchy_config allocation_config(kvtk::tier::hierarchy_config cfg,
                                               std::uint64_t refs);

/// The per-tier JSON of a finished replay. `requested` is the configuration asked for (its
/// capacities and prices are reported; idx may run a capped allocation_config of it).
/// trace_days <= 0: endurance per day is omitted.
nlohmann::json tier_report(const kvtk::tier::tier_index<>& idx,
                           const kvtk::tier::hierarchy_config& requested,
                           const kvtk::prefix::prefix_counts& c, double trace_days);

}  // namespace kvtk::sim::cli
