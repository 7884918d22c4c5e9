// sim/api/simulate.hpp — `kvtk simulate` as a library call: the discrete-event simulation of a
// serving cluster replaying a trace with arrival times.
//
//   kvtk::sim::simulate_options o;
//   o.trace = "traces/mooncake_fast25_conversation_trace.jsonl";
//   o.config = {{"prefill_instances", 4}, {"local_cache", "20GiB"}, {"router", "cache-aware"}};
//   const auto r = kvtk::sim::run(o);
//   std::cout << r.result["ttft_s"]["p90"] << "\n";
//
// Config keys: docs/simulate.md; the simulator: sim/des/simulator.hpp.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/progress.hpp"
#include "des/simulator.hpp"

namespace kvtk::sim {

/// Applies `overrides` ("key=value"; values parse as JSON, else as strings) to `j`, then builds a
/// cluster config from it (docs/simulate.md). Capacities use --capacity's units
/// with the config's model. Throws usage_error naming the key and the problem.
des::cluster_config cluster_config_from_json(nlohmann::json& j, std::uint32_t block_tokens,
                                             const std::vector<std::string>& overrides);

/// What `kvtk simulate` does. The config is built from config_file, then the keys of `config`
/// over it, then calibration and timing_table, then each `set` override in order. A relative
/// `timing_table` in config_file is relative to that file's directory; anywhere else (config,
/// timing_table, set) to the working directory.
struct simulate_options {
  std::string trace;                ///< trace path (required; needs arrival times)
  std::string format = "auto";      ///< a format name, or auto
  std::uint32_t block_tokens = 0;   ///< tokens per block; 0 = the trace's
  std::string config_file;          ///< cluster config JSON file ("" = none)
  nlohmann::json config = nlohmann::json::object();  ///< config keys (docs/simulate.md)
  std::vector<std::string> set;     ///< "key=value" overrides, applied last
  std::string calibration;          ///< calibration JSON for the DRAM tier's link ("" = none)
  std::string timing_table;         ///< measured iteration times, CSV ("" = the config's)
  /// Hit accounting and, with it, the scheduler: ideal (kvtk's scheduler), vllm (vllm-v1 unless
  /// the config names a vllm-* scheduler), sglang; "" = the config's (docs/simulate.md).
  std::string engine;
  std::string pricing;              ///< price preset or .json: attach an API cost ("" = none)
  bool skip_invalid = false;        ///< skip malformed trace lines (counted) instead of stopping
  bool iteration_log = false;       ///< engine schedulers: keep every iteration's batch
  /// Streams one CSV row per request (to_csv's format) to this file as requests retire ("-" =
  /// stdout; "" = none): the rows never all sit in memory. Written by util/output_file's rules.
  std::string csv;
  bool force = false;               ///< replace an existing `csv` file (never an input)
  /// Keep every request's outcome in simulate_result::requests (136 bytes a request). Off, the
  /// simulation's memory is bounded by the requests in flight (docs/simulate.md "Memory").
  bool requests = true;
};

nlohmann::json to_json(const simulate_options& o);
/// Throws usage_error naming an unknown key or a value of the wrong type.
simulate_options simulate_options_from_json(const nlohmann::json& j);
/// Checks the options (the whole cluster config) and resolves format and block_tokens, in place.
/// Throws usage_error naming the key; trace_error when the trace cannot be read.
void validate(simulate_options& o);

struct simulate_result {
  nlohmann::json trace;   ///< path, format, block_tokens, partial_block
  nlohmann::json config;  ///< the config as applied (file, keys, overrides)
  nlohmann::json result;  ///< the summary: hit ratios, TTFT/TBT/latency, throughput, cost, ...
  nlohmann::json host_link_calibration;       ///< the fit applied, or null
  std::vector<std::string> warnings;  ///< input notes (skipped lines, unused records): shown by the CLI
  std::vector<des::request_outcome> requests;  ///< one outcome per request, in trace order
  std::vector<des::iteration_record> iterations;  ///< the iteration log (options.iteration_log)
  bool sparse = false;                         ///< sparse decode simulated (CSV has two more columns)
};

/// Effects: loads the trace (and its decode records when sparse), simulates the cluster.
/// Throws: as validate(); usage_error for an impossible config or bad decode-record ids;
/// std::runtime_error for a request asking more than 2^24 decode steps; trace_error.
/// Progress is in requests ended (finished or rejected); see des::simulation_progress.
simulate_result run(simulate_options options, const progress_callback& progress = {});

nlohmann::json to_json(const simulate_result& r);  ///< `kvtk simulate --json`
std::string to_csv(const simulate_result& r);      ///< `kvtk simulate --csv`: one row per request
/// The CSV's header line (with its newline); `sparse` adds recalls and stall_s.
std::string csv_header(bool sparse);
/// Effects: appends request `index`'s CSV row (with its newline) to `out`.
void append_csv_row(std::string& out, std::uint64_t index, const des::request_outcome& o,
                    bool sparse);
/// `kvtk simulate --iterations`: the iteration log as CSV, instance,iteration,start_s,end_s,
/// request,new_tokens,context_tokens (one row per request scheduled in an iteration;
/// context_tokens = its tokens computed before this iteration).
std::string iterations_csv(const simulate_result& r);
std::string to_text(const simulate_result& r);     ///< what `kvtk simulate` prints

}  // namespace kvtk::sim
