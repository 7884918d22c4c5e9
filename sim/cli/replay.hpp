// sim/cli/replay.hpp — `kvtk replay`: a request trace through index x policy x capacity.
#pragma once

#include <string>
#include <vector>

namespace kvtk::sim {

/// Runs `kvtk replay` with the arguments after the subcommand name. Returns the exit code
/// (0 ok, 1 runtime error, 2 usage error) and writes errors to stderr.
int run_replay(const std::vector<std::string>& args);

}  // namespace kvtk::sim
