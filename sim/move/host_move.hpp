// sim/move/host_move.hpp — the host backend of real block movement: DRAM and file pools,
// deterministic block contents with verification, copy mechanisms, and the timing model fit.
//
// The CUDA backend (device and pinned pools, cudaMemcpyAsync / batched / kernel mechanisms) is
// issue 8's remaining work; this part builds and runs everywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kvtk/move/kv_layout.hpp"
#include "kvtk/move/timing_fit.hpp"

namespace kvtk::sim::move {

/// A DRAM pool of `blocks` blocks of a layout (page-aligned, zeroed).
class host_pool {
 public:
  host_pool(const kvtk::move::kv_layout& layout, std::uint64_t blocks);
  [[nodiscard]] std::byte* piece(std::uint64_t block, std::uint64_t p) noexcept {
    return base_.get() + layout_.offset(block, p, blocks_);
  }
  [[nodiscard]] const kvtk::move::kv_layout& layout() const noexcept { return layout_; }
  [[nodiscard]] std::uint64_t blocks() const noexcept { return blocks_; }

 private:
  struct free_deleter {
    void operator()(std::byte* p) const noexcept;
  };
  kvtk::move::kv_layout layout_;
  std::uint64_t blocks_;
  std::unique_ptr<std::byte, free_deleter> base_;
};

/// A file of `blocks` blocks (block-first), read and written with pread/pwrite; O_DIRECT when
/// the filesystem accepts it (else buffered, and direct() says so).
class file_pool {
 public:
  /// Creates (truncates) `path`. Throws std::runtime_error naming the path and the errno text.
  file_pool(std::string path, std::uint64_t block_bytes, std::uint64_t blocks, bool try_direct);
  file_pool(const file_pool&) = delete;
  file_pool& operator=(const file_pool&) = delete;
  ~file_pool();
  [[nodiscard]] bool direct() const noexcept { return direct_; }
  [[nodiscard]] std::uint64_t block_bytes() const noexcept { return block_bytes_; }
  [[nodiscard]] std::uint64_t blocks() const noexcept { return blocks_; }
  /// Writes / reads `count` consecutive blocks starting at `block` from / into `buf`.
  /// Throws std::runtime_error on an I/O error or a range beyond the pool's blocks.
  void write(std::uint64_t block, std::uint64_t count, const std::byte* buf);
  void read(std::uint64_t block, std::uint64_t count, std::byte* buf);

 private:
  std::string path_;
  std::uint64_t block_bytes_, blocks_;
  int fd_ = -1;
  int tracked_ = -1;  // util/output_file.hpp track_temporary
  bool direct_ = false;
};

/// Fills a block (all its pieces) with the pattern of `key`; verify() checks it.
void fill_block(host_pool& pool, std::uint64_t block, std::uint64_t key);
[[nodiscard]] bool verify_block(host_pool& pool, std::uint64_t block, std::uint64_t key);

enum class mechanism : std::uint8_t {
  per_piece,  ///< one memcpy per contiguous piece of each block
  coalesced,  ///< runs of consecutive block ids (in both pools) as one memcpy per piece row
  threads,    ///< the blocks split into contiguous shares, one per io_pool worker (and the
              ///< caller), each share coalesced: parallel memcpy, or one pread/pwrite per share
};

/// Copies blocks src_ids[i] of `src` to dst_ids[i] of `dst` (same layout). `threads` copies as
/// `coalesced` here (the bench splits the work over its io_pool first).
/// Returns the number of memcpy calls made.  Throws std::invalid_argument on a layout mismatch.
std::uint64_t copy_blocks(host_pool& src, std::span<const std::uint64_t> src_ids, host_pool& dst,
                          std::span<const std::uint64_t> dst_ids, mechanism m);

// The timing model and its fit live in kvtk/move/timing_fit.hpp (shared with the CUDA bench).
using kvtk::move::fit_timing;
using kvtk::move::timing_model;
using kvtk::move::timing_sample;

}  // namespace kvtk::sim::move
