// sim/cli/trace_gen.cpp — the command line of `kvtk trace gen` over the library call
// (api/trace_gen.hpp).
#include "cli/trace_gen.hpp"

#include <boost/program_options.hpp>
#include <iostream>

#include "api/trace_gen.hpp"
#include "cli/common.hpp"

namespace kvtk::sim {

int run_trace_gen(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  using namespace cli;
  po::options_description opts(
      "kvtk trace gen: a synthetic DeepSeek-style workload. Profiles: chat (multi-turn sessions\n"
      "re-sending their history under popular system prompts), agent (tool loops re-sending a\n"
      "long context), api (one-off requests), mixed (the default; lands near DeepSeek's 56.3%\n"
      "input-token hit ratio). Deterministic for a seed; streams any number of requests.\n"
      "Options");
  trace_gen_options o;
  gen_options& g = o.gen;
  std::string& out_path = o.output;
  std::string& to = o.to;
  opts.add_options()("help,h", "show this help")(
      "profile", po::value(&g.profile)->default_value("mixed"), "chat | agent | api | mixed")(
      "requests", po::value(&g.requests)->default_value(10000), "number of requests")(
      "seed", po::value(&g.seed)->default_value(1), "random seed")(
      "block-tokens", po::value(&g.block_tokens)->default_value(64), "tokens per block")(
      "rate", po::value(&g.rate_per_s)->default_value(5.0), "mean arrivals per second")(
      "arrivals", po::value(&g.arrivals)->default_value("poisson"),
      "poisson | bursty (gamma inter-arrival times; both follow a day/night rate curve)")(
      "burst-cv", po::value(&g.burst_cv)->default_value(3.0),
      "bursty: coefficient of variation of inter-arrival times (Poisson is 1)")(
      "tenants", po::value(&g.tenants)->default_value(4),
      "number of tenants (Zipf-weighted; kvtk/kvtb outputs carry them; 0 = none)")(
      "session-fields", po::bool_switch(&g.session_fields),
      "also write each request's id, parent, turn, kind (chat | agent | tool) and, on an agent "
      "step whose reply calls a tool, tool_s (the tool's seconds); kvtk/kvtb outputs only")(
      "to", po::value(&to),
      "output format: kvtk (default: a header with the block size, sessions and tenants) | kvtb "
      "(default for a .kvtb name) | mooncake (no block size: read it with --block-tokens)")("output,o", po::value(&out_path)->required(),
                     "output file, or - for stdout");
  po::variables_map vm;
  if (const int rc = parse_command("trace gen", opts, args, vm, [&] {
        o.force = force_outputs();
        validate(o);
      });
      rc >= 0) {
    return rc;
  }
  try {
    const trace_gen_result r = run(o);
    for (const auto& w : r.warnings) std::cerr << "kvtk trace gen: " << w << "\n";
  } catch (const std::exception& e) {
    std::cerr << "kvtk trace gen: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace kvtk::sim
