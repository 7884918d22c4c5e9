// sim/cli/compare.cpp — the command line of `kvtk compare` over the library call (api/compare.hpp).
#include "cli/compare.hpp"

#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <kvtk/registry.hpp>

#include "api/compare.hpp"
#include "cli/common.hpp"
#include "formats/trace_error.hpp"

namespace kvtk::sim {

namespace po = boost::program_options;

int run_compare(const std::vector<std::string>& args) {
  po::options_description opts(
      "kvtk compare: replay a flat block trace (each record one unit-size request: every hash_id "
      "of\n"
      "a Mooncake JSONL trace, every line of an ids file, every oracleGeneral record) through "
      "each\n"
      "eviction policy at each capacity and print hit (and miss) ratios.\n"
      "Options");
  compare_options o;
  std::string policies, capacities, csv_out, json_out;
  opts.add_options()("help,h", "show this help")("trace", po::value(&o.trace)->required(),
                                                 "flat trace file")(
      "format", po::value(&o.format)->default_value("auto"),
      "mooncake | ids | oracle-general | auto (detected from the content)")(
      "policy", po::value(&policies)->default_value("all"),
      "comma-separated policy names, or 'all'")(
      "capacity", po::value(&capacities)->default_value("1000,5859,10000"),
      "comma-separated capacities in blocks")(
      "csv", po::value(&csv_out), "write CSV to a file, or - for stdout")(
      "json", po::value(&json_out), "write JSON to a file, or - for stdout");
  po::variables_map vm;
  if (const int rc = cli::parse_command("compare", opts, args, vm, [&] {
        o.policy = policies == "all" ? std::vector<std::string>{"all"}
                                     : split_list(policies, "--policy");
        o.capacity = split_list(capacities, "--capacity");
        validate(o);
      });
      rc >= 0) {
    if (rc == 0) {
      std::cout << "\nPolicies:";
      for (auto n : policy_names) std::cout << ' ' << n;
      std::cout << "\n";
    }
    return rc;
  }
  compare_result r;
  try {
    r = run(o);
  } catch (const trace_error& e) {
    std::cerr << "kvtk compare: " << e.what() << "\n";
    return 1;
  }
  if (!vm.count("csv") && !vm.count("json")) std::fputs(to_text(r).c_str(), stdout);
  if (vm.count("json")) cli::write_to(json_out, to_json(r).dump(2) + "\n");
  if (vm.count("csv")) cli::write_to(csv_out, to_csv(r));
  return 0;
}

}  // namespace kvtk::sim
