#include "util/output_file.hpp"
#include "util/temp_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <random>
#include <utility>
#include <vector>

namespace kvtk::sim {
namespace {

std::mutex inputs_lock;
std::vector<std::pair<dev_t, ino_t>>& inputs() {
  static std::vector<std::pair<dev_t, ino_t>> v;
  return v;
}

bool is_input(const struct stat& st) {
  const std::lock_guard<std::mutex> hold(inputs_lock);
  for (const auto& [dev, ino] : inputs()) {
    if (dev == st.st_dev && ino == st.st_ino) return true;
  }
  return false;
}

// Temporaries to remove on a signal: fixed storage, so the handler only reads memory and calls
// unlink (both async-signal-safe).
constexpr int slots = 64;
char slot_path[slots][4096];
std::atomic<bool> slot_used[slots];

int claim_slot(const std::string& path) noexcept {
  if (path.size() >= sizeof slot_path[0]) return -1;
  for (int i = 0; i < slots; ++i) {
    bool expected = false;
    if (slot_used[i].load() || !slot_used[i].compare_exchange_strong(expected, true)) continue;
    // Written while marked used but before the handler can see a complete name: the handler
    // may then unlink a prefix of it, which names nothing of ours (the name is unique).
    std::memcpy(slot_path[i], path.c_str(), path.size() + 1);
    return i;
  }
  return -1;  // more than 64 open outputs: those beyond are removed on errors, not on signals
}

void release_slot(int i) noexcept {
  if (i >= 0) slot_used[i].store(false);
}

extern "C" void remove_temporaries(int sig) {
  for (int i = 0; i < slots; ++i) {
    if (slot_used[i].load()) ::unlink(slot_path[i]);
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

std::string reason(int err) { return std::strerror(err); }

std::string quoted(const std::string& option, const std::string& path) {
  return (option.empty() ? "" : option + ": ") + "cannot write '" + path + "': ";
}

// The file a destination path writes: a symlink's target (so the link keeps pointing at it).
std::string resolved(const std::string& path) {
  struct stat st{};
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    std::error_code ec;
    const auto target = std::filesystem::canonical(path, ec);
    if (!ec) return target.string();
  }
  return path;
}

}  // namespace

void note_input(const std::string& path) noexcept {
  struct stat st{};
  if (path.empty() || path == "-" || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return;
  }
  try {
    const std::lock_guard<std::mutex> hold(inputs_lock);
    inputs().emplace_back(st.st_dev, st.st_ino);
  } catch (...) {  // out of memory noting an input: the check is then weaker, never wrong
  }
}

void check_output(const std::string& path, bool force, const std::string& option) {
  if (path == "-") return;
  if (path.empty()) throw output_refused((option.empty() ? "" : option + ": ") + "empty file name");
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw output_refused(quoted(option, path) + "it is a directory");
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return;  // written directly
    if (!S_ISREG(st.st_mode)) {
      throw output_refused(quoted(option, path) +
                           "not a regular file, character device or FIFO");
    }
    if (is_input(st)) {
      throw output_refused(quoted(option, path) +
                           "it is an input of this run (the same file); choose another name");
    }
    if (!force) {
      throw output_refused(quoted(option, path) + "it exists; pass --force to overwrite it");
    }
    return;
  }
  const int err = errno;
  if (err != ENOENT) throw output_refused(quoted(option, path) + reason(err));
  struct stat lst{};
  if (::lstat(path.c_str(), &lst) == 0) {  // a dangling symlink: where it points is unclear
    throw output_refused(quoted(option, path) + "a symbolic link to nothing");
  }
  const auto dir = std::filesystem::path(path).parent_path();
  const std::string d = dir.empty() ? "." : dir.string();
  if (::stat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw output_refused(quoted(option, path) + "directory '" + d + "' does not exist");
  }
}

int track_temporary(const std::string& path) noexcept { return claim_slot(path); }
void untrack_temporary(int token) noexcept { release_slot(token); }

void install_signal_cleanup() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction sa{};
    sa.sa_handler = remove_temporaries;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

output_file::output_file(std::string path, bool force) : path_(std::move(path)), force_(force) {
  check_output(path_, force_, "");
  if (path_ == "-") {
    std::cout.flush();  // what the command printed before stays before
    std::fflush(stdout);
    fd_ = 1;
    return;
  }
  const std::string dest = resolved(path_);
  struct stat st{};
  const bool exists = ::stat(dest.c_str(), &st) == 0;
  if (exists && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
    fd_ = ::open(dest.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd_ < 0) throw output_error("cannot write '" + path_ + "': " + reason(errno));
    owns_fd_ = true;
    return;
  }
  const auto p = std::filesystem::path(dest);
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  fd_ = create_temporary(dir, p.filename().string(), O_WRONLY, temp_);
  if (fd_ < 0) {
    const int err = errno;
    temp_.clear();
    throw output_error("cannot write '" + path_ + "': cannot create a file in '" + dir +
                       "': " + reason(err));
  }
  owns_fd_ = true;
  slot_ = claim_slot(temp_);
  if (exists) (void)::fchmod(fd_, st.st_mode & 07777);  // a replaced file keeps its mode
  path_ = dest;
}

output_file::~output_file() {
  if (owns_fd_ && fd_ >= 0) ::close(fd_);
  if (!temp_.empty() && !committed_) ::unlink(temp_.c_str());
  release_slot(slot_);
}

void output_file::fail(const std::string& what, int err) {
  if (owns_fd_ && fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_.empty()) ::unlink(temp_.c_str());
  release_slot(slot_);
  slot_ = -1;
  temp_.clear();
  committed_ = true;  // nothing left to clean up
  throw output_error("cannot write '" + path_ + "': " + what + (err != 0 ? reason(err) : ""));
}

void output_file::flush() {
  std::size_t done = 0;
  while (done < buf_.size()) {
    const ssize_t n = ::write(fd_, buf_.data() + done, buf_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("", n < 0 ? errno : EIO);
    done += static_cast<std::size_t>(n);
  }
  buf_.clear();
}

void output_file::write(const void* data, std::size_t bytes) {
  if (fd_ < 0) throw output_error("cannot write '" + path_ + "': the file is closed");
  if (bytes == 0) return;
  buf_.append(static_cast<const char*>(data), bytes);
  if (buf_.size() >= (std::size_t{1} << 20)) flush();
}

void output_file::commit() {
  if (fd_ < 0) throw output_error("cannot write '" + path_ + "': the file is closed");
  flush();
  if (owns_fd_) {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) {
      owns_fd_ = false;
      fail("closing: ", errno);
    }
  } else {
    fd_ = -1;
  }
  if (temp_.empty()) {
    committed_ = true;
    return;
  }
  // The destination may have changed since the check: look again, and never replace an input.
  struct stat st{};
  if (::stat(path_.c_str(), &st) == 0 && S_ISREG(st.st_mode) && is_input(st)) {
    fail("it is an input of this run (the same file); choose another name", 0);
  }
  int rc = 0;
  if (force_) {
    rc = ::rename(temp_.c_str(), path_.c_str());
  } else {
    rc = ::renameat2(AT_FDCWD, temp_.c_str(), AT_FDCWD, path_.c_str(), RENAME_NOREPLACE);
    if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {  // no RENAME_NOREPLACE here
      rc = ::link(temp_.c_str(), path_.c_str());
      if (rc == 0) ::unlink(temp_.c_str());
    }
  }
  if (rc != 0) {
    const int err = errno;
    owns_fd_ = false;
    if (err == EEXIST) fail("it appeared while kvtk was writing; pass --force to overwrite it", 0);
    fail("renaming the finished file into place: ", err);
  }
  committed_ = true;
  release_slot(slot_);
  slot_ = -1;
}

void write_output(const std::string& path, std::string_view text, bool force) {
  output_file out(path, force);
  out.write(text);
  out.commit();
}

}  // namespace kvtk::sim
