// sim/cli/check_engine.hpp — `kvtk check-engine`: a recording of an engine's KV events against
// kvtk's model of that engine (api/check_engine.hpp).
#pragma once

#include <string>
#include <vector>

namespace kvtk::sim {

/// Runs `kvtk check-engine` with the arguments after the command. Returns the exit code: 0 no
/// divergence, 3 a divergence (or anything lost or unresolved); bad data throws (exit 1), a bad
/// command line is 2.
int run_check_engine(const std::vector<std::string>& args);

}  // namespace kvtk::sim
