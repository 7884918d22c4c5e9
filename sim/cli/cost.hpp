// sim/cli/cost.hpp — `kvtk cost`: the command line over api/cost.hpp (price tables: api/pricing.hpp).
#pragma once

#include <string>
#include <vector>


namespace kvtk::sim {

/// Runs `kvtk cost` with the arguments after "cost". Returns the exit code.
int run_cost(const std::vector<std::string>& args);

}  // namespace kvtk::sim
