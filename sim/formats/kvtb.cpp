#include "formats/kvtb.hpp"
#include "util/output_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "formats/requests.hpp"
#include "formats/trace_limits.hpp"
#include "formats/utf8.hpp"

static_assert(std::endian::native == std::endian::little,
              "kvtb is little-endian and mapped without conversion");

namespace kvtk::sim::kvtb {
namespace {

constexpr std::uint64_t p1 = 0x9E3779B185EBCA87ull, p2 = 0xC2B2AE3D27D4EB4Full;

struct column_info {
  int bit;  // -1 = always present
  std::size_t elem_bytes;
  bool per_request;  // else: offsets (n + 1) or keys (k)
};

std::uint64_t padded(std::uint64_t bytes) { return (bytes + 7) / 8 * 8; }

// The optional per-request columns, in bit order, and their element sizes.
constexpr int column_bits = 11;
constexpr std::size_t elem[column_bits] = {8, 8, 4, 8, 4, 4, 8, 8, 4, 4, 8};
// Bit 11: fan-in, join_offsets[n + 1] u64 then join_ids[j] u64 (j: the header's u64 at 72).
constexpr std::uint64_t join_bit = std::uint64_t{1} << column_bits;

std::uint64_t read_u64(const unsigned char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
std::uint32_t read_u32(const unsigned char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The checksum of a header's words before its last one (copied: the bytes need no alignment).
std::uint64_t header_digest(std::span<const unsigned char> header) noexcept {
  std::uint64_t w[32];
  const std::size_t words = header.size() / 8 - 1;
  checksum c;
  for (std::size_t at = 0; at < words; at += 32) {
    const std::size_t n = std::min<std::size_t>(32, words - at);
    std::memcpy(w, header.data() + at * 8, n * 8);
    c.update({w, n});
  }
  return c.digest();
}

}  // namespace

void seal_header(std::span<unsigned char> header) noexcept {
  if (header.size() < 16 || header.size() % 8 != 0) return;  // not a sealed header's shape
  const std::uint64_t d = header_digest(header);
  std::memcpy(header.data() + header.size() - 8, &d, 8);
}

bool header_sealed(std::span<const unsigned char> header) noexcept {
  if (header.size() < 16 || header.size() % 8 != 0) return false;
  return header_digest(header) == read_u64(header.data() + header.size() - 8);
}

void checksum::update(std::span<const std::uint64_t> words) noexcept {
  std::size_t i = 0;
  // Keep lanes aligned with the running word count so that split updates equal one update.
  for (; i < words.size() && (words_ + i) % 4 != 0; ++i) {
    auto& l = lane_[(words_ + i) % 4];
    l = std::rotl(l + words[i] * p2, 31) * p1;
  }
  for (; i + 4 <= words.size(); i += 4) {
    for (int j = 0; j < 4; ++j) lane_[j] = std::rotl(lane_[j] + words[i + j] * p2, 31) * p1;
  }
  for (; i < words.size(); ++i) {
    auto& l = lane_[(words_ + i) % 4];
    l = std::rotl(l + words[i] * p2, 31) * p1;
  }
  words_ += words.size();
}

std::uint64_t checksum::digest() const noexcept {
  std::uint64_t h = std::rotl(lane_[0], 1) + std::rotl(lane_[1], 7) + std::rotl(lane_[2], 12) +
                    std::rotl(lane_[3], 18) + words_ * p1;
  h ^= h >> 33;
  h *= p2;
  h ^= h >> 29;
  h *= p1;
  h ^= h >> 32;
  return h;
}

std::uint32_t header_block_tokens(std::span<const unsigned char> bytes, const std::string& name) {
  auto fail = [&](const std::string& why) { return trace_error(name, 0, "kvtb: " + why); };
  if (bytes.size() < header_bytes || std::memcmp(bytes.data(), magic, 8) != 0) {
    return parse(bytes, name).view.block_tokens;  // parse words the error
  }
  const unsigned char* b = bytes.data();
  if (!header_sealed(bytes.first(header_bytes))) throw fail("header checksum mismatch (corrupt)");
  if (read_u32(b + 8) != version) return parse(bytes, name).view.block_tokens;
  const std::uint32_t bt = read_u32(b + 12);
  if (bt == 0) throw fail("block_tokens is 0");
  return bt;
}

namespace {

// The counts a kvtb header gives (after check_header has validated them against the file).
struct header_counts {
  std::uint32_t bt;
  std::uint64_t n, k, cols, tenant_bytes, kind_bytes, joins;
};

// Checks the header (magic, alignment, checksum, version, counts, sizes); returns its counts.
header_counts check_header(std::span<const unsigned char> bytes, const std::string& name) {
  auto fail = [&](const std::string& why) { return trace_error(name, 0, "kvtb: " + why); };
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), magic, 8) != 0) {
    throw fail("bad magic (not a kvtb file)");
  }
  if (bytes.size() < header_bytes) {
    throw fail("file is " + std::to_string(bytes.size()) + " bytes, shorter than the " +
               std::to_string(header_bytes) + "-byte header (truncated?)");
  }
  const unsigned char* b = bytes.data();
  if (reinterpret_cast<std::uintptr_t>(b) % 8 != 0) throw fail("image not 8-byte aligned");
  if (std::memcmp(b, magic, 8) != 0) throw fail("bad magic (not a kvtb file)");
  if (!header_sealed(bytes.first(header_bytes))) throw fail("header checksum mismatch (corrupt)");
  const std::uint32_t ver = read_u32(b + 8);
  if (ver != version) {
    throw fail("version " + std::to_string(ver) + " (this kvtk reads version " +
               std::to_string(version) + ")");
  }
  const std::uint32_t bt = read_u32(b + 12);
  const std::uint64_t n = read_u64(b + 16), k = read_u64(b + 24), cols = read_u64(b + 32);
  const std::uint64_t tenant_bytes = read_u64(b + 40), file_size = read_u64(b + 48);
  const std::uint64_t kind_bytes = read_u64(b + 64), joins = read_u64(b + 72);
  if (bt == 0) throw fail("block_tokens is 0");
  if (cols >> (column_bits + 1)) throw fail("unknown column bits (written by a newer kvtk?)");
  if (joins != 0 && !(cols & join_bit)) throw fail("fan-in ids without the fan-in column bit");
  if (file_size != bytes.size()) {
    throw fail("header says " + std::to_string(file_size) + " bytes but the file has " +
               std::to_string(bytes.size()) + " (truncated or appended to)");
  }
  // Size implied by the counts, guarding against overflow: every count is bounded by the size.
  if (n > bytes.size() / 8 || k > bytes.size() / 8 || tenant_bytes > bytes.size() ||
      kind_bytes > bytes.size() || joins > bytes.size() / 8) {
    throw fail("counts larger than the file");
  }
  std::uint64_t want =
      header_bytes + (n + 1) * 8 + n * 8 + k * 8 + padded(tenant_bytes) + padded(kind_bytes);
  for (int c = 0; c < column_bits; ++c) {
    if (cols >> c & 1) want += padded(n * elem[c]);
  }
  if (cols & join_bit) want += (n + 1) * 8 + joins * 8;
  if (want != bytes.size()) {
    throw fail("size " + std::to_string(bytes.size()) + " does not match the counts (" +
               std::to_string(want) + " expected)");
  }
  return {bt, n, k, cols, tenant_bytes, kind_bytes, joins};
}

// Checks the payload checksum (header field at byte 56) over everything after the header.
void check_payload(std::span<const unsigned char> bytes, const std::string& name,
                   const mapping* mapped) {
  // In slices, each dropped once summed (mapped files): the check reads the whole file, and
  // without this it would all stay resident (bench/RESULTS.md, "End to end").
  const unsigned char* b = bytes.data();
  checksum sum;
  constexpr std::size_t slice = std::size_t{8} << 20;  // a multiple of 8
  for (std::size_t at = header_bytes; at < bytes.size(); at += slice) {
    const std::size_t len = std::min(slice, bytes.size() - at);
    sum.update({reinterpret_cast<const std::uint64_t*>(b + at), len / 8});
    if (mapped != nullptr) mapped->drop(bytes.subspan(at, len));
  }
  if (sum.digest() != read_u64(b + 56)) {
    throw trace_error(name, 0, "kvtb: payload checksum mismatch (corrupt)");
  }
}

// Points `im`'s columns into the image `b` and reads its tenant table.
void map_columns(image& im, const unsigned char* b, const header_counts& h,
                 const std::string& name) {
  auto& v = im.view;
  v.block_tokens = h.bt;
  std::size_t at = header_bytes;
  auto take = [&]<class T>(std::span<const T>& out, std::uint64_t count) {
    out = {reinterpret_cast<const T*>(b + at), count};
    at += padded(count * sizeof(T));
  };
  take(v.offsets, h.n + 1);
  take(v.input_length, h.n);
  take(v.keys, h.k);
  if (h.cols & 1) take(v.arrival_s, h.n);
  if (h.cols & 2) take(v.output_length, h.n);
  if (h.cols & 4) take(v.priority, h.n);
  if (h.cols & 8) take(v.session, h.n);
  if (h.cols & 16) take(v.tenant, h.n);
  if (h.cols & 32) take(v.request_block_tokens, h.n);
  if (h.cols & 64) take(v.request_id, h.n);
  if (h.cols & 128) take(v.parent, h.n);
  if (h.cols & 256) take(v.turn, h.n);
  if (h.cols & 512) take(v.kind, h.n);
  if (h.cols & 1024) take(v.tool_s, h.n);
  if (h.cols & join_bit) {
    take(v.join_offsets, h.n + 1);
    take(v.join_ids, h.joins);
  }
  auto table = [&](std::uint64_t size, const char* what, std::vector<std::string>& out) {
    const std::string_view names(reinterpret_cast<const char*>(b + at), size);
    for (std::size_t s = 0; s < names.size();) {
      const std::size_t e = names.find('\n', s);
      if (e == std::string_view::npos) {
        throw trace_error(name, 0, std::string("kvtb: ") + what + " table not '\\n'-terminated");
      }
      const std::string_view entry = names.substr(s, e - s);
      if (!valid_utf8(entry)) {
        throw trace_error(name, 0, std::string("kvtb: ") + what + " " + std::to_string(out.size()) +
                                       " in the " + what + " table is not valid UTF-8");
      }
      out.emplace_back(entry);
      s = e + 1;
    }
    at += padded(size);
  };
  table(h.tenant_bytes, "tenant", im.tenants);
  table(h.kind_bytes, "kind", im.kinds);
}

// Request r's fan-in ids: offsets in order, a parent first, at most 1024 parents in all (the
// JSONL reader's limit), none reserved or repeated.
template <class Fail>
void check_joins(const kvtk::prefix::prefix_trace_view& v, std::uint64_t r, const Fail& fail) {
  if (v.join_offsets[r + 1] < v.join_offsets[r] || v.join_offsets[r + 1] > v.join_ids.size()) {
    throw fail("fan-in offsets out of order at request " + std::to_string(r));
  }
  const auto ids = v.joins(r);
  if (ids.empty()) return;
  const std::string at = "request " + std::to_string(r);
  if (v.parent.empty() || v.parent[r] == kvtk::prefix::no_parent) throw fail(at + " has fan-in ids but no parent");
  if (ids.size() >= 1024) throw fail(at + " has more than 1024 parents");
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == kvtk::prefix::no_parent) throw fail(at + " has the reserved id 2^64-1 as a parent");
    if (ids[i] == v.parent[r] || std::find(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(i), ids[i]) !=
                                     ids.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw fail(at + " lists parent " + std::to_string(ids[i]) + " twice");
    }
  }
}

// Checks the columns' contents: offsets, tenant indices, block sizes and per-request limits.
// One pass in stretches of requests, each stretch's pages dropped once checked (mapped files):
// reading whole columns first would make hundreds of MB resident for 10^7 requests.
void check_columns(const image& im, const header_counts& h, const std::string& name,
                   const mapping* mapped) {
  auto fail = [&](const std::string& why) { return trace_error(name, 0, "kvtb: " + why); };
  const auto& v = im.view;
  const std::uint64_t n = h.n;
  if (v.offsets[0] != 0 || v.offsets[n] != h.k) throw fail("offsets do not span the keys");
  if (!v.join_offsets.empty() && (v.join_offsets[0] != 0 || v.join_offsets[n] != h.joins)) {
    throw fail("fan-in offsets do not span the fan-in ids");
  }
  // The semantic rules every reader applies (formats/trace_limits.hpp): a file written by
  // another program is held to what kvtk's own readers would have accepted.
  constexpr std::uint64_t stretch = 65536;
  double last_time = 0;
  for (std::uint64_t first = 0; first < n; first += stretch) {
    const std::uint64_t last = std::min(n, first + stretch);
    for (std::uint64_t r = first; r < last; ++r) {
      if (v.offsets[r + 1] < v.offsets[r]) {
        throw fail("offsets decrease at request " + std::to_string(r));
      }
      if (!v.join_offsets.empty()) check_joins(v, r, fail);
      if (!v.tenant.empty() && v.tenant[r] >= im.tenants.size()) {
        throw fail("tenant index out of range");
      }
      if (!v.kind.empty() && v.kind[r] >= im.kinds.size()) throw fail("kind index out of range");
      if (!v.tool_s.empty() && !std::isnan(v.tool_s[r]) && !(v.tool_s[r] >= 0 && v.tool_s[r] <= 1e9)) {
        throw fail("request " + std::to_string(r) + " has tool_s outside [0, 1e9] seconds");
      }
      if (!v.request_block_tokens.empty() && v.request_block_tokens[r] == 0) {
        throw fail("a request has block_tokens 0");
      }
      const std::uint32_t rbt = v.request_block_tokens.empty() ? h.bt : v.request_block_tokens[r];
      std::optional<double> t;
      if (!v.arrival_s.empty()) t = v.arrival_s[r];
      std::optional<std::uint64_t> out;
      if (!v.output_length.empty()) out = v.output_length[r];
      if (auto p = limits::request_problem(v.input_length[r], v.offsets[r + 1] - v.offsets[r],
                                           rbt, t, out);
          !p.empty()) {
        throw fail("request " + std::to_string(r) + ": " + p);
      }
      if (t && !std::isnan(*t)) {
        if (*t < last_time) throw fail("request " + std::to_string(r) + ": arrival goes backwards");
        last_time = *t;
      }
    }
    if (mapped != nullptr) drop_requests(*mapped, v, first, last);
  }
}

}  // namespace

image parse(std::span<const unsigned char> bytes, const std::string& name, const mapping* mapped) {
  const header_counts h = check_header(bytes, name);
  check_payload(bytes, name, mapped);
  image im;
  map_columns(im, bytes.data(), h, name);
  check_columns(im, h, name, mapped);
  if (mapped != nullptr) mapped->drop(bytes.subspan(header_bytes));  // checked: let pages go
  return im;
}

bool has_magic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[8] = {};
  in.read(head, 8);
  return in.gcount() == 8 && std::memcmp(head, magic, 8) == 0;
}

mapping::mapping(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw trace_error(path, 0, std::string("cannot open file: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw trace_error(path, 0, "not a regular file");
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    // Not MAP_POPULATE: that would make the whole file resident at once; pages come in as a
    // pass reaches them and go again when it drops them (drop()).
    data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data_ == MAP_FAILED) {
      data_ = nullptr;
      ::close(fd);
      throw trace_error(path, 0, std::string("cannot map file: ") + std::strerror(errno));
    }
  }
  ::close(fd);
}

void mapping::drop(std::span<const unsigned char> range) const noexcept {
  if (range.empty() || data_ == nullptr) return;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto lo = (reinterpret_cast<std::uintptr_t>(range.data()) + page - 1) / page * page;
  const auto hi = (reinterpret_cast<std::uintptr_t>(range.data()) + range.size()) / page * page;
  const auto base = reinterpret_cast<std::uintptr_t>(data_);
  if (hi <= lo || lo < base || hi > base + size_) return;  // not whole pages of this mapping
  ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);  // a hint: failure costs RSS
}

void drop_requests(const mapping& m, const kvtk::prefix::prefix_trace_view& v, std::size_t first,
                   std::size_t last) noexcept {
  if (first >= last || last > v.requests()) return;
  auto bytes_of = [](auto span, std::size_t a, std::size_t b) {
    return std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(span.data() + a),
                                          (b - a) * sizeof(span[0]));
  };
  auto column = [&](auto span) {
    if (!span.empty()) m.drop(bytes_of(span, first, last));
  };
  if (v.unit_requests()) {
    m.drop(bytes_of(v.keys, first, last));
  } else {
    m.drop(bytes_of(v.keys, v.offsets[first], v.offsets[last]));
  }
  column(v.offsets);
  column(v.input_length);
  column(v.priority);
  column(v.arrival_s);
  column(v.output_length);
  column(v.session);
  column(v.tenant);
  column(v.request_block_tokens);
  column(v.request_id);
  column(v.parent);
  column(v.turn);
  column(v.kind);
  column(v.tool_s);
  if (!v.join_offsets.empty()) {
    m.drop(bytes_of(v.join_ids, v.join_offsets[first], v.join_offsets[last]));
    column(v.join_offsets);
  }
}

mapping::~mapping() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

writer::writer(std::string path, std::uint32_t block_tokens, bool force)
    : path_(std::move(path)), block_tokens_(block_tokens), force_(force) {
  if (block_tokens_ == 0) throw std::invalid_argument("kvtb writer: block_tokens must be > 0");
  for (auto& f : spool_) {
    f = std::tmpfile();
    if (f == nullptr) throw std::runtime_error("cannot create a temporary file for " + path_);
  }
  const std::uint64_t zero = 0;
  put(offsets, &zero, 8);
  put(join_offsets, &zero, 8);
}

writer::~writer() {
  for (auto* f : spool_) {
    if (f != nullptr) std::fclose(f);
  }
}

void writer::put(column c, const void* data, std::size_t bytes) {
  if (bytes == 0) return;  // an empty span may have a null data()
  if (std::fwrite(data, 1, bytes, spool_[c]) != bytes) {
    throw std::runtime_error("error writing a temporary file for " + path_);
  }
}

void writer::add(const request_record& r) {
  if (check_parents) kvtk::sim::check_parents(r, path_);
  keys_ += r.keys.size();
  put(keys, r.keys.data(), r.keys.size_bytes());
  put(offsets, &keys_, 8);
  put(input, &r.input_length, 8);
  // Optional columns are written for every request; finish() keeps only those that were used.
  const double at = r.arrival_s.value_or(std::nan(""));
  const std::uint64_t out = r.output_length.value_or(0), ses = r.session.value_or(0);
  const std::uint32_t pri = r.priority.value_or(kvtk::access_hint{}.priority);
  // A name's index in its table: 0 is "none", so the first name is 1.
  auto intern = [](std::string_view name, std::unordered_map<std::string, std::uint32_t>& index,
                   std::vector<std::string>& names) -> std::uint32_t {
    if (name.empty()) return 0;
    const auto [it, fresh] = index.try_emplace(std::string(name), static_cast<std::uint32_t>(names.size()));
    if (fresh) names.push_back(it->first);
    return it->second + 1;
  };
  const std::uint32_t ten = intern(r.tenant, tenant_index_, tenant_names_);
  put(arrival, &at, 8);
  put(output, &out, 8);
  put(priority, &pri, 4);
  put(session, &ses, 8);
  put(tenant, &ten, 4);
  put(rbt, &r.block_tokens, 4);
  const std::uint64_t rid = r.request_id.value_or(kvtk::prefix::no_parent),
                      par = r.parent.value_or(kvtk::prefix::no_parent);
  const std::uint32_t trn = r.turn.value_or(kvtk::prefix::no_turn);
  const std::uint32_t knd = intern(r.kind, kind_index_, kind_names_);
  put(id, &rid, 8);
  put(parent, &par, 8);
  put(turn, &trn, 4);
  put(kind, &knd, 4);
  const double tool = r.tool_s.value_or(NAN);
  put(tool_s, &tool, 8);
  joins_ += r.joins.size();
  put(join_ids, r.joins.data(), r.joins.size_bytes());
  put(join_offsets, &joins_, 8);
  columns_ |= (r.arrival_s ? 1u : 0u) | (r.output_length ? 2u : 0u) | (r.priority ? 4u : 0u) |
              (r.session ? 8u : 0u) | (r.tenant.empty() ? 0u : 16u) |
              (r.block_tokens != block_tokens_ ? 32u : 0u) | (r.request_id ? 64u : 0u) |
              (r.parent ? 128u : 0u) | (r.turn ? 256u : 0u) | (r.kind.empty() ? 0u : 512u) |
              (r.tool_s ? 1024u : 0u) | (r.joins.empty() ? 0u : join_bit);
  ++requests_;
}

void writer::finish() {
  // Two passes over the spools: the header carries the data's checksum and size, so it is
  // computed first and the file is then written front to back. That keeps every destination
  // possible, including stdout and FIFOs, which cannot seek back to a header.
  const std::uint64_t n = requests_;
  // "No tenant" is name 0 when any request has a tenant.
  std::string names;
  if (columns_ & 16) {
    names = "\n";
    for (const auto& t : tenant_names_) names += t + "\n";
  }
  std::string kinds;
  if (columns_ & 512) {
    kinds = "\n";
    for (const auto& k : kind_names_) kinds += k + "\n";
  }
  struct section {
    std::FILE* spool;
    std::uint64_t bytes;
  };
  std::vector<section> sections = {{spool_[offsets], (n + 1) * 8}, {spool_[input], n * 8},
                                   {spool_[keys], keys_ * 8}};
  const column optional[column_bits] = {arrival, output, priority, session, tenant,
                                        rbt,     id,     parent,   turn,    kind,   tool_s};
  for (int c = 0; c < column_bits; ++c) {
    if (columns_ >> c & 1) sections.push_back({spool_[optional[c]], n * elem[c]});
  }
  if (columns_ & join_bit) {
    sections.push_back({spool_[join_offsets], (n + 1) * 8});
    sections.push_back({spool_[join_ids], joins_ * 8});
  }
  std::vector<std::uint64_t> name_words(padded(names.size()) / 8 + padded(kinds.size()) / 8, 0);
  if (!names.empty()) std::memcpy(name_words.data(), names.data(), names.size());
  if (!kinds.empty()) {
    std::memcpy(reinterpret_cast<unsigned char*>(name_words.data()) + padded(names.size()), kinds.data(),
                kinds.size());
  }

  std::vector<std::uint64_t> buf(1 << 15);
  // Streams one section, zero-padded to 8 bytes, to fn(words, count).
  auto each_chunk = [&](const section& sec, auto&& fn) {
    if (std::fflush(sec.spool) != 0 || std::fseek(sec.spool, 0, SEEK_SET) != 0) {
      throw std::runtime_error("error reading a temporary file for " + path_);
    }
    const std::uint64_t words = padded(sec.bytes) / 8;
    for (std::uint64_t done = 0; done < words;) {
      const std::size_t chunk =
          static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), words - done));
      std::fill(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(chunk), 0);
      const std::size_t want = static_cast<std::size_t>(
          std::min<std::uint64_t>(chunk * 8, sec.bytes - std::min(sec.bytes, done * 8)));
      if (std::fread(buf.data(), 1, want, sec.spool) != want) {
        throw std::runtime_error("error reading a temporary file for " + path_);
      }
      fn(buf.data(), chunk);
      done += chunk;
    }
  };
  checksum sum;
  std::uint64_t size = header_bytes;
  for (const auto& sec : sections) {
    each_chunk(sec, [&](const std::uint64_t* w, std::size_t count) { sum.update({w, count}); });
    size += padded(sec.bytes);
  }
  sum.update(name_words);
  size += name_words.size() * 8;

  std::vector<unsigned char> header(header_bytes, 0);
  std::memcpy(header.data(), magic, 8);
  auto put32 = [&](std::size_t at, std::uint32_t v) { std::memcpy(header.data() + at, &v, 4); };
  auto put64 = [&](std::size_t at, std::uint64_t v) { std::memcpy(header.data() + at, &v, 8); };
  put32(8, version);
  put32(12, block_tokens_);
  put64(16, n);
  put64(24, keys_);
  put64(32, columns_);
  put64(40, names.size());
  put64(48, size);
  put64(56, sum.digest());
  put64(64, kinds.size());
  put64(72, columns_ & join_bit ? joins_ : 0);
  seal_header(header);

  output_file out(path_, force_);
  out.write(header.data(), header.size());
  for (const auto& sec : sections) {
    each_chunk(sec, [&](const std::uint64_t* w, std::size_t count) { out.write(w, count * 8); });
  }
  out.write(name_words.data(), name_words.size() * 8);
  out.commit();
}

}  // namespace kvtk::sim::kvtb
