#include "cli/replay.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <memory>

#include "api/replay.hpp"
#include "cli/common.hpp"
#include "util/phase_clock.hpp"
#include "cli/progress.hpp"

namespace kvtk::sim {

namespace {

namespace po = boost::program_options;

// The options that are lists or files on the command line, before they reach replay_options.
struct replay_args {
  std::string engines, indexes, policies, capacities, json_out, csv_out, tier_top;
};

// `kvtk replay`'s options, bound to o and l.
po::options_description describe(replay_options& o, replay_args& l) {
  po::options_description opts(
      "kvtk replay: replay a request trace through prefix-cache indexes, policies and capacities\n"
      "(order-only; semantics in include/kvtk/prefix/replay.hpp). Every (index, policy, capacity)\n"
      "combination runs on the same trace; results do not depend on --threads.\nOptions");
  opts.add_options()("help,h", "show this help")("trace", po::value(&o.trace)->required(),
                                                 "trace file (any format below)")(
      "format", po::value(&o.format)->default_value("auto"),
      "mooncake | bailian | kvtk | kvtb | oracle-general | ids | auto (detected from content)")(
      "block-tokens", po::value(&o.block_tokens)->default_value(0),
      "tokens per block (0 = the trace's: kvtb/kvtk header, else 512 Mooncake, 16 Bailian, 64 "
      "kvtk, 1 flat)")("engine", po::value(&l.engines)->default_value("ideal"),
                       "accounting (a list): ideal = kvtk's definitions over the index x policy "
                       "grid; vllm = vLLM 0.33.0's block pool; sglang = SGLang 0.5.23's radix "
                       "cache (LRU). Engine modes run one job per capacity; without ideal the "
                       "grid does not run")(
      "index", po::value(&l.indexes)->default_value("radix"),
                       "radix | flat | hashchain (a list); with --tiers, --index radix alone "
                       "also makes the top tier a radix tree (--tier-top)")(
      "policy", po::value(&l.policies)->default_value("lru"),
      "policies (a list, or all): radix leaf orders, optionally +rule (an admission rule: "
      "ghost, adaptive, tinylfu, depth; e.g. lru+adaptive; belady+belady offline), flat core "
      "policies, vllm for hashchain; each runs with every listed index that knows it")(
      "capacity", po::value(&l.capacities)->default_value("1000,10000,100000"),
      "capacities (a list): blocks (1000), tokens (3Mtok) or bytes (64GiB, needs --model)")(
      "model", po::value(&o.model),
      "model preset for byte capacities: deepseek-v3, llama-3-70b, "
      "qwen2.5-7b, qwen3-235b-a22b")(
      "partial-block", po::value(&o.partial_block)->default_value("skip"),
      "skip: cache full blocks only; cache: also the partial last block (how Mooncake's "
      "published hit ratios count)")(
      "threads", po::value(&o.threads)->default_value(1),
      "worker threads (also parse JSONL and read oracleGeneral traces in parallel, and run the "
      "ideal pass beside the jobs; results do not depend on it)")(
      "json", po::value(&l.json_out), "write JSON results to a file, or - for stdout")(
      "csv", po::value(&l.csv_out), "write CSV results to a file, or - for stdout")(
      "no-opt", "skip the offline optimum (opt_fraction)")(
      "no-ideal",
      "skip the ideal (infinite-cache) ratios and the distinct-block count, whose set costs 16 "
      "bytes per distinct block (they are reported as null)")(
      "pricing", po::value(&o.pricing),
      "attach an API cost estimate to each result (kvtk cost --help: presets or a .json)")(
      "tiers", po::value(&o.tiers)->composing(),
      "a tier hierarchy name:capacity:policy[:usd_per_gb_month],... top first, e.g. "
      "hbm:80GiB:lru,dram:1TiB:arc:2.5,ssd:30TiB:s3fifo:0.08 (repeat to compare several; "
      "docs/tiers.md \"Command line\")")(
      "offload", po::value(&o.offload)->composing(),
      "with --engine vllm: vLLM's own CPU offload tier under its GPU pool (the "
      "OffloadingConnector of vLLM 0.33), cpu:SIZE[:POLICY[:usd_per_gb_month]][,key=value...]; "
      "SIZE in GPU blocks, tokens or bytes; POLICY lru or arc (vLLM's) or a kvtk policy (kvtk-NAME, "
      "through kvtk.integrations.vllm); knobs block_size (tokens), store_threshold, "
      "max_tracker_size; repeat to compare several (docs/tiers.md \"Engine offload tiers\")")(
      "tier-config", po::value(&o.tier_config)->composing(),
      "a tier hierarchy as a JSON file (docs/tiers.md \"Command line\"; repeatable)")(
      "inclusive", "tiers: lower tiers keep copies of blocks held above")(
      "exclusive", "tiers: a block lives in one tier (the default)")(
      "tier-top", po::value(&l.tier_top)->default_value("flat"),
      "tiers: the top tier: flat (a block cache) | radix (a radix tree whose leaf order is the top "
      "tier's policy; exclusive write-back only) | vllm | sglang (the engine's own GPU cache, "
      "as --engine counts it, over kvtk's generic exclusive write-back tiers; the top tier's "
      "policy is the engine's name). --index radix alone implies radix")(
      "write-policy", po::value(&o.write_policy)->default_value("write-back"),
      "tiers: write-back | write-through | write-through-selective[:N] (inclusive only but "
      "write-back)")("admission", po::value(&o.admission)->default_value("always"),
                     "tiers: filter on writes into lower tiers: always | frequency[:N] | "
                     "tinylfu[:N] | decay[:HALF_LIFE_REQUESTS[:N]]")(
      "calibration", po::value(&o.calibration),
      "tiers: take link figures from a calibration JSON (kvtk move bench --json, "
      "cuda/validate.sh): latency = alpha, per block = beta, bandwidth = B per measured path")(
      "calibration-mechanism", po::value(&o.calibration_mechanism),
      "tiers: the copy mechanism whose fit to use (default: the fastest for 256 blocks)")(
      "skip-invalid", "skip malformed trace lines (counted and reported) instead of stopping")(
      "next-use-cache", po::value(&o.next_use_cache)->default_value("auto"),
      "where the next uses of --opt and offline policies come from: auto (a sidecar file "
      "<trace>.next-<skip|cache>.kvtn, else in $TMPDIR/kvtk-next, for kvtb traces over 32 Mi "
      "block keys; else memory) | off (memory: 8 bytes a reference plus a key map) | a directory "
      "for the sidecar (kvtb traces); results are the same every way (docs/formats.md)")(
      "timings",
      "report where the time went (read, next_use, ideal, replay incl. optimum, output, write) "
      "and the peak RSS: a \"timings\" object in the JSON and a line on stderr");
  return opts;
}

// The flags and lists that parse_command's check turns into options.
void finish_options(const po::variables_map& vm, const replay_args& l, replay_options& o) {
  if (vm.count("inclusive") && vm.count("exclusive")) {
    throw usage_error("--inclusive and --exclusive contradict each other");
  }
  if (vm.count("inclusive")) o.inclusion = "inclusive";
  o.engine = split_list(l.engines, "--engine");
  o.index = split_list(l.indexes, "--index");
  // The top tier of --tiers hierarchies: --tier-top, else radix when --index names radix alone
  // (the default index list is radix too, for the grid, so only an explicit one counts; with
  // --index flat,radix the hierarchies keep a flat top unless --tier-top radix).
  if (!vm["tier-top"].defaulted()) {
    o.tier_top = l.tier_top;
  } else if (!vm["index"].defaulted() && o.index == std::vector<std::string>{"radix"}) {
    o.tier_top = "radix";
  }
  o.policy = split_list(l.policies, "--policy");
  if (!vm["capacity"].defaulted()) {
    o.capacity = split_list(l.capacities, "--capacity");
    if (o.capacity.empty()) throw usage_error("--capacity: empty list");
  }
  o.opt = vm.count("no-opt") == 0;
  o.ideal = vm.count("no-ideal") == 0;
  o.skip_invalid = vm.count("skip-invalid") != 0;
  o.timings = vm.count("timings") != 0;
  validate(o);
}

}  // namespace

// The command line of `kvtk replay` over the library call (api/replay.hpp): argv -> options,
// run, then the results in the forms asked for.
int run_replay(const std::vector<std::string>& args) {
  using namespace kvtk::sim::cli;
  replay_options o;
  replay_args l;
  po::options_description opts = describe(o, l);
  po::variables_map vm;
  if (const int rc = parse_command("replay", opts, args, vm, [&] { finish_options(vm, l, o); });
      rc >= 0) {
    return rc;
  }
  std::unique_ptr<progress> bar;
  std::uint64_t drawn = 0;
  const replay_result r = run(o, [&](std::uint64_t done, std::uint64_t total) {
    if (!bar) bar = std::make_unique<progress>("kvtk replay", "block refs", total);
    bar->add(done - drawn);
    drawn = done;
  });
  bar.reset();
  show_warnings("replay", r.warnings);
  nlohmann::json out = to_json(r);
  const std::string csv = vm.count("csv") ? to_csv(r) : std::string();
  if (r.clock) {
    r.clock->lap("output");  // building the results; writing them is timed below
    out["timings"] = r.clock->json({{"optimum_in_replay", r.optimum_seconds}});
  }
  try {
    if (vm.count("json")) write_to(l.json_out, out.dump(2) + "\n");
    if (vm.count("csv")) write_to(l.csv_out, csv);
  } catch (const std::exception& e) {
    std::cerr << "kvtk replay: " << e.what() << "\n";
    return 1;
  }
  if (!vm.count("json") && !vm.count("csv")) std::fputs(to_text(r).c_str(), stdout);
  if (r.clock) {
    r.clock->lap("write");
    std::fprintf(stderr, "%s\n", r.clock->text({{"optimum_in_replay", r.optimum_seconds}}).c_str());
  }
  return 0;
}

}  // namespace kvtk::sim
