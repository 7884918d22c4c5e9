// python/src/bindings.hpp — the pieces of the kvtk._kvtk extension (module.cpp puts them
// together). The extension is a thin layer over sim/api: it never re-implements a command.
#pragma once

#include <nanobind/nanobind.h>

#include <exception>

namespace kvtk::python {

namespace nb = nanobind;

/// kvtk.Trace and kvtk.load_trace (trace.cpp).
void bind_trace(nb::module_& m);
/// run_command and simulate (commands.cpp).
void bind_commands(nb::module_& m);
/// kvtk.BlockCache (block_cache.cpp).
void bind_block_cache(nb::module_& m);
/// kvtk.PrefixTree (prefix_tree.cpp).
void bind_prefix_tree(nb::module_& m);

/// Raises the Python exception for a C++ one (call it inside a catch (...) with the GIL held):
/// cli::usage_error and std::invalid_argument -> ValueError with the CLI's message,
/// trace_error -> kvtk.TraceError(message, path, line), output_refused -> ValueError,
/// output_error -> OSError; anything else is rethrown for
/// nanobind's own translation (std::runtime_error -> RuntimeError, std::bad_alloc ->
/// MemoryError).
[[noreturn]] void raise_python(std::exception_ptr e);

}  // namespace kvtk::python
