#include "cli/simulate.hpp"

#include <boost/program_options.hpp>
#include <iostream>

#include "api/simulate.hpp"
#include "cli/common.hpp"

namespace kvtk::sim {

// The command line of `kvtk simulate` over the library call (api/simulate.hpp).
int run_simulate(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  using namespace cli;
  po::options_description opts(
      "kvtk simulate: a discrete-event simulation of a serving cluster (prefill instances with\n"
      "KV caches, an optional global pool, optional decode instances, a router) replaying a\n"
      "trace with arrival times; reports hit ratios, TTFT/TBT/end-to-end latency, throughput,\n"
      "goodput and compute saved. Config keys: docs/simulate.md; examples: sim/configs/.\nOptions");
  simulate_options o;
  std::string json_out, csv_out, iterations_out;
  opts.add_options()("help,h", "show this help")("trace", po::value(&o.trace)->required(),
                                                 "trace file (any format; needs arrival times)")(
      "format", po::value(&o.format)->default_value("auto"), "trace format, or auto")(
      "block-tokens", po::value(&o.block_tokens)->default_value(0), "tokens per block (0 = the trace's)")(
      "config", po::value(&o.config_file), "cluster config JSON (default: one h800, deepseek-v3, no cache)")(
      "set", po::value(&o.set)->composing(), "override a config key: --set router=cache-aware")(
      "calibration", po::value(&o.calibration),
      "DRAM-tier host link from a calibration JSON's dram->hbm fit (same as --set calibration=F)")(
      "timing-table", po::value(&o.timing_table),
      "measured iteration times (CSV kind,batch,tokens_per_request,context_tokens,ms; "
      "docs/simulate.md \"Timing\"), over the config's timing_table")(
      "engine", po::value(&o.engine),
      "ideal | vllm | sglang: the engine's hit accounting and scheduler (vllm: vllm-v1 unless "
      "the config names vllm-v0; docs/simulate.md \"Engine schedulers\"); same as --set engine=E")(
      "pricing", po::value(&o.pricing), "attach an API cost estimate (kvtk cost --help)")(
      "json", po::value(&json_out), "write the summary JSON to a file, or - for stdout")(
      "csv", po::value(&csv_out), "write one CSV row per request to a file, or - for stdout")(
      "iterations", po::value(&iterations_out),
      "engine schedulers: write every iteration's batch as CSV (instance, iteration, start_s, "
      "end_s, request, new_tokens, context_tokens) to a file, or - for stdout")(
      "skip-invalid", "skip malformed trace lines (counted and reported) instead of stopping");
  po::variables_map vm;
  if (const int rc = parse_command("simulate", opts, args, vm, [&] {
        o.skip_invalid = vm.count("skip-invalid") != 0;
        o.iteration_log = vm.count("iterations") != 0;
        o.csv = csv_out;  // streamed by run() as requests retire
        o.force = force_outputs();
        o.requests = false;  // nothing here needs them all: memory stays bounded
        validate(o);
      });
      rc >= 0) {
    return rc;
  }
  const simulate_result r = run(o);
  show_warnings("simulate", r.warnings);
  try {
    if (vm.count("json")) write_to(json_out, to_json(r).dump(2) + "\n");
    if (vm.count("iterations")) write_to(iterations_out, iterations_csv(r));
  } catch (const std::exception& e) {
    std::cerr << "kvtk simulate: " << e.what() << "\n";
    return 1;
  }
  if (!vm.count("json") && !vm.count("csv") && !vm.count("iterations")) std::cout << to_text(r);
  return 0;
}

}  // namespace kvtk::sim
