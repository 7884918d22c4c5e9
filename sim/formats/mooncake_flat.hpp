// sim/formats/mooncake_flat.hpp — a Mooncake JSONL trace flattened to one block per request.
//
// Every element of every line's `hash_ids`, in file order, becomes one unit-size request: the
// "flat block trace" on which the policy golden values are defined. Full trace ingestion (all
// formats, streaming, --skip-invalid) is the sim/formats reader set; this reader only needs
// hash_ids and validates exactly what it uses.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "formats/trace_error.hpp"
#include "kvtk/prefix/replay.hpp"

namespace kvtk::sim {

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

}  // namespace kvtk::sim
