#include "cli/trace_import.hpp"

#include <boost/program_options.hpp>
#include <iostream>
#include <memory>

#include "api/trace_import.hpp"
#include "cli/common.hpp"
#include "cli/progress.hpp"

namespace kvtk::sim {

int run_trace_import(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  using namespace cli;
  po::options_description opts(
      "kvtk trace import: a request log with token ids (JSONL, one object per request, or CSV\n"
      "with a header line) to a kvtk\n"
      "trace whose block keys are the ones the engine computes (vLLM's block hashes, SGLang's\n"
      "page hashes), streaming, hashing on every core. docs/formats.md \"Importing your traffic\".\n"
      "usage: kvtk trace import LOG -o OUT [--engine vllm|sglang] [--block-tokens N]\nOptions");
  trace_import_options o;
  opts.add_options()("help,h", "show this help")("log", po::value(&o.log)->required(),
                                                 "the request log (also the first positional)")(
      "format", po::value(&o.format)->default_value("token-ids"),
      "the log's kind: token-ids | vllm-events | sglang-events | dynamo-events (a kvtk trace record recording: "
      "its miss stream, --to ids or oracle-general) | dynamo (Dynamo's DYN_REQUEST_TRACE records)")(
      "keys", po::value(&o.keys),
      "events: derived (from the events' token ids and parents; the default) | engine (their "
      "own hashes; dynamo-events' default and only choice)")(
      "report-mode", po::value(&o.report_mode)->default_value("incremental"),
      "vllm-events: incremental | full (every request ran with kv_cache_report_mode=\"full\": "
      "the requests are rebuilt, --to kvtb|kvtk|mooncake)")(
      "log-format", po::value(&o.log_format)->default_value("auto"),
      "jsonl | csv | auto (JSONL when the first line opens an object, else a CSV header line)")(
      "output,o", po::value(&o.output)->required(), "output file, or - for stdout")(
      "to", po::value(&o.to),
      "output format: kvtb | kvtk | mooncake (default: kvtb for a .kvtb name); events: ids | "
      "oracle-general")(
      "engine", po::value(&o.engine), "whose block keys: vllm | sglang (default: sglang for "
      "sglang-events, else vllm)")(
      "block-tokens", po::value(&o.block_tokens)->default_value(16),
      "the engine's block size (vLLM --block-size, SGLang --page-size), tokens")(
      "hash-algo", po::value(&o.hash_algo)->default_value("sha256"),
      "vLLM --prefix-caching-hash-algo: sha256 | sha256_cbor | xxhash | xxhash_cbor")(
      "hash-seed", po::value(&o.hash_seed),
      "vLLM: the engine's PYTHONHASHSEED (NONE_HASH's seed; default: vLLM's own)")(
      "preset", po::value(&o.preset)->default_value("kvtk"),
      "field names: kvtk (timestamp, token_ids, output_length) | vllm (arrival_time, "
      "prompt_token_ids, max_tokens); both: session, lora_name, cache_salt")(
      "field-timestamp", po::value(&o.field_timestamp), "the arrival time's field")(
      "field-tokens", po::value(&o.field_tokens), "the prompt token ids' field")(
      "field-output", po::value(&o.field_output), "the output length's field")(
      "field-session", po::value(&o.field_session), "the session's field (string or integer)")(
      "field-lora", po::value(&o.field_lora), "the LoRA adapter name's field (an extra key)")(
      "field-lora-path", po::value(&o.field_lora_path), "the LoRA adapter path's field (vLLM)")(
      "field-cache-salt", po::value(&o.field_cache_salt), "the cache_salt's field")(
      "field-mm", po::value(&o.field_mm),
      "vLLM's multimodal items' field (default mm_hashes): [{identifier, offset, length}]")(
      "time-unit", po::value(&o.time_unit)->default_value("s"), "the timestamps' unit: s | ms")(
      "threads", po::value(&o.threads)->default_value(0), "hashing threads (0 = every core)")(
      "json", po::value<std::string>(), "also write the summary as JSON to this file, or - for stdout");
  po::positional_options_description pos;
  pos.add("log", 1);
  po::variables_map vm;
  if (const int rc = parse_command(
          "trace import", opts, args, vm,
          [&] {
            o.force = force_outputs();
            validate(o);
          },
          &pos);
      rc >= 0) {
    return rc;
  }
  trace_import_result r;
  try {
    std::unique_ptr<progress> bar;
    r = run(o, [&](std::uint64_t, std::uint64_t) {
      if (!bar) bar = std::make_unique<progress>("kvtk trace import", "requests", 0);
      bar->add(1);
    });
  } catch (const trace_error&) {
    throw;  // main reports "file:line: reason" and exits 1
  } catch (const usage_error&) {
    throw;
  } catch (const std::exception& e) {
    std::cerr << "kvtk trace import: " << e.what() << "\n";
    return 1;
  }
  std::cerr << to_text(r);
  if (vm.count("json")) write_to(vm["json"].as<std::string>(), to_json(r).dump(2) + "\n");
  return 0;
}

}  // namespace kvtk::sim
