#include "cli/tune.hpp"

#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "api/tune.hpp"
#include "cli/common.hpp"

namespace kvtk::sim {

// The command line of `kvtk tune` over the library call (api/tune.hpp).
int run_tune(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  using namespace cli;
  po::options_description opts(
      "kvtk tune: choose the online policy (index x policy) with the most block hits on the first\n"
      "part of a trace, and report it on the rest (the holdout, replayed after a warm-up on the\n"
      "first part) beside radix LRU and the offline optimum; definitions in api/tune.hpp and\n"
      "docs/policy-quality.md. Prints a command to paste, or JSON.\nOptions");
  tune_options o;
  std::string capacities, indexes, policies, json_out;
  opts.add_options()("help,h", "show this help");
  add_trace_options(opts, o.trace, o.format, o.block_tokens);
  opts.add_options()("capacity", po::value(&capacities)->required(),
                     "capacities (a list): blocks (1000), tokens (3Mtok) or bytes (64GiB, needs "
                     "--model)")("model", po::value(&o.model), "model preset for byte capacities")(
      "holdout", po::value(&o.holdout)->default_value(0.5),
      "share of requests (the last ones) held out for the report, in (0, 1)")(
      "partial-block", po::value(&o.partial_block)->default_value("skip"), "skip | cache")(
      "index", po::value(&indexes)->default_value("radix,flat"), "candidate indexes: radix, flat")(
      "policy", po::value(&policies)->default_value("all"),
      "candidate policies (a list of online policies, or all)")(
      "threads", po::value(&o.threads)->default_value(1), "worker threads")(
      "json", po::value(&json_out), "write JSON to a file, or - for stdout")(
      "skip-invalid", "skip malformed trace lines (counted and reported) instead of stopping")(
      "next-use-cache", po::value(&o.next_use_cache)->default_value("auto"),
      "where the optimum's next uses come from: auto | off | a directory (kvtk replay --help)");
  po::variables_map vm;
  if (const int rc = parse_command("tune", opts, args, vm,
                                   [&] {
                                     o.capacity = split_list(capacities, "--capacity");
                                     o.index = split_list(indexes, "--index");
                                     o.policy = split_list(policies, "--policy");
                                     o.skip_invalid = vm.count("skip-invalid") != 0;
                                     validate(o);
                                   });
      rc >= 0) {
    return rc;
  }
  const tune_result r = run(o);
  show_warnings("tune", r.warnings);
  try {
    if (vm.count("json")) write_to(json_out, to_json(r).dump(2) + "\n");
  } catch (const std::exception& e) {
    std::cerr << "kvtk tune: " << e.what() << "\n";
    return 1;
  }
  if (!vm.count("json") || json_out != "-") std::fputs(to_text(r).c_str(), stdout);
  return 0;
}

}  // namespace kvtk::sim
