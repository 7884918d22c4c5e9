// sim/api/sparse.cpp — `kvtk sparse` (api/sparse.hpp): replays decode-step selections (recorded
// in a kvtk JSONL trace, or generated) against a per-request HBM budget through the residency
// managers of include/kvtk/sparse/, and reports recall traffic, stalls, prefetch use and, for the
// lossy managers, the attention mass dropped. Each step is kvtk::sparse::decode_step and
// decode_clock (kvtk/sparse/decode_step.hpp), the component the simulator's decode steps use.
// Semantics: docs/sparse.md.
#include "api/sparse.hpp"

#include <algorithm>
#include <sstream>

#include "api/options_json.hpp"
#include "api/sparse_plan.hpp"
#include "api/text.hpp"
#include "api/trace_options.hpp"
#include "formats/decode_records.hpp"
#include "kvtk/sparse/decode_step.hpp"
#include "kvtk/sparse/pattern_gen.hpp"
#include "kvtk/sparse/residency.hpp"

namespace kvtk::sim {
namespace {

namespace sp = kvtk::sparse;
using sparse_detail::job;
using sparse_detail::plan;
using sparse_detail::run_options;

struct totals {
  sp::residency_counters c;  // summed over requests
  std::uint64_t stalled_steps = 0;
  double stall_s = 0, max_stall_s = 0, recall_link_s = 0, prefetch_link_s = 0;
  double resident_sum = 0;
  std::uint32_t resident_max = 0;
  std::vector<double> series_resident, series_recalls;  // per sampled step, summed over requests
  std::vector<std::uint64_t> series_step;
};

// What one job's streams share while they run.
struct job_run {
  const job& j;
  const run_options& common;
  sp::decode_link link;   // common.link with the job's layer_ahead
  std::size_t stride = 1;  // the series samples every stride-th step
  std::string name;        // the step CSV's job column
  std::ostringstream* csv = nullptr;
  totals t;
};

// One request's steps on a fresh manager: decode_step for the pages, decode_clock for the time.
template <class Manager>
void run_stream(const sp::pattern_trace& p, const std::vector<std::uint64_t>& step_numbers,
                const sp::residency_config& rc, std::size_t request,
                const std::string& request_name, job_run& run) {
  Manager m(rc);
  totals& t = run.t;
  sp::splitmix64 rng{run.common.seed ^ (0x9e3779b97f4a7c15ull * (request + 1))};
  std::vector<std::uint32_t> predicted;
  sp::decode_clock clock;
  const bool prefetch = rc.prefetch != sp::prefetch_mode::none;
  for (std::size_t s = 0; s < p.steps(); ++s) {
    const sp::step_selection sel = p.step(s);
    sp::next_selection next;
    const bool has_next = prefetch && s + 1 < p.steps();
    if (has_next) next = {p.step(s + 1), run.j.accuracy};
    const sp::decode_pages pages = sp::decode_step(m, sel, has_next ? &next : nullptr, rng, predicted);
    const auto time = clock.step(run.link, pages.recalls, pages.prefetched, run.common.step_s);
    t.recall_link_s += time.recall_link_s;
    t.prefetch_link_s += time.prefetch_link_s;
    if (time.stall_s > 0) {
      ++t.stalled_steps;
      t.stall_s += time.stall_s;
      t.max_stall_s = std::max(t.max_stall_s, time.stall_s);
    }
    const std::uint32_t resident = m.resident_blocks();
    t.resident_sum += resident;
    t.resident_max = std::max(t.resident_max, resident);
    if (s % run.stride == 0 && s / run.stride < t.series_step.size()) {
      t.series_resident[s / run.stride] += resident;
      t.series_recalls[s / run.stride] += static_cast<double>(pages.recalls);
    }
    if (run.csv != nullptr) {
      *run.csv << run.name << ',' << request_name << ','
               << (step_numbers.empty() ? static_cast<std::uint64_t>(s) : step_numbers[s]) << ','
               << sel.context_blocks << ',' << sel.blocks.size() << ',' << resident << ','
               << pages.recalls << ',' << time.stall_s << '\n';
    }
  }
  t.c += m.counters();
}

// The job's result row from its totals.
nlohmann::json job_row(const job_run& run, std::size_t requests) {
  const job& j = run.j;
  const totals& t = run.t;
  const auto& c = t.c;
  const double steps = static_cast<double>(std::max<std::uint64_t>(c.steps, 1));
  const double page_bytes = run.link.page_bytes;
  nlohmann::json r = {
      {"manager", j.manager},
      {"scorer", j.scorer},
      {"budget", j.budget_text},
      {"prefetch", j.prefetch_text},
      {"requests", requests},
      {"steps", c.steps},
      {"selections", c.selections},
      {"hits", c.hits},
      {"evictions", c.evictions},
      {"resident_blocks_mean", t.resident_sum / steps},
      {"resident_blocks_max", t.resident_max},
      {"over_budget_steps", c.over_budget_steps},
      {"budget_raised_steps", c.budget_raised_steps},
      {"hbm_blocks_over_time",
       {{"step", t.series_step}, {"resident_blocks", t.series_resident}, {"recalls", t.series_recalls}}}};
  if (j.drift >= 0) r["drift"] = j.drift;
  if (j.manager == "offload") {
    r["recalls"] = c.recalls;
    r["recalls_per_step"] = static_cast<double>(c.recalls) / steps;
    r["recall_bytes"] = static_cast<double>(c.recalls) * page_bytes;
    r["prefetches_issued"] = c.prefetches_issued;
    r["prefetch_hits"] = c.prefetch_hits;
    r["wasted_prefetches"] = c.wasted_prefetches;
    r["prefetches_dropped"] = c.prefetches_dropped;
    r["prefetch_hit_ratio"] =
        c.prefetches_issued ? static_cast<double>(c.prefetch_hits) / static_cast<double>(c.prefetches_issued) : 0.0;
    r["prefetch_bytes"] = static_cast<double>(c.prefetches_issued) * page_bytes;
    r["stalled_steps"] = t.stalled_steps;
    r["stall_s"] = t.stall_s;
    r["stall_s_per_step"] = t.stall_s / steps;
    r["stall_s_max"] = t.max_stall_s;
    r["recall_link_s"] = t.recall_link_s;
    r["prefetch_link_s"] = t.prefetch_link_s;
  } else {
    r["dropped_selections"] = c.dropped_selections;
    r["total_mass"] = c.total_mass;
    r["dropped_mass"] = c.dropped_mass;
    r["dropped_mass_fraction"] = c.total_mass > 0 ? c.dropped_mass / c.total_mass : 0.0;
  }
  return r;
}


nlohmann::json run_job(const job& j, const std::vector<sp::pattern_trace>& streams,
                       const std::vector<std::vector<std::uint64_t>>& step_numbers,
                       const std::vector<std::string>& names, const run_options& common,
                       std::uint32_t block_tokens, std::ostringstream* csv) {
  job_run run{j, common, common.link, 1, {}, nullptr, {}};
  run.link.layer_ahead = j.layer_ahead;
  run.csv = csv;
  run.name = j.manager + ":" + j.scorer + ":" + j.budget_text +
             (j.drift >= 0 ? ":drift=" + std::to_string(j.drift) : "") +
             (j.manager == "offload" ? ":prefetch=" + j.prefetch_text : "");
  std::size_t longest = 1;
  for (const auto& p : streams) longest = std::max(longest, p.steps());
  run.stride = std::max<std::size_t>(1, (longest + common.series_points - 1) / common.series_points);
  for (std::size_t s = 0; s < longest; s += run.stride) run.t.series_step.push_back(s);
  run.t.series_resident.assign(run.t.series_step.size(), 0);
  run.t.series_recalls.assign(run.t.series_step.size(), 0);
  for (std::size_t r = 0; r < streams.size(); ++r) {
    sp::residency_config rc;
    rc.max_blocks = std::max<std::uint32_t>(streams[r].max_context(), 1);
    rc.budget = j.budget;
    rc.block_tokens = block_tokens;
    rc.sinks = common.sinks;
    rc.recent_window = common.recent;
    rc.prefetch = j.manager == "offload" ? j.prefetch : sp::prefetch_mode::none;
    const bool found = sp::all_scorers::visit(j.scorer, [&]<class S>() {
      if (j.manager == "offload") {
        run_stream<sp::offload_recall_manager<S>>(streams[r], step_numbers[r], rc, r, names[r], run);
      } else {
        run_stream<sp::lossy_manager<S>>(streams[r], step_numbers[r], rc, r, names[r], run);
      }
    });
    if (!found) throw usage_error("--scorer: unknown '" + j.scorer + "'");
  }
  return job_row(run, streams.size());
}

// Decode records -> one pattern per request.
sp::pattern_trace to_pattern(const decode_request& req) {
  sp::pattern_trace p;
  for (const auto& s : req.steps) {
    p.blocks.insert(p.blocks.end(), s.selected.begin(), s.selected.end());
    p.weights.insert(p.weights.end(), s.weights.begin(), s.weights.end());
    p.offsets.push_back(static_cast<std::uint32_t>(p.blocks.size()));
    p.context.push_back(s.context_blocks);
  }
  return p;
}


struct streams {
  std::vector<sp::pattern_trace> patterns;
  std::vector<std::vector<std::uint64_t>> step_numbers;  // recorded; empty: step = index
  std::vector<std::string> names;
};

streams recorded_streams(const std::string& trace) {
  streams s;
  for (const auto& req : load_decode_records(trace)) {  // trace_error: exit 1 via main
    s.patterns.push_back(to_pattern(req));
    s.names.push_back(req.id);
    std::vector<std::uint64_t> numbers;
    for (const auto& st : req.steps) numbers.push_back(st.step);
    s.step_numbers.push_back(std::move(numbers));
  }
  return s;
}

streams generated_streams(const sparse_options& o, const sp::pattern_config& base, double drift) {
  streams s;
  for (std::uint32_t r = 0; r < o.requests; ++r) {
    sp::pattern_config pc = base;
    pc.drift = drift;
    pc.seed = o.seed + r;
    s.patterns.push_back(sp::generate_pattern(pc, o.steps));
    s.names.push_back(std::to_string(r));
    s.step_numbers.emplace_back();
  }
  return s;
}

}  // namespace

nlohmann::json to_json(const sparse_options& o) {
  auto opt_u = [](const std::optional<std::uint32_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
  return {{"trace", o.trace},
          {"pattern", o.pattern},
          {"context_blocks", o.context_blocks},
          {"steps", o.steps},
          {"requests", o.requests},
          {"grow", o.grow},
          {"page_tokens", o.page_tokens},
          {"top_k", o.top_k},
          {"heavy", o.heavy},
          {"persistence", o.persistence ? nlohmann::json(*o.persistence) : nlohmann::json()},
          {"drift", o.drift},
          {"zipf", o.zipf},
          {"seed", o.seed},
          {"manager", o.manager},
          {"scorer", o.scorer},
          {"budget", o.budget},
          {"sinks", opt_u(o.sinks)},
          {"recent", opt_u(o.recent)},
          {"prefetch", o.prefetch},
          {"layers", opt_u(o.layers)},
          {"model", o.model},
          {"link_gb_per_s", o.link_gb_per_s},
          {"link_latency_us", o.link_latency_us},
          {"calibration", o.calibration},
          {"calibration_mechanism", o.calibration_mechanism},
          {"step_ms", o.step_ms},
          {"step_rows", o.step_rows}};
}

sparse_options sparse_options_from_json(const nlohmann::json& j) {
  sparse_options o;
  detail::options_reader in(j, "sparse options");
  in.get("trace", o.trace);
  in.get("pattern", o.pattern);
  in.get("context_blocks", o.context_blocks);
  in.get("steps", o.steps);
  in.get("requests", o.requests);
  in.get("grow", o.grow);
  in.get("page_tokens", o.page_tokens);
  in.get("top_k", o.top_k);
  in.get("heavy", o.heavy);
  in.get("persistence", o.persistence);
  in.get("drift", o.drift);
  in.get("zipf", o.zipf);
  in.get("seed", o.seed);
  in.get("manager", o.manager);
  in.get("scorer", o.scorer);
  in.get("budget", o.budget);
  in.get("sinks", o.sinks);
  in.get("recent", o.recent);
  in.get("prefetch", o.prefetch);
  in.get("layers", o.layers);
  in.get("model", o.model);
  in.get("link_gb_per_s", o.link_gb_per_s);
  in.get("link_latency_us", o.link_latency_us);
  in.get("calibration", o.calibration);
  in.get("calibration_mechanism", o.calibration_mechanism);
  in.get("step_ms", o.step_ms);
  in.get("step_rows", o.step_rows);
  in.finish();
  return o;
}

void validate(const sparse_options& o) { (void)sparse_detail::make_plan(o); }

sparse_result run(const sparse_options& o) {
  const plan p = sparse_detail::make_plan(o);
  const bool from_trace = !o.trace.empty();
  const streams recorded = from_trace ? recorded_streams(o.trace) : streams{};
  nlohmann::json results = nlohmann::json::array();
  std::ostringstream csv;
  if (o.step_rows) csv << "job,request,step,context_blocks,selected,resident,recalls,stall_s\n";
  try {
    streams generated;
    double generated_drift = -2;
    for (const auto& j : p.jobs) {
      if (!from_trace && j.drift != generated_drift) {  // the jobs of one drift share patterns
        generated = generated_streams(o, p.base, j.drift);
        generated_drift = j.drift;
      }
      const streams& s = from_trace ? recorded : generated;
      results.push_back(run_job(j, s.patterns, s.step_numbers, s.names, p.common, p.page_tokens,
                                o.step_rows ? &csv : nullptr));
    }
  } catch (const std::invalid_argument& e) {
    throw usage_error(e.what());
  }
  sparse_result r;
  r.summary = {
      {"input", from_trace ? nlohmann::json{{"trace", o.trace}, {"requests", recorded.patterns.size()}}
                           : nlohmann::json{{"pattern", o.pattern},
                                            {"context_blocks", o.context_blocks},
                                            {"steps", o.steps},
                                            {"requests", o.requests},
                                            {"grow", p.base.grow},
                                            {"heavy_blocks", p.base.heavy_blocks},
                                            {"persistence", p.base.persistence},
                                            {"zipf", o.zipf},
                                            {"seed", o.seed}}},
      {"page_tokens", p.page_tokens},
      {"page_bytes", p.common.link.page_bytes},
      {"link",
       {{"alpha_s", p.common.link.link.alpha_s}, {"beta_s", p.common.link.link.beta_s},
        {"bytes_per_s", p.common.link.link.bytes_per_s}}},
      {"step_s", p.common.step_s},
      {"sinks", p.common.sinks},
      {"recent", p.common.recent},
      {"results", results}};
  if (o.step_rows) r.step_csv = csv.str();
  return r;
}

nlohmann::json to_json(const sparse_result& r) { return r.summary; }

std::string to_text(const sparse_result& r) {
  using detail::format;
  std::string s = format("%-8s %-14s %-10s %6s %-16s %9s %10s %10s %9s %11s %9s %10s\n", "manager",
                         "scorer", "budget", "drift", "prefetch", "steps", "recalls", "per step",
                         "stalled", "stall s", "pf hit", "dropped");
  for (const auto& row : r.summary["results"]) {
    const bool off = row["manager"] == "offload";
    auto cut = [](const std::string& t, std::size_t n) { return t.substr(0, n); };
    s += format("%-8s %-14s %-10s %6s %-16s %9llu %10s %10s %9s %11s %9s %10s\n",
                row["manager"].get<std::string>().c_str(), row["scorer"].get<std::string>().c_str(),
                row["budget"].get<std::string>().c_str(),
                row.contains("drift") ? cut(std::to_string(row["drift"].get<double>()), 5).c_str() : "-",
                off ? row["prefetch"].get<std::string>().c_str() : "-",
                static_cast<unsigned long long>(row["steps"].get<std::uint64_t>()),
                off ? std::to_string(row["recalls"].get<std::uint64_t>()).c_str() : "-",
                off ? cut(std::to_string(row["recalls_per_step"].get<double>()), 7).c_str() : "-",
                off ? std::to_string(row["stalled_steps"].get<std::uint64_t>()).c_str() : "-",
                off ? cut(std::to_string(row["stall_s"].get<double>()), 9).c_str() : "-",
                off ? cut(std::to_string(row["prefetch_hit_ratio"].get<double>()), 5).c_str() : "-",
                off ? "-" : cut(std::to_string(row["dropped_mass_fraction"].get<double>()), 6).c_str());
  }
  s += "dropped: the fraction of selected attention mass that fell on dropped pages (lossy)\n";
  return s;
}

}  // namespace kvtk::sim
