// libFuzzer target: the kvtk and Bailian JSONL readers, the decode-record reader and the kvtb
// validator must turn any byte string into a trace (or records) or a trace_error naming the
// input — never a crash, hang, leak or undefined behaviour; a kvtb image that validates must be
// safe to walk.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "formats/decode_records.hpp"
#include "formats/kvtb.hpp"
#include "formats/requests.hpp"

namespace {
void check_name(const kvtk::sim::trace_error& e) {
  if (std::string(e.what()).rfind("fuzz:", 0) != 0) __builtin_trap();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (auto f : {kvtk::sim::trace_format::kvtk, kvtk::sim::trace_format::bailian}) {
    std::istringstream in(text);
    try {
      std::uint64_t keys = 0;
      kvtk::sim::for_each_request(in, "fuzz", f, 0, {}, nullptr,
                                  [&](const kvtk::sim::request_record& r) {
                                    keys += r.keys.size();
                                    if (r.block_tokens == 0) __builtin_trap();
                                  });
      (void)keys;
    } catch (const kvtk::sim::trace_error& e) {
      check_name(e);
    }
  }
  {
    // Decode-step records (kvtk sparse): grouped, sorted, bounded by context_blocks.
    std::istringstream in(text);
    try {
      for (const auto& req : kvtk::sim::parse_decode_records(in, "fuzz")) {
        for (const auto& st : req.steps) {
          if (st.selected.size() != st.weights.size()) __builtin_trap();
          for (std::size_t i = 0; i < st.selected.size(); ++i) {
            if (st.selected[i] >= st.context_blocks) __builtin_trap();
            if (i > 0 && st.selected[i - 1] >= st.selected[i]) __builtin_trap();
          }
        }
      }
    } catch (const kvtk::sim::trace_error& e) {
      check_name(e);
    }
  }
  std::vector<std::uint64_t> aligned((size + 7) / 8);
  if (size > 0) std::memcpy(aligned.data(), data, size);
  try {
    const auto im = kvtk::sim::kvtb::parse(
        {reinterpret_cast<const unsigned char*>(aligned.data()), size}, "fuzz");
    std::uint64_t sum = 0;
    for (std::size_t r = 0; r < im.view.requests(); ++r) {
      for (auto k : im.view.blocks(r)) sum += k;
      if (!im.view.tenant.empty()) sum += im.tenants[im.view.tenant[r]].size();
    }
    (void)sum;
  } catch (const kvtk::sim::trace_error& e) {
    check_name(e);
  }
  return 0;
}
