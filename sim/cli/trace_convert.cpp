#include "cli/trace_convert.hpp"

#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>

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
  std::string in_path, out_path, from, to;
  std::uint32_t block_tokens = 0;
  opts.add_options()("help,h", "show this help")("trace", po::value(&in_path)->required(),
                                                 "input trace (also the first positional)")(
      "format", po::value(&from)->default_value("auto"),
      "input format: mooncake | bailian | kvtk | kvtb | oracle-general | ids | auto")(
      "output,o", po::value(&out_path)->required(), "output file, or - for stdout")(
      "to", po::value(&to),
      "output format: kvtk | kvtb | mooncake | ids | oracle-general (default: kvtb for a .kvtb "
      "output name, else required)")(
      "block-tokens", po::value(&block_tokens)->default_value(0),
      "tokens per block of the input (0 = the trace's default)")(
      "skip-invalid", "skip malformed input lines (counted and reported) instead of stopping");
  po::positional_options_description pos;
  pos.add("trace", 1);
  po::variables_map vm;
  trace_format out_format = trace_format::kvtk;
  if (const int rc = parse_command(
          "trace convert", opts, args, vm,
          [&] {
            check_request_format(from);
            if (!vm.count("to")) {
              if (out_path.size() < 5 || out_path.compare(out_path.size() - 5, 5, ".kvtb") != 0) {
                throw usage_error("--to: give the output format (kvtk kvtb mooncake ids "
                                  "oracle-general)");
              }
              to = "kvtb";
            }
            const auto f = parse_format_name(to);
            if (!f || *f == trace_format::bailian) {
              throw usage_error("--to: cannot write '" + to +
                                "' (writable: kvtk kvtb mooncake ids oracle-general)");
            }
            out_format = *f;
            resolve_trace(in_path, from, block_tokens);  // trace_error: exit 1 via main
          },
          &pos);
      rc >= 0) {
    return rc;
  }
  read_options ro;
  ro.skip_invalid = vm.count("skip-invalid") != 0;
  read_report report;
  std::uint64_t requests = 0;
  try {
    auto writer = trace_writer::open(out_path, out_format, block_tokens, force_outputs());
    progress bar("kvtk trace convert", "requests", 0);
    for_each_request(in_path, *parse_format_name(from), block_tokens, ro, &report,
                     [&](const request_record& r) {
                       try {
                         writer->add(r);
                       } catch (const trace_error& e) {
                         // Writers name the record by line; the file is the input.
                         throw trace_error(in_path, r.line,
                                           e.what() + std::string(e.what()).find(": ", 0) + 2);
                       }
                       ++requests;
                       bar.add(1);
                     });
    writer->finish();
  } catch (const trace_error&) {
    throw;  // main reports "file:line: reason" and exits 1
  } catch (const std::exception& e) {
    std::cerr << "kvtk trace convert: " << e.what() << "\n";
    return 1;
  }
  if (report.skipped_lines > 0) {
    std::cerr << "kvtk trace convert: skipped " << report.skipped_lines
              << " invalid line(s); the first: " << report.first_error << "\n";
  }
  if (report.decode_records > 0) {
    std::cerr << "kvtk trace convert: " << report.decode_records
              << " decode-step record(s) were not carried (request formats only; keep the input "
                 "for kvtk sparse)\n";
  }
  std::cerr << "kvtk trace convert: wrote " << requests << " requests (" << from << " -> "
            << format_name(out_format) << ", " << block_tokens << "-token blocks) to " << out_path
            << "\n";
  return 0;
}

}  // namespace kvtk::sim
