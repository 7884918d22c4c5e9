#include "cli/trace_stats.hpp"

#include "api/trace_stats.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "cli/common.hpp"
#include "util/phase_clock.hpp"
#include "cli/trace_convert.hpp"
#include "cli/trace_anonymize.hpp"
#include "cli/trace_import.hpp"
#include "cli/trace_gen.hpp"

namespace kvtk::sim {
namespace {

int stats(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  using namespace cli;
  po::options_description opts(
      "kvtk trace stats: requests, time span and arrival rate, input/output length distributions,\n"
      "block references, unique blocks, ideal (infinite-cache) prefix hit ratios, reuse distances\n"
      "and session structure of a request trace.\nOptions");
  trace_stats_options o;
  std::string json_out;
  opts.add_options()("help,h", "show this help");
  add_trace_options(opts, o.trace, o.format, o.block_tokens);
  opts.add_options()("partial-block", po::value(&o.partial_block)->default_value("skip"), "skip | cache")(
      "json", po::value(&json_out), "write JSON to a file, or - for stdout")(
      "skip-invalid", "skip malformed trace lines (counted and reported) instead of stopping")(
      "timings", "report where the time went and the peak RSS on stderr");
  po::positional_options_description pos;
  pos.add("trace", 1);
  po::variables_map vm;
  if (const int rc = parse_command(
          "trace stats", opts, args, vm,
          [&] {
            o.skip_invalid = vm.count("skip-invalid") != 0;
            o.timings = vm.count("timings") != 0;
            validate(o);
          },
          &pos);
      rc >= 0) {
    return rc;
  }
  const trace_stats_result r = run(o);
  show_warnings("trace stats", r.warnings);
  if (vm.count("json")) {
    try {
      write_to(json_out, to_json(r).dump(2) + "\n");
    } catch (const std::exception& e) {
      std::cerr << "kvtk trace stats: " << e.what() << "\n";
      return 1;
    }
  } else {
    std::fputs(to_text(r).c_str(), stdout);
  }
  if (r.clock) {
    r.clock->lap("write");
    std::fprintf(stderr, "%s\n", r.clock->text().c_str());
  }
  return 0;
}

}  // namespace

int run_trace(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(
        "usage: kvtk trace stats F [options] | kvtk trace gen -o F [options] |\n"
        "       kvtk trace convert IN -o OUT [--to FORMAT] [options] |\n"
        "       kvtk trace import LOG -o OUT [--engine vllm|sglang] [options] |\n"
        "       kvtk trace anonymize IN -o OUT [--salt-file F] [options] |\n"
        "       kvtk trace record --endpoint E -o F [options] (the Python package's)\n",
               args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "stats") return stats(std::vector<std::string>(args.begin() + 1, args.end()));
  if (args[0] == "gen") return run_trace_gen(std::vector<std::string>(args.begin() + 1, args.end()));
  if (args[0] == "convert") {
    return run_trace_convert(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  if (args[0] == "import") {
    return run_trace_import(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  if (args[0] == "anonymize") {
    return run_trace_anonymize(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  std::fprintf(stderr,
               "kvtk trace: unknown subcommand '%s' (known: stats gen convert import anonymize)\n",
               args[0].c_str());
  return 2;
}

}  // namespace kvtk::sim
