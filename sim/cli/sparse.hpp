// sim/cli/sparse.hpp — `kvtk sparse` (docs/sparse.md).
#pragma once

#include <string>
#include <vector>

namespace kvtk::sim {

/// Runs `kvtk sparse` with the arguments after "sparse". Returns the exit code.
int run_sparse(const std::vector<std::string>& args);

}  // namespace kvtk::sim
