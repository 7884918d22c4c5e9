// sim/util/memory_budget.hpp — checking a structure's size against this machine before
// allocating it, so that an option asking for more memory than there is gets a message naming
// the option and the figures instead of std::bad_alloc halfway through a run.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace kvtk::sim {

/// Thrown when a configuration needs more memory than memory_limit_bytes(). Derives from
/// std::invalid_argument: it is a property of the options, reported like a bad option (exit 2).
struct memory_budget_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// Bytes this process may allocate: the smallest of physical memory, RLIMIT_AS and RLIMIT_DATA
/// (so `ulimit -v` is honoured). Complexity: two system calls. Throws: nothing.
std::uint64_t memory_limit_bytes() noexcept;

/// Effects: throws memory_budget_error "<what> needs about X GiB; this process may use Y GiB"
/// when `bytes` exceeds memory_limit_bytes(); otherwise nothing.
void check_memory(const std::string& what, double bytes);

/// A planning bound on the bytes one cache entry takes (slot table, node and policy state of
/// the largest registered policy, measured with 10^6 entries), used with check_memory.
inline constexpr double cache_entry_bytes = 200;

}  // namespace kvtk::sim
