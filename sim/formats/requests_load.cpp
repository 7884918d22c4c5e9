// The per-file half of requests.hpp: format names, format detection, the default block size of
// a trace file, and the readers of a whole file that dispatch on its format (kvtb, flat, JSONL).
// The JSONL line reader and trace_builder are in requests.cpp.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "formats/flat_traces.hpp"
#include "formats/kvtb.hpp"
#include "formats/requests.hpp"
#include "formats/requests_detail.hpp"
#include "util/temp_file.hpp"

namespace kvtk::sim {
namespace {

// The first non-blank line within the file's first MiB and its 1-based number (0 when there is
// none): one bounded read, so detecting the format of a binary file with no '\n' byte, or of a
// huge first line, reads a MiB and not the whole file. A line cut at the MiB is returned cut
// (detection needs only its start; the reader proper reports over-long lines).
std::string first_line(const std::string& path, std::uint64_t* number = nullptr) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw trace_error(path, 0, std::string("cannot open file: ") + std::strerror(errno));
  std::string head(std::size_t{1} << 20, '\0');
  head.resize(std::fread(head.data(), 1, head.size(), f.get()));
  if (std::ferror(f.get())) throw trace_error(path, 0, "read error");
  std::size_t at = 0;
  for (std::uint64_t n = 1; at < head.size(); ++n) {
    std::size_t end = head.find('\n', at);
    if (end == std::string::npos) end = head.size();
    const std::string_view line(head.data() + at, end - at);
    if (line.find_first_not_of(" \t\r") != std::string_view::npos) {
      if (number != nullptr) *number = n;
      return std::string(line);
    }
    at = end + 1;
  }
  return {};
}

}  // namespace

std::uint32_t detail::format_default(trace_format f) {
  switch (f) {
    case trace_format::mooncake:
      return 512;
    case trace_format::bailian:
      return 16;
    case trace_format::kvtk:
      return 64;
    default:
      return 1;
  }
}

std::string_view format_name(trace_format f) noexcept { return trace_format_names.name(f); }

std::optional<trace_format> parse_format_name(std::string_view name) noexcept {
  return trace_format_names.find(name);
}

std::string format_names() {
  return "mooncake|bailian|oracle-general|ids|kvtk|kvtb";
}

void require_trace_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw trace_error(path, 0, std::string("cannot open file: ") + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) throw trace_error(path, 0, "is a directory, not a trace file");
  if (!S_ISREG(st.st_mode)) {
    throw trace_error(path, 0,
                      "not a regular file (a FIFO, socket or device): kvtk reads a trace more "
                      "than once; save it to a file first");
  }
}

trace_format detect_trace_format(const std::string& path) {
  if (kvtb::has_magic(path)) return trace_format::kvtb;
  std::uint64_t lineno = 0;
  const std::string line = first_line(path, &lineno);
  const std::size_t b = line.find_first_not_of(" \t");
  if (b != std::string::npos && line[b] == '{') {
    for (const char* marker : {"\"kvtk_trace\"", "\"content_ids\"", "\"arrival_s\"", "\"session\""}) {
      if (line.find(marker) != std::string::npos) return trace_format::kvtk;
    }
    if (line.find("\"chat_id\"") != std::string::npos ||
        line.find("\"parent_chat_id\"") != std::string::npos) {
      return trace_format::bailian;
    }
    if (line.find("\"hash_ids\"") != std::string::npos) return trace_format::mooncake;
    throw trace_error(path, lineno,
                      "cannot detect the format (a JSON line without hash_ids, chat_id or "
                      "kvtk_trace); give --format");
  }
  const std::string flat = detect_flat_format(path);  // throws when nothing fits
  return flat == "ids" ? trace_format::ids : trace_format::oracle_general;
}

std::uint32_t default_block_tokens(const std::string& path, trace_format f) {
  if (f == trace_format::kvtb) {
    kvtb::mapping m(path);
    return kvtb::header_block_tokens(m.bytes(), path);
  }
  if (f == trace_format::kvtk) {
    const std::string line = first_line(path);
    if (line.find("\"kvtk_trace\"") != std::string::npos) {
      if (const std::uint32_t bt = detail::read_kvtk_header(line, path)) return bt;
    }
  }
  return detail::format_default(f);
}

std::uint32_t for_each_request(const std::string& path, trace_format f,
                               std::uint32_t block_tokens, const read_options& opts,
                               read_report* report, const request_sink& sink) {
  if (f == trace_format::kvtb) {
    kvtb::mapping m(path);
    const kvtb::image im = kvtb::parse(m.bytes(), path, &m);
    const auto& v = im.view;
    if (block_tokens != 0 && block_tokens != v.block_tokens) {
      throw trace_error(path, 0,
                        "kvtb file was written with " + std::to_string(v.block_tokens) +
                            "-token blocks; --block-tokens " + std::to_string(block_tokens) +
                            " would misread it");
    }
    for (std::size_t r = 0; r < v.requests(); ++r) {
      request_record rec;
      rec.keys = v.blocks(r);
      rec.input_length = v.input_length[r];
      rec.block_tokens = v.block_tokens_of(r);
      rec.line = r + 1;
      if (!v.arrival_s.empty() && !std::isnan(v.arrival_s[r])) rec.arrival_s = v.arrival_s[r];
      if (!v.output_length.empty()) rec.output_length = v.output_length[r];
      if (!v.priority.empty()) rec.priority = v.priority[r];
      if (!v.session.empty()) rec.session = v.session[r];
      if (!v.tenant.empty()) rec.tenant = im.tenants[v.tenant[r]];
      if (!v.request_id.empty() && v.request_id[r] != kvtk::prefix::no_parent) rec.request_id = v.request_id[r];
      if (!v.parent.empty() && v.parent[r] != kvtk::prefix::no_parent) rec.parent = v.parent[r];
      rec.joins = v.joins(r);
      if (!v.turn.empty() && v.turn[r] != kvtk::prefix::no_turn) rec.turn = v.turn[r];
      if (!v.kind.empty()) rec.kind = im.kinds[v.kind[r]];
      if (!v.tool_s.empty() && !std::isnan(v.tool_s[r])) rec.tool_s = v.tool_s[r];
      sink(rec);
      if ((r + 1) % 65536 == 0) kvtb::drop_requests(m, v, r + 1 - 65536, r + 1);  // streamed past
    }
    return v.block_tokens;
  }
  if (f == trace_format::ids || f == trace_format::oracle_general) {
    const std::uint32_t bt = block_tokens ? block_tokens : detail::format_default(f);
    // Flat traces are read whole (they are id lists; the JSONL formats stream).
    const std::vector<std::uint64_t> ids = load_flat(path, std::string(format_name(f)));
    for (std::size_t i = 0; i < ids.size(); ++i) {
      request_record rec;
      rec.keys = {&ids[i], 1};
      rec.input_length = bt;
      rec.block_tokens = bt;
      rec.line = i + 1;
      sink(rec);
    }
    return bt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw trace_error(path, 0, "cannot open file");
  return for_each_request(in, path, f, block_tokens, opts, report, sink);
}

void loaded_trace::release(std::size_t first, std::size_t last) const noexcept {
  if (mapping_ != nullptr) kvtb::drop_requests(*mapping_, view_, first, last);
}

std::string loaded_trace::attach_session_signals() {
  auto s = std::make_shared<const kvtk::prefix::session_signals>(
      kvtk::prefix::session_signals_of(view_, kinds_));
  s->attach(view_);
  heap_bytes_ += s->session.capacity() * 8 + s->turn.capacity() * 4 + s->awaits_tool.capacity();
  signals_ = std::move(s);
  return signals_->source;
}

loaded_trace::loaded_trace(kvtk::prefix::prefix_trace t) {
  auto owned = std::make_shared<const kvtk::prefix::prefix_trace>(std::move(t));
  view_ = owned->view();
  auto bytes = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  heap_bytes_ = bytes(owned->keys) + bytes(owned->offsets) + bytes(owned->input_length) +
                bytes(owned->priority) + bytes(owned->arrival_s) + bytes(owned->output_length) +
                bytes(owned->session) + bytes(owned->tenant) + bytes(owned->request_block_tokens) +
                bytes(owned->request_id) + bytes(owned->parent) + bytes(owned->turn) +
                bytes(owned->kind) + bytes(owned->tool_s) +
                bytes(owned->join_offsets) + bytes(owned->join_ids);
  tenants_ = owned->tenant_names;
  kinds_ = owned->kind_names;
  storage_ = std::move(owned);
}

loaded_trace loaded_trace::load(const std::string& path, trace_format f, std::uint32_t block_tokens,
                                const read_options& opts, read_report* report, unsigned threads) {
  if (f == trace_format::kvtb) {
    auto m = std::make_shared<const kvtb::mapping>(path);
    kvtb::image im = kvtb::parse(m->bytes(), path, m.get());
    if (block_tokens != 0 && block_tokens != im.view.block_tokens) {
      throw trace_error(path, 0,
                        "kvtb file was written with " + std::to_string(im.view.block_tokens) +
                            "-token blocks; --block-tokens " + std::to_string(block_tokens) +
                            " would misread it");
    }
    loaded_trace out;
    out.view_ = im.view;
    out.tenants_ = std::move(im.tenants);
    out.kinds_ = std::move(im.kinds);
    // A flat trace written as kvtb (every request one whole block of the file's size) replays
    // through the unit layout's faster paths; the check reads two columns once.
    auto& v = out.view_;
    bool unit = v.request_block_tokens.empty() && v.keys.size() == v.requests();
    constexpr std::size_t slice = 1 << 20;
    for (std::size_t first = 0; unit && first < v.requests(); first += slice) {
      const std::size_t last = std::min(v.requests(), first + slice);
      for (std::size_t r = first; unit && r < last; ++r) {
        unit = v.offsets[r] == r && v.input_length[r] == v.block_tokens;
      }
      kvtb::drop_requests(*m, v, first, last);  // the columns just read
    }
    if (unit) {
      v.offsets = {};
      v.input_length = {};
    }
    out.mapping_ = m.get();
    out.storage_ = std::move(m);
    return out;
  }
  const std::uint32_t bt = block_tokens ? block_tokens : default_block_tokens(path, f);
  if (f == trace_format::ids || f == trace_format::oracle_general) {
    // The unit layout (prefix_trace_view): the ids are the keys, 8 bytes per reference.
    kvtk::prefix::prefix_trace t;
    t.block_tokens = bt;
    t.keys = load_flat(path, std::string(format_name(f)), threads);
    std::vector<std::uint64_t>().swap(t.offsets);
    return loaded_trace(std::move(t));
  }
  if (f == trace_format::mooncake || f == trace_format::kvtk) {
    return loaded_trace(parse_jsonl_parallel(path, f, bt, opts, report, threads));
  }
  trace_builder b(bt);
  for_each_request(path, f, bt, opts, report, [&](const request_record& r) { b.add(r); });
  return loaded_trace(b.finish());
}

loaded_trace loaded_trace::spill(const std::string& path, trace_format f,
                                 std::uint32_t block_tokens, const read_options& opts,
                                 read_report* report) {
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
  if (ec) throw spill_failed("no temporary directory: " + ec.message());
  temp_file spool;
  if (!spool.create(dir.string(), "kvtk-trace.kvtb")) {
    throw spill_failed("cannot create a file in " + dir.string() + ": " + std::strerror(errno));
  }
  try {
    kvtb::writer w(spool.path(), block_tokens, /*force=*/true);
    for_each_request(path, f, block_tokens, opts, report,
                     [&](const request_record& r) { w.add(r); });
    w.finish();
  } catch (const trace_error&) {
    throw;  // the trace itself: as load() reports it
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    throw spill_failed(e.what());  // the temporary files
  }
  loaded_trace t;
  try {
    t = load(spool.path(), trace_format::kvtb, block_tokens, read_options{}, nullptr);
  } catch (const std::exception& e) {
    throw spill_failed(e.what());
  }
  spool.discard();  // the mapping holds the file until the trace goes
  return t;
}

}  // namespace kvtk::sim
