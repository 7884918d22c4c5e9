#include "api/next_uses.hpp"

#include <sys/stat.h>

#include <algorithm>

#include "api/trace_options.hpp"

namespace kvtk::sim {

using kvtk::prefix::partial_block;

void check_next_use_cache(const std::string& value, const std::string& option) {
  if (value == "auto" || value == "off") return;
  if (value.empty()) {
    throw usage_error(option + ": empty (use auto, off or a directory)");
  }
  struct stat st {};
  if (::stat(value.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw usage_error(option + ": '" + value +
                           "' is not an existing directory (use auto, off or a directory)");
  }
}

next_use_column next_uses_for(const std::string& trace_path, const loaded_trace& t, partial_block p,
                              const std::string& cache) {
  const bool sidecar =
      t.kvtb_file() != nullptr && cache != "off" &&
      (cache != "auto" || t.view().keys.size() > next_use_cache_auto_bytes / sizeof(std::uint64_t));
  if (!sidecar) return next_use_column(kvtk::prefix::next_use_positions(t.view(), p));
  kvtn::options o;
  if (cache != "auto") o.dir = cache;
  return kvtn::open(trace_path, t, p, o);
}

namespace detail {

bool optimum_runs_flat(const loaded_trace& lt, partial_block p) {
  const kvtk::prefix::prefix_trace_view& t = lt.view();
  if (t.unit_requests()) return true;
  constexpr std::size_t slice = std::size_t{1} << 16;
  for (std::size_t r = 0; r < t.requests(); r += slice) {
    const std::size_t end = std::min(t.requests(), r + slice);
    const bool flat = kvtk::prefix::single_block_requests(t, p, r, end);
    lt.release(r, end);
    if (!flat) return false;
  }
  return true;
}

namespace {
// Feeds requests to a next-use counter (add(t, p, first, last), position()) in slices, dropping
// the pages of the trace and of next behind each, and reporting the references to bar.
template <class Counter>
void add_sliced(const loaded_trace& lt, partial_block p, Counter& c, const next_use_column& next,
                std::size_t slice, progress_relay* bar) {
  const kvtk::prefix::prefix_trace_view& t = lt.view();
  for (std::size_t r = 0; r < t.requests(); r += slice) {
    const std::size_t end = std::min(t.requests(), r + slice);
    const std::uint64_t from = c.position();
    c.add(t, p, r, end);
    lt.release(r, end);
    next.release(from, c.position());
    if (bar != nullptr) bar->add(c.position() - from);
  }
}
}  // namespace

kvtk::prefix::offline_optimum::result optimum_sliced(const loaded_trace& lt,
                                                     std::uint32_t capacity, bool flat,
                                                     partial_block p, const next_use_column& next,
                                                     progress_relay* bar) {
  kvtk::prefix::offline_optimum o(capacity, flat, next.span());
  add_sliced(lt, p, o, next, std::size_t{1} << 14, bar);
  return o.finish();
}

kvtk::prefix::ideal_counts ideal_sliced(const loaded_trace& lt, partial_block p,
                                        const next_use_column& next) {
  kvtk::prefix::next_use_ideal_counter c(next.span());
  add_sliced(lt, p, c, next, std::size_t{1} << 16, nullptr);
  return c.finish();
}

}  // namespace detail
}  // namespace kvtk::sim
