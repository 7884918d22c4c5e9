// sim/util/temp_file.hpp — the one way kvtk makes a scratch file beside a destination: a new,
// uniquely named, hidden file ".<base>.kvtk-<pid>-<random>" in the destination's directory
// (O_CREAT|O_EXCL|O_NOFOLLOW: never an existing file, never through a link), registered with the
// signal handlers (output_file.hpp) so that an interrupted run leaves nothing behind. Used by
// output_file (every output the user names) and the next-use sidecar (formats/next_use_file).
#pragma once

#include <fcntl.h>

#include <string>

namespace kvtk::sim {

/// Effects: creates ".<base>.kvtk-<pid>-<random>" in `dir`, opened with `flags` | O_CREAT |
/// O_EXCL | O_NOFOLLOW | O_CLOEXEC (mode 0666 before the umask), trying 16 names. Returns the
/// descriptor and sets `path`; returns -1 with errno set when no file could be made.
/// Not tracked for the signal handlers (the caller decides).
int create_temporary(const std::string& dir, const std::string& base, int flags,
                     std::string& path) noexcept;

/// A scratch file that removes itself unless disowned; tracked for the signal handlers while it
/// has a name. Thread safety: one owner.
class temp_file {
 public:
  temp_file() = default;
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;
  ~temp_file() { discard(); }

  /// Effects: create_temporary(dir, base, O_RDWR) and tracking. Returns false (errno set) when
  /// no file could be made.  Requires: no file held.
  bool create(const std::string& dir, const std::string& base) noexcept;
  /// Effects: closes and removes the file (nothing when none is held).
  void discard() noexcept;
  /// Effects: forgets the name (renamed into place, or unlinked by the caller); the descriptor
  /// stays open and owned.
  void disown() noexcept;

  [[nodiscard]] int fd() const noexcept { return fd_; }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
  int token_ = -1;
};

}  // namespace kvtk::sim
