// sim/cli/simulate.hpp — `kvtk simulate`: the discrete-event cluster simulator's command.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "des/simulator.hpp"

namespace kvtk::sim {

/// Applies `overrides` ("key=value"; values parse as JSON, else as strings) to `j`, then builds a
/// cluster config from it (docs/simulate.md). Capacities use --capacity's units
/// with the config's model. Throws cli::usage_error naming the key and the problem.
des::cluster_config cluster_config_from_json(nlohmann::json& j, std::uint32_t block_tokens,
                                             const std::vector<std::string>& overrides);

/// Runs `kvtk simulate` with the arguments after "simulate". Returns the exit code.
int run_simulate(const std::vector<std::string>& args);

}  // namespace kvtk::sim
