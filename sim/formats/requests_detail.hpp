// sim/formats/requests_detail.hpp — what requests.cpp (the JSONL request reader) and
// requests_detect.cpp (format names, detection and default block sizes) share. Internal to
// sim/formats.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "formats/requests.hpp"

namespace kvtk::sim::detail {

/// The block size of format `f` when neither the user nor the file gives one (512 / 16 / 64 / 1).
/// Defined in requests_detect.cpp.
std::uint32_t format_default(trace_format f);

/// The kvtk header line {"kvtk_trace": 1, "block_tokens": B} of file `name`: returns B (0 if
/// absent). Throws trace_error(name, 1, …) when the line is malformed. Defined in requests.cpp.
std::uint32_t read_kvtk_header(std::string_view line, const std::string& name);

}  // namespace kvtk::sim::detail
