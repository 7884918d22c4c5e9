// sim/formats/next_use_file.hpp — the next uses of a kvtb trace in a sidecar file (.kvtn), so
// that Belady and the offline optimum on a very large trace need neither 8 bytes per reference
// of memory nor a key map over all distinct blocks at once.
//
// Layout (little-endian, 64-byte header, then the column):
//
//   offset  size  field
//        0     8  magic "KVTN\r\n\x1a\n"
//        8     4  u32 version (1)
//       12     4  u32 partial_block: 0 skip, 1 cache
//       16     8  u64 refs: cacheable block references of the trace under that mode
//       24     8  u64 the trace's kvtb header checksum (byte 120 of the kvtb; it covers the
//                 trace's header, which holds its payload checksum and size)
//       32     8  u64 the trace's kvtb payload checksum (byte 56)
//       40     8  u64 the trace's file size
//       48     8  u64 column checksum: column_checksum() of next[0..refs)
//       56     8  u64 header checksum: kvtb::checksum of bytes [0, 56)
//       64        u64 next[refs]: kvtk::prefix::next_use_positions(trace, partial_block)
//
// Where: `<trace>.next-<skip|cache>.kvtn` beside the trace (or `DIR/<id>-<mode>.kvtn` when a
// directory is given; <id> = the trace's header checksum in hex), else
// `$TMPDIR/kvtk-next/<id>-<mode>.kvtn` (a directory of this user's, mode 0700), else an unlinked
// temporary file in $TMPDIR that lives as long as the mapping. A path that holds something other
// than a kvtn file (no magic, a link, a directory) is never touched: the next place is used.
//
// Reuse: a file whose header matches the trace (version, mode, the three trace fields, refs,
// size) and whose column checksum matches (one read of the column, pages dropped behind it) is
// mapped read-only. Otherwise it is rebuilt: written to a temporary file in the same directory
// (every write checked, fdatasync'd), then renamed over the stale one; a failure removes the
// temporary. Two processes building the same sidecar at once both succeed (equal files; the later
// rename wins); nothing locks.
//
// Build (memory bounded by options::map_budget, default 160 MiB, plus 2 MiB of buffers):
//  * one pass over the requests counts the cacheable references (no keys read);
//  * when a map over every reference could exceed the budget, a HyperLogLog pass (16 KiB,
//    about 1 % error) estimates the distinct keys, and they are split by a hash into P
//    partitions whose key maps fit the budget;
//  * P = 1: one backward pass over the keys with a key -> next position map writes the column
//    backward, through a buffer, at its offsets;
//  * P > 1: pass p walks the keys backward, keeps only partition p's in its map, and appends
//    their next uses to run p of an unlinked scratch file (refs x 8 bytes in all); a last
//    backward pass takes each reference's value from its partition's run (read in order) and
//    writes the column.
//  Every pass drops the trace's pages behind it (loaded_trace::release). Time: (P + 1 or 2)
//  passes over the trace. Disk: refs x 8 bytes for the sidecar, as much again while P > 1 builds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kvtk/prefix/block_keys.hpp"

namespace kvtk::sim {

class loaded_trace;

/// The next use of every cacheable block reference of a trace, in replay order (as
/// kvtk::prefix::next_use_positions gives them): in memory, or a read-only mapping of a sidecar.
/// Copies share the storage. Thread safety: read-only; release() may be called from any thread.
class next_use_column {
 public:
  next_use_column() = default;
  /// The column held in memory.
  explicit next_use_column(std::vector<std::uint64_t> in_memory);

  [[nodiscard]] std::span<const std::uint64_t> span() const noexcept { return view_; }
  [[nodiscard]] bool empty() const noexcept { return view_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return view_.size(); }
  /// Effects: for a mapped sidecar, drops the whole pages of entries [first, last) from the
  /// process's resident set (the page cache keeps them); nothing for a column in memory.
  void release(std::uint64_t first, std::uint64_t last) const noexcept;
  /// The sidecar's path; "" in memory or for an unlinked temporary file.
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  /// True when a sidecar already on disk was used (not built by this call).
  [[nodiscard]] bool reused() const noexcept { return reused_; }
  /// True for a mapped sidecar.
  [[nodiscard]] bool mapped() const noexcept { return static_cast<bool>(map_); }

 private:
  friend struct next_use_column_access;
  struct mapped_file;
  std::shared_ptr<const void> owned_;  // the in-memory vector
  std::shared_ptr<const mapped_file> map_;
  std::span<const std::uint64_t> view_;
  std::string path_;
  bool reused_ = false;
};

namespace kvtn {

inline constexpr std::uint32_t version = 1;
inline constexpr std::size_t header_bytes = 64;
inline constexpr char magic[8] = {'K', 'V', 'T', 'N', '\r', '\n', '\x1a', '\n'};
/// The key maps' memory limit per pass, unless options say otherwise.
inline constexpr std::size_t default_map_budget = std::size_t{160} << 20;

/// What identifies a kvtb trace: fields of its header.
struct trace_identity {
  std::uint64_t header_checksum = 0, payload_checksum = 0, file_size = 0;
};

/// The identity of a kvtb image (its first 128 bytes; the caller has validated it).
/// Throws: std::invalid_argument when the bytes are too few for a kvtb header.
trace_identity identity_of(std::span<const unsigned char> kvtb_bytes);

/// Checksum of a column (order-free: a sum of one mix per (position, value)), so that a column
/// built backward is summed as it is written.
std::uint64_t column_checksum(std::span<const std::uint64_t> next) noexcept;

struct options {
  std::string dir;  ///< "" = beside the trace; else this directory (which must exist)
  std::size_t map_budget = default_map_budget;  ///< bytes of key map per pass (tests: small)
};

/// The first place tried for trace_path's sidecar (see the header comment).
std::string preferred_path(const std::string& trace_path, const trace_identity& id,
                           kvtk::prefix::partial_block p, const options& o);

/// Outcome of looking at an existing path.
enum class file_state { absent, foreign, stale, valid };
/// Classifies `path` for trace `id` and mode p: absent; foreign (not a kvtn file: never
/// replaced); stale (a kvtn file for something else, truncated or corrupt: replaced); valid.
/// Reads the whole column of a file whose header matches (its checksum).
file_state inspect(const std::string& path, const trace_identity& id,
                   kvtk::prefix::partial_block p);

/// The number of partitions (passes over the keys) a build of t's sidecar under p takes with
/// this key-map budget: 1 when the map of every reference fits, else from the distinct-key
/// estimate. Reads the trace (one pass over its requests, one over its keys when estimating).
std::uint32_t build_partitions(const loaded_trace& t, kvtk::prefix::partial_block p,
                               std::size_t map_budget);

/// The next uses of t (a mapped kvtb file, loaded from trace_path) under p, from its sidecar:
/// reused when valid, else built (see the header comment).
/// Requires: t.kvtb_file() != nullptr.
/// Throws: std::invalid_argument for a trace in memory; output_error naming the file when no
/// place could take a sidecar (every attempt's reason in the message); std::bad_alloc.
next_use_column open(const std::string& trace_path, const loaded_trace& t,
                     kvtk::prefix::partial_block p, const options& o = {});

}  // namespace kvtn
}  // namespace kvtk::sim
