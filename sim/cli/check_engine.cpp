#include "cli/check_engine.hpp"

#include <boost/program_options.hpp>
#include <iostream>

#include "api/check_engine.hpp"
#include "cli/common.hpp"

namespace kvtk::sim {

int run_check_engine(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  using namespace cli;
  po::options_description opts(
      "kvtk check-engine: does kvtk model your engine? A recording of its KV events (kvtk trace\n"
      "record) is compared block by block with what kvtk's model of the engine does with the same\n"
      "requests (one at a time, prompt only: record with requests sent one after another and\n"
      "max_tokens=1). Prints the first divergence; exit 0 when there is none, 3 when there is\n"
      "(1: unreadable input, 2: a bad command line).\n"
      "usage: kvtk check-engine --events REC --trace T --gpu-blocks N [--block-tokens 16]\nOptions");
  check_engine_options o;
  opts.add_options()("help,h", "show this help")(
      "events", po::value(&o.events)->required(), "the recording (kvtk trace record's file)")(
      "trace", po::value(&o.trace)->required(),
      "the same requests as a kvtk trace (kvtk trace import of their token ids)")(
      "format", po::value(&o.format)->default_value("auto"), "the trace's format")(
      "engine", po::value(&o.engine)->default_value("vllm"), "whose model: vllm | sglang")(
      "gpu-blocks", po::value(&o.gpu_blocks)->required(),
      "the engine's logged number of GPU blocks (vLLM: '# GPU blocks', its null block included; "
      "SGLang: max_total_num_tokens / page size)")(
      "block-tokens", po::value(&o.block_tokens)->default_value(16), "the engine's block size")(
      "hash-algo", po::value(&o.hash_algo)->default_value("sha256"),
      "as the trace was imported with (derived keys)")(
      "hash-seed", po::value(&o.hash_seed), "as the trace was imported with")(
      "keys", po::value(&o.keys)->default_value("derived"),
      "derived (from the events' token ids and parents; any NONE_HASH) | engine (the events' "
      "own hashes: the engine ran with PYTHONHASHSEED = --hash-seed)")(
      "report-mode", po::value(&o.report_mode)->default_value("incremental"),
      "vLLM's kv_cache_report_mode: incremental | full (reused prefixes reported too: compared "
      "with the model's hits)")(
      "json", po::value<std::string>(), "also write the result as JSON to this file, or - for stdout");
  po::variables_map vm;
  if (const int rc = parse_command("check-engine", opts, args, vm, [&] { validate(o); }); rc >= 0) {
    return rc;
  }
  const check_engine_result r = run(o);
  std::cerr << to_text(r);
  if (vm.count("json")) write_to(vm["json"].as<std::string>(), to_json(r).dump(2) + "\n");
  return r.equal ? 0 : 3;
}

}  // namespace kvtk::sim
