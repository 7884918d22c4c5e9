// sim/api/next_uses.hpp — the next uses that offline policies and the optimum need (in memory,
// or from a kvtb trace's sidecar: formats/next_use_file.hpp), and replays in slices that let go
// of the pages of the trace and of the sidecar they have passed.
#pragma once

#include <cstdint>
#include <kvtk/prefix/optimum.hpp>
#include <kvtk/prefix/replay.hpp>
#include <span>
#include <string>

#include "api/progress.hpp"
#include "formats/next_use_file.hpp"
#include "formats/requests.hpp"

namespace kvtk::sim {

/// `auto` uses a sidecar above this many bytes of next uses (8 per block key: 32 Mi keys).
inline constexpr std::uint64_t next_use_cache_auto_bytes = std::uint64_t{256} << 20;

/// Effects: throws usage_error naming `option` unless `value` is "auto", "off" or the path
/// of an existing directory.
void check_next_use_cache(const std::string& value, const std::string& option = "--next-use-cache");

/// The next uses of t (loaded from trace_path) under p, as `cache` (a next_use_cache option)
/// says: "off" = computed in memory (kvtk::prefix::next_use_positions: 8 bytes a reference plus
/// a key map); a directory = from a sidecar in it; "auto" = from a sidecar beside the trace (else
/// in $TMPDIR/kvtk-next) when t is a mapped kvtb file with more than 256 MiB of next uses (by its
/// block keys), else in memory. A trace that is not kvtb is always computed in memory. The
/// numbers are the same every way.
/// Throws: output_error when a sidecar can be neither reused nor written; std::bad_alloc.
next_use_column next_uses_for(const std::string& trace_path, const loaded_trace& t,
                              kvtk::prefix::partial_block p, const std::string& cache);

namespace detail {

/// Replays t in slices of requests through idx (a replay_requests split, so the counts equal one
/// whole replay), reporting progress to bar (when not null) and, after each slice, dropping the
/// pages of the trace (loaded_trace::release) and, for an offline Index, of next (when not null;
/// online indexes are given no next uses) that it has passed.
template <class Index>
kvtk::prefix::prefix_counts replay_sliced(const loaded_trace& lt, Index& idx,
                                          kvtk::prefix::partial_block p,
                                          const next_use_column* next, progress_relay* bar) {
  const kvtk::prefix::prefix_trace_view& t = lt.view();
  std::span<const std::uint64_t> nx;
  if constexpr (Index::offline) {
    if (next != nullptr) nx = next->span();
  }
  kvtk::prefix::prefix_counts c;
  std::uint64_t pos = 0;
  constexpr std::size_t slice = std::size_t{1} << 14;
  for (std::size_t r = 0; r < t.requests(); r += slice) {
    const std::uint64_t before = c.block_refs, from = pos;
    const std::size_t end = std::min(t.requests(), r + slice);
    kvtk::prefix::replay_requests(t, idx, p, nx, r, end, c, pos);
    lt.release(r, end);
    if constexpr (Index::offline) {  // only offline indexes read next uses
      if (next != nullptr && !nx.empty()) next->release(from, pos);
    }
    if (bar != nullptr) bar->add(c.block_refs - before);
  }
  c.evictions = idx.evictions();
  return c;
}

/// kvtk::prefix::single_block_requests over the whole trace, in slices that drop the pages read.
bool optimum_runs_flat(const loaded_trace& lt, kvtk::prefix::partial_block p);

/// kvtk::prefix::optimum_and_bound(t, capacity, p, next) in slices that drop the pages of the
/// trace and of next behind them; `flat` is optimum_runs_flat(lt, p), computed once for every
/// capacity.
kvtk::prefix::offline_optimum::result optimum_sliced(const loaded_trace& lt,
                                                     std::uint32_t capacity, bool flat,
                                                     kvtk::prefix::partial_block p,
                                                     const next_use_column& next,
                                                     progress_relay* bar);

/// kvtk::prefix::replay_ideal(t, p, next) in slices that drop the pages of the trace and of next
/// behind them (next_use_ideal_counter).
kvtk::prefix::ideal_counts ideal_sliced(const loaded_trace& lt, kvtk::prefix::partial_block p,
                                        const next_use_column& next);

}  // namespace detail
}  // namespace kvtk::sim
