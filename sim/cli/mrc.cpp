#include "cli/mrc.hpp"

#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "api/mrc.hpp"
#include "cli/common.hpp"

namespace kvtk::sim {

// The command line of `kvtk mrc` over the library call (api/mrc.hpp).
int run_mrc(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  using namespace cli;
  po::options_description opts(
      "kvtk mrc: the exact prefix-LRU miss-ratio curve of a trace in one pass (flat LRU index;\n"
      "a block hits at capacity C iff the largest LRU stack depth of it and the blocks before it\n"
      "is <= C), or a SHARDS-style sampled curve, optionally with the offline optimum beside it.\n"
      "Options");
  mrc_options o;
  std::string capacities, engines, json_out, csv_out;
  opts.add_options()("help,h", "show this help");
  add_trace_options(opts, o.trace, o.format, o.block_tokens);
  opts.add_options()(
      "partial-block", po::value(&o.partial_block)->default_value("skip"), "skip | cache")(
      "capacity", po::value(&capacities),
      "capacities to report (blocks, tokens or bytes); default: --points log-spaced sizes up to "
      "where the curve saturates")("points", po::value(&o.points)->default_value(24),
                                   "number of log-spaced capacities when --capacity is absent")(
      "model", po::value(&o.model), "model preset for byte capacities")(
      "sample", po::value(&o.sample)->default_value(1.0),
      "sampling rate in (0, 1]; below 1 the SHARDS-style sampled curve")(
      "opt", "also replay the offline optimum and the upper bound at every capacity "
      "(opt_block_hit_ratio, opt_policy, bound_block_hit_ratio; docs/prefix.md)")(
      "engine", po::value(&engines),
      "also replay engine modes at every capacity (a list: vllm, sglang; kvtk replay --help)")(
      "json", po::value(&json_out), "write JSON to a file, or - for stdout")(
      "csv", po::value(&csv_out), "write CSV to a file, or - for stdout")(
      "skip-invalid", "skip malformed trace lines (counted and reported) instead of stopping")(
      "next-use-cache", po::value(&o.next_use_cache)->default_value("auto"),
      "where --opt's next uses come from: auto | off | a directory (kvtk replay --help)");
  po::variables_map vm;
  if (const int rc = parse_command("mrc", opts, args, vm,
                                   [&] {
                                     if (vm.count("capacity")) {
                                       o.capacity = split_list(capacities, "--capacity");
                                       if (o.capacity.empty())
                                         throw usage_error("--capacity: empty list");
                                     }
                                     o.opt = vm.count("opt") != 0;
                                     if (vm.count("engine")) {
                                       o.engine = split_list(engines, "--engine");
                                     }
                                     o.skip_invalid = vm.count("skip-invalid") != 0;
                                     validate(o);
                                   });
      rc >= 0) {
    return rc;
  }
  const mrc_result r = run(o);
  for (const auto& w : r.warnings) std::cerr << "kvtk mrc: " << w << "\n";
  try {
    if (vm.count("json")) write_to(json_out, to_json(r).dump(2) + "\n");
    if (vm.count("csv")) write_to(csv_out, to_csv(r));
  } catch (const std::exception& e) {
    std::cerr << "kvtk mrc: " << e.what() << "\n";
    return 1;
  }
  if (!vm.count("json") && !vm.count("csv")) std::fputs(to_text(r).c_str(), stdout);
  return 0;
}

}  // namespace kvtk::sim
