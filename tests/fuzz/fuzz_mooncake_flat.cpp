// libFuzzer target: the Mooncake flat-trace parser must turn any byte string into either ids or a
// trace_error — never a crash, hang, leak or undefined behaviour.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "formats/mooncake_flat.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    const auto ids = kvtk::sim::parse_mooncake_flat(in, "fuzz");
    (void)ids;
  } catch (const kvtk::sim::trace_error& e) {
    // Every error names the input and a line.
    if (std::string(e.what()).rfind("fuzz:", 0) != 0) __builtin_trap();
  }
  return 0;
}
