// libFuzzer targets for every non-trace input kvtk reads: the simulate config (with --set
// overrides), tier configs, model files, calibrations, price tables, command-line values,
// simulate's timing tables and token-id request logs (trace import).
// One source, compiled once; each target links it with a one-line TU that defines which reader
// it drives (kvtk_fuzz_reader, see CMakeLists.txt), and has its own seed corpus under
// tests/fuzz/inputs/<target>/.
//
// The contract: any input gives a result or the reader's documented error (sim::usage_error or
// std::runtime_error with a message). Any other exception (a JSON library exception, a
// logic_error, std::out_of_range from a conversion) is a bug and traps, as does a crash.
#include <filesystem>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/pricing.hpp"
#include "api/simulate.hpp"
#include "api/tiers.hpp"
#include "api/trace_import.hpp"
#include "formats/kv_events.hpp"
#include "api/trace_options.hpp"
#include "cli/common.hpp"  // parse_command: the options fuzzer reads the command line
#include "des/timing.hpp"
#include "move/calibration.hpp"

namespace {

namespace cli = kvtk::sim::cli;
namespace sim = kvtk::sim;

// The input as a file (the path readers take), rewritten per input; removed at exit.
[[maybe_unused]] const std::string& input_file(const std::uint8_t* data, std::size_t size) {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("kvtk_fuzz_" + std::to_string(::getpid()) + ".json"))
          .string();
  static const struct remover {
    ~remover() { std::remove(path.c_str()); }
  } remove_at_exit;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) __builtin_trap();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  if (std::fclose(f) != 0) __builtin_trap();
  return path;
}

// Runs f; the documented errors are fine, anything else traps.
template <class F>
void expect_documented(F&& f) {
  try {
    f();
  } catch (const sim::usage_error&) {
  } catch (const std::runtime_error&) {
  } catch (...) {
    __builtin_trap();
  }
}

[[maybe_unused]] std::vector<std::string> split_nul(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> out(1);
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      out.emplace_back();
    } else {
      out.back().push_back(static_cast<char>(data[i]));
    }
  }
  return out;
}

}  // namespace

// Defined by each target's generated TU: 1..7, the readers below.
extern const int kvtk_fuzz_reader;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  switch (kvtk_fuzz_reader) {
  case 1: {  // fuzz_simulate_config: the JSON config, then the lines as --set
    const std::string text(reinterpret_cast<const char*>(data), size);
    expect_documented([&] {
      nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
      if (j.is_discarded()) j = nlohmann::json::object();
      std::vector<std::string> sets;
      if (!j.is_object()) {
        for (const auto& s : split_nul(data, size)) sets.push_back(s);
        j = nlohmann::json::object();
      }
      (void)kvtk::sim::cluster_config_from_json(j, 64, sets);
    });
    break;
  }
  case 2: {  // fuzz_tier_config
    const std::string& path = input_file(data, size);
    expect_documented([&] { (void)sim::load_tier_config(path, 64, 70272); });
    expect_documented([&] { (void)sim::load_tier_config(path, 16, 0); });
    break;
  }
  case 3: {  // fuzz_model_file
    const std::string& path = input_file(data, size);
    expect_documented([&] {
      const std::uint64_t b = sim::model_file_bytes_per_token(path);
      if (b == 0 || b >= (std::uint64_t{1} << 32)) __builtin_trap();  // the documented range
    });
    break;
  }
  case 4: {  // fuzz_calibration
    const std::string& path = input_file(data, size);
    expect_documented([&] {
      const auto cal = kvtk::sim::move::calibration::load(path);
      for (const char* m : {"", "coalesced"}) (void)cal.find("dram", "hbm", 4096, m);
      kvtk::tier::hierarchy_config cfg;
      cfg.tiers.resize(2);
      cfg.tiers[0].name = "hbm";
      cfg.tiers[1].name = "dram";
      cfg.tiers[0].capacity_blocks = cfg.tiers[1].capacity_blocks = 8;
      cfg.block_bytes = 4096;
      (void)kvtk::sim::move::apply_calibration(cfg, cal, "", false);
    });
    break;
  }
  case 5: {  // fuzz_pricing
    const std::string& path = input_file(data, size);
    expect_documented([&] {
      std::vector<std::string> storage;
      (void)kvtk::sim::load_price_table(path, storage);
    });
    break;
  }
  case 6: {  // fuzz_options: command-line values, NUL-separated
    const auto args = split_nul(data, size);
    for (const auto& a : args) {
      expect_documented([&] { (void)sim::parse_capacity(a, 64, 70272); });
      expect_documented([&] { (void)sim::parse_capacity(a, 1, 0); });
      expect_documented([&] { (void)sim::parse_tier_spec(a, {}, 64, 70272); });
      expect_documented([&] { (void)sim::split_list(a, "--fuzz"); });
      expect_documented([&] { (void)sim::parse_partial_block(a); });
    }
    // A whole command line through the shared parser (typed options, negative-count rejection).
    namespace po = boost::program_options;
    po::options_description opts("fuzz");
    std::uint32_t block_tokens = 0, threads = 1;
    std::uint64_t requests = 0;
    double rate = 0;
    std::string capacity;
    opts.add_options()("help,h", "")("block-tokens", po::value(&block_tokens))(
        "threads", po::value(&threads))("requests", po::value(&requests))(
        "rate", po::value(&rate))("capacity", po::value(&capacity))("flag", "");
    po::variables_map vm;
    // parse_command prints its messages to std::cerr; silence the stream (not fd 2, which
    // carries libFuzzer's and the sanitizers' reports).
    static std::ofstream null_sink("/dev/null");
    static std::streambuf* const saved = std::cerr.rdbuf(null_sink.rdbuf());
    (void)saved;
    expect_documented([&] {
      (void)cli::parse_command("fuzz", opts, args, vm, [&] {
        if (vm.count("capacity")) (void)sim::parse_capacity(capacity, block_tokens ? block_tokens : 64, 0);
      });
    });
    break;
  }
  case 7: {  // fuzz_timing_table: a table, then lookups on and off its grid
    const std::string& path = input_file(data, size);
    expect_documented([&] {
      const auto t = kvtk::sim::des::timing_table::load(path);
      for (const double x : {0.0, 1.0, 3.5, 1e6, 1e12}) {
        const double p = t.has_prefill() ? t.prefill_s(1 + x, x, x) : 0.0;
        const double d = t.has_decode() ? t.decode_s(1 + x, x) : 0.0;
        if (!(p >= 0) || !(d >= 0)) __builtin_trap();  // clamped at 0; never NaN
      }
    });
    break;
  }
  case 8: {  // fuzz_trace_import: a token-id log, imported for vLLM (sha256_cbor) and SGLang, and a
             // Dynamo request trace
    const std::string& path = input_file(data, size);
    static const std::string out =
        (std::filesystem::temp_directory_path() / ("kvtk_fuzz_import_" + std::to_string(::getpid()) + ".kvtb"))
            .string();
    for (const char* engine : {"vllm", "sglang"}) {
      expect_documented([&] {
        sim::trace_import_options o;
        o.log = path;
        o.output = out;
        o.force = true;
        o.threads = 1;
        o.engine = engine;
        o.block_tokens = 4;
        if (std::string(engine) == "vllm") o.hash_algo = "sha256_cbor";
        (void)sim::run(o);
      });
    }
    expect_documented([&] {  // the same bytes as a Dynamo request trace (DYN_REQUEST_TRACE)
      sim::trace_import_options o;
      o.log = path;
      o.output = out;
      o.force = true;
      o.format = "dynamo";
      (void)sim::run(o);
    });
    std::remove(out.c_str());
    break;
  }
  case 9: {  // fuzz_kv_events: a KV-event recording, imported as vLLM's miss stream and checked
    const std::string& path = input_file(data, size);
    static const std::string out =
        (std::filesystem::temp_directory_path() / ("kvtk_fuzz_events_" + std::to_string(::getpid()) + ".ids"))
            .string();
    for (const char* format : {"vllm-events", "sglang-events", "dynamo-events"}) {  // two refused at the header
      expect_documented([&] {
        sim::trace_import_options o;
        o.log = path;
        o.format = format;
        o.to = "ids";
        o.output = out;
        o.force = true;
        o.block_tokens = 4;
        (void)sim::run(o);
      });
    }
    // The payload decoder alone, on the raw bytes (msgpack straight from a publisher), with
    // each engine's array-like layout.
    sim::kv_batch b;
    const std::string raw(reinterpret_cast<const char*>(data), size);
    (void)sim::decode_event_batch(raw, b, sim::event_engine::vllm);
    (void)sim::decode_event_batch(raw, b, sim::event_engine::sglang);
    (void)sim::decode_event_batch(raw, b, sim::event_engine::dynamo);
    std::remove(out.c_str());
    break;
  }
  default:
    __builtin_trap();  // a target built without a valid reader number
  }
  return 0;
}
