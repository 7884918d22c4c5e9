// sim/formats/requests.hpp — every request-trace format behind one streaming interface.
//
// Formats (README "Trace formats" has the field tables):
//  * mooncake  JSONL: timestamp (ms), input_length, output_length, hash_ids = prefix ids.
//              Default 512-token blocks.
//  * bailian   JSONL: chat_id, parent_chat_id (-1 = root), timestamp (s), input_length,
//              output_length, type, turn, hash_ids = per-block content ids, chained here into
//              prefix keys. Default 16-token blocks. Session = the root chat of the parent chain.
//  * kvtk      JSONL, kvtk's native superset (schema: traces/kvtk-trace.schema.json): an optional
//              header line {"kvtk_trace": 1, "block_tokens": B}, then one request per line.
//              Default 64-token blocks.
//  * ids / oracle-general: flat block traces; every record is one single-block request of
//              block_tokens tokens (default 1, so token and block ratios agree).
//  * kvtb      kvtk's binary trace (formats/kvtb.hpp), memory-mapped.
//
// Streaming: readers hold one line (JSONL) or one record at a time; memory does not grow with
// the trace, except the Bailian reader's chat_id -> session map (one entry per chat) and the
// kvtk reader's tenant-name table.
//
// Errors: a malformed line throws trace_error("file:line: reason"); with
// read_options::skip_invalid it is counted in read_report instead and the line is skipped.
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "kvtk/names.hpp"
#include "formats/mooncake_flat.hpp"
#include "formats/trace_error.hpp"
#include "kvtk/prefix/replay.hpp"
#include "kvtk/prefix/sessions.hpp"

namespace kvtk::sim {

namespace kvtb {
class mapping;
}

enum class trace_format : std::uint8_t { mooncake, bailian, kvtk, ids, oracle_general, kvtb };
/// The formats' names (kvtk/names.hpp): the --format values, the kvtb/JSON "format" fields.
inline constexpr kvtk::name_table<trace_format, 6> trace_format_names{
    "format", {"mooncake", "bailian", "kvtk", "ids", "oracle-general", "kvtb"}};

/// "mooncake", "bailian", "kvtk", "ids", "oracle-general", "kvtb".
std::string_view format_name(trace_format f) noexcept;
/// The format named `name`, or nullopt ("auto" is not a format: see detect_trace_format).
std::optional<trace_format> parse_format_name(std::string_view name) noexcept;
/// "mooncake|bailian|oracle-general|ids|kvtk|kvtb".
std::string format_names();

/// Throws trace_error unless `path` names a regular file ("cannot open file: <errno text>", "is
/// a directory", "not a regular file"): kvtk reads a trace more than once (format detection,
/// then the requests; kvtb is mapped), which a FIFO or device cannot give.
void require_trace_file(const std::string& path);

/// Detects the format of the file at `path` from its content: the kvtb magic; else a JSONL line
/// (the first non-blank one) with "kvtk_trace", "content_ids", "arrival_s" or "session" -> kvtk,
/// "chat_id"/"parent_chat_id" -> bailian, "hash_ids" -> mooncake; else text of integers -> ids;
/// else a whole number of 24-byte records -> oracle-general. Throws trace_error when none fits.
trace_format detect_trace_format(const std::string& path);

/// The block size a trace of `format` at `path` uses when the user gives none: the kvtb header's,
/// the kvtk header line's, or the format default (512 / 16 / 64 / 1).
std::uint32_t default_block_tokens(const std::string& path, trace_format format);

/// One request as a reader yields it; spans and views are valid during the callback only.
struct request_record {
  std::span<const kvtk::block_key> keys;  ///< prefix keys (chained / namespaced as the format says)
  std::uint64_t input_length = 0;
  std::uint32_t block_tokens = 0;  ///< this request's block size
  std::uint64_t line = 0;          ///< 1-based line or record number in the file
  std::optional<double> arrival_s;
  std::optional<std::uint64_t> output_length;
  std::optional<std::uint32_t> priority;
  std::optional<std::uint64_t> session;
  std::string_view tenant;  ///< empty = none (raw JSON string contents)
  // Session structure (docs/formats.md "Session fields"): Bailian's chat_id, parent_chat_id,
  // turn and type; kvtk JSONL's id, parent, turn and kind.
  std::optional<std::uint64_t> request_id;  ///< the request's own id
  std::optional<std::uint64_t> parent;      ///< its parent's id; nullopt = a root (or unknown)
  /// Fan-in: the ids of its further parents, which it also waits for (kvtk JSONL `"parent":
  /// [first, ...]` lists them after `parent`); empty for a request with one parent or none.
  std::span<const std::uint64_t> joins;
  std::optional<std::uint32_t> turn;        ///< its turn in its session
  std::string_view kind;                    ///< empty = none (raw JSON string contents)
  /// Seconds the tool call that ended its reply took (kvtk JSONL "tool_s"); nullopt: the reply
  /// made no tool call, or the trace does not say.
  std::optional<double> tool_s;
};

using request_sink = std::function<void(const request_record&)>;

/// What every reader checks of a request's parents, checked again where a record is written
/// (library and Python callers build records too): joins need a parent, at most 1024 parents in
/// all, none repeated, none the reserved 2^64-1.  Throws: trace_error naming `file` and r.line.
void check_parents(const request_record& r, const std::string& file);

/// Streams the requests of `path` (format `f`, block size block_tokens or 0 for the default) to
/// `sink`, in file order. Returns the block size used.
/// Throws: trace_error for unreadable or malformed input (see the header comment).
std::uint32_t for_each_request(const std::string& path, trace_format f, std::uint32_t block_tokens,
                               const read_options& opts, read_report* report,
                               const request_sink& sink);

/// The same over a stream of JSONL text named `name` (mooncake, bailian or kvtk only), whose
/// first line is line `first_line` of the file (a chunk of it: parse_jsonl_parallel).
std::uint32_t for_each_request(std::istream& in, const std::string& name, trace_format f,
                               std::uint32_t block_tokens, const read_options& opts,
                               read_report* report, const request_sink& sink,
                               std::uint64_t first_line = 1);

/// Reads a mooncake or kvtk JSONL file into memory with `threads` threads: the file is cut at
/// line boundaries into one chunk per thread, each chunk parsed by the sequential reader (with
/// the file's true line numbers) into its own trace, and the traces concatenated in file order.
/// The result, the errors and the report equal the sequential reader's: the first error in file
/// order wins, and the arrival-order check spans chunk boundaries. Bailian (whose sessions chain
/// across the file), skip_invalid (whose skipping changes what later lines are checked against)
/// and files that are not regular read sequentially.  Throws: as for_each_request.
kvtk::prefix::prefix_trace parse_jsonl_parallel(const std::string& path, trace_format f,
                                                std::uint32_t block_tokens,
                                                const read_options& opts, read_report* report,
                                                unsigned threads);

/// Appends records to an in-memory trace (optional columns appear once any request has them).
class trace_builder {
 public:
  explicit trace_builder(std::uint32_t block_tokens);
  /// Effects: room for about this many requests and keys (an estimate: more or fewer only cost
  /// a reallocation), so that a large trace is not copied by repeated doubling.
  void reserve(std::size_t requests, std::size_t keys);
  void add(const request_record& r);
  /// Requires: called once.  Returns the trace, moved out.
  kvtk::prefix::prefix_trace finish();

 private:
  kvtk::prefix::prefix_trace t_;
  std::unordered_map<std::string, std::uint32_t> tenant_index_;
  std::size_t requests_hint_ = 0;
  bool mixed_block_size_ = false, any_time_ = false, any_output_ = false, any_priority_ = false,
       any_session_ = false, any_tenant_ = false, any_id_ = false, any_parent_ = false,
       any_turn_ = false, any_kind_ = false, any_tool_ = false;
  std::unordered_map<std::string, std::uint32_t> kind_index_;
};

/// loaded_trace::spill could not use the temporary directory (the message says why): the caller
/// may load the trace into memory instead.
struct spill_failed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A trace ready to replay: owned in memory, or a mapped kvtb file (no parsing).
class loaded_trace {
 public:
  loaded_trace() = default;
  explicit loaded_trace(kvtk::prefix::prefix_trace t);
  [[nodiscard]] const kvtk::prefix::prefix_trace_view& view() const noexcept { return view_; }
  [[nodiscard]] std::span<const std::string> tenant_names() const noexcept { return tenants_; }
  [[nodiscard]] std::span<const std::string> kind_names() const noexcept { return kinds_; }
  /// Heap bytes the trace's arrays hold (vector capacities); 0 for a mapped kvtb file, whose
  /// pages belong to the page cache. The unit layout of a flat trace holds 8 bytes a reference.
  [[nodiscard]] std::size_t memory_bytes() const noexcept { return heap_bytes_; }
  /// Effects: for a mapped kvtb file, drops the pages of requests [first, last) from the
  /// resident set (a pass is done with them; a later access reads them back from the page
  /// cache); nothing for a trace in memory. The view stays valid and unchanged.
  void release(std::size_t first, std::size_t last) const noexcept;
  /// The mapping of a kvtb file (its header identifies the trace: formats/next_use_file.hpp);
  /// nullptr for a trace in memory.
  [[nodiscard]] const kvtb::mapping* kvtb_file() const noexcept { return mapping_; }

  /// Effects: replaces the view's session and turn columns by the signals session-aware leaf
  /// orders read (kvtk/prefix/sessions.hpp session_signals_of: sessions from the trace, or
  /// inferred; turn = depth in the session) and sets its awaits_tool column. Returns where the
  /// sessions came from: "trace" or "inferred". Call before sharing the trace between threads.
  /// Throws: std::bad_alloc.
  std::string attach_session_signals();

  /// Loads `path`. A kvtb file is mapped and checked (size, version, checksums); any other
  /// format is read into memory. block_tokens 0 = the format's default; a kvtb file refuses a
  /// different block size (its keys were computed with its own).
  /// JSONL formats are parsed with `threads` threads (parse_jsonl_parallel).
  static loaded_trace load(const std::string& path, trace_format f, std::uint32_t block_tokens,
                           const read_options& opts, read_report* report, unsigned threads = 1);
  /// As load(), for a JSONL format, in memory bounded by the request being parsed: the requests
  /// are written as they are read to a temporary kvtb file (kvtb::writer: constant memory) in the
  /// temporary directory, which is mapped and unlinked at once (the mapping keeps it until the
  /// trace goes; signals remove it before). The same trace, report and errors as load().
  /// Throws: as load() for the trace itself; spill_failed when the temporary file cannot be
  /// created, written or mapped (a full or unwritable disk: the column buffers of
  /// kvtb::writer are std::tmpfile()s, in /tmp whatever TMPDIR says).
  static loaded_trace spill(const std::string& path, trace_format f, std::uint32_t block_tokens,
                            const read_options& opts, read_report* report);

 private:
  std::shared_ptr<const void> storage_;  // the prefix_trace or the mapping
  kvtk::prefix::prefix_trace_view view_;
  std::vector<std::string> tenants_, kinds_;
  std::shared_ptr<const kvtk::prefix::session_signals> signals_;
  std::size_t heap_bytes_ = 0;
  const kvtb::mapping* mapping_ = nullptr;  // set for a mapped kvtb file (storage_ owns it)
};

}  // namespace kvtk::sim
