// sim/formats/kvtb.hpp — kvtk's binary request trace (.kvtb): written once by
// `kvtk trace convert`, then memory-mapped by every replay with no parsing.
//
// Layout (little-endian; every section starts on an 8-byte boundary, u32 columns are padded):
//
//   offset  size  field
//        0     8  magic "KVTB\r\n\x1a\n" (the CR/LF/^Z bytes catch text-mode mangling)
//        8     4  u32 version (1)
//       12     4  u32 block_tokens (> 0)
//       16     8  u64 requests (n)
//       24     8  u64 keys (k)
//       32     8  u64 columns: optional-column bits (below)
//       40     8  u64 tenant_bytes: size of the tenant-name table
//       48     8  u64 file_size: the whole file, header included
//       56     8  u64 payload_checksum: kvtb::checksum of bytes [128, file_size)
//       64     8  u64 kind_bytes: size of the kind-name table (0 in files without kinds)
//       72     8  u64 joins (j): fan-in ids (0 without bit 11)
//       80    40  reserved, zero
//      120     8  u64 header_checksum: kvtb::checksum of bytes [0, 120)
//      128        offsets[n+1] u64, input_length[n] u64, keys[k] u64, then the optional columns
//                 present, in bit order: arrival_s[n] f64 (bit 0), output_length[n] u64 (1),
//                 priority[n] u32 (2), session[n] u64 (3), tenant[n] u32 (4),
//                 request_block_tokens[n] u32 (5), request_id[n] u64 (6; ~0 = none),
//                 parent[n] u64 (7; ~0 = none), turn[n] u32 (8; ~0 = none), kind[n] u32 (9),
//                 tool_s[n] f64 (10; NaN = no tool call), fan-in (11): join_offsets[n+1] u64
//                 and join_ids[j] u64 (request r also waits for the ids
//                 join_ids[join_offsets[r] .. join_offsets[r+1]), its parents after `parent`);
//                 then the tenant names, then
//                 the kind names, each table '\n'-separated (name 0 = "none" when present).
//
// Invariants checked on open (a file that passes cannot make a replay read out of bounds):
// magic, version, header checksum, file size == header size == size implied by the counts,
// payload checksum, offsets non-decreasing from 0 to k, tenant and kind indexes < number of names,
// block sizes > 0; fan-in (column bit 11): join offsets non-decreasing from 0 to j, joins only on
// a request with a parent, at most 1024 parents, none repeated, none 2^64-1. Anything else is
// "file:0: reason".
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "formats/trace_error.hpp"
#include "kvtk/prefix/replay.hpp"

namespace kvtk::sim {
struct request_record;
}

namespace kvtk::sim::kvtb {

inline constexpr std::uint32_t version = 1;
inline constexpr std::size_t header_bytes = 128;
inline constexpr char magic[8] = {'K', 'V', 'T', 'B', '\r', '\n', '\x1a', '\n'};

/// Streaming 64-bit checksum over 8-byte words (4 interleaved multiply-rotate lanes, then an
/// avalanche). Detects truncation, bit flips and reordered words; not cryptographic.
class checksum {
 public:
  void update(std::span<const std::uint64_t> words) noexcept;
  [[nodiscard]] std::uint64_t digest() const noexcept;

 private:
  std::uint64_t lane_[4] = {0x9E3779B185EBCA87ull, 0xC2B2AE3D27D4EB4Full, 0x165667B19E3779F9ull,
                            0x85EBCA77C2B2AE63ull};
  std::uint64_t words_ = 0;
};

/// The sealed header of kvtk's binary files (kvtb here, the kvtn next-use sidecar): an 8-byte
/// magic first and, in its last 8 bytes, the checksum of every byte before them, so that a torn
/// or edited header is caught before any count in it is trusted.
/// seal_header: writes that checksum.  Requires: header.size() a multiple of 8 and >= 16.
void seal_header(std::span<unsigned char> header) noexcept;
/// Whether the last 8 bytes of `header` are the checksum of the rest.  Requires: as seal_header.
[[nodiscard]] bool header_sealed(std::span<const unsigned char> header) noexcept;

/// A validated kvtb image. The view points into the bytes given to parse().
struct image {
  kvtk::prefix::prefix_trace_view view;
  std::vector<std::string> tenants;
  std::vector<std::string> kinds;
};

/// Validates `bytes` (named `name` in errors) and returns views into them.
/// Requires: bytes.data() is 8-byte aligned (mmap and std::vector<std::uint64_t> are).
/// Throws: trace_error("name:0: reason") for any violated invariant (see the layout above).
/// `mapped`: the bytes are this file mapping, whose pages are dropped from the process (not from
/// the page cache) once checked, so that opening a large file does not make it all resident.
image parse(std::span<const unsigned char> bytes, const std::string& name,
            const class mapping* mapped = nullptr);

/// Drops the pages of requests [first, last) of a view into `m` (their keys and every column's
/// entries) from the process's resident set: for passes over a mapped trace, once they are done
/// with a stretch of it.
void drop_requests(const mapping& m, const kvtk::prefix::prefix_trace_view& v, std::size_t first,
                   std::size_t last) noexcept;

/// The block size from a kvtb header (magic, header checksum and version checked; the payload is
/// not read). Throws: trace_error as parse.
std::uint32_t header_block_tokens(std::span<const unsigned char> bytes, const std::string& name);

/// True when the file starts with the kvtb magic.
bool has_magic(const std::string& path);

/// A read-only memory mapping of a whole file. Throws trace_error when it cannot be opened.
class mapping {
 public:
  explicit mapping(const std::string& path);
  mapping(const mapping&) = delete;
  mapping& operator=(const mapping&) = delete;
  ~mapping();
  [[nodiscard]] std::span<const unsigned char> bytes() const noexcept {
    return {static_cast<const unsigned char*>(data_), size_};
  }
  /// Effects: drops the whole pages inside `range` (a part of this mapping) from the process's
  /// resident set; the next access reads them back from the page cache. Contents never change.
  void drop(std::span<const unsigned char> range) const noexcept;

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

/// Writes a kvtb file from a stream of requests in constant memory: the columns are spooled to
/// temporary files and joined by finish(), which writes `path` through a temporary name and a
/// rename, so a failed conversion never leaves a half-written trace under the real name.
class writer {
 public:
  /// Writes to `path` by the output rules (util/output_file.hpp; "-" is stdout); `force`
  /// replaces an existing file. The file appears complete on finish(), or not at all.
  writer(std::string path, std::uint32_t block_tokens, bool force = false);
  writer(const writer&) = delete;
  writer& operator=(const writer&) = delete;
  ~writer();
  /// Throws: trace_error for parents no reader accepts (check_parents), unless check_parents
  /// is off (tests that make such files for the reader's checks).
  void add(const request_record& r);
  bool check_parents = true;
  /// Throws: output_error (a std::runtime_error) naming the file on an I/O error.
  void finish();

 private:
  enum column : int {
    offsets, input, keys, arrival, output, priority, session, tenant, rbt, id, parent, turn, kind, tool_s,
    join_offsets, join_ids, count
  };
  void put(column c, const void* data, std::size_t bytes);
  std::string path_;
  std::uint32_t block_tokens_;
  bool force_;
  std::FILE* spool_[count] = {};
  std::uint64_t requests_ = 0, keys_ = 0, columns_ = 0, joins_ = 0;
  std::vector<std::string> tenant_names_, kind_names_;
  std::unordered_map<std::string, std::uint32_t> tenant_index_, kind_index_;
};

}  // namespace kvtk::sim::kvtb
