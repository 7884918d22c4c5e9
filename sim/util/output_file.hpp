// sim/util/output_file.hpp — the one way kvtk writes a file the user named.
//
// The rules (README "Output files"), the same for every command and every format:
//  * "-" is standard output.
//  * A character device or a FIFO (/dev/null, /dev/stdout, a named pipe) is written directly,
//    never replaced.
//  * A regular file is written to a temporary file created in the destination's directory
//    (O_CREAT|O_EXCL|O_NOFOLLOW, a unique name), every write and the close are checked, and
//    the temporary is renamed over the destination on commit(). On an error, on destruction
//    without commit() and (in the executable, see install_signal_cleanup) on SIGINT/SIGTERM/
//    SIGHUP the temporary is removed, so the destination is either untouched or complete.
//  * An existing regular file is replaced only with `force`; without it the rename refuses to
//    replace a file that appeared meanwhile (RENAME_NOREPLACE).
//  * A destination that is one of the run's inputs (the same file through any path, symlink or
//    hard link; see note_input) is refused, with or without `force`.
//  * Directories, sockets and block devices are refused.
// Errors are output_error: "cannot write 'PATH': reason".
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace kvtk::sim {

/// A destination kvtk may not or could not write; what() names the file and the reason.
struct output_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A destination refused before anything was written (it exists and `force` is not given, it is
/// an input, a directory, ...). A usage problem: the executable exits 2.
struct output_refused : output_error {
  using output_error::output_error;
};

/// Effects: remembers the file `path` names (device and inode) as an input of this process, so
/// that no output may replace it. Paths that do not name an existing file are ignored.
/// Thread-safe. Throws: nothing.
void note_input(const std::string& path) noexcept;

/// Effects: throws output_refused when `path` may not be written: it names a noted input, an
/// existing regular file (unless `force`), a directory, a socket or block device, or a
/// directory that does not exist. `option` ("--json", "-o") prefixes the message.
void check_output(const std::string& path, bool force, const std::string& option);

/// Effects: installs SIGINT, SIGTERM and SIGHUP handlers that remove every open output_file's
/// temporary, then re-raise the signal with its default action. For executables: a library
/// embedded in another program (Python) leaves the host's handlers alone.
void install_signal_cleanup();

/// Effects: registers a scratch file of this process for removal by the signal handlers of
/// install_signal_cleanup. Returns a token for untrack_temporary (-1: not tracked).
int track_temporary(const std::string& path) noexcept;
/// Effects: forgets a token of track_temporary (the caller removes the file itself).
void untrack_temporary(int token) noexcept;

class output_file {
 public:
  /// Opens `path` for writing (see the rules above). Throws output_refused or output_error.
  output_file(std::string path, bool force);
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;
  /// Effects: without commit(), removes the temporary; the destination is untouched.
  ~output_file();

  /// Appends bytes (buffered). Throws output_error naming the file and the errno text.
  void write(const void* data, std::size_t bytes);
  void write(std::string_view text) { write(text.data(), text.size()); }
  /// Effects: flushes, closes (both checked) and renames the temporary into place.
  /// Throws output_error; the temporary is removed.
  void commit();

  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  void flush();
  void fail(const std::string& what, int err);
  std::string path_, temp_;  // temp_ empty: writing the destination itself (stdout, device)
  int fd_ = -1;
  bool owns_fd_ = false, force_ = false, committed_ = false;
  int slot_ = -1;  // the signal-cleanup slot of temp_
  std::string buf_;
};

/// Writes `text` to `path` as one output_file (commit included).
void write_output(const std::string& path, std::string_view text, bool force);

}  // namespace kvtk::sim
