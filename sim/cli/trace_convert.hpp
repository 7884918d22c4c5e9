// sim/cli/trace_convert.hpp — `kvtk trace convert`: any readable format to kvtk, kvtb, mooncake,
// ids or oracle-general, streaming (constant memory except oracle-general's next-access pass).
#pragma once

#include <string>
#include <vector>

namespace kvtk::sim {

/// Runs `kvtk trace convert` with the arguments after "convert". Returns the exit code.
int run_trace_convert(const std::vector<std::string>& args);

}  // namespace kvtk::sim
