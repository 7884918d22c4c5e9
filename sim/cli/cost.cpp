#include "cli/cost.hpp"

#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "api/cost.hpp"
#include "cli/common.hpp"
#include "des/profiles.hpp"
#include "kvtk/cost/self_hosted.hpp"

namespace kvtk::sim {

namespace kc = kvtk::cost;

// The command line of `kvtk cost` over the library call (api/cost.hpp).
int run_cost(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  po::options_description opts(
      "kvtk cost: what a cache hit ratio is worth. API view (a provider's bill with and without\n"
      "caching at a price table) and, with --model/--gpu/--gpu-hour, the self-hosted view\n"
      "(prefill GPU time and dollars saved; tier rent, wear and transfer time from a tiered\n"
      "replay; the net). Token counts come from flags or from kvtk replay / simulate JSON; a\n"
      "kvtk mrc JSON gives the break-even capacity.\nOptions");
  cost_options o;
  std::string json_out;
  opts.add_options()("help,h", "show this help")(
      "pricing", po::value(&o.pricing)->default_value("deepseek-v3.2"),
      "price table: deepseek-v3, deepseek-r1, deepseek-v3.1, deepseek-v3.2, or a .json file")(
      "hit-tokens", po::value<double>(), "input tokens served from cache (a whole number)")(
      "hit-ratio", po::value<double>(),
      "share of --input-tokens served from cache, in [0, 1] (instead of --hit-tokens)")(
      "miss-tokens", po::value<double>(), "input tokens computed")(
      "input-tokens", po::value<double>(), "all input tokens (instead of --miss-tokens)")(
      "output-tokens", po::value(&o.output_tokens)->default_value(0), "output tokens")(
      "from", po::value(&o.from), "a kvtk replay, simulate or mrc JSON result")(
      "offpeak-share", po::value(&o.offpeak_share)->default_value(0),
      "share of tokens in the price table's off-peak window (0..1)")(
      "per-day", "scale counts to one day using the trace's time span (needs --from)")(
      "model", po::value(&o.model), "self-hosted view: model preset")(
      "gpu", po::value(&o.gpu), "self-hosted view: GPU preset (h100 h200 h800 a800)")(
      "gpu-hour", po::value(&o.gpu_hour)->default_value(2.0), "USD per GPU-hour")(
      "efficiency", po::value(&o.efficiency)->default_value(0.5), "achieved fraction of peak FLOP/s")(
      "usd-per-gb-month", po::value(&o.usd_per_gb_month)->default_value(0),
      "break-even (mrc input): price of cache capacity, USD per GB-month")(
      "json", po::value(&json_out), "write JSON to a file, or - for stdout");
  po::variables_map vm;
  if (const int rc = cli::parse_command("cost", opts, args, vm, [&] {
        auto given = [&](const char* name) -> std::optional<double> {
          if (!vm.count(name)) return std::nullopt;
          return vm[name].as<double>();
        };
        o.hit_tokens = given("hit-tokens");
        o.hit_ratio = given("hit-ratio");
        o.miss_tokens = given("miss-tokens");
        o.input_tokens = given("input-tokens");
        o.per_day = vm.count("per-day") != 0;
        validate(o);
      });
      rc >= 0) {
    return rc;
  }
  const cost_result r = run(o);
  try {
    if (vm.count("json")) {
      cli::write_to(json_out, to_json(r).dump(2) + "\n");
      return 0;
    }
  } catch (const std::exception& e) {
    std::cerr << "kvtk cost: " << e.what() << "\n";
    return 1;
  }
  std::fputs(to_text(r).c_str(), stdout);
  return 0;
}

}  // namespace kvtk::sim
