// Trace ingestion and kvtb replay speed.
//  * jsonl/*: the Mooncake conversation trace (3.03 MB) repeated 10 times in memory (each copy's
//    timestamps shifted so arrival order holds), parsed into requests by the JSONL reader, as
//    Mooncake JSONL and as kvtk JSONL. bytes/s = JSONL bytes per second.
//  * kvtb/open: mapping and validating (checksums, offsets) a kvtb file of the same 10 copies.
//  * kvtb/replay_radix_lru: a 200,000-request `trace gen` mixed trace (64-token blocks) written
//    as kvtb, mapped, and replayed through radix LRU at 10,000 / 100,000 blocks;
//    items/s = block refs per second, the mapping and validation included.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <kvtk/kvtk.hpp>
#include <sstream>

#include "cli/trace_gen.hpp"
#include "formats/kvtb.hpp"
#include "formats/mooncake_flat.hpp"
#include "formats/writers.hpp"

namespace {

std::string conversation_times(int copies) {
  std::ifstream in(KVTK_TRACES_DIR "/mooncake_fast25_conversation_trace.jsonl", std::ios::binary);
  std::string all, line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  const std::string key = "{\"timestamp\": ";
  for (int c = 0; c < copies; ++c) {
    for (const auto& l : lines) {
      std::size_t end = key.size();
      while (end < l.size() && l[end] >= '0' && l[end] <= '9') ++end;
      const auto t = std::stoull(l.substr(key.size(), end - key.size()));
      all += key + std::to_string(t + static_cast<std::uint64_t>(c) * 10'000'000ull) +
             l.substr(end) + "\n";
    }
  }
  return all;
}

const std::string& mooncake10() {
  static const std::string text = conversation_times(10);
  return text;
}

// The same requests as kvtk JSONL (written by the kvtk writer).
const std::string& kvtk10() {
  static const std::string text = [] {
    std::istringstream in(mooncake10());
    std::ostringstream out;
    auto w = kvtk::sim::trace_writer::to_stream(out, kvtk::sim::trace_format::kvtk, 512);
    kvtk::sim::for_each_request(in, "bench", kvtk::sim::trace_format::mooncake, 512, {}, nullptr,
                                [&](const kvtk::sim::request_record& r) { w->add(r); });
    w->finish();
    return out.str();
  }();
  return text;
}

// The benchmark's kvtb files: named after the process (two runs never collide, and a file an
// interrupted run left behind does not stop the next) and removed when the process exits.
std::string temp_kvtb(const std::string& name, const std::function<void(kvtk::sim::trace_writer&)>& fill,
                      std::uint32_t bt) {
  struct removed_at_exit : std::vector<std::string> {
    ~removed_at_exit() {
      for (const std::string& p : *this) {
        std::error_code ec;
        std::filesystem::remove(p, ec);
      }
    }
  };
  static removed_at_exit made;
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("kvtk_bench_" + std::to_string(::getpid()) + "_" + name + ".kvtb"))
                               .string();
  made.push_back(path);
  auto w = kvtk::sim::trace_writer::open(path, kvtk::sim::trace_format::kvtb, bt);
  fill(*w);
  w->finish();
  return path;
}

void bm_jsonl(benchmark::State& state, const std::string& text, kvtk::sim::trace_format f) {
  for (auto _ : state) {
    std::istringstream in(text);
    std::uint64_t keys = 0;
    kvtk::sim::for_each_request(in, "bench", f, 512, {}, nullptr,
                                [&](const kvtk::sim::request_record& r) { keys += r.keys.size(); });
    benchmark::DoNotOptimize(keys);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(text.size()));
}

void bm_mooncake_requests(benchmark::State& state) {
  // The in-memory trace, as `kvtk replay` builds it.
  const std::string& text = mooncake10();
  for (auto _ : state) {
    std::istringstream in(text);
    const auto t = kvtk::sim::parse_mooncake_requests(in, "bench");
    benchmark::DoNotOptimize(t.keys.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(text.size()));
}

void bm_kvtb_open(benchmark::State& state) {
  static const std::string path = temp_kvtb(
      "conv10",
      [](kvtk::sim::trace_writer& w) {
        std::istringstream in(mooncake10());
        kvtk::sim::for_each_request(in, "bench", kvtk::sim::trace_format::mooncake, 512, {},
                                    nullptr, [&](const kvtk::sim::request_record& r) { w.add(r); });
      },
      512);
  for (auto _ : state) {
    kvtk::sim::kvtb::mapping m(path);
    const auto im = kvtk::sim::kvtb::parse(m.bytes(), path);
    benchmark::DoNotOptimize(im.view.keys.data());
  }
  state.SetBytesProcessed(state.iterations() *
                          static_cast<std::int64_t>(std::filesystem::file_size(path)));
}

void bm_kvtb_replay(benchmark::State& state) {
  static const std::string path = temp_kvtb(
      "mixed200k",
      [](kvtk::sim::trace_writer& w) {
        kvtk::sim::gen_options g;
        g.requests = 200'000;
        kvtk::sim::generate_trace(g, [&](const kvtk::sim::request_record& r) { w.add(r); });
      },
      64);
  std::uint64_t refs = 0;
  for (auto _ : state) {
    kvtk::sim::kvtb::mapping m(path);
    const auto im = kvtk::sim::kvtb::parse(m.bytes(), path);
    kvtk::prefix::radix_index<kvtk::prefix::leaf_lru> idx(
        static_cast<std::uint32_t>(state.range(0)));
    const auto c = kvtk::prefix::replay(im.view, idx);
    refs += c.block_refs;
    state.counters["hit_ratio"] = c.block_hit_ratio();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(refs));
}

}  // namespace

BENCHMARK(bm_mooncake_requests)->Name("jsonl/mooncake_requests")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_jsonl, mooncake_stream, mooncake10(), kvtk::sim::trace_format::mooncake)
    ->Name("jsonl/mooncake_stream")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_jsonl, kvtk_stream, kvtk10(), kvtk::sim::trace_format::kvtk)
    ->Name("jsonl/kvtk_stream")
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bm_kvtb_open)->Name("kvtb/open")->Unit(benchmark::kMillisecond);
BENCHMARK(bm_kvtb_replay)
    ->Name("kvtb/replay_radix_lru")
    ->Arg(10'000)
    ->Arg(100'000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
