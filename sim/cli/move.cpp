// sim/cli/move.cpp — the command lines of `kvtk move replay` and `kvtk move bench` over the
// library calls (api/move.hpp).
#include "cli/move.hpp"

#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "api/move.hpp"
#include "cli/common.hpp"
#include "formats/trace_error.hpp"

namespace kvtk::sim {
namespace {


int run_move_replay(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  po::options_description opts(
      "kvtk move replay: replay a trace through a tier hierarchy and perform every decision on\n"
      "real host memory (promotions read up through a staging buffer, demotions and copies\n"
      "write down, computed blocks are written), verifying every arrival byte for byte; per\n"
      "link: bytes, measured copy time, and the time the tier model predicts.\nOptions");
  move_replay_options o;
  std::string json_out;
  opts.add_options()("help,h", "show this help")("trace", po::value(&o.trace)->required(),
                                                 "trace file (any format)")(
      "format", po::value(&o.format)->default_value("auto"), "trace format")(
      "block-tokens", po::value(&o.block_tokens)->default_value(0), "tokens per block")(
      "tiers", po::value(&o.tiers)->required(),
      "hierarchy name:capacity:policy,... (capacity in blocks, tokens or bytes of --block-bytes blocks)")(
      "inclusive", "lower tiers keep copies")(
      "write-policy", po::value(&o.write_policy)->default_value("write-back"),
      "write-back | write-through | write-through-selective[:N]")(
      "admission", po::value(&o.admission)->default_value("always"), "lower-tier admission")(
      "block-bytes", po::value(&o.block_bytes)->default_value("4KiB"),
      "bytes per moved block (pools hold capacity x this)")(
      "partial-block", po::value(&o.partial_block)->default_value("skip"),
      "skip (only full blocks are cached: every command's default) | cache")(
      "backend", po::value(&o.backend)->default_value("host"),
      "host (hbm and dram tiers in DRAM, ssd/nvme/file tiers in files); for device memory use "
      "cuda/kv_move_replay")(
      "dir", po::value(&o.dir), "directory for file tiers (default: the system temp dir)")(
      "calibration", po::value(&o.calibration),
      "predict link times from a calibration JSON (kvtk move bench --json); hbm counts as dram")(
      "calibration-mechanism", po::value(&o.calibration_mechanism),
      "the mechanism whose fit to use (default: the fastest for 256 blocks)")(
      "json", po::value(&json_out), "write JSON to a file, or - for stdout");
  po::variables_map vm;
  if (const int rc = cli::parse_command("move replay", opts, args, vm, [&] {
        if (vm.count("inclusive")) o.inclusion = "inclusive";
        validate(o);
      });
      rc >= 0) {
    return rc;
  }
  move_replay_result r;
  try {
    r = run(o);
  } catch (const usage_error&) {
    throw;  // options the data showed impossible: exit 2 via main
  } catch (const trace_error&) {
    throw;  // main reports "file:line: reason" and exits 1
  } catch (const std::runtime_error& e) {
    std::cerr << "kvtk move replay: " << e.what() << "\n";
    return 1;
  }
  cli::show_warnings("move replay", r.warnings);
  try {
    if (vm.count("json")) {
      cli::write_to(json_out, r.report.dump(2) + "\n");
    } else {
      std::cout << r.report.dump(2) << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "kvtk move replay: " << e.what() << "\n";
    return 1;
  }
  if (!r.verified) {
    std::cerr << "kvtk move replay: " << r.report["integrity_failures"] << " block(s) arrived corrupted\n";
    return 1;
  }
  return 0;
}

}  // namespace

int run_move(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  if (!args.empty() && args[0] == "replay") {
    return run_move_replay(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  if (args.empty() || args[0] != "bench") {
    const bool help = !args.empty() && (args[0] == "--help" || args[0] == "-h");
    (help ? std::cout : std::cerr)
        << "usage: kvtk move bench [options] | kvtk move replay --trace F --tiers … [options]\n"
           "  (the CUDA backend: cuda/kv_move_bench, cuda/validate.sh)\n";
    if (!help && !args.empty()) std::cerr << "kvtk move: unknown subcommand '" << args[0] << "'\n";
    return help ? 0 : 2;
  }
  po::options_description opts(
      "kvtk move bench: measure real block movement on the host backend (DRAM <-> DRAM,\n"
      "DRAM <-> file), verify every byte, and fit t = alpha + n*beta + bytes/B per path and\n"
      "mechanism (the calibration JSON).\nOptions");
  move_bench_options o;
  std::string to, sizes, counts, mechs, json_out;
  opts.add_options()("help,h", "show this help")(
      "backend", po::value(&o.backend)->default_value("host"),
      "host (the CUDA paths: cuda/kv_move_bench)")(
      "from", po::value(&o.from)->default_value("dram"), "source tier: dram")(
      "to", po::value(&to)->default_value("dram,file"), "destinations: dram, file (a list)")(
      "block-bytes", po::value(&sizes)->default_value("16KiB,64KiB,1MiB,4MiB"), "block sizes")(
      "blocks", po::value(&counts)->default_value("1,16,256,1024"), "blocks per transfer")(
      "mechanism", po::value(&mechs)->default_value("per-piece,coalesced,threads"),
      "per-piece | coalesced | threads (a list; threads: --io-threads workers + the caller, "
      "each with a contiguous share, one pread/pwrite or memcpy per share)")(
      "io-threads", po::value(&o.io_threads)->default_value(4), "workers of the threads mechanism")(
      "layout", po::value(&o.layout)->default_value("block-first"),
      "block-first | layer-first (layer-first: 80 layers x K,V pieces per block)")(
      "dir", po::value(&o.dir), "directory for the file tier (default: the system temp dir)")(
      "reps", po::value(&o.reps)->default_value(3), "repetitions (the fastest counts)")(
      "max-gib", po::value(&o.max_gib)->default_value(1.0),
      "skip transfers larger than this many GiB")(
      "json", po::value(&json_out), "write rows and the calibration JSON to a file, or -");
  po::variables_map vm;
  if (const int rc = cli::parse_command(
          "move bench", opts, std::vector<std::string>(args.begin() + 1, args.end()), vm, [&] {
            o.to = split_list(to, "--to");
            o.block_bytes = split_list(sizes, "--block-bytes");
            o.blocks = split_list(counts, "--blocks");
            o.mechanism = split_list(mechs, "--mechanism");
            validate(o);
          });
      rc >= 0) {
    return rc;
  }
  const move_bench_result r = run(o);
  for (const auto& w : r.warnings) std::cerr << "kvtk move bench: " << w << "\n";
  try {
    if (vm.count("json")) cli::write_to(json_out, r.report.dump(2) + "\n");
  } catch (const std::exception& e) {
    std::cerr << "kvtk move bench: " << e.what() << "\n";
    return 1;
  }
  if (!vm.count("json")) std::fputs(to_text(r).c_str(), stdout);
  if (!r.verified) {
    std::cerr << "kvtk move bench: a block arrived corrupted\n";
    return 1;
  }
  return 0;
}

}  // namespace kvtk::sim
