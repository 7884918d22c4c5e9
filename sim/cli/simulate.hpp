// sim/cli/simulate.hpp — `kvtk simulate`: the discrete-event cluster simulator's command.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/simulate.hpp"  // cluster_config_from_json, the library call

namespace kvtk::sim {

/// Runs `kvtk simulate` with the arguments after "simulate". Returns the exit code.
int run_simulate(const std::vector<std::string>& args);

}  // namespace kvtk::sim
