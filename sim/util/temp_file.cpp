// sim/util/temp_file.cpp — scratch files beside a destination (util/temp_file.hpp).
#include "util/temp_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <random>

#include "util/output_file.hpp"

namespace kvtk::sim {

int create_temporary(const std::string& dir, const std::string& base, int flags,
                     std::string& path) noexcept {
  try {
    std::random_device rd;
    for (int attempt = 0; attempt < 16; ++attempt) {
      char suffix[48];
      std::snprintf(suffix, sizeof suffix, ".kvtk-%ld-%08x", static_cast<long>(::getpid()), rd());
      std::string name = dir + "/." + base + suffix;
      const int fd = ::open(name.c_str(), flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
      if (fd >= 0) {
        path = std::move(name);
        return fd;
      }
      if (errno != EEXIST) return -1;
    }
  } catch (...) {  // std::random_device or the name's allocation
    errno = ENOMEM;
    return -1;
  }
  return -1;  // errno: EEXIST, 16 times
}

bool temp_file::create(const std::string& dir, const std::string& base) noexcept {
  fd_ = create_temporary(dir, base, O_RDWR, path_);
  if (fd_ < 0) return false;
  token_ = track_temporary(path_);
  return true;
}

void temp_file::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!path_.empty()) ::unlink(path_.c_str());
  path_.clear();
  untrack_temporary(token_);
  token_ = -1;
}

void temp_file::disown() noexcept {
  path_.clear();
  untrack_temporary(token_);
  token_ = -1;
}

}  // namespace kvtk::sim
