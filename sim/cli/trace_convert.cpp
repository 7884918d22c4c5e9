#include "cli/trace_convert.hpp"

#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>
#include <memory>

#include "api/trace_convert.hpp"
#include "cli/common.hpp"
#include "cli/progress.hpp"
#include "formats/writers.hpp"

namespace kvtk::sim {

int run_trace_convert(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  using namespace cli;
  po::options_description opts(
      "kvtk trace convert: rewrite a trace in another format, streaming. Keys are written as\n"
      "prefix ids (Bailian content ids arrive chained, model/cache_salt namespaces applied), so\n"
      "the converted trace replays identically. kvtb is the fast one: replays map it with no\n"
      "parsing.\nusage: kvtk trace convert IN -o OUT [--to FORMAT]\nOptions");
  trace_convert_options o;
  opts.add_options()("help,h", "show this help")("trace", po::value(&o.trace)->required(),
                                                 "input trace (also the first positional)")(
      "format", po::value(&o.format)->default_value("auto"),
      "input format: mooncake | bailian | kvtk | kvtb | oracle-general | ids | auto")(
      "output,o", po::value(&o.output)->required(), "output file, or - for stdout")(
      "to", po::value(&o.to),
      "output format: kvtk | kvtb | mooncake | ids | oracle-general (default: kvtb for a .kvtb "
      "output name, else required)")(
      "block-tokens", po::value(&o.block_tokens)->default_value(0),
      "tokens per block of the input (0 = the trace's default)")(
      "skip-invalid", "skip malformed input lines (counted and reported) instead of stopping")(
      "infer-sessions", "a trace without session fields (Mooncake): write each request's session, "
      "parent and turn, inferred from prefixes (docs/formats.md \"Inferred sessions\")");
  po::positional_options_description pos;
  pos.add("trace", 1);
  po::variables_map vm;
  if (const int rc = parse_command(
          "trace convert", opts, args, vm,
          [&] {
            o.skip_invalid = vm.count("skip-invalid") != 0;
            o.infer_sessions = vm.count("infer-sessions") != 0;
            o.force = force_outputs();
            validate(o);
          },
          &pos);
      rc >= 0) {
    return rc;
  }
  trace_convert_result r;
  try {
    std::unique_ptr<progress> bar;
    r = run(o, [&](std::uint64_t, std::uint64_t) {
      if (!bar) bar = std::make_unique<progress>("kvtk trace convert", "requests", 0);
      bar->add(1);
    });
  } catch (const trace_error&) {
    throw;  // main reports "file:line: reason" and exits 1
  } catch (const std::exception& e) {
    std::cerr << "kvtk trace convert: " << e.what() << "\n";
    return 1;
  }
  std::cerr << to_text(r);
  return 0;
}

}  // namespace kvtk::sim
