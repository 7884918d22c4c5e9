// sim/formats/gzip_input.hpp — a gzip-compressed file read as a stream of its text, in pieces,
// through zlib (Dynamo's request-trace sink may write .jsonl.gz; the file is never inflated
// whole, so its size does not bound the reader's memory).
#pragma once

#include <istream>
#include <memory>
#include <string>

namespace kvtk::sim {

/// Whether the file at `path` starts with gzip's magic bytes (1f 8b). False when it cannot be
/// read (the caller's open reports that).
bool is_gzip(const std::string& path);

/// A stream of the decompressed bytes of the gzip file `path`. A corrupt or truncated file
/// sets the stream's badbit when reached; gzip_failed() then names the reason.
/// Throws: std::runtime_error when the file cannot be opened.
std::unique_ptr<std::istream> open_gzip(const std::string& path);

/// Returns: "" or why the gzip stream `in` (from open_gzip) stopped early.
std::string gzip_failed(const std::istream& in);

}  // namespace kvtk::sim
