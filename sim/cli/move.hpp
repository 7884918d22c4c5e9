// sim/cli/move.hpp — `kvtk move`: real block movement (host backend so far).
#pragma once

#include <string>
#include <vector>

namespace kvtk::sim {

/// Runs `kvtk move` with the arguments after "move". Returns the exit code.
int run_move(const std::vector<std::string>& args);

}  // namespace kvtk::sim
