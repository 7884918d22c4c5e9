// sim/cli/sparse.cpp — the command line of `kvtk sparse` over the library call (api/sparse.hpp).
#include "cli/sparse.hpp"

#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "api/sparse.hpp"
#include "cli/common.hpp"

namespace kvtk::sim {

namespace {

namespace po = boost::program_options;

// The options that are lists or files on the command line, before they reach sparse_options.
struct sparse_args {
  std::string managers, scorers, budgets, drifts, prefetch, json_out, csv_out;
};

// `kvtk sparse`'s options, bound to o and l.
po::options_description describe(sparse_options& o, sparse_args& l) {
  po::options_description opts(
      "kvtk sparse: replay sparse-attention block selections of decode steps against a\n"
      "per-request HBM budget. offload = lossless (the full KV in host memory, selected blocks\n"
      "recalled on the critical path unless prefetched); lossy = evicted blocks are dropped for\n"
      "good. Input: --trace F (kvtk JSONL decode records, docs/sparse.md) or a generated pattern.\n"
      "Lists (comma-separated) of --manager, --scorer, --budget and --drift run as a grid.\nOptions");
  opts.add_options()("help,h", "show this help")(
      "trace", po::value(&o.trace), "kvtk JSONL with decode-step records (instead of a pattern)")(
      "pattern", po::value(&o.pattern)->default_value("dsa"),
      "generated selections: dsa (top-2048 tokens in 64-token pages) | quest (top-K pages)")(
      "context-blocks", po::value(&o.context_blocks)->default_value(2048), "pattern: context at step 0, in pages")(
      "steps", po::value(&o.steps)->default_value(2000), "pattern: decode steps per request")(
      "requests", po::value(&o.requests)->default_value(1), "pattern: independent requests (seeds)")(
      "grow", "pattern: the context grows by one page every page-tokens steps")(
      "page-tokens", po::value(&o.page_tokens)->default_value(0), "tokens per page (0: dsa 64, quest 16)")(
      "top-k", po::value(&o.top_k)->default_value(0), "quest: pages per step (default 32)")(
      "heavy", po::value(&o.heavy)->default_value(0), "pattern: heavy-hitter pages per step (0: the preset's)")(
      "persistence", po::value<double>()->default_value(-1),
      "pattern: fraction of heavy hitters kept step to step (default the preset's 0.9)")(
      "drift", po::value(&l.drifts)->default_value("0.02"), "pattern: drift rates in [0,1] (a list)")(
      "zipf", po::value(&o.zipf)->default_value(1.0), "pattern: Zipf exponent of heavy-hitter importance")(
      "seed", po::value(&o.seed)->default_value(1), "pattern and predictor seed")(
      "manager", po::value(&l.managers)->default_value("offload"), "offload | lossy (a list)")(
      "scorer", po::value(&l.scorers)->default_value("selection-lru"),
      "victim order (a list): selection-lru, streaming-llm, h2o, tova, snapkv, infllm-lru-s")(
      "budget", po::value(&l.budgets)->default_value("256"),
      "HBM budget per request (a list): pages (256), tokens (16384tok) or % of the context")(
      "sinks", po::value<std::uint32_t>(), "protected sink pages, always selected (default 1)")(
      "recent", po::value<std::uint32_t>(),
      "protected recent pages, always selected (default: dsa 2, quest 1)")(
      "prefetch", po::value(&l.prefetch)->default_value("none"),
      "offload (a list): none | layer-ahead (each layer's recalls load during the previous "
      "layer: --layers shares) | next-step (the next step's selection) | next-step:ACC (a "
      "predictor right for a fraction ACC of the blocks)")(
      "layers", po::value<std::uint32_t>(),
      "model layers for layer-ahead (default: the --model preset's, deepseek-v3 61)")(
      "model", po::value(&o.model)->default_value("deepseek-v3"),
      "KV bytes per token for page bytes: a preset or a .json model file")(
      "link-gb-per-s", po::value(&o.link_gb_per_s)->default_value(50), "host -> HBM link bandwidth")(
      "link-latency-us", po::value(&o.link_latency_us)->default_value(10), "fixed cost per transfer")(
      "calibration", po::value(&o.calibration), "link from a calibration JSON's dram->hbm (h2d) fit")(
      "calibration-mechanism", po::value(&o.calibration_mechanism), "the mechanism whose fit to use")(
      "step-ms", po::value(&o.step_ms)->default_value(25),
      "decode compute per step: a prefetch longer than this stalls the excess")(
      "json", po::value(&l.json_out), "write JSON results to a file, or - for stdout")(
      "csv", po::value(&l.csv_out), "write one row per request and step to a file, or -");
  return opts;
}

// The flags, optional values and lists that parse_command's check turns into options.
void finish_options(const po::variables_map& vm, const sparse_args& l, sparse_options& o) {
  if (vm.count("persistence") && vm["persistence"].as<double>() != -1) {
    o.persistence = vm["persistence"].as<double>();
  }
  for (const char* name : {"sinks", "recent", "layers"}) {
    if (!vm.count(name)) continue;
    auto& field = std::string(name) == "sinks" ? o.sinks : std::string(name) == "recent" ? o.recent : o.layers;
    field = vm[name].as<std::uint32_t>();
  }
  o.grow = vm.count("grow") != 0;
  o.prefetch = split_list(l.prefetch, "--prefetch");
  if (!vm["drift"].defaulted()) {
    o.drift = split_list(l.drifts, "--drift");
    if (o.drift.empty()) throw usage_error("--drift: empty list");
  }
  o.manager = split_list(l.managers, "--manager");
  o.scorer = split_list(l.scorers, "--scorer");
  o.budget = split_list(l.budgets, "--budget");
  o.step_rows = vm.count("csv") != 0;
  validate(o);
}

}  // namespace

int run_sparse(const std::vector<std::string>& args) {
  sparse_options o;
  sparse_args l;
  po::options_description opts = describe(o, l);
  po::variables_map vm;
  if (const int rc = cli::parse_command("sparse", opts, args, vm, [&] { finish_options(vm, l, o); });
      rc >= 0) {
    return rc;
  }
  const sparse_result r = run(o);
  try {
    if (vm.count("json")) cli::write_to(l.json_out, to_json(r).dump(2) + "\n");
    if (vm.count("csv")) cli::write_to(l.csv_out, r.step_csv);
  } catch (const std::exception& e) {
    std::cerr << "kvtk sparse: " << e.what() << "\n";
    return 1;
  }
  if (!vm.count("json")) std::fputs(to_text(r).c_str(), stdout);
  return 0;
}

}  // namespace kvtk::sim
