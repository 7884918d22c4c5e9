#include "move/host_move.hpp"
#include "util/output_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>

#include "kvtk/move/block_pattern.hpp"

namespace kvtk::sim::move {

void host_pool::free_deleter::operator()(std::byte* p) const noexcept { std::free(p); }

host_pool::host_pool(const kvtk::move::kv_layout& layout, std::uint64_t blocks)
    : layout_(layout), blocks_(blocks) {
  layout_.validate();
  if (blocks == 0) throw std::invalid_argument("host_pool: 0 blocks");
  const std::uint64_t bytes = layout_.bytes_per_block() * blocks;
  void* p = nullptr;
  if (posix_memalign(&p, 4096, (bytes + 4095) / 4096 * 4096) != 0) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  base_.reset(static_cast<std::byte*>(p));
}

void fill_block(host_pool& pool, std::uint64_t block, std::uint64_t key) {
  const auto& l = pool.layout();
  for (std::uint64_t p = 0; p < l.pieces(); ++p) {
    kvtk::move::fill_pattern(pool.piece(block, p), key, p, l.piece_bytes());
  }
}

bool verify_block(host_pool& pool, std::uint64_t block, std::uint64_t key) {
  const auto& l = pool.layout();
  for (std::uint64_t p = 0; p < l.pieces(); ++p) {
    if (!kvtk::move::check_pattern(pool.piece(block, p), key, p, l.piece_bytes())) return false;
  }
  return true;
}

std::uint64_t copy_blocks(host_pool& src, std::span<const std::uint64_t> src_ids, host_pool& dst,
                          std::span<const std::uint64_t> dst_ids, mechanism m) {
  const auto& l = src.layout();
  if (l.bytes_per_block() != dst.layout().bytes_per_block() || l.order != dst.layout().order ||
      src_ids.size() != dst_ids.size()) {
    throw std::invalid_argument("copy_blocks: layouts or id lists differ");
  }
  std::uint64_t calls = 0;
  for (std::size_t i = 0; i < src_ids.size();) {
    std::size_t run = 1;
    if (m != mechanism::per_piece) {
      while (i + run < src_ids.size() && src_ids[i + run] == src_ids[i] + run &&
             dst_ids[i + run] == dst_ids[i] + run) {
        ++run;
      }
    }
    // In block-first order a run is one range; in layer-first one range per piece row.
    const std::uint64_t rows = l.order == kvtk::move::arrangement::block_first ? 1 : l.pieces();
    const std::uint64_t bytes =
        (l.order == kvtk::move::arrangement::block_first ? l.bytes_per_block() : l.piece_bytes()) *
        run;
    for (std::uint64_t p = 0; p < rows; ++p) {
      std::memcpy(dst.piece(dst_ids[i], p), src.piece(src_ids[i], p), bytes);
      ++calls;
    }
    i += run;
  }
  return calls;
}

file_pool::file_pool(std::string path, std::uint64_t block_bytes, std::uint64_t blocks,
                     bool try_direct)
    : path_(std::move(path)), block_bytes_(block_bytes), blocks_(blocks) {
  if (try_direct && block_bytes % 4096 == 0) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_DIRECT | O_CLOEXEC, 0644);
    direct_ = fd_ >= 0;
    // tmpfs refuses O_DIRECT with EINVAL after creating the file: remove it before retrying.
    if (!direct_ && errno == EINVAL) ::unlink(path_.c_str());
    if (!direct_) {
      std::cerr << "kvtk move: O_DIRECT refused for '" << path_ << "' (" << std::strerror(errno)
                << "); using buffered I/O\n";
    }
  }
  if (fd_ < 0) fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot open '" + path_ + "': " + std::strerror(errno));
  tracked_ = track_temporary(path_);  // removed on SIGINT/SIGTERM too
  if (::ftruncate(fd_, static_cast<off_t>(block_bytes * blocks)) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd_);
    untrack_temporary(tracked_);
    throw std::runtime_error("cannot size '" + path_ + "': " + why);
  }
}

file_pool::~file_pool() {
  untrack_temporary(tracked_);
  if (fd_ >= 0) ::close(fd_);
}

void file_pool::write(std::uint64_t block, std::uint64_t count, const std::byte* buf) {
  if (block > blocks_ || count > blocks_ - block) {
    throw std::runtime_error("write of blocks [" + std::to_string(block) + ", " +
                             std::to_string(block + count) + ") beyond the " +
                             std::to_string(blocks_) + " blocks of '" + path_ + "'");
  }
  std::uint64_t done = 0, total = count * block_bytes_;
  while (done < total) {
    const ssize_t n = ::pwrite(fd_, buf + done, total - done,
                               static_cast<off_t>(block * block_bytes_ + done));
    if (n <= 0) throw std::runtime_error("write to '" + path_ + "' failed: " + std::strerror(errno));
    done += static_cast<std::uint64_t>(n);
  }
}

void file_pool::read(std::uint64_t block, std::uint64_t count, std::byte* buf) {
  if (block > blocks_ || count > blocks_ - block) {
    throw std::runtime_error("read of blocks [" + std::to_string(block) + ", " +
                             std::to_string(block + count) + ") beyond the " +
                             std::to_string(blocks_) + " blocks of '" + path_ + "'");
  }
  std::uint64_t done = 0, total = count * block_bytes_;
  while (done < total) {
    const ssize_t n = ::pread(fd_, buf + done, total - done,
                              static_cast<off_t>(block * block_bytes_ + done));
    if (n <= 0) throw std::runtime_error("read from '" + path_ + "' failed: " + std::strerror(errno));
    done += static_cast<std::uint64_t>(n);
  }
}

}  // namespace kvtk::sim::move
