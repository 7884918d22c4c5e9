#include "formats/next_use_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <stdexcept>
#include <utility>

#include "formats/kvtb.hpp"
#include "formats/requests.hpp"
#include "kvtk/detail/key_map.hpp"
#include "util/output_file.hpp"
#include "util/temp_file.hpp"

static_assert(std::endian::native == std::endian::little,
              "kvtn is little-endian and mapped without conversion");

namespace kvtk::sim {

struct next_use_column::mapped_file {
  void* base = nullptr;
  std::size_t size = 0;
  mapped_file(void* b, std::size_t s) : base(b), size(s) {}
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  ~mapped_file() {
    if (base != nullptr) ::munmap(base, size);
  }
};

// Builds mapped columns (the constructor is private to keep the class's invariants here).
struct next_use_column_access {
  static next_use_column mapped(void* base, std::size_t bytes, std::string path, bool reused) {
    next_use_column c;
    auto m = std::make_shared<const next_use_column::mapped_file>(base, bytes);
    c.view_ = {reinterpret_cast<const std::uint64_t*>(static_cast<const unsigned char*>(base) +
                                                      kvtn::header_bytes),
               (bytes - kvtn::header_bytes) / 8};
    c.map_ = std::move(m);
    c.path_ = std::move(path);
    c.reused_ = reused;
    return c;
  }
};

next_use_column::next_use_column(std::vector<std::uint64_t> in_memory) {
  auto owned = std::make_shared<const std::vector<std::uint64_t>>(std::move(in_memory));
  view_ = *owned;
  owned_ = std::move(owned);
}

namespace {

// Drops the whole pages inside [p, p + bytes) from the resident set (a hint: failure costs RSS).
void drop_pages(const void* p, std::size_t bytes) noexcept {
  if (bytes == 0) return;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto lo = (reinterpret_cast<std::uintptr_t>(p) + page - 1) / page * page;
  const auto hi = (reinterpret_cast<std::uintptr_t>(p) + bytes) / page * page;
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

}  // namespace

void next_use_column::release(std::uint64_t first, std::uint64_t last) const noexcept {
  if (!map_ || first >= last || last > view_.size()) return;
  drop_pages(view_.data() + first, (last - first) * sizeof(std::uint64_t));
}

namespace kvtn {
namespace {

using kvtk::prefix::partial_block;
using kvtk::prefix::prefix_trace_view;
constexpr std::uint64_t never = kvtk::access_hint::never;

using kvtk::detail::mix64;  // the one mixer (kvtk/detail/mix.hpp)
std::uint64_t word_mix(std::uint64_t i, std::uint64_t v) noexcept {
  return mix64(v ^ mix64(i + 0x9E3779B97F4A7C15ull));
}
std::uint64_t column_digest(std::uint64_t sum, std::uint64_t refs) noexcept {
  return mix64(sum + mix64(refs ^ 0x6B766E6578747573ull));
}

const char* mode_name(partial_block p) { return p == partial_block::cache ? "cache" : "skip"; }

std::string reason(int err) { return std::strerror(err); }

[[noreturn]] void io_fail(const std::string& path, const std::string& what, int err) {
  throw output_error("cannot write '" + path + "': " + what + (err != 0 ? reason(err) : ""));
}

void pwrite_all(int fd, const void* data, std::size_t bytes, std::uint64_t offset,
                const std::string& name) {
  const auto* p = static_cast<const unsigned char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) io_fail(name, "", n < 0 ? errno : EIO);
    p += n;
    bytes -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
}

void pread_all(int fd, void* data, std::size_t bytes, std::uint64_t offset,
               const std::string& name) {
  auto* p = static_cast<unsigned char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) io_fail(name, "reading back a scratch file: ", n < 0 ? errno : EIO);
    p += n;
    bytes -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
}

struct header {
  std::uint32_t mode = 0;
  std::uint64_t refs = 0;
  trace_identity id;
  std::uint64_t column = 0;
};

std::array<unsigned char, header_bytes> encode(const header& h) {
  std::array<std::uint64_t, header_bytes / 8> w{};
  std::memcpy(&w[0], magic, 8);
  w[1] = std::uint64_t{version} | (std::uint64_t{h.mode} << 32);
  w[2] = h.refs;
  w[3] = h.id.header_checksum;
  w[4] = h.id.payload_checksum;
  w[5] = h.id.file_size;
  w[6] = h.column;
  std::array<unsigned char, header_bytes> out{};
  std::memcpy(out.data(), w.data(), header_bytes);
  kvtb::seal_header(out);  // the checksum of words 0-6 into word 7
  return out;
}

// The header in `b` when its checksum and version are right.
bool decode(const unsigned char* b, header& h) {
  std::array<std::uint64_t, header_bytes / 8> w{};
  std::memcpy(w.data(), b, header_bytes);
  if (std::memcmp(b, magic, 8) != 0 || !kvtb::header_sealed({b, header_bytes})) return false;
  if (static_cast<std::uint32_t>(w[1]) != version) return false;
  h.mode = static_cast<std::uint32_t>(w[1] >> 32);
  h.refs = w[2];
  h.id = {w[3], w[4], w[5]};
  h.column = w[6];
  return true;
}

// An open descriptor, closed on destruction.
struct fd_guard {
  int fd = -1;
  explicit fd_guard(int f = -1) : fd(f) {}
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

struct inspection {
  file_state state = file_state::absent;
  void* base = nullptr;  // the mapping of a valid file (the caller owns it)
  std::size_t bytes = 0;
};

// Classifies `path`; maps it when valid and `keep_mapping`.
inspection inspect_file(const std::string& path, const trace_identity& id, partial_block p,
                        bool keep_mapping) {
  inspection out;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    out.state = errno == ENOENT ? file_state::absent : file_state::foreign;
    return out;
  }
  out.state = file_state::foreign;
  if (!S_ISREG(st.st_mode)) return out;  // links, directories, FIFOs: not ours
  fd_guard f(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (f.fd < 0 || ::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) return out;
  const auto size = static_cast<std::uint64_t>(st.st_size);
  unsigned char b[header_bytes] = {};
  const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(size, header_bytes));
  std::size_t got = 0;
  while (got < want) {
    const ssize_t n = ::pread(f.fd, b + got, want - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got < 8 || std::memcmp(b, magic, 8) != 0) return out;  // someone else's file
  out.state = file_state::stale;  // ours from here on: replaced unless it is valid
  header h;
  if (got < header_bytes || !decode(b, h)) return out;
  if (h.mode != static_cast<std::uint32_t>(p) || h.id.header_checksum != id.header_checksum ||
      h.id.payload_checksum != id.payload_checksum || h.id.file_size != id.file_size) {
    return out;
  }
  if (h.refs > (std::uint64_t{1} << 60) || size != header_bytes + h.refs * 8) return out;
  void* base = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_SHARED, f.fd, 0);
  if (base == MAP_FAILED) return out;
  // The column's checksum, in slices whose pages are dropped behind the pass.
  const auto* col = reinterpret_cast<const std::uint64_t*>(static_cast<const unsigned char*>(base) +
                                                           header_bytes);
  std::uint64_t sum = 0;
  constexpr std::uint64_t slice = 1 << 20;
  for (std::uint64_t lo = 0; lo < h.refs; lo += slice) {
    const std::uint64_t hi = std::min(h.refs, lo + slice);
    for (std::uint64_t i = lo; i < hi; ++i) sum += word_mix(i, col[i]);
    drop_pages(col + lo, (hi - lo) * 8);
  }
  if (column_digest(sum, h.refs) != h.column) {
    ::munmap(base, static_cast<std::size_t>(size));
    return out;
  }
  out.state = file_state::valid;
  if (keep_mapping) {
    out.base = base;
    out.bytes = static_cast<std::size_t>(size);
  } else {
    ::munmap(base, static_cast<std::size_t>(size));
  }
  return out;
}

// True when `path` is a regular file (not a link) that starts with the kvtn magic: ours to replace.
bool has_magic(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  fd_guard f(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  char b[8] = {};
  return f.fd >= 0 && ::pread(f.fd, b, 8, 0) == 8 && std::memcmp(b, magic, 8) == 0;
}

// ---- the passes over the trace -------------------------------------------------------------

constexpr std::size_t request_slice = std::size_t{1} << 16;

// The number of cacheable references (reads no keys), dropping the columns' pages behind.
std::uint64_t count_refs(const loaded_trace& lt, partial_block p) {
  const prefix_trace_view& t = lt.view();
  if (t.unit_requests() && t.request_block_tokens.empty() && t.block_tokens > 0) {
    return t.keys.size();  // every unit request is one whole block
  }
  std::uint64_t refs = 0;
  for (std::size_t lo = 0; lo < t.requests(); lo += request_slice) {
    const std::size_t hi = std::min(t.requests(), lo + request_slice);
    for (std::size_t r = lo; r < hi; ++r) refs += t.cacheable(r, p).size();
    lt.release(lo, hi);
  }
  return refs;
}

// Calls visit(position, key, index of the key in t.keys) for every cacheable reference, last
// first, and drops the trace's pages behind the pass.
template <class F>
void walk_backward(const loaded_trace& lt, partial_block p, std::uint64_t refs, F&& visit) {
  const prefix_trace_view& t = lt.view();
  std::uint64_t pos = refs;
  for (std::size_t hi = t.requests(); hi > 0;) {
    const std::size_t lo = hi > request_slice ? hi - request_slice : 0;
    for (std::size_t r = hi; r-- > lo;) {
      const auto b = t.cacheable(r, p);
      const auto at = static_cast<std::size_t>(b.data() - t.keys.data());
      for (std::size_t j = b.size(); j-- > 0;) visit(--pos, b[j], at + j);
    }
    lt.release(lo, hi);
    hi = lo;
  }
  if (pos != 0) throw std::logic_error("next-use sidecar: the reference count changed");
}

constexpr std::uint64_t partition_salt = 0x243F6A8885A308D3ull;
constexpr std::uint64_t hll_salt = 0x13198A2E03707344ull;

// HyperLogLog with 2^14 registers (standard error about 0.8 %): the distinct cacheable keys.
double estimate_distinct(const loaded_trace& lt, partial_block p, std::uint64_t refs) {
  constexpr unsigned bits = 14;
  constexpr std::size_t m = std::size_t{1} << bits;
  std::vector<std::uint8_t> reg(m, 0);
  walk_backward(lt, p, refs, [&](std::uint64_t, block_key k, std::size_t) {
    const std::uint64_t h = mix64(k ^ hll_salt);
    const std::size_t idx = static_cast<std::size_t>(h >> (64 - bits));
    const std::uint64_t rest = (h << bits) | (std::uint64_t{1} << (bits - 1));
    const auto rank = static_cast<std::uint8_t>(std::countl_zero(rest) + 1);
    reg[idx] = std::max(reg[idx], rank);
  });
  double z = 0;
  std::size_t zeros = 0;
  for (const std::uint8_t r : reg) {
    z += std::ldexp(1.0, -static_cast<int>(r));
    zeros += r == 0 ? 1 : 0;
  }
  const double md = static_cast<double>(m);
  double e = 0.7213 / (1.0 + 1.079 / md) * md * md / z;
  if (e <= 2.5 * md && zeros > 0) e = md * std::log(md / static_cast<double>(zeros));
  return e;
}

// Bytes of a key_map<uint64_t> made for `expected` keys (16-byte slots, load <= 1/2).
std::uint64_t map_bytes(std::uint64_t expected) {
  return std::bit_ceil(std::max<std::uint64_t>(16, expected * 2 + 2)) * 16;
}

struct build_plan {
  std::uint64_t refs = 0;
  std::uint32_t parts = 1;
  std::size_t expected = 0;  // keys per partition's map before its first doubling
};

build_plan plan_build(const loaded_trace& lt, partial_block p, std::size_t budget) {
  build_plan b;
  b.refs = count_refs(lt, p);
  if (map_bytes(b.refs) <= budget) {  // even all-distinct references fit: no estimate needed
    b.expected = detail::key_map<std::uint64_t>::expected_for_refs(b.refs);
    return b;
  }
  // A little above the estimate, so that a partition's map rarely has to double.
  const auto d = static_cast<std::uint64_t>(estimate_distinct(lt, p, b.refs) * 1.03) + 16;
  constexpr std::uint64_t max_parts = 1 << 16;
  std::uint64_t parts = std::max<std::uint64_t>(1, d * 32 / std::max<std::size_t>(budget, 1));
  while (parts < max_parts && map_bytes((d + parts - 1) / parts) > budget) ++parts;
  b.parts = static_cast<std::uint32_t>(parts);
  b.expected = static_cast<std::size_t>((d + parts - 1) / parts);
  return b;
}

std::uint32_t partition_of(block_key k, std::uint32_t parts) noexcept {
  return static_cast<std::uint32_t>(((mix64(k ^ partition_salt) >> 32) * parts) >> 32);
}

// Takes the column backward (position refs-1 first) and writes it at its offsets in buffers.
class backward_writer {
 public:
  backward_writer(int fd, const std::string& name, std::uint64_t refs)
      : fd_(fd), name_(name), buf_(std::size_t{1} << 16), k_(buf_.size()), hi_(refs), refs_(refs) {}
  void put(std::uint64_t i, std::uint64_t v) {
    sum_ += word_mix(i, v);
    buf_[--k_] = v;
    if (k_ == 0) flush();
  }
  void flush() {
    const std::size_t n = buf_.size() - k_;
    if (n == 0) return;
    const std::uint64_t lo = hi_ - n;
    pwrite_all(fd_, buf_.data() + k_, n * 8, header_bytes + lo * 8, name_);
    hi_ = lo;
    k_ = buf_.size();
  }
  // The column's checksum once every position was put.
  std::uint64_t finish() {
    flush();
    if (hi_ != 0) throw std::logic_error("next-use sidecar: a position was not written");
    return column_digest(sum_, refs_);
  }

 private:
  int fd_;
  const std::string& name_;
  std::vector<std::uint64_t> buf_;
  std::size_t k_;
  std::uint64_t hi_, refs_, sum_ = 0;
};

// Creates an empty temporary file in `dir` named after `dest` (for messages).
void create_temp(temp_file& f, const std::string& dir, const std::string& base,
                 const std::string& dest) {
  if (!f.create(dir, base)) io_fail(dest, "cannot create a file in '" + dir + "': ", errno);
}

std::string dir_of(const std::string& path) {
  const auto parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// Writes the header and the column of t into f (an empty file), fdatasync'd.
void write_sidecar(const loaded_trace& lt, partial_block p, const build_plan& plan,
                   const trace_identity& id, temp_file& f, const std::string& dest) {
  const std::uint64_t total = header_bytes + plan.refs * 8;
  if (::fallocate(f.fd(), 0, 0, static_cast<off_t>(total)) != 0) {
    if (errno != EOPNOTSUPP && errno != ENOSYS && errno != EINVAL) {
      io_fail(dest, "reserving " + std::to_string(total) + " bytes: ", errno);
    }
    if (::ftruncate(f.fd(), static_cast<off_t>(total)) != 0) io_fail(dest, "", errno);
  }
  const std::span<const block_key> keys = lt.view().keys;
  constexpr std::size_t ahead = detail::key_map<std::uint64_t>::prefetch_distance;
  backward_writer out(f.fd(), dest, plan.refs);
  if (plan.parts == 1) {
    detail::key_map<std::uint64_t> seen(plan.expected);
    walk_backward(lt, p, plan.refs, [&](std::uint64_t i, block_key k, std::size_t ki) {
      if (ki >= ahead) seen.prefetch(keys[ki - ahead]);
      auto [pos, fresh] = seen.try_emplace(k, i);
      std::uint64_t nx = never;
      if (!fresh) {
        nx = *pos;
        *pos = i;
      }
      out.put(i, nx);
    });
  } else {
    // Runs: partition q's next uses, in the backward order of its references, one after another
    // in an unlinked scratch file beside the sidecar.
    const std::uint32_t parts = plan.parts;
    std::string scratch_name = dir_of(f.path()) + "/.kvtk-next-scratch-XXXXXX";
    fd_guard scratch(::mkostemp(scratch_name.data(), O_CLOEXEC));
    if (scratch.fd < 0) io_fail(dest, "cannot create a scratch file: ", errno);
    ::unlink(scratch_name.c_str());
    std::vector<std::uint64_t> start(parts + 1, 0);
    std::vector<std::uint64_t> buf(std::size_t{1} << 15);
    for (std::uint32_t q = 0; q < parts; ++q) {
      detail::key_map<std::uint64_t> seen(plan.expected);
      std::uint64_t written = start[q];
      std::size_t n = 0;
      auto flush = [&] {
        pwrite_all(scratch.fd, buf.data(), n * 8, written * 8, scratch_name);
        written += n;
        n = 0;
      };
      walk_backward(lt, p, plan.refs, [&](std::uint64_t i, block_key k, std::size_t ki) {
        if (ki >= ahead && partition_of(keys[ki - ahead], parts) == q) {
          seen.prefetch(keys[ki - ahead]);
        }
        if (partition_of(k, parts) != q) return;
        auto [pos, fresh] = seen.try_emplace(k, i);
        std::uint64_t nx = never;
        if (!fresh) {
          nx = *pos;
          *pos = i;
        }
        buf[n++] = nx;
        if (n == buf.size()) flush();
      });
      flush();
      start[q + 1] = written;
    }
    if (start[parts] != plan.refs) throw std::logic_error("next-use sidecar: runs do not add up");
    // Readers of every run, each through its own buffer.
    const std::size_t words =
        std::clamp<std::size_t>((std::size_t{8} << 20) / 8 / parts, 512, std::size_t{1} << 15);
    std::vector<std::uint64_t> rbuf(words * parts);
    std::vector<std::uint64_t> next_at(start.begin(), start.end() - 1);  // next word to read
    std::vector<std::size_t> have(parts, 0), used(parts, 0);
    walk_backward(lt, p, plan.refs, [&](std::uint64_t i, block_key k, std::size_t) {
      const std::uint32_t q = partition_of(k, parts);
      if (used[q] == have[q]) {
        const auto n =
            static_cast<std::size_t>(std::min<std::uint64_t>(words, start[q + 1] - next_at[q]));
        if (n == 0) throw std::logic_error("next-use sidecar: a run ended early");
        pread_all(scratch.fd, rbuf.data() + q * words, n * 8, next_at[q] * 8, scratch_name);
        next_at[q] += n;
        have[q] = n;
        used[q] = 0;
      }
      out.put(i, rbuf[q * words + used[q]++]);
    });
  }
  header h;
  h.mode = static_cast<std::uint32_t>(p);
  h.refs = plan.refs;
  h.id = id;
  h.column = out.finish();
  const auto bytes = encode(h);
  pwrite_all(f.fd(), bytes.data(), bytes.size(), 0, dest);
  if (::fdatasync(f.fd()) != 0) io_fail(dest, "syncing: ", errno);
}

next_use_column map_fd(int fd, std::uint64_t refs, std::string path, const std::string& dest) {
  const std::size_t bytes = header_bytes + refs * 8;
  void* base = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) io_fail(dest, "mapping the finished file: ", errno);
  return next_use_column_access::mapped(base, bytes, std::move(path), false);
}

// $TMPDIR/kvtk-next (created 0700), or "" when it is not a private directory of this user's.
std::string private_temp_dir() {
  const char* env = std::getenv("TMPDIR");
  const std::string base = env != nullptr && *env != '\0' ? env : "/tmp";
  const std::string dir = base + "/kvtk-next";
  (void)::mkdir(dir.c_str(), 0700);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & 022) != 0) {
    return {};
  }
  return dir;
}

std::string hex(std::uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(v));
  return s;
}

}  // namespace

trace_identity identity_of(std::span<const unsigned char> b) {
  if (b.size() < kvtb::header_bytes) throw std::invalid_argument("kvtn: not a kvtb image");
  trace_identity id;
  std::memcpy(&id.payload_checksum, b.data() + 56, 8);
  std::memcpy(&id.file_size, b.data() + 48, 8);
  std::memcpy(&id.header_checksum, b.data() + 120, 8);
  return id;
}

std::uint64_t column_checksum(std::span<const std::uint64_t> next) noexcept {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < next.size(); ++i) sum += word_mix(i, next[i]);
  return column_digest(sum, next.size());
}

std::string preferred_path(const std::string& trace_path, const trace_identity& id, partial_block p,
                           const options& o) {
  if (o.dir.empty()) return trace_path + ".next-" + mode_name(p) + ".kvtn";
  return o.dir + "/" + hex(id.header_checksum) + "-" + mode_name(p) + ".kvtn";
}

std::uint32_t build_partitions(const loaded_trace& t, partial_block p, std::size_t map_budget) {
  return plan_build(t, p, map_budget).parts;
}

file_state inspect(const std::string& path, const trace_identity& id, partial_block p) {
  return inspect_file(path, id, p, false).state;
}

next_use_column open(const std::string& trace_path, const loaded_trace& t, partial_block p,
                     const options& o) {
  if (t.kvtb_file() == nullptr) {
    throw std::invalid_argument("next-use sidecar: '" + trace_path + "' is not a mapped kvtb file");
  }
  const trace_identity id = identity_of(t.kvtb_file()->bytes());
  // Where to look and build, in order: the preferred path, then the private temp directory
  // (made only when the first place will not do).
  const std::string first = preferred_path(trace_path, id, p, o);
  std::string why;
  std::optional<build_plan> plan;
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::string dest = first;
    if (attempt == 1) {
      const std::string tmp = private_temp_dir();
      if (tmp.empty()) {
        why += "\n  no private directory kvtk-next in the temporary directory";
        continue;
      }
      dest = tmp + "/" + hex(id.header_checksum) + "-" + mode_name(p) + ".kvtn";
      if (dest == first) continue;
    }
    inspection seen = inspect_file(dest, id, p, true);
    if (seen.state == file_state::valid) {
      return next_use_column_access::mapped(seen.base, seen.bytes, dest, true);
    }
    if (seen.state == file_state::foreign) {
      why += "\n  '" + dest + "' holds another file (left alone)";
      continue;
    }
    const std::string dir = dir_of(dest);
    try {
      if (!plan) plan = plan_build(t, p, o.map_budget);
      temp_file f;
      create_temp(f, dir, std::filesystem::path(dest).filename().string(), dest);
      write_sidecar(t, p, *plan, id, f, dest);
      // Into place: over a stale sidecar of ours, or where nothing was (never over a file that
      // appeared meanwhile). The file is complete either way: when it cannot take the name, it
      // is used unnamed (mapped, then unlinked).
      bool named = false;
      if (seen.state == file_state::stale) {
        named = has_magic(dest) && ::rename(f.path().c_str(), dest.c_str()) == 0;
      } else {
        int rc = ::renameat2(AT_FDCWD, f.path().c_str(), AT_FDCWD, dest.c_str(), RENAME_NOREPLACE);
        if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {
          rc = ::link(f.path().c_str(), dest.c_str());
          if (rc == 0) ::unlink(f.path().c_str());
        }
        if (rc != 0 && errno == EEXIST) {  // another process's, perhaps: use it if it is right
          inspection other = inspect_file(dest, id, p, true);
          if (other.state == file_state::valid) {
            return next_use_column_access::mapped(other.base, other.bytes, dest, true);
          }
        }
        named = rc == 0;
      }
      if (named) {
        f.disown();
      } else {
        ::unlink(f.path().c_str());
        f.disown();
      }
      next_use_column c = map_fd(f.fd(), plan->refs, named ? dest : std::string(), dest);
      return c;
    } catch (const output_error& e) {
      why += std::string("\n  ") + e.what();
    }
  }
  // Last: an unnamed file in the temp directory, gone when the mapping goes.
  const char* env = std::getenv("TMPDIR");
  const std::string base = env != nullptr && *env != '\0' ? env : "/tmp";
  try {
    if (!plan) plan = plan_build(t, p, o.map_budget);
    temp_file f;
    create_temp(f, base, "kvtk-next", base + "/kvtk-next");
    write_sidecar(t, p, *plan, id, f, f.path());
    ::unlink(f.path().c_str());
    f.disown();
    return map_fd(f.fd(), plan->refs, std::string(), base);
  } catch (const output_error& e) {
    why += std::string("\n  ") + e.what();
  }
  throw output_error("cannot write the next-use sidecar of '" + trace_path + "' anywhere:" + why);
}

}  // namespace kvtn
}  // namespace kvtk::sim
