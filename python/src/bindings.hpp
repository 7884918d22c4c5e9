// python/src/bindings.hpp — the pieces of the kvtk._kvtk extension (module.cpp puts them
// together). The extension is a thin layer over sim/api: it never re-implements a command.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <span>
#include <string>
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

/// Any 1-D array on the CPU, of any dtype (no implicit conversion by nanobind: block_keys checks).
using any_array = nb::ndarray<nb::ro, nb::ndim<1>, nb::device::cpu>;

/// Block keys from a Python array, as every binding takes them: unsigned integers of any width
/// are taken as they are (uint64, contiguous: no copy); signed integers must be non-negative;
/// floats and bools are refused (a float key would be truncated, a negative one wrapped to a huge
/// one). `what` names the argument in the message. Throws nb::type_error or nb::value_error.
class block_keys {
 public:
  block_keys(const any_array& a, const char* what) {
    const auto dt = a.dtype();
    const auto n = static_cast<std::size_t>(a.shape(0));
    const bool is_unsigned = dt.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::UInt);
    const bool is_signed = dt.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Int);
    if ((!is_unsigned && !is_signed) || dt.lanes != 1 ||
        (dt.bits != 8 && dt.bits != 16 && dt.bits != 32 && dt.bits != 64)) {
      throw nb::type_error((std::string(what) + ": unsigned integers expected; got an array of "
                            "another type (floats or bools): convert it explicitly, e.g. "
                            "a.astype(np.uint64), if that is what you mean").c_str());
    }
    if (is_unsigned && dt.bits == 64 && (n < 2 || a.stride(0) == 1)) {
      view_ = {static_cast<const std::uint64_t*>(a.data()), n};
      return;
    }
    copy_.resize(n);
    const auto base = reinterpret_cast<std::uintptr_t>(a.data());
    // Strides are in elements and may be negative (a[::-1]); memcpy reads unaligned buffers.
    const std::ptrdiff_t step = static_cast<std::ptrdiff_t>(a.stride(0)) * (dt.bits / 8);
    auto read = [&]<class T>(std::size_t i, T) {
      T v;
      std::memcpy(&v, reinterpret_cast<const void*>(base + static_cast<std::uintptr_t>(static_cast<std::ptrdiff_t>(i) * step)), sizeof v);
      return v;
    };
    for (std::size_t i = 0; i < n; ++i) {
      std::int64_t s = 0;
      std::uint64_t u = 0;
      switch (dt.bits) {
        case 8: is_signed ? s = read(i, std::int8_t{}) : u = read(i, std::uint8_t{}); break;
        case 16: is_signed ? s = read(i, std::int16_t{}) : u = read(i, std::uint16_t{}); break;
        case 32: is_signed ? s = read(i, std::int32_t{}) : u = read(i, std::uint32_t{}); break;
        default: is_signed ? s = read(i, std::int64_t{}) : u = read(i, std::uint64_t{}); break;
      }
      if (is_signed && s < 0) {
        throw nb::value_error((std::string(what) + ": " + std::to_string(s) + " at index " +
                               std::to_string(i) + " is negative (unsigned integers expected)").c_str());
      }
      copy_[i] = is_signed ? static_cast<std::uint64_t>(s) : u;
    }
    view_ = copy_;
  }
  [[nodiscard]] std::span<const std::uint64_t> span() const noexcept { return view_; }
  [[nodiscard]] std::size_t size() const noexcept { return view_.size(); }

 private:
  std::vector<std::uint64_t> copy_;
  std::span<const std::uint64_t> view_;
};

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
