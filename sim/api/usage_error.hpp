// sim/api/usage_error.hpp — the one error type of a bad option value, whichever surface gave it
// (a command line, a JSON options object, a Python keyword). The CLI reports it with exit code 2;
// the Python package raises ValueError.
#pragma once

#include <stdexcept>

namespace kvtk::sim {

/// A bad option or option value: the message names the option and the reason.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace kvtk::sim
