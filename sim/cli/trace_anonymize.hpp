// sim/cli/trace_anonymize.hpp — `kvtk trace anonymize`: a trace re-keyed through a secret keyed
// permutation, ready to share (api/trace_anonymize.hpp).
#pragma once

#include <string>
#include <vector>

namespace kvtk::sim {

/// Runs `kvtk trace anonymize` with the arguments after "anonymize". Returns the exit code.
int run_trace_anonymize(const std::vector<std::string>& args);

}  // namespace kvtk::sim
