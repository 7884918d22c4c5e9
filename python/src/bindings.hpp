// python/src/bindings.hpp — the pieces of the kvtk._kvtk extension (module.cpp puts them
// together). The extension is a thin layer over sim/api: it never re-implements a command.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <exception>
#include <utility>
#include <vector>

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
/// sim::usage_error and std::invalid_argument -> ValueError with the CLI's message,
/// trace_error -> kvtk.TraceError(message, path, line), output_refused -> ValueError,
/// output_error -> OSError; anything else is rethrown for
/// nanobind's own translation (std::runtime_error -> RuntimeError, std::bad_alloc ->
/// MemoryError).
[[noreturn]] void raise_python(std::exception_ptr e);

/// Evictions collected while C++ runs (perhaps without the GIL), handed to a Python callable
/// afterwards, in eviction order (BlockCache and PrefixTree).
class eviction_queue {
 public:
  explicit eviction_queue(nb::object on_evict) : on_evict_(std::move(on_evict)) {}
  void push(std::uint64_t key) { keys_.push_back(key); }
  /// Calls on_evict(key) for each queued key (the GIL held) and returns them, emptying the queue.
  std::vector<std::uint64_t> deliver() { return call(take()); }
  /// The queued keys, emptying the queue (under the owner's lock when it has one).
  std::vector<std::uint64_t> take() {
    std::vector<std::uint64_t> keys;
    keys.swap(keys_);
    return keys;
  }
  /// Calls on_evict(key) for each key (the GIL held, no lock of the owner held: the callable may
  /// call back into the owner) and returns them.
  std::vector<std::uint64_t> call(std::vector<std::uint64_t> keys) {
    if (!on_evict_.is_none()) {
      for (const std::uint64_t k : keys) on_evict_(k);
    }
    return keys;
  }

 private:
  nb::object on_evict_;
  std::vector<std::uint64_t> keys_;
};

}  // namespace kvtk::python
