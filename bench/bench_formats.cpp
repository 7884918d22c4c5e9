// Trace ingestion speed: the Mooncake conversation trace (3.03 MB) repeated 10 times in memory,
// parsed into requests by the JSONL reader. bytes/s = JSONL bytes per second.
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>

#include "formats/mooncake_flat.hpp"

namespace {

const std::string& jsonl10() {
  static const std::string text = [] {
    std::ifstream in(KVTK_TRACES_DIR "/mooncake_fast25_conversation_trace.jsonl", std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    std::string one = buf.str(), all;
    for (int i = 0; i < 10; ++i) all += one;
    return all;
  }();
  return text;
}

void bm_mooncake_requests(benchmark::State& state) {
  const std::string& text = jsonl10();
  for (auto _ : state) {
    std::istringstream in(text);
    const auto t = kvtk::sim::parse_mooncake_requests(in, "bench");
    benchmark::DoNotOptimize(t.keys.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(text.size()));
}

}  // namespace

BENCHMARK(bm_mooncake_requests)->Name("jsonl/mooncake_requests")->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
