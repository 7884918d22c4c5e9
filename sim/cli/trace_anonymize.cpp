#include "cli/trace_anonymize.hpp"

#include <boost/program_options.hpp>
#include <iostream>
#include <memory>

#include "api/trace_anonymize.hpp"
#include "cli/common.hpp"
#include "cli/progress.hpp"

namespace kvtk::sim {

int run_trace_anonymize(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  using namespace cli;
  po::options_description opts(
      "kvtk trace anonymize: a trace you can share. Every block key and session id goes through\n"
      "a secret keyed permutation (10-round Feistel over SHA-256), tenants become opaque ids;\n"
      "lengths, prefix structure, order and relative timing stay exact, so replay, mrc and tune\n"
      "give identical results on the output. docs/formats.md \"Sharing a trace\".\n"
      "usage: kvtk trace anonymize IN -o OUT [--salt-file F] [--time-zero] [--time-shift S]\n"
      "Options");
  trace_anonymize_options o;
  opts.add_options()("help,h", "show this help")("trace", po::value(&o.trace)->required(),
                                                 "input trace (also the first positional)")(
      "format", po::value(&o.format)->default_value("auto"),
      "input format: mooncake | bailian | kvtk | kvtb | oracle-general | ids | auto")(
      "block-tokens", po::value(&o.block_tokens)->default_value(0),
      "tokens per block of the input (0 = the trace's default)")(
      "output,o", po::value(&o.output)->required(), "output file, or - for stdout")(
      "to", po::value(&o.to),
      "output format: kvtk | kvtb | mooncake | ids | oracle-general (default: kvtb for a .kvtb "
      "name, else the input's)")(
      "salt-file", po::value(&o.salt_file),
      "the secret salt (16 B to 1 MiB, e.g. head -c 32 /dev/urandom > F); the same salt maps "
      "shared blocks of several traces alike. Default: a random salt, used once, never written")(
      "time-zero", "shift arrivals so that the first request arrives at 0")(
      "time-shift", po::value(&o.time_shift_s)->default_value(0),
      "seconds added to every arrival (after --time-zero)")(
      "json", po::value<std::string>(), "also write the summary as JSON to this file, or - for stdout");
  po::positional_options_description pos;
  pos.add("trace", 1);
  po::variables_map vm;
  if (const int rc = parse_command(
          "trace anonymize", opts, args, vm,
          [&] {
            o.time_zero = vm.count("time-zero") != 0;
            o.force = force_outputs();
            validate(o);
          },
          &pos);
      rc >= 0) {
    return rc;
  }
  trace_anonymize_result r;
  try {
    std::unique_ptr<progress> bar;
    r = run(o, [&](std::uint64_t, std::uint64_t) {
      if (!bar) bar = std::make_unique<progress>("kvtk trace anonymize", "requests", 0);
      bar->add(1);
    });
  } catch (const trace_error&) {
    throw;  // main reports "file:line: reason" and exits 1
  } catch (const usage_error&) {
    throw;
  } catch (const std::exception& e) {
    std::cerr << "kvtk trace anonymize: " << e.what() << "\n";
    return 1;
  }
  std::cerr << to_text(r);
  if (vm.count("json")) write_to(vm["json"].as<std::string>(), to_json(r).dump(2) + "\n");
  return 0;
}

}  // namespace kvtk::sim
