#include "api/simulate.hpp"

#include <cstdio>
#include <filesystem>
#include <type_traits>
#include <memory>
#include <sstream>

#include "api/options_json.hpp"
#include "api/trace_options.hpp"
#include "api/pricing.hpp"
#include "formats/decode_records.hpp"
#include "formats/requests.hpp"
#include "util/output_file.hpp"

namespace kvtk::sim {
namespace {


// The config file (its relative timing_table made relative to the file's directory), then the
// options' keys, then calibration and timing_table; `set` is applied by
// cluster_config_from_json.
nlohmann::json config_json(const simulate_options& o) {
  nlohmann::json j = nlohmann::json::object();
  if (!o.config_file.empty()) j = read_json_file("--config", o.config_file);
  if (!o.config.is_object()) throw usage_error("config: must be a JSON object");
  if (!j.is_object()) throw usage_error("config: must be a JSON object");
  if (j.contains("timing_table") && j["timing_table"].is_string()) {
    const std::filesystem::path table = j["timing_table"].get<std::string>();
    if (table.is_relative() && !table.empty()) {
      j["timing_table"] = (std::filesystem::path(o.config_file).parent_path() / table).string();
    }
  }
  for (const auto& [k, v] : o.config.items()) j[k] = v;
  if (!o.calibration.empty()) j["calibration"] = o.calibration;
  if (!o.timing_table.empty()) j["timing_table"] = o.timing_table;
  if (!o.engine.empty()) j["engine"] = o.engine;
  return j;
}

// Decoding is simulated token by token: bound the work a single request can ask for.
void check_decode_lengths(const simulate_options& o, const loaded_trace& loaded,
                          const des::cluster_config& cfg) {
  constexpr std::uint64_t max_decode = std::uint64_t{1} << 24;
  const auto& v = loaded.view();
  for (std::size_t r = 0; r < v.output_length.size(); ++r) {
    // A mapped trace's pages are let go behind the pass (des/outcomes.hpp: bounded memory).
    if (r % 65536 == 0 && r > 0) loaded.release(r - 65536, r);
    std::uint64_t out = v.output_length[r];
    if (cfg.max_output_tokens >= 0) out = std::min<std::uint64_t>(out, cfg.max_output_tokens);
    if (out > max_decode) {
      throw std::runtime_error(o.trace + ": request " + std::to_string(r) + " (0-based) has " +
                               std::to_string(v.output_length[r]) +
                               " output tokens; simulate decodes at most 2^24 per request (set "
                               "the config's max_output_tokens to cap them)");
    }
  }
}

// Recorded selections replace the generated pattern of their requests: "request" is the 0-based
// index of a request line. Returns how many requests have records.
std::size_t attach_decode_records(const std::string& trace, std::size_t requests,
                                  des::cluster_config& cfg) {
  auto rec = std::make_shared<std::vector<des::recorded_selection>>(requests);
  std::size_t recorded = 0;
  for (const auto& req : load_decode_records(trace)) {  // trace_error: exit 1 via main
    std::size_t idx = 0;
    const bool digits = !req.id.empty() && req.id.size() < 19 &&
                        req.id.find_first_not_of("0123456789") == std::string::npos;
    if (digits) idx = std::stoull(req.id);
    if (!digits || idx >= rec->size()) {
      throw usage_error("decode records of request '" + req.id +
                        "': simulate needs the 0-based index of a request line (the trace has " +
                        std::to_string(rec->size()) + " requests)");
    }
    auto& out = (*rec)[idx];
    for (const auto& st : req.steps) {
      out.step.push_back(st.step);
      out.pattern.blocks.insert(out.pattern.blocks.end(), st.selected.begin(), st.selected.end());
      out.pattern.weights.insert(out.pattern.weights.end(), st.weights.begin(), st.weights.end());
      out.pattern.offsets.push_back(static_cast<std::uint32_t>(out.pattern.blocks.size()));
      out.pattern.context.push_back(st.context_blocks);
    }
    ++recorded;
  }
  cfg.sparse.recorded = std::move(rec);
  return recorded;
}

}  // namespace

nlohmann::json to_json(const simulate_options& o) {
  return {{"trace", o.trace},     {"format", o.format},   {"block_tokens", o.block_tokens},
          {"config_file", o.config_file}, {"config", o.config}, {"set", o.set},
          {"calibration", o.calibration}, {"timing_table", o.timing_table}, {"engine", o.engine}, {"iteration_log", o.iteration_log},
          {"pricing", o.pricing}, {"skip_invalid", o.skip_invalid},
          {"csv", o.csv}, {"force", o.force}, {"requests", o.requests}};
}

simulate_options simulate_options_from_json(const nlohmann::json& j) {
  simulate_options o;
  detail::options_reader in(j, "simulate options");
  in.get("trace", o.trace);
  in.get("format", o.format);
  in.get("block_tokens", o.block_tokens);
  in.get("config_file", o.config_file);
  in.get("config", o.config);
  in.get("set", o.set);
  in.get("calibration", o.calibration);
  in.get("timing_table", o.timing_table);
  in.get("engine", o.engine);
  in.get("iteration_log", o.iteration_log);
  in.get("pricing", o.pricing);
  in.get("skip_invalid", o.skip_invalid);
  in.get("csv", o.csv);
  in.get("force", o.force);
  in.get("requests", o.requests);
  in.finish();
  return o;
}

void validate(simulate_options& o) {
  if (!o.csv.empty()) check_output(o.csv, o.force, "--csv");
  check_request_format(o.format);
  resolve_trace(o.trace, o.format, o.block_tokens);
  nlohmann::json j = config_json(o);
  (void)cluster_config_from_json(j, o.block_tokens, o.set);
  if (!o.pricing.empty()) {
    std::vector<std::string> storage;
    (void)load_price_table(o.pricing, storage);
  }
}

simulate_result run(simulate_options o, const progress_callback& progress) {
  validate(o);
  simulate_result r;
  r.config = config_json(o);
  des::cluster_config cfg = cluster_config_from_json(r.config, o.block_tokens, o.set);
  if (o.iteration_log && !cfg.sched.engine_scheduler()) {
    throw usage_error("--iterations: the iteration log is the engine schedulers' (set scheduler or "
                      "--engine vllm|sglang)");
  }
  cfg.sched.log_iterations = o.iteration_log;
  read_report skipped;
  std::vector<std::string>& warnings = r.warnings;
  // JSONL streams through a temporary kvtb file (memory bounded whatever the trace's length),
  // except with sparse decode, which reads the file's decode-step records as well.
  const loaded_trace loaded =
      load_trace_for(o.trace, o.format, o.block_tokens, o.skip_invalid, skipped, warnings,
                     cfg.sparse.enabled, 1, !cfg.sparse.enabled);
  check_decode_lengths(o, loaded, cfg);
  std::size_t recorded_requests = 0;
  if (cfg.sparse.enabled && skipped.decode_records > 0) {
    recorded_requests = attach_decode_records(o.trace, loaded.view().requests(), cfg);
  }
  des::simulation_hooks hooks;
  hooks.progress = progress;
  hooks.keep_requests = o.requests;
  // The trace's pages are dropped behind the simulation (a mapped kvtb file), and the CSV is
  // written as requests retire, in trace order, through one 1 MiB buffer.
  hooks.release = [&loaded](std::size_t first, std::size_t last) { loaded.release(first, last); };
  std::unique_ptr<output_file> csv;
  std::string rows;
  if (!o.csv.empty()) {
    csv = std::make_unique<output_file>(o.csv, o.force);
    rows = csv_header(cfg.sparse.enabled);
    hooks.on_request = [&](std::uint64_t i, const des::request_outcome& out) {
      append_csv_row(rows, i, out, cfg.sparse.enabled);
      if (rows.size() >= (1u << 20)) {
        csv->write(rows);
        rows.clear();
      }
    };
  }
  des::simulation_result res;
  try {
    res = des::simulate(loaded.view(), cfg, hooks);
  } catch (const std::invalid_argument& e) {
    throw usage_error(e.what());
  }
  if (csv) {
    csv->write(rows);
    csv->commit();
  }
  if (!o.pricing.empty()) {
    std::vector<std::string> storage;
    const auto table = load_price_table(o.pricing, storage);
    const auto& s = res.summary;
    res.summary["cost"] = api_cost_json(
        table,
        {s["token_hits"].get<double>(), s["token_refs"].get<double>() - s["token_hits"].get<double>(),
         s["output_tokens"].get<double>()},
        0.0);
  }
  r.trace = {{"path", o.trace},
             {"format", o.format},
             {"block_tokens", o.block_tokens},
             {"partial_block", cfg.cache_partial_block ? "cache" : "skip"}};
  r.result = std::move(res.summary);
  r.host_link_calibration = cfg.host_link_calibration;
  r.sparse = cfg.sparse.enabled;
  if (r.sparse) r.result["sparse"]["recorded_requests"] = recorded_requests;
  r.requests = std::move(res.requests);
  r.iterations = std::move(res.iterations);
  return r;
}

nlohmann::json to_json(const simulate_result& r) {
  nlohmann::json out = {{"trace", r.trace}, {"config", r.config}, {"result", r.result}};
  if (!r.host_link_calibration.is_null()) out["host_link_calibration"] = r.host_link_calibration;
  return out;
}

std::string csv_header(bool sparse) {
  return std::string(
             "request,instance,rejected,arrival_s,prefill_start_s,first_token_s,done_s,blocks,"
             "hit_blocks,dram_blocks,pool_blocks,inflight_miss_blocks,input_tokens,hit_tokens,"
             "output_tokens,mean_tbt_s") +
         (sparse ? ",recalls,stall_s\n" : "\n");
}

void append_csv_row(std::string& out, std::uint64_t index, const des::request_outcome& o,
                    bool sparse) {
  // Six significant digits, as an ostream's default: the format the CSV always had.
  char buf[64];
  auto num = [&](double v) {
    const int n = std::snprintf(buf, sizeof buf, "%g", v);
    out.append(buf, static_cast<std::size_t>(n));
  };
  auto sep = [&](auto v) {
    if constexpr (std::is_floating_point_v<decltype(v)>) {
      num(v);
    } else {
      out += std::to_string(v);
    }
    out += ',';
  };
  sep(index);
  sep(o.instance);
  sep(static_cast<int>(o.rejected));
  sep(o.arrival);
  sep(o.prefill_start);
  sep(o.first_token);
  sep(o.done);
  sep(o.blocks);
  sep(o.hit_blocks);
  sep(o.dram_blocks);
  sep(o.pool_blocks);
  sep(o.inflight_miss_blocks);
  sep(o.input_tokens);
  sep(o.hit_tokens);
  sep(o.output_tokens);
  num(o.mean_tbt);
  if (sparse) {
    out += ',';
    out += std::to_string(o.recalls);
    out += ',';
    num(o.stall_s);
  }
  out += '\n';
}

std::string to_csv(const simulate_result& r) {
  std::string csv = csv_header(r.sparse);
  for (std::size_t i = 0; i < r.requests.size(); ++i) append_csv_row(csv, i, r.requests[i], r.sparse);
  return csv;
}

std::string iterations_csv(const simulate_result& r) {
  std::ostringstream csv;
  csv.precision(17);
  csv << "instance,iteration,start_s,end_s,request,new_tokens,context_tokens\n";
  for (const auto& x : r.iterations) {
    csv << x.instance << ',' << x.iteration << ',' << x.start << ',' << x.end << ',' << x.request
        << ',' << x.new_tokens << ',' << x.context_tokens << '\n';
  }
  return csv.str();
}

std::string to_text(const simulate_result& r) { return r.result.dump(2) + "\n"; }

}  // namespace kvtk::sim
