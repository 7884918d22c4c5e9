// sim/formats/mooncake_flat.hpp — Mooncake and Bailian JSONL request traces, and the Mooncake trace
// flattened to one block per request.
//
// Every element of every line's `hash_ids`, in file order, becomes one unit-size request: the
// "flat block trace" on which the policy golden values are defined. This reader only needs
// hash_ids and validates exactly what it uses; the request readers of every format are in
// formats/requests.hpp (these functions are their in-memory shortcuts).
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "formats/trace_error.hpp"
#include "kvtk/prefix/replay.hpp"

namespace kvtk::sim {

/// How readers treat bad lines.
struct read_options {
  /// Skip malformed lines (counting them) instead of stopping at the first one.
  bool skip_invalid = false;
  /// JSONL files smaller than this are read by one thread whatever the thread count (splitting
  /// a small file costs more than it saves; tests and the fuzzer set 0 to split everything).
  std::uint64_t parallel_min_bytes = std::uint64_t{1} << 20;
};

/// What a reader skipped (with read_options::skip_invalid).
struct read_report {
  std::uint64_t skipped_lines = 0;
  std::string first_error;  ///< "file:line: reason" of the first skipped line
  /// kvtk JSONL: decode-step records ("type": "decode", docs/sparse.md) passed over by request
  /// readers (they are `kvtk sparse`'s input, not requests).
  std::uint64_t decode_records = 0;
};

/// Parses `in` (named `name` in errors). Each non-empty line must be a JSON object with a
/// `hash_ids` array of non-negative integers (< 2^64). Throws trace_error("name:line: reason") on
/// the first malformed line: invalid JSON, not an object, missing/ill-typed hash_ids, negative or
/// non-integer id, empty line.
std::vector<std::uint64_t> parse_mooncake_flat(std::istream& in, const std::string& name);

/// Opens and parses a file. Throws trace_error (line 0) when the file cannot be opened.
std::vector<std::uint64_t> load_mooncake_flat(const std::string& path);

/// Parses a Mooncake JSONL trace into requests: hash_ids (prefix ids, used unchanged as keys) and
/// input_length (a non-negative integer, required). Same errors as parse_mooncake_flat, plus a
/// missing or ill-typed input_length.
kvtk::prefix::prefix_trace parse_mooncake_requests(std::istream& in, const std::string& name,
                                                   std::uint32_t block_tokens = 512);
kvtk::prefix::prefix_trace load_mooncake_requests(const std::string& path,
                                                  std::uint32_t block_tokens = 512);

/// Parses an Alibaba Bailian JSONL trace (chat_id, parent_chat_id, timestamp in s, input_length,
/// output_length, type, turn, hash_ids = per-block *content* ids, 16-token blocks by default).
/// The content ids are chained into prefix keys (kvtk::prefix::chain_keys), so equal content under
/// different prefixes never shares a key.
kvtk::prefix::prefix_trace parse_bailian_requests(std::istream& in, const std::string& name,
                                                  std::uint32_t block_tokens = 16);

/// Parses a kvtk native JSONL trace (formats/requests.hpp).
kvtk::prefix::prefix_trace parse_kvtk_requests(std::istream& in, const std::string& name,
                                               std::uint32_t block_tokens = 64);

/// The name of the detected format of any trace (detect_trace_format in formats/requests.hpp).
std::string detect_format(const std::string& path);

/// Loads a request trace of any format but kvtb (which is mapped: loaded_trace) or "auto" into
/// memory; block_tokens 0 = the format's default. The JSONL formats are checked for one id per
/// block of input (len(hash_ids) == ceil(input_length / block_tokens)) and non-decreasing times.
kvtk::prefix::prefix_trace load_requests(const std::string& path, const std::string& format,
                                         std::uint32_t block_tokens = 0,
                                         const read_options& opts = {},
                                         read_report* report = nullptr);

}  // namespace kvtk::sim
