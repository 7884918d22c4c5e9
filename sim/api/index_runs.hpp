// sim/api/index_runs.hpp — the prefix-index replays behind `kvtk replay` and `kvtk tune`, one
// function per index family. Internal to kvtk_commands.
//
// Why this file exists: replaying through an index instantiates its whole policy grid (flat
// index x 12 core policies, radix index x 47 leaf orders and admission rules (one unit per
// rule), radix tier hierarchies x 9 online leaf
// orders x 12 lower-tier policies, flat tier hierarchies x 12). Each family is compiled in its
// own translation unit (index_runs_*.cpp), and the radix tier hierarchies two or three leaf
// orders per unit (a function template declared here and explicitly instantiated there), so no
// unit instantiates the grid and the callers (replay.cpp, tune.cpp, cli/tiers.cpp) instantiate
// none of it. A leaf order added to all_leaf_policies without its instantiation fails at link
// time, naming the function.
#pragma once

#include <cstdint>
#include <kvtk/prefix/leaf_policies.hpp>
#include <kvtk/prefix/replay.hpp>
#include <kvtk/tier/tier_spec.hpp>
#include <span>
#include <string_view>
#include <vector>

#include "api/progress.hpp"
#include "api/tiers.hpp"
#include "formats/next_use_file.hpp"
#include "formats/requests.hpp"

namespace kvtk::sim::index_runs {

using kvtk::prefix::partial_block;
using kvtk::prefix::prefix_counts;

/// Requires: `policy` names a core policy (visit_policy) / a radix policy (visit_radix_policy:
/// a leaf order, or leaf+rule).
/// Effects: replays lt through a fresh flat_index / radix_index of capacity_blocks, in slices
/// (detail::replay_sliced: progress to bar, the trace's pages dropped behind); next (may be null)
/// is read by offline policies only.
/// Throws: kvtk::unknown_policy for an unknown name; what the index throws; std::bad_alloc.
prefix_counts replay_flat(std::string_view policy, std::uint32_t capacity_blocks,
                          const loaded_trace& lt, partial_block p, const next_use_column* next,
                          detail::progress_relay& bar);
prefix_counts replay_radix(std::string_view policy, std::uint32_t capacity_blocks,
                           const loaded_trace& lt, partial_block p, const next_use_column* next,
                           detail::progress_relay& bar);

/// Effects: replays requests [0, bounds[0]) uncounted, then each [bounds[i], bounds[i+1])
/// counted apart (evictions included), through one fresh index of an online policy.
/// Requires: bounds non-decreasing, bounds.size() >= 2, bounds.back() <= t.requests().
std::vector<prefix_counts> replay_flat_segments(std::string_view policy,
                                                std::uint32_t capacity_blocks,
                                                const kvtk::prefix::prefix_trace_view& t,
                                                partial_block p,
                                                std::span<const std::size_t> bounds);
std::vector<prefix_counts> replay_radix_segments(std::string_view policy,
                                                 std::uint32_t capacity_blocks,
                                                 const kvtk::prefix::prefix_trace_view& t,
                                                 partial_block p,
                                                 std::span<const std::size_t> bounds);

/// The radix runs of the policies whose admission rule is Admit (a leaf order alone: admit_all),
/// one explicit instantiation per rule (index_runs_radix.ipp), so that replay_radix and
/// replay_radix_segments above, which pick the rule by name, compile none of the grid.
/// Throws: kvtk::unknown_name when the leaf order does not go with Admit.
template <class Admit>
struct radix_with {
  static prefix_counts replay(std::string_view policy, std::uint32_t capacity_blocks,
                              const loaded_trace& lt, partial_block p, const next_use_column* next,
                              detail::progress_relay& bar);
  static std::vector<prefix_counts> segments(std::string_view policy,
                                             std::uint32_t capacity_blocks,
                                             const kvtk::prefix::prefix_trace_view& t,
                                             partial_block p, std::span<const std::size_t> bounds);
  static bool offline(std::string_view policy);
};

/// Whether the named core policy / radix policy is offline (needs next uses).
/// Throws: kvtk::unknown_policy.
bool flat_offline(std::string_view policy);
bool radix_offline(std::string_view policy);

/// A tier-hierarchy replay: the counts and the hierarchy's final counters.
struct tier_run {
  prefix_counts counts;
  tier_state state;
};

/// Effects: replays lt through a tier_index (flat top tier) of cfg.
/// Throws: std::invalid_argument for a bad configuration (as tier_hierarchy); std::bad_alloc.
tier_run replay_flat_tiers(kvtk::tier::hierarchy_config cfg, const loaded_trace& lt,
                           partial_block p, detail::progress_relay& bar);

/// Effects: replays lt through a radix_tier_index<Leaf> (radix top tier) of cfg.
/// Requires: Leaf is an online leaf order of all_leaf_policies.
/// Throws: std::invalid_argument for a bad configuration (as radix_tier_hierarchy); bad_alloc.
template <class Leaf>
tier_run replay_radix_tiers(kvtk::tier::hierarchy_config cfg, const loaded_trace& lt,
                            partial_block p, detail::progress_relay& bar);

/// Effects: replays lt through an engine_tier_hierarchy (tier/engine_tier_hierarchy.hpp) whose
/// top is `engine`'s GPU cache (vllm: vLLM's block pool; sglang: SGLang's radix cache); its
/// version and unscheduled requests go to engine_state.
/// Throws: std::invalid_argument for a bad configuration; std::bad_alloc.
tier_run replay_engine_tiers(const std::string& engine, kvtk::tier::hierarchy_config cfg,
                             const loaded_trace& lt, partial_block p, detail::progress_relay& bar,
                             nlohmann::json& engine_state);
/// Effects: builds (and drops) an engine_tier_hierarchy of cfg.  Throws: std::invalid_argument
/// naming the tier and the problem.
void check_engine_tiers(const std::string& engine, const kvtk::tier::hierarchy_config& cfg);

/// Effects: builds (and drops) a radix_tier_hierarchy<Leaf> of cfg: its constructor checks the
/// configuration. Throws: std::invalid_argument naming the tier and the problem.
template <class Leaf>
void check_radix_tiers(const kvtk::tier::hierarchy_config& cfg);

}  // namespace kvtk::sim::index_runs
