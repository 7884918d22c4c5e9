#include "util/memory_budget.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace kvtk::sim {

std::uint64_t memory_limit_bytes() noexcept {
  std::uint64_t limit = UINT64_MAX;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) {
    limit = static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
  }
  for (int resource : {RLIMIT_AS, RLIMIT_DATA}) {
    rlimit r{};
    if (::getrlimit(resource, &r) == 0 && r.rlim_cur != RLIM_INFINITY) {
      limit = std::min<std::uint64_t>(limit, r.rlim_cur);
    }
  }
  return limit;
}

void check_memory(const std::string& what, double bytes) {
  const double limit = static_cast<double>(memory_limit_bytes());
  if (!(bytes <= limit)) {
    char msg[160];
    std::snprintf(msg, sizeof msg, " needs about %.3g GiB; this process may use %.3g GiB",
                  bytes / 1073741824.0, limit / 1073741824.0);
    throw memory_budget_error(what + msg);
  }
}

}  // namespace kvtk::sim
