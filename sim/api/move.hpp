// sim/api/move.hpp — `kvtk move replay` and `kvtk move bench` as library calls: tier decisions
// executed on real host memory and files with every arrival verified, and the measured copy
// paths with their fitted timing model (the calibration JSON). Semantics: docs/move.md.
//
//   kvtk::sim::move_replay_options o;
//   o.trace = "traces/mooncake_fast25_conversation_trace.jsonl";
//   o.tiers = "hbm:2500:lru,dram:7500:lru";
//   const auto r = kvtk::sim::run(o);  // r.report["integrity_failures"] == 0
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kvtk::sim {

/// What `kvtk move replay` does; each field is the option of the same name.
struct move_replay_options {
  std::string trace;                   ///< trace path (required; any format)
  std::string format = "auto";         ///< a format name, or auto
  std::uint32_t block_tokens = 0;      ///< tokens per block; 0 = the trace's
  std::string tiers;                   ///< hierarchy name:capacity:policy,... (required)
  std::string inclusion = "exclusive";  ///< exclusive | inclusive
  std::string write_policy = "write-back";  ///< write-back | write-through | ...
  std::string admission = "always";         ///< lower-tier admission
  std::string block_bytes = "4KiB";    ///< bytes per moved block, [64, 1GiB], a multiple of 8
  std::string partial_block = "skip";  ///< skip | cache
  std::string backend = "host";        ///< host (device memory: cuda/kv_move_replay)
  std::string dir;                     ///< directory for file tiers ("" = the system temp dir)
  std::string calibration;             ///< predict link times from a calibration JSON ("" = none)
  std::string calibration_mechanism;   ///< the fit to use ("" = fastest for 256 blocks)
};

nlohmann::json to_json(const move_replay_options& o);
/// Throws usage_error naming an unknown key or a value of the wrong type.
move_replay_options move_replay_options_from_json(const nlohmann::json& j);
/// Checks the options and resolves format and block_tokens, in place. Throws usage_error
/// naming the option; trace_error when the trace cannot be read.
void validate(move_replay_options& o);

struct move_replay_result {
  nlohmann::json report;  ///< hits, moves, verified arrivals, per-link bytes and times, ...
  bool verified = false;  ///< no block arrived corrupted
  std::vector<std::string> warnings;  ///< input notes (skipped lines, unused records): shown by the CLI
};

/// Throws: as validate(); memory_budget_error when the pools do not fit; std::runtime_error for
/// an I/O failure of a file tier.
move_replay_result run(move_replay_options options);

/// What `kvtk move bench` does; each field is the option of the same name.
struct move_bench_options {
  std::string backend = "host";  ///< host (the CUDA paths: cuda/kv_move_bench)
  std::string from = "dram";     ///< source tier: dram
  std::vector<std::string> to = {"dram", "file"};  ///< destinations
  std::vector<std::string> block_bytes = {"16KiB", "64KiB", "1MiB", "4MiB"};  ///< block sizes
  std::vector<std::string> blocks = {"1", "16", "256", "1024"};  ///< blocks per transfer
  std::vector<std::string> mechanism = {"per-piece", "coalesced", "threads"};
  std::uint32_t io_threads = 4;        ///< workers of the threads mechanism, [1, 64]
  std::string layout = "block-first";  ///< block-first | layer-first
  std::string dir;                     ///< directory for the file tier ("" = the system temp dir)
  std::uint32_t reps = 3;              ///< repetitions (the fastest counts), [1, 100]
  double max_gib = 1.0;                ///< skip transfers larger than this
};

nlohmann::json to_json(const move_bench_options& o);
/// Throws usage_error naming an unknown key or a value of the wrong type.
move_bench_options move_bench_options_from_json(const nlohmann::json& j);
/// Throws usage_error naming the option.
void validate(const move_bench_options& o);

struct move_bench_result {
  nlohmann::json report;  ///< backend, layout, rows, calibration (the calibration JSON), verified
  std::vector<std::string> warnings;  ///< block sizes skipped (not divisible into layer pieces)
  bool verified = false;
};

/// Effects: moves and verifies real blocks (DRAM and files under dir). Throws: as validate();
/// std::runtime_error for an I/O failure.
move_bench_result run(const move_bench_options& options);

std::string to_text(const move_bench_result& r);  ///< the table `kvtk move bench` prints

}  // namespace kvtk::sim
