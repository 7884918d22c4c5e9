// libFuzzer target, differential: the parallel JSONL reader (parse_jsonl_parallel, forced to
// split even tiny inputs into 1..5 chunks) must give exactly what the sequential reader gives:
// the same trace, or a trace_error with the same message (file, line and reason). The input is
// written to a private temporary file because the parallel reader works on files.
#include <filesystem>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "formats/requests.hpp"

namespace {

struct outcome {
  std::string error;  // "" = read
  kvtk::prefix::prefix_trace trace;
};

outcome read(const std::string& path, kvtk::sim::trace_format f, unsigned threads) {
  kvtk::sim::read_options opts;
  opts.parallel_min_bytes = 0;
  outcome o;
  try {
    o.trace = kvtk::sim::parse_jsonl_parallel(path, f, 64, opts, nullptr, threads);
  } catch (const kvtk::sim::trace_error& e) {
    o.error = e.what();
  }
  return o;
}

bool same(const kvtk::prefix::prefix_trace& a, const kvtk::prefix::prefix_trace& b) {
  auto eq_nan = [](const std::vector<double>& x, const std::vector<double>& y) {
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (!(x[i] == y[i] || (x[i] != x[i] && y[i] != y[i]))) return false;
    }
    return true;
  };
  return a.keys == b.keys && a.offsets == b.offsets && a.input_length == b.input_length &&
         a.priority == b.priority && eq_nan(a.arrival_s, b.arrival_s) &&
         a.output_length == b.output_length && a.session == b.session && a.tenant == b.tenant &&
         a.tenant_names == b.tenant_names && a.request_block_tokens == b.request_block_tokens;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The input as a file in $TMPDIR, rewritten per input; removed at exit.
  static const std::string path =
      (std::filesystem::temp_directory_path() /
       ("kvtk_fuzz_parallel_" + std::to_string(::getpid()) + ".jsonl"))
          .string();
  static const struct remover {
    ~remover() { std::remove(path.c_str()); }
  } remove_at_exit;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  if (size > 0 && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  std::fclose(f);
  for (auto fmt : {kvtk::sim::trace_format::mooncake, kvtk::sim::trace_format::kvtk}) {
    const outcome one = read(path, fmt, 1);
    for (unsigned threads : {2u, 5u}) {
      const outcome many = read(path, fmt, threads);
      if (one.error != many.error) __builtin_trap();
      if (one.error.empty() && !same(one.trace, many.trace)) __builtin_trap();
    }
  }
  std::remove(path.c_str());
  return 0;
}
