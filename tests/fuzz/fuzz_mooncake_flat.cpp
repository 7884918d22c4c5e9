// libFuzzer target: the trace parsers (Mooncake flat and requests, plain ids, oracleGeneral) must turn
// any byte string into either a result or a trace_error — never a crash, hang, leak or undefined
// behaviour.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "formats/flat_traces.hpp"
#include "formats/mooncake_flat.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::istringstream in(text);
  try {
    const auto ids = kvtk::sim::parse_mooncake_flat(in, "fuzz");
    (void)ids;
  } catch (const kvtk::sim::trace_error& e) {
    // Every error names the input and a line.
    if (std::string(e.what()).rfind("fuzz:", 0) != 0) __builtin_trap();
  }
  std::istringstream in2(text);
  try {
    const auto t = kvtk::sim::parse_mooncake_requests(in2, "fuzz");
    if (t.offsets.size() != t.requests() + 1 || t.offsets.back() != t.keys.size()) __builtin_trap();
  } catch (const kvtk::sim::trace_error& e) {
    if (std::string(e.what()).rfind("fuzz:", 0) != 0) __builtin_trap();
  }
  std::istringstream in3(text);
  try {
    (void)kvtk::sim::parse_ids(in3, "fuzz");
  } catch (const kvtk::sim::trace_error& e) {
    if (std::string(e.what()).rfind("fuzz:", 0) != 0) __builtin_trap();
  }
  try {
    (void)kvtk::sim::parse_oracle_general(text, "fuzz");
  } catch (const kvtk::sim::trace_error& e) {
    if (std::string(e.what()).rfind("fuzz:", 0) != 0) __builtin_trap();
  }
  return 0;
}
