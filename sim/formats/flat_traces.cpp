#include "formats/flat_traces.hpp"
#include "formats/trace_limits.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string_view>
#include <vector>

#include "formats/mooncake_flat.hpp"
#include "util/parallel.hpp"

namespace kvtk::sim {

namespace {

// One line of the ids format (without its '\n'), or a trace_error naming it.
std::uint64_t parse_id_line(std::string_view line, const std::string& name, std::uint64_t lineno) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const std::size_t b = line.find_first_not_of(" \t");
  if (b == std::string_view::npos) throw trace_error(name, lineno, "empty line (expected an id)");
  const std::size_t e = line.find_last_not_of(" \t") + 1;
  const char* first = line.data() + b;
  const char* last = line.data() + e;
  if (*first == '-') throw trace_error(name, lineno, "negative id");
  std::uint64_t id = 0;
  const auto r = std::from_chars(first, last, id);
  if (r.ec == std::errc::result_out_of_range) {
    throw trace_error(name, lineno, "id does not fit in 64 bits");
  }
  if (r.ec != std::errc() || r.ptr != last) {
    throw trace_error(name, lineno,
                      "expected one non-negative integer id, got '" +
                          std::string(line.substr(b, std::min<std::size_t>(e - b, 80))) +
                          (e - b > 80 ? "...'" : "'"));
  }
  return id;
}

// Calls fn(bytes, n) for consecutive chunks of the file (the last one may be short).
template <class Fn>
void for_each_chunk(const std::string& path, std::size_t chunk, Fn&& fn) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw trace_error(path, 0, std::string("cannot open file: ") + std::strerror(errno));
  std::vector<char> buf(chunk);
  for (;;) {
    const std::size_t n = std::fread(buf.data(), 1, chunk, f.get());
    if (n > 0) fn(buf.data(), n);
    if (n < chunk) break;
  }
  if (std::ferror(f.get())) throw trace_error(path, 0, "read error");
}

// Whole lines of a text stream, split across chunks: fn(line, lineno) per line (getline's rule:
// a last line without '\n' counts, an empty tail after the last '\n' does not).
class line_splitter {
 public:
  explicit line_splitter(const std::string& name) : name_(name) {}
  template <class Fn>
  void feed(const char* p, std::size_t n, Fn&& fn) {
    const char* end = p + n;
    while (p < end) {
      const char* nl =
          static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
      if (nl == nullptr) {
        if (carry_.size() + static_cast<std::size_t>(end - p) > limits::max_line_bytes) {
          throw trace_error(name_, lineno_ + 1,
                            "line is longer than " + std::to_string(limits::max_line_bytes >> 20) +
                                " MiB (the longest line a text trace may have)");
        }
        carry_.append(p, end);
        return;
      }
      if (carry_.empty()) {
        fn(std::string_view(p, static_cast<std::size_t>(nl - p)), ++lineno_);
      } else {
        carry_.append(p, nl);
        fn(std::string_view(carry_), ++lineno_);
        carry_.clear();
      }
      p = nl + 1;
    }
  }
  template <class Fn>
  void finish(Fn&& fn) {
    if (!carry_.empty()) fn(std::string_view(carry_), ++lineno_);
  }

 private:
  const std::string& name_;
  std::string carry_;
  std::uint64_t lineno_ = 0;
};

constexpr std::size_t record_bytes = 24;
constexpr std::size_t read_chunk = record_bytes << 17;  // 3 MiB: whole records

std::uint64_t record_id(const char* rec) noexcept {
  std::uint64_t id = 0;
  for (int k = 7; k >= 0; --k) {  // little-endian, whatever the host
    id = (id << 8) | static_cast<unsigned char>(rec[4 + k]);
  }
  return id;
}

std::uint64_t file_size(const std::string& path) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path, ec);
  if (ec) throw trace_error(path, 0, "cannot open file: " + ec.message());
  return n;
}

}  // namespace

std::vector<std::uint64_t> parse_ids(std::istream& in, const std::string& name) {
  std::vector<std::uint64_t> ids;
  line_splitter lines(name);
  auto on_line = [&](std::string_view line, std::uint64_t n) {
    ids.push_back(parse_id_line(line, name, n));
  };
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    lines.feed(buf, static_cast<std::size_t>(in.gcount()), on_line);
  }
  if (in.bad()) throw trace_error(name, 0, "read error");
  lines.finish(on_line);
  return ids;
}

std::vector<std::uint64_t> load_ids(const std::string& path) {
  std::vector<std::uint64_t> ids;
  line_splitter lines(path);
  auto on_line = [&](std::string_view line, std::uint64_t n) {
    ids.push_back(parse_id_line(line, path, n));
  };
  for_each_chunk(path, 1 << 22, [&](const char* p, std::size_t n) { lines.feed(p, n, on_line); });
  lines.finish(on_line);
  return ids;
}

// Records [first, last) of an oracleGeneral file into ids[first, last), by pread from the
// shared descriptor fd (one part of a parallel load; pread keeps no file position).
static void read_oracle_part(const std::string& path, int fd, std::uint64_t first,
                             std::uint64_t last, std::uint64_t* ids) {
  std::vector<char> buf(std::min<std::uint64_t>(read_chunk, (last - first) * record_bytes));
  std::uint64_t r = first;
  while (r < last) {
    const std::uint64_t want = std::min<std::uint64_t>(buf.size(), (last - r) * record_bytes);
    std::uint64_t got = 0;
    while (got < want) {
      const ssize_t n = ::pread(fd, buf.data() + got, want - got,
                                static_cast<off_t>(r * record_bytes + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw trace_error(path, 0, "read error");  // as the sequential reader says
      if (n == 0) throw trace_error(path, 0, "file changed while being read");
      got += static_cast<std::uint64_t>(n);
    }
    for (std::uint64_t i = 0; i < want; i += record_bytes) ids[r++] = record_id(buf.data() + i);
  }
}

// The ids of an n-record oracleGeneral file read in `parts` ranges at once, one per thread, from
// one descriptor (so a file replaced by rename meanwhile is not mixed in).
static std::vector<std::uint64_t> read_oracle_parallel(const std::string& path, std::uint64_t n,
                                                       std::uint64_t parts) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw trace_error(path, 0, std::string("cannot open file: ") + std::strerror(errno));
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } close_fd{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) != n * record_bytes) {
    throw trace_error(path, 0, "file changed while being read");
  }
  std::vector<std::uint64_t> ids(n);
  detail::parallel_for(parts, parts, [&](std::size_t i) {
    read_oracle_part(path, fd, n * i / parts, n * (i + 1) / parts, ids.data());
  });
  if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) != n * record_bytes) {
    throw trace_error(path, 0, "file changed while being read");
  }
  return ids;
}

std::vector<std::uint64_t> load_oracle_general(const std::string& path, unsigned threads) {
  const std::uint64_t size = file_size(path);
  if (size % record_bytes != 0) {
    throw trace_error(path, 0,
                      "size " + std::to_string(size) +
                          " bytes is not a whole number of 24-byte oracleGeneral records "
                          "(truncated or not this format)");
  }
  const std::uint64_t n = size / record_bytes;
  if (threads >= 2 && n >= 2) return read_oracle_parallel(path, n, std::min<std::uint64_t>(threads, n));
  std::vector<std::uint64_t> ids;
  ids.reserve(size / record_bytes);
  for_each_chunk(path, read_chunk, [&](const char* p, std::size_t n) {
    if (n % record_bytes != 0) throw trace_error(path, 0, "file changed while being read");
    for (std::size_t i = 0; i < n; i += record_bytes) ids.push_back(record_id(p + i));
  });
  if (ids.size() != size / record_bytes)
    throw trace_error(path, 0, "file changed while being read");
  return ids;
}

std::vector<std::uint64_t> parse_oracle_general(const std::string& bytes, const std::string& name) {
  constexpr std::size_t record = 24;
  if (bytes.size() % record != 0) {
    throw trace_error(name, 0,
                      "size " + std::to_string(bytes.size()) +
                          " bytes is not a whole number of 24-byte oracleGeneral records "
                          "(truncated or not this format)");
  }
  std::vector<std::uint64_t> ids(bytes.size() / record);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = record_id(bytes.data() + i * record);
  return ids;
}

std::string detect_flat_format(const std::string& path) {
  // The first 64 KiB decide text or binary; the size decides whether records fit. A text file
  // with a NUL further on is then reported by the ids parser at its line.
  std::string head(1 << 16, '\0');
  {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
    if (!f) throw trace_error(path, 0, std::string("cannot open file: ") + std::strerror(errno));
    head.resize(std::fread(head.data(), 1, head.size(), f.get()));
    if (std::ferror(f.get())) throw trace_error(path, 0, "read error");
  }
  if (head.empty()) throw trace_error(path, 0, "empty trace: cannot detect the format");
  const std::size_t b = head.find_first_not_of(" \t\r\n");
  const bool text = head.find('\0') == std::string::npos;
  if (text && b != std::string::npos && head[b] == '{') return "mooncake";
  if (text && b != std::string::npos && head[b] >= '0' && head[b] <= '9') return "ids";
  if (file_size(path) % record_bytes == 0) return "oracle-general";
  throw trace_error(path, 0,
                    "cannot detect the format (not JSONL, not ids, not 24-byte records); give "
                    "--format");
}

std::vector<std::uint64_t> load_flat(const std::string& path, const std::string& format,
                                     unsigned threads) {
  const std::string f = format == "auto" ? detect_flat_format(path) : format;
  if (f == "mooncake") return load_mooncake_flat(path);
  if (f == "oracle-general") return load_oracle_general(path, threads);
  if (f == "ids") return load_ids(path);
  throw trace_error(path, 0, "unsupported flat format '" + f + "'");
}

}  // namespace kvtk::sim
