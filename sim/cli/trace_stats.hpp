// sim/cli/trace_stats.hpp — `kvtk trace stats`: what a request trace looks like.
#pragma once

#include <string>
#include <vector>

namespace kvtk::sim {

/// Runs `kvtk trace <subcommand> ...` (stats); returns the exit code.
int run_trace(const std::vector<std::string>& args);

}  // namespace kvtk::sim
