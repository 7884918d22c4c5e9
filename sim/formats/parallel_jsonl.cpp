// parse_jsonl_parallel (requests.hpp): JSONL request traces read by several threads.
//
// Design: the file is cut into one byte range per thread, each starting just after a '\n', and
// every range is parsed by the one sequential reader (for_each_request over an istream): the
// messages, the kvtk header rule (line 1 only) and every per-line check are the sequential
// reader's own. Line numbers of later ranges are local; only when a message needs one are the
// lines before the range counted, so that the error names the file's true line. What crosses a
// range boundary is handled at the join: the arrival-order check (a range's first timed request
// against the previous ranges' last), and the first error in file order, which wins whichever
// thread found it first. Ranges are read with pread through a small buffer, so a thread holds a
// buffer and its part of the trace, never the file.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <limits>
#include <cstring>
#include <istream>
#include <optional>
#include <streambuf>
#include <unordered_map>
#include <vector>

#include "formats/requests.hpp"
#include "util/parallel.hpp"

namespace kvtk::sim {
namespace {

// An istream's view of bytes [begin, end) of a file descriptor.
class range_streambuf : public std::streambuf {
 public:
  range_streambuf(int fd, std::uint64_t begin, std::uint64_t end)
      : fd_(fd), pos_(begin), end_(end), buf_(1 << 20) {}
  bool failed() const noexcept { return failed_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    if (pos_ >= end_) return traits_type::eof();
    const std::size_t want =
        static_cast<std::size_t>(std::min<std::uint64_t>(buf_.size(), end_ - pos_));
    ssize_t n;
    do {
      n = ::pread(fd_, buf_.data(), want, static_cast<off_t>(pos_));
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {  // an error, or the file shrank under us
      failed_ = true;
      return traits_type::eof();
    }
    pos_ += static_cast<std::uint64_t>(n);
    setg(buf_.data(), buf_.data(), buf_.data() + n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  int fd_;
  std::uint64_t pos_, end_;
  std::vector<char> buf_;
  bool failed_ = false;
};

struct fd_guard {
  int fd;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads bytes [at, at + n) (short at the end of the file).
std::string read_at(int fd, std::uint64_t at, std::size_t n) {
  std::string out(n, '\0');
  const ssize_t got = ::pread(fd, out.data(), n, static_cast<off_t>(at));
  out.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  return out;
}

// Byte offsets that cut the file into `parts` ranges at line starts.
std::vector<std::uint64_t> cut_points(int fd, std::uint64_t size, unsigned parts) {
  std::vector<std::uint64_t> cuts{0};
  for (unsigned i = 1; i < parts; ++i) {
    std::uint64_t at = std::max(cuts.back(), size * i / parts);
    for (;;) {  // the next '\n' at or after `at`; the range starts after it
      if (at >= size) break;
      const std::string probe = read_at(fd, at, 1 << 16);
      if (probe.empty()) break;
      const auto nl = probe.find('\n');
      if (nl != std::string::npos) {
        at += nl + 1;
        break;
      }
      at += probe.size();
    }
    cuts.push_back(std::min(at, size));
  }
  cuts.push_back(size);
  return cuts;
}

std::uint64_t count_lines(int fd, std::uint64_t begin, std::uint64_t end) {
  std::vector<char> buf(1 << 20);
  std::uint64_t lines = 0;
  for (std::uint64_t at = begin; at < end;) {
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), end - at));
    const ssize_t n = ::pread(fd, buf.data(), want, static_cast<off_t>(at));
    if (n <= 0) break;
    lines += static_cast<std::uint64_t>(std::count(buf.data(), buf.data() + n, '\n'));
    at += static_cast<std::uint64_t>(n);
  }
  return lines;
}

// Requests and keys in bytes [begin, end), estimated from the first MiB: lines, and commas plus
// opening brackets (every id but an array's last is followed by a comma; a few other members
// are too, so this errs high), scaled by 1.05. Reserving the estimate costs no resident memory
// beyond what is used (large blocks are mmap'd and untouched pages stay unmapped).
std::pair<std::size_t, std::size_t> estimate_size(int fd, std::uint64_t begin, std::uint64_t end) {
  if (end <= begin) return {0, 0};
  const std::string sample =
      read_at(fd, begin, static_cast<std::size_t>(std::min<std::uint64_t>(end - begin, 1 << 20)));
  if (sample.empty()) return {0, 0};
  const double scale = 1.05 * static_cast<double>(end - begin) / static_cast<double>(sample.size());
  const auto lines = static_cast<double>(std::count(sample.begin(), sample.end(), '\n') + 1);
  const auto items = static_cast<double>(std::count(sample.begin(), sample.end(), ',') +
                                         std::count(sample.begin(), sample.end(), '['));
  return {static_cast<std::size_t>(lines * scale), static_cast<std::size_t>(items * scale)};
}

struct chunk_result {
  kvtk::prefix::prefix_trace trace;
  read_report report;
  std::string error;  // the reason of the first error ("" = none), at local line error_line
  std::uint64_t error_line = 0;
  // The first timed request (line, time) and the last time, for the cross-boundary order check.
  std::optional<std::pair<std::uint64_t, double>> first_time;
  double last_time = 0;
};

// Appends b's requests to a (both built by trace_builder with the same block size).
void append(kvtk::prefix::prefix_trace& a, kvtk::prefix::prefix_trace&& b) {
  const std::size_t na = a.requests(), nb = b.requests();
  auto column = [&]<class T>(std::vector<T>& x, std::vector<T>& y, T filler) {
    if (x.empty() && y.empty()) return;
    if (x.empty()) x.assign(na, filler);
    if (y.empty()) {
      x.insert(x.end(), nb, filler);
    } else {
      x.insert(x.end(), y.begin(), y.end());
    }
  };
  column(a.arrival_s, b.arrival_s, std::numeric_limits<double>::quiet_NaN());
  column(a.output_length, b.output_length, std::uint64_t{0});
  column(a.priority, b.priority, kvtk::access_hint{}.priority);
  column(a.session, b.session, std::uint64_t{0});
  column(a.request_block_tokens, b.request_block_tokens, a.block_tokens);
  // b's name indexes point into b's table: map them into a's (name 0, "", is none in both).
  auto remap = [](std::vector<std::uint32_t>& b_index, const std::vector<std::string>& b_names,
                  std::vector<std::string>& a_names) {
    if (b_index.empty()) return;
    if (a_names.empty()) a_names.emplace_back();
    std::unordered_map<std::string, std::uint32_t> index;
    for (std::uint32_t i = 0; i < a_names.size(); ++i) index.emplace(a_names[i], i);
    for (std::uint32_t& x : b_index) {
      if (x == 0) continue;
      const auto [it, fresh] = index.try_emplace(b_names[x], static_cast<std::uint32_t>(a_names.size()));
      if (fresh) a_names.push_back(it->first);
      x = it->second;
    }
  };
  remap(b.tenant, b.tenant_names, a.tenant_names);
  column(a.tenant, b.tenant, std::uint32_t{0});
  column(a.request_id, b.request_id, kvtk::prefix::no_parent);
  column(a.parent, b.parent, kvtk::prefix::no_parent);
  column(a.turn, b.turn, kvtk::prefix::no_turn);
  remap(b.kind, b.kind_names, a.kind_names);
  column(a.kind, b.kind, std::uint32_t{0});
  column(a.tool_s, b.tool_s, std::numeric_limits<double>::quiet_NaN());
  if (!a.join_offsets.empty() || !b.join_offsets.empty()) {  // fan-in: offsets into join_ids
    if (a.join_offsets.empty()) a.join_offsets.assign(na + 1, 0);
    const std::uint64_t base = a.join_ids.size();
    if (b.join_offsets.empty()) {
      a.join_offsets.insert(a.join_offsets.end(), nb, base);
    } else {
      for (std::size_t r = 1; r < b.join_offsets.size(); ++r) a.join_offsets.push_back(base + b.join_offsets[r]);
      a.join_ids.insert(a.join_ids.end(), b.join_ids.begin(), b.join_ids.end());
    }
  }
  const std::uint64_t base = a.keys.size();
  a.keys.insert(a.keys.end(), b.keys.begin(), b.keys.end());
  for (std::size_t r = 1; r < b.offsets.size(); ++r) a.offsets.push_back(base + b.offsets[r]);
  a.input_length.insert(a.input_length.end(), b.input_length.begin(), b.input_length.end());
  b = {};  // free b's memory before the next append
}

// Parses range i (bytes [cuts[i], cuts[i + 1]) of the file `fd`, `size` bytes) into `c`,
// catching its first error.
void parse_chunk(chunk_result& c, int fd, const std::vector<std::uint64_t>& cuts, std::size_t i,
                 std::uint64_t size, const std::string& path, trace_format f, std::uint32_t bt,
                 const read_options& opts) {
  // Chunk 0 starts at line 1 (the kvtk header's place); a later chunk's lines are numbered
  // from 2, so none is taken for a header, and fixed up (throw_first_error) only if a message
  // needs them.
  const std::uint64_t first_line = i == 0 ? 1 : 2;
  trace_builder b(bt);
  // Chunk 0 is the one the others are appended to: it gets room for the whole file.
  const auto [requests, keys] = estimate_size(fd, cuts[i], i == 0 ? size : cuts[i + 1]);
  b.reserve(requests, keys);
  range_streambuf buf(fd, cuts[i], cuts[i + 1]);
  std::istream in(&buf);
  try {
    for_each_request(
        in, path, f, bt, opts, &c.report,
        [&](const request_record& r) {
          if (r.arrival_s) {
            if (!c.first_time) c.first_time.emplace(r.line, *r.arrival_s);
            c.last_time = *r.arrival_s;
          }
          b.add(r);
        },
        first_line);
    if (buf.failed()) throw trace_error(path, 0, "read error");
  } catch (const trace_error& e) {
    c.error = e.what();
    c.error_line = e.line();
    const std::string prefix = path + ":" + std::to_string(e.line()) + ": ";
    if (c.error.rfind(prefix, 0) == 0) c.error.erase(0, prefix.size());  // keep the reason
  }
  c.trace = b.finish();
}

// Throws the first error of the parsed chunks in file order, with its line in the file.
void throw_first_error(std::vector<chunk_result>& chunks, int fd,
                       const std::vector<std::uint64_t>& cuts, const std::string& path) {
  // Join in file order: the first error (a chunk's own, or time going backwards across a
  // boundary, whichever line comes first) is the sequential reader's, with its line number.
  std::optional<double> last_time;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    chunk_result& c = chunks[i];
    auto file_line = [&](std::uint64_t local) {
      if (i == 0 || local == 0) return local;
      return count_lines(fd, 0, cuts[i]) + local - 1;
    };
    const bool backwards = last_time && c.first_time && c.first_time->second < *last_time;
    if (backwards && (c.error.empty() || c.first_time->first < c.error_line)) {
      throw trace_error(path, file_line(c.first_time->first),
                        "timestamp goes backwards (the format is in arrival order)");
    }
    if (!c.error.empty()) throw trace_error(path, file_line(c.error_line), c.error);
    if (c.first_time) last_time = c.last_time;
  }
}

}  // namespace

kvtk::prefix::prefix_trace parse_jsonl_parallel(const std::string& path, trace_format f,
                                                std::uint32_t block_tokens,
                                                const read_options& opts, read_report* report,
                                                unsigned threads) {
  const std::uint32_t bt = block_tokens ? block_tokens : default_block_tokens(path, f);
  fd_guard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  struct stat st {};
  const bool regular = fd.fd >= 0 && ::fstat(fd.fd, &st) == 0 && S_ISREG(st.st_mode);
  const auto size = regular ? static_cast<std::uint64_t>(st.st_size) : 0;
  if (threads <= 1 || opts.skip_invalid || f == trace_format::bailian || !regular ||
      size < opts.parallel_min_bytes) {
    // One thread (also where the sequential reader gives the right error message).
    trace_builder b(bt);
    if (regular) {
      const auto [requests, keys] = estimate_size(fd.fd, 0, size);
      b.reserve(requests, keys);
    }
    for_each_request(path, f, bt, opts, report, [&](const request_record& r) { b.add(r); });
    return b.finish();
  }
  const std::vector<std::uint64_t> cuts = cut_points(fd.fd, size, threads);
  const std::size_t parts = cuts.size() - 1;

  std::vector<chunk_result> chunks(parts);
  // Trace errors stay in the chunks (the first in file order is thrown below); anything else
  // (std::bad_alloc on a huge trace) comes back from parallel_for.
  detail::parallel_for(parts, parts, [&](std::size_t i) {
    parse_chunk(chunks[i], fd.fd, cuts, i, size, path, f, bt, opts);
  });

  throw_first_error(chunks, fd.fd, cuts, path);
  kvtk::prefix::prefix_trace out = std::move(chunks[0].trace);
  std::uint64_t decode_records = chunks[0].report.decode_records;
  for (std::size_t i = 1; i < parts; ++i) {
    decode_records += chunks[i].report.decode_records;
    append(out, std::move(chunks[i].trace));
  }
  if (report != nullptr) report->decode_records += decode_records;
  return out;
}

}  // namespace kvtk::sim
