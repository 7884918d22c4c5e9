// sim/cli/compare.hpp — `kvtk compare`: every policy x capacity on a flat block trace.
#pragma once

#include <string>
#include <vector>

namespace kvtk::sim {

/// Runs `kvtk compare` with the arguments after the subcommand name. Returns the exit code
/// (0 ok, 1 runtime error, 2 usage error) and writes errors to stderr.
int run_compare(const std::vector<std::string>& args);

}  // namespace kvtk::sim
