// sim/formats/decode_records.hpp — decode-step selection records in kvtk native JSONL, the
// input of `kvtk sparse --trace` (docs/sparse.md).
//
//   {"type": "decode", "request": "r7", "step": 12, "context_blocks": 300,
//    "selected": [0, 5, 17, 299], "weights": [64, 3, 40, 64], "layer_group": 0}
//
// * request: an integer or string naming the request (records of one request form its run);
// * step: the decode step (non-negative integer), non-decreasing within a request (a trace may
//   record every k-th step: steps need not be consecutive);
// * context_blocks: the request's context in blocks at that step (> every selected index; at
//   most 2^24; never shrinking within a request);
// * selected: block indices the step's sparse attention used (distinct within a record);
// * weights (optional): one non-negative number per selected block (DSA: how many of the block's
//   tokens are in the top-k; Quest: 1; default 1);
// * layer_group (optional, non-negative integer): records of one (request, step) with different
//   layer groups are united — the selected set is the union over layers, a block's weight the
//   sum — which is what a block-granular HBM residency needs when layers share a block table. A
//   step repeated without a new layer_group is an error (not a silent doubling of weights).
// * "request": 1 and "request": "1" are different requests.
// Request lines ("type" absent or "request") and the header line are passed over here, and
// request readers pass over decode lines, so one file can carry both.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "formats/mooncake_flat.hpp"

namespace kvtk::sim {

struct decode_step {
  std::uint64_t step = 0;
  std::uint32_t context_blocks = 0;
  std::vector<std::uint32_t> selected;  ///< sorted, distinct
  std::vector<float> weights;           ///< parallel to selected
};

struct decode_request {
  std::string id;
  std::vector<decode_step> steps;  ///< in step order, one per distinct step
};

/// Reads every decode record of `path`, grouped by request in order of first appearance.
/// Throws trace_error("path:line: reason") for a malformed record (bad JSON, a missing or
/// ill-typed field, a selected index >= context_blocks, a duplicate index, weights of another
/// length or above 3e38, a step that goes back within its request or repeats without a new
/// layer_group, a "type" other than request/decode) and trace_error(path, 0, …) when the file
/// cannot be opened or holds no decode record.
std::vector<decode_request> load_decode_records(const std::string& path);

/// The same over a stream named `name` in errors (load_decode_records opens the file and calls
/// this; the fuzz target calls it on arbitrary bytes).
std::vector<decode_request> parse_decode_records(std::istream& in, const std::string& name);

}  // namespace kvtk::sim
