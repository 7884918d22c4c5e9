// sim/cli/tune.hpp — `kvtk tune`: the best online policy for a trace and capacity, chosen on the
// first part of the trace and reported on the rest.
#pragma once

#include <string>
#include <vector>

namespace kvtk::sim {

/// Runs `kvtk tune` with the arguments after the subcommand name; returns the exit code.
int run_tune(const std::vector<std::string>& args);

}  // namespace kvtk::sim
