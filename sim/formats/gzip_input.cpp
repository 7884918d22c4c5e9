#include "formats/gzip_input.hpp"

#include <zlib.h>

#include <array>
#include <cstdio>
#include <stdexcept>
#include <streambuf>

namespace kvtk::sim {

namespace {

// A read-only streambuf refilled by gzread, 64 KiB at a time.
class gz_buf : public std::streambuf {
 public:
  explicit gz_buf(const std::string& path) : file_(gzopen(path.c_str(), "rb")) {
    if (file_ == nullptr) throw std::runtime_error("cannot open file");
    gzbuffer(file_, 1 << 17);
  }
  ~gz_buf() override {
    if (file_ != nullptr) gzclose(file_);
  }
  gz_buf(const gz_buf&) = delete;
  gz_buf& operator=(const gz_buf&) = delete;
  [[nodiscard]] const std::string& error() const noexcept { return error_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    const int n = gzread(file_, buf_.data(), static_cast<unsigned>(buf_.size()));
    if (n < 0) {
      int code = 0;
      const char* msg = gzerror(file_, &code);
      error_ = std::string("not valid gzip (") + (msg != nullptr ? msg : "zlib error") + ")";
      throw std::ios_base::failure(error_);
    }
    if (n == 0) {
      // gzread returns 0 at the end; a file cut short is an error zlib reports here.
      int code = 0;
      const char* msg = gzerror(file_, &code);
      if (code != Z_OK && code != Z_STREAM_END) {
        error_ = std::string("not valid gzip (") + (msg != nullptr ? msg : "zlib error") + ")";
        throw std::ios_base::failure(error_);
      }
      return traits_type::eof();
    }
    setg(buf_.data(), buf_.data(), buf_.data() + n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  gzFile file_;
  std::array<char, 1 << 16> buf_{};
  std::string error_;
};

class gz_stream : public std::istream {
 public:
  explicit gz_stream(const std::string& path) : std::istream(nullptr), buf_(path) { rdbuf(&buf_); }
  [[nodiscard]] const std::string& error() const noexcept { return buf_.error(); }

 private:
  gz_buf buf_;
};

}  // namespace

bool is_gzip(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  unsigned char magic[2] = {0, 0};
  const std::size_t n = std::fread(magic, 1, 2, f);
  std::fclose(f);
  return n == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

std::unique_ptr<std::istream> open_gzip(const std::string& path) { return std::make_unique<gz_stream>(path); }

std::string gzip_failed(const std::istream& in) {
  const auto* g = dynamic_cast<const gz_stream*>(&in);
  return g != nullptr ? g->error() : "";
}

}  // namespace kvtk::sim
