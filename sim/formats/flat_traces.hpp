// sim/formats/flat_traces.hpp — flat block traces: every record is one single-block request.
//
//  * ids: plain text, one non-negative integer id per line.
//  * oracle-general: libCacheSim's binary format, packed little-endian 24-byte records
//    {uint32 time, uint64 id, uint32 size, int64 next_access}; only the ids are used (sizes and
//    next-access hints are ignored: kvtk computes next uses itself).
//  * mooncake: every hash_id of a Mooncake JSONL line, in file order (mooncake_flat.hpp).
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "formats/trace_error.hpp"

namespace kvtk::sim {

/// Parses the ids text format. Throws trace_error("name:line: reason") for an empty line, a
/// negative, fractional, non-numeric or out-of-range id, or trailing characters.
std::vector<std::uint64_t> parse_ids(std::istream& in, const std::string& name);

/// Parses oracle-general bytes. Throws trace_error("name:0: ...") when the size is not a whole
/// number of 24-byte records (a truncated file).
std::vector<std::uint64_t> parse_oracle_general(const std::string& bytes, const std::string& name);

/// "mooncake", "ids" or "oracle-general" for a flat trace file, from its content: a '{' first ->
/// mooncake; a digit first and only text -> ids; otherwise a whole number of 24-byte records ->
/// oracle-general. Throws trace_error when none fits.
std::string detect_flat_format(const std::string& path);

/// Loads a flat trace of `format` ("mooncake", "ids", "oracle-general" or "auto"). threads >= 2:
/// an oracleGeneral file is read in that many parts at once (the same ids).
std::vector<std::uint64_t> load_flat(const std::string& path, const std::string& format,
                                     unsigned threads = 1);

}  // namespace kvtk::sim
