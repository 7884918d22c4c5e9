// sim/formats/writers.hpp — writing request traces (what `kvtk trace convert` and
// `kvtk trace gen` produce).
//
//  * kvtk: a header line {"kvtk_trace": 1, "block_tokens": B}, then one object per request with
//    hash_ids = the request's prefix keys (already chained and namespaced, so a trace read from
//    Bailian content ids or with model/cache_salt fields replays identically after conversion)
//    and every optional field the request has.
//  * mooncake: timestamp (ms, rounded), input_length, output_length, hash_ids. Needs one block
//    size for the whole trace.
//  * ids: every key of every request, one per line (the flat block trace).
//  * oracle-general: libCacheSim's 24-byte records {u32 time, u64 id, u32 size, i64 next}, one
//    per key; time = the request's arrival in whole seconds (else its index), size = the block's
//    token count, next = the record index of the id's next reference, or -1. Computing next needs
//    the whole key stream: this writer holds the ids (8 bytes each) until finish().
//  * kvtb: formats/kvtb.hpp.
// Every writer writes through util/output_file.hpp: "-" is stdout, a device or FIFO is written
// directly, and a file is written to a unique temporary beside it and renamed on finish(), so an
// interrupted or failed write never leaves a truncated file under the requested name.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

#include "formats/requests.hpp"

namespace kvtk::sim {

class trace_writer {
 public:
  virtual ~trace_writer() = default;
  /// Throws: trace_error naming the request's line when the format cannot represent it.
  virtual void add(const request_record& r) = 0;
  /// Throws: std::runtime_error on an I/O error.
  virtual void finish() = 0;

  /// A writer of format f to path ("-": stdout). `force`: replace an existing file.
  /// Throws output_refused / output_error (util/output_file.hpp) when it cannot be created.
  static std::unique_ptr<trace_writer> open(const std::string& path, trace_format f,
                                            std::uint32_t block_tokens, bool force = false);
  /// A JSONL writer (kvtk or mooncake) to a stream, e.g. stdout; finish() flushes.
  static std::unique_ptr<trace_writer> to_stream(std::ostream& out, trace_format f,
                                                 std::uint32_t block_tokens);
};

}  // namespace kvtk::sim
