// sim/cli/trace_import.hpp — `kvtk trace import`: a request log with token ids to a kvtk trace
// whose keys are the engine's block hashes (api/trace_import.hpp).
#pragma once

#include <string>
#include <vector>

namespace kvtk::sim {

/// Runs `kvtk trace import` with the arguments after "import". Returns the exit code.
int run_trace_import(const std::vector<std::string>& args);

}  // namespace kvtk::sim
