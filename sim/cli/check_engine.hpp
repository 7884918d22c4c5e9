// sim/cli/check_engine.hpp — `kvtk check-engine`: a recording of an engine's KV events against
// kvtk's model of that engine (api/check_engine.hpp).
#pragma once

#include <string>
#include <vector>

namespace kvtk::sim {

/// Runs `kvtk check-engine` with the arguments after the command. Returns the exit code: 0 no
/// divergence, 1 a divergence (or bad data), 2 a bad command line.
int run_check_engine(const std::vector<std::string>& args);

}  // namespace kvtk::sim
