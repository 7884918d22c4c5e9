// tests/bundled_traces.hpp — the bundled Mooncake traces, loaded once per test binary.
#pragma once

#include "formats/mooncake_flat.hpp"

namespace kvtk::test {

inline const kvtk::prefix::prefix_trace& conversation() {
  static const kvtk::prefix::prefix_trace t = kvtk::sim::load_mooncake_requests(
      KVTK_TRACES_DIR "/mooncake_fast25_conversation_trace.jsonl");
  return t;
}

inline const kvtk::prefix::prefix_trace& synthetic() {
  static const kvtk::prefix::prefix_trace t =
      kvtk::sim::load_mooncake_requests(KVTK_TRACES_DIR "/mooncake_fast25_synthetic_trace.jsonl");
  return t;
}

}  // namespace kvtk::test
