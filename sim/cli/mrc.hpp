// sim/cli/mrc.hpp — `kvtk mrc`: the prefix-LRU miss-ratio curve of a trace.
#pragma once

#include <string>
#include <vector>

namespace kvtk::sim {

/// Runs `kvtk mrc` with the arguments after the subcommand name; returns the exit code.
int run_mrc(const std::vector<std::string>& args);

}  // namespace kvtk::sim
