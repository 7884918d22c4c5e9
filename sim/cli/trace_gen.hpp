// sim/cli/trace_gen.hpp — `kvtk trace gen`: synthetic DeepSeek-style request traces.
#pragma once

#include <string>
#include <vector>

#include "api/trace_gen.hpp"  // gen_options, generate_trace, the library call

namespace kvtk::sim {

/// Runs `kvtk trace gen` with the arguments after "gen". Returns the exit code.
int run_trace_gen(const std::vector<std::string>& args);

}  // namespace kvtk::sim
