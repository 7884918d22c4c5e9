// sim/api/sparse.cpp — `kvtk sparse` (api/sparse.hpp): replays decode-step selections (recorded
// in a kvtk JSONL trace, or generated) against a per-request HBM budget through the residency
// managers of include/kvtk/sparse/, and reports recall traffic, stalls, prefetch use and, for the
// lossy managers, the attention mass dropped. Semantics: docs/sparse.md.
#include "api/sparse.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "api/options_json.hpp"
#include "api/text.hpp"
#include "cli/common.hpp"
#include "des/profiles.hpp"
#include "des/sparse_decode.hpp"
#include "formats/decode_records.hpp"
#include "formats/requests.hpp"
#include "kvtk/move/timing_fit.hpp"
#include "kvtk/sparse/pattern_gen.hpp"
#include "kvtk/sparse/residency.hpp"
#include "move/calibration.hpp"

namespace kvtk::sim {
namespace {

namespace sp = kvtk::sparse;
using cli::usage_error;

// A transfer of `blocks` pages over the host link (nothing when there are none).
double link_seconds(const kvtk::move::timing_model& link, std::uint64_t blocks, double block_bytes) {
  if (blocks == 0) return 0;
  return link.predict(static_cast<double>(blocks), static_cast<double>(blocks) * block_bytes);
}

struct run_options {
  double block_bytes = 0;
  double step_s = 0.025;  // decode compute per step: prefetches hide behind it
  kvtk::move::timing_model link{10e-6, 0, 50e9};
  std::uint32_t sinks = 1, recent = 2;  // the pattern preset's unless given
  sp::prefetch_mode prefetch = sp::prefetch_mode::none;  // per job (job::prefetch)
  double prefetch_accuracy = 1.0;  // fraction of the next step's blocks the predictor names
  std::uint64_t seed = 1;
  std::size_t series_points = 200;
  std::size_t series_stride = 1;  // set per job from the longest stream
  bool layer_ahead = false;       // per job (job::layer_ahead)
  std::uint32_t layers = 61;      // --layers
};

struct job {
  std::string manager, scorer, budget_text;
  sp::hbm_budget budget;
  double drift = -1;  // generated patterns only (< 0: from a trace)
  std::string prefetch_text = "none";
  sp::prefetch_mode prefetch = sp::prefetch_mode::none;
  double accuracy = 1.0;
  bool layer_ahead = false;  // recalls load one layer ahead (timing only; no prefetch)
};

// "none", "layer-ahead", "next-step" or "next-step:ACC" -> (mode, accuracy); layer-ahead is a
// timing mode over prefetch_mode::none.
std::pair<sp::prefetch_mode, double> parse_prefetch(const std::string& text) {
  if (text == "none" || text == "layer-ahead") return {sp::prefetch_mode::none, 1.0};
  if (text.rfind("next-step", 0) != 0 || (text.size() > 9 && text[9] != ':')) {
    throw usage_error("--prefetch: '" + text + "' (none, layer-ahead, next-step, next-step:ACC)");
  }
  double acc = 1.0;
  if (text.size() > 9) {
    try {
      acc = std::stod(text.substr(10));
    } catch (const std::exception&) {
      throw usage_error("--prefetch: '" + text + "': accuracy is not a number");
    }
    if (!(acc >= 0 && acc <= 1)) throw usage_error("--prefetch: accuracy must be in [0, 1]");
  }
  return {sp::prefetch_mode::next_step, acc};
}

// "256" blocks, "16384tok" tokens, "12.5%" of the context.
sp::hbm_budget parse_budget(const std::string& text) {
  std::size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (const std::exception&) {
    throw usage_error("--budget: '" + text + "' is not a number of blocks, NNNtok or NN%");
  }
  const std::string unit = text.substr(pos);
  if (!(v >= 0) || !std::isfinite(v)) throw usage_error("--budget: '" + text + "' must be >= 0");
  if (unit.empty()) {
    if (v != std::floor(v) || v > 4e9) throw usage_error("--budget: '" + text + "' is not a whole block count");
    return sp::hbm_budget::in_blocks(static_cast<std::uint32_t>(v));
  }
  if (unit == "tok") {
    return sp::hbm_budget::in_tokens(v >= 1.8e19 ? ~std::uint64_t{0} : static_cast<std::uint64_t>(v));
  }
  if (unit == "%") {
    if (v > 100) throw usage_error("--budget: '" + text + "' is over 100%");
    return sp::hbm_budget::fraction_of_context(v / 100.0);
  }
  throw usage_error("--budget: '" + text + "': unit must be none (blocks), tok or %");
}

// The prediction a next-step prefetch acts on: the true next selection, with each block replaced,
// with probability 1 - accuracy, by a random block of the context (a deterministic stand-in for
// a predictor that is sometimes wrong).
void predict(const sp::step_selection& next, double accuracy, sp::splitmix64& rng,
             std::vector<std::uint32_t>& out) {
  out.assign(next.blocks.begin(), next.blocks.end());
  if (accuracy >= 1.0 || next.context_blocks == 0) return;
  for (auto& b : out) {
    const double u = static_cast<double>(rng.next() >> 11) * 0x1.0p-53;
    if (u >= accuracy) b = static_cast<std::uint32_t>(rng.next() % next.context_blocks);
  }
}

struct totals {
  sp::residency_counters c;  // summed over requests
  std::uint64_t stalled_steps = 0;
  double stall_s = 0, max_stall_s = 0, recall_link_s = 0, prefetch_link_s = 0;
  double resident_sum = 0;
  std::uint32_t resident_max = 0;
  std::vector<double> series_resident, series_recalls;  // per sampled step, summed over requests
  std::vector<std::uint64_t> series_step;
};


template <class Manager>
void run_stream(const sp::pattern_trace& p, const std::vector<std::uint64_t>& step_numbers,
                const sp::residency_config& rc, const run_options& o, std::size_t request,
                const std::string& request_name, const std::string& job_name, totals& t,
                std::ostringstream* csv) {
  Manager m(rc);
  sp::splitmix64 rng{o.seed ^ (0x9e3779b97f4a7c15ull * (request + 1))};
  std::vector<std::uint32_t> predicted;
  const std::size_t stride = o.series_stride;
  double prefetch_due_s = 0;  // link time of the prefetch issued for this step
  for (std::size_t s = 0; s < p.steps(); ++s) {
    const sp::step_selection sel = p.step(s);
    while (m.context_blocks() < sel.context_blocks) m.append_block();
    const std::uint64_t before_recalls = m.counters().recalls;
    m.step(sel.blocks, sel.weights);
    const std::uint64_t recalls = m.counters().recalls - before_recalls;
    // Critical path: the step's recalls (with layer-ahead only what the layers' compute does not
    // hide), plus whatever part of its prefetch did not fit behind the previous step's compute.
    const double link_s = link_seconds(o.link, recalls, o.block_bytes);
    const double recall_s =
        o.layer_ahead ? des::layer_ahead_stall(link_s, o.link.alpha_s, o.step_s, o.layers) : link_s;
    const double stall = recall_s + std::max(0.0, prefetch_due_s - o.step_s);
    t.recall_link_s += link_s;
    if (stall > 0) {
      ++t.stalled_steps;
      t.stall_s += stall;
      t.max_stall_s = std::max(t.max_stall_s, stall);
    }
    prefetch_due_s = 0;
    if constexpr (requires { m.prefetch(std::span<const std::uint32_t>{}); }) {
    if (o.prefetch != sp::prefetch_mode::none && s + 1 < p.steps()) {
      const sp::step_selection next = p.step(s + 1);
      while (m.context_blocks() < next.context_blocks) m.append_block();
      predict(next, o.prefetch_accuracy, rng, predicted);
      const std::uint64_t before = m.counters().prefetches_issued;
      m.prefetch(predicted);
      prefetch_due_s = link_seconds(o.link, m.counters().prefetches_issued - before, o.block_bytes);
      t.prefetch_link_s += prefetch_due_s;
    }
    }
    const std::uint32_t resident = m.resident_blocks();
    t.resident_sum += resident;
    t.resident_max = std::max(t.resident_max, resident);
    if (s % stride == 0 && s / stride < t.series_step.size()) {
      t.series_resident[s / stride] += resident;
      t.series_recalls[s / stride] += static_cast<double>(recalls);
    }
    if (csv != nullptr) {
      *csv << job_name << ',' << request_name << ','
           << (step_numbers.empty() ? static_cast<std::uint64_t>(s) : step_numbers[s]) << ','
           << sel.context_blocks << ','
           << sel.blocks.size() << ',' << resident << ',' << recalls << ',' << stall << '\n';
    }
  }
  t.c += m.counters();
}

nlohmann::json run_job(const job& j, const std::vector<sp::pattern_trace>& streams,
                       const std::vector<std::vector<std::uint64_t>>& step_numbers,
                       const std::vector<std::string>& names, const run_options& common,
                       std::uint32_t block_tokens, std::ostringstream* csv) {
  totals t;
  run_options o = common;
  // The series samples every stride-th step (record, for traces) of every request.
  std::size_t longest = 1;
  for (const auto& p : streams) longest = std::max(longest, p.steps());
  o.series_stride = std::max<std::size_t>(1, (longest + o.series_points - 1) / o.series_points);
  for (std::size_t s = 0; s < longest; s += o.series_stride) t.series_step.push_back(s);
  t.series_resident.assign(t.series_step.size(), 0);
  t.series_recalls.assign(t.series_step.size(), 0);
  o.prefetch = j.prefetch;
  o.prefetch_accuracy = j.accuracy;
  o.layer_ahead = j.layer_ahead;
  const std::string job_name = j.manager + ":" + j.scorer + ":" + j.budget_text +
                               (j.drift >= 0 ? ":drift=" + std::to_string(j.drift) : "") +
                               (j.manager == "offload" ? ":prefetch=" + j.prefetch_text : "");
  for (std::size_t r = 0; r < streams.size(); ++r) {
    sp::residency_config rc;
    rc.max_blocks = std::max<std::uint32_t>(streams[r].max_context(), 1);
    rc.budget = j.budget;
    rc.block_tokens = block_tokens;
    rc.sinks = o.sinks;
    rc.recent_window = o.recent;
    rc.prefetch = j.manager == "offload" ? o.prefetch : sp::prefetch_mode::none;
    const bool found = sp::all_scorers::visit(j.scorer, [&]<class S>() {
      if (j.manager == "offload") {
        run_stream<sp::offload_recall_manager<S>>(streams[r], step_numbers[r], rc, o, r, names[r],
                                                  job_name, t, csv);
      } else {
        run_stream<sp::lossy_manager<S>>(streams[r], step_numbers[r], rc, o, r, names[r], job_name,
                                          t, csv);
      }
    });
    if (!found) throw usage_error("--scorer: unknown '" + j.scorer + "'");
  }
  const auto& c = t.c;
  const double steps = static_cast<double>(std::max<std::uint64_t>(c.steps, 1));
  nlohmann::json r = {
      {"manager", j.manager},
      {"scorer", j.scorer},
      {"budget", j.budget_text},
      {"prefetch", j.prefetch_text},
      {"requests", streams.size()},
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
    r["recall_bytes"] = static_cast<double>(c.recalls) * o.block_bytes;
    r["prefetches_issued"] = c.prefetches_issued;
    r["prefetch_hits"] = c.prefetch_hits;
    r["wasted_prefetches"] = c.wasted_prefetches;
    r["prefetches_dropped"] = c.prefetches_dropped;
    r["prefetch_hit_ratio"] =
        c.prefetches_issued ? static_cast<double>(c.prefetch_hits) / static_cast<double>(c.prefetches_issued) : 0.0;
    r["prefetch_bytes"] = static_cast<double>(c.prefetches_issued) * o.block_bytes;
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


// Everything run() derives from the options: the job grid, the common run options and the
// pattern configuration.
struct plan {
  std::vector<job> jobs;
  run_options common;
  sp::pattern_config base;
  std::uint32_t page_tokens = 0;
};

std::vector<double> drifts_of(const sparse_options& o, bool from_trace) {
  if (from_trace) {
    if (!o.drift.empty()) throw usage_error("--drift applies to generated patterns, not --trace");
    return {-1};
  }
  std::vector<double> list;
  for (const auto& d : o.drift.empty() ? std::vector<std::string>{"0.02"} : o.drift) {
    double v = -1;
    try {
      v = std::stod(d);
    } catch (const std::exception&) {
    }
    if (!(v >= 0 && v <= 1)) throw usage_error("--drift: '" + d + "' must be in [0, 1]");
    list.push_back(v);
  }
  return list;
}

void check_names(const sparse_options& o) {
  if (o.manager.empty() || o.scorer.empty() || o.budget.empty()) {
    throw usage_error("--manager, --scorer and --budget need at least one value");
  }
  for (const auto& m : o.manager) {
    if (m != "offload" && m != "lossy") throw usage_error("--manager: '" + m + "' (offload, lossy)");
  }
  for (const auto& s : o.scorer) {
    if (s == "quest") {
      throw usage_error("--scorer quest ranks by a query against per-block key bounds; a "
                        "selection trace carries neither (use the header API)");
    }
    if (sp::all_scorers::index_of(s) == sp::all_scorers::npos) {
      std::string known;
      for (auto n : sp::all_scorers::names) {
        if (n != "quest") known += (known.empty() ? "" : ", ") + std::string(n);
      }
      throw usage_error("--scorer: unknown '" + s + "' (" + known + ")");
    }
  }
}

// The link, page bytes, layers and step time shared by every job.
run_options common_of(const sparse_options& o, std::uint32_t page_tokens) {
  run_options c;
  if (!(o.link_gb_per_s > 0) || !(o.link_latency_us >= 0) || !(o.step_ms >= 0)) {
    throw usage_error("--link-gb-per-s must be > 0, --link-latency-us and --step-ms >= 0");
  }
  c.link = {o.link_latency_us * 1e-6, 0, o.link_gb_per_s * 1e9};
  if (!o.calibration_mechanism.empty() && o.calibration.empty()) {
    throw usage_error("--calibration-mechanism needs --calibration");
  }
  const std::uint64_t bpt = cli::bytes_per_token_of(o.model);
  if (o.layers) {
    c.layers = *o.layers;
  } else {
    const auto& presets = des::model_presets();
    const auto it = presets.find(o.model);
    c.layers = it != presets.end() ? it->second.layers : 0;
  }
  if (c.layers == 0 || c.layers > 100000) {
    for (const auto& p : o.prefetch) {
      if (p.find("layer-ahead") != std::string::npos) {
        throw usage_error("--prefetch layer-ahead needs --layers (1..100000) for this model");
      }
    }
    c.layers = 1;
  }
  c.block_bytes = static_cast<double>(bpt) * page_tokens;
  if (!o.calibration.empty()) {
    try {
      const auto cal = move::calibration::load(o.calibration);
      const auto fit = cal.find("dram", "hbm", static_cast<std::uint64_t>(c.block_bytes),
                                o.calibration_mechanism);
      if (!fit) throw std::runtime_error(cal.source + ": no dram->hbm (h2d) fit");
      c.link = {fit->model.alpha_s, fit->model.beta_s, fit->model.bytes_per_s};
    } catch (const std::runtime_error& e) {
      throw usage_error(std::string("--calibration ") + e.what());
    }
  }
  c.step_s = o.step_ms * 1e-3;
  c.seed = o.seed;
  return c;
}

// The generated pattern's configuration; sets p.common.sinks / recent from the preset unless
// given.
void pattern_of(const sparse_options& o, bool from_trace, plan& p) {
  p.base = o.pattern == "quest" ? sp::pattern_config::quest(o.context_blocks, o.top_k ? o.top_k : 32, o.seed)
                                : sp::pattern_config::dsa(o.context_blocks, o.seed);
  if (o.pattern == "dsa" && o.top_k != 0) throw usage_error("--top-k applies to --pattern quest");
  // Pages per step: DSA's top-2048 tokens in pages, or Quest's K; sinks and the recent window
  // are part of them, heavy hitters fill the rest (unless --heavy says otherwise).
  const std::uint32_t per_step =
      o.pattern == "quest" ? (o.top_k ? o.top_k : 32) : std::max(1u, 2048 / p.page_tokens);
  p.common.sinks = o.sinks.value_or(p.base.sinks);
  p.common.recent = o.recent.value_or(p.base.recent_window);
  p.base.sinks = p.common.sinks;
  p.base.recent_window = p.common.recent;
  const std::uint32_t guarded = p.common.sinks + p.common.recent;
  p.base.heavy_blocks = o.heavy != 0 ? o.heavy : (per_step > guarded ? per_step - guarded : 0);
  p.base.block_tokens = p.page_tokens;
  p.base.grow = o.grow;
  p.base.zipf_exponent = o.zipf;
  if (o.persistence) p.base.persistence = *o.persistence;
  const double selections = static_cast<double>(o.steps) * o.requests *
                            (static_cast<double>(p.base.heavy_blocks) + guarded);
  if (!from_trace && selections * 8.0 > 4.0 * (1ull << 30)) {
    throw usage_error("--steps x --requests x pages per step = " +
                      std::to_string(static_cast<unsigned long long>(selections)) +
                      " selections: more than the 4 GiB of patterns kvtk sparse holds");
  }
}

plan make_plan(const sparse_options& o) {
  plan p;
  const bool from_trace = !o.trace.empty();
  if (o.pattern != "dsa" && o.pattern != "quest") {
    throw usage_error("--pattern: '" + o.pattern + "' (dsa, quest)");
  }
  p.page_tokens = o.page_tokens;
  if (from_trace) {
    // Decode records count pages of the trace's block size (its kvtk header's).
    const std::uint32_t header = default_block_tokens(o.trace, trace_format::kvtk);
    if (o.page_tokens != 0 && o.page_tokens != header) {
      throw usage_error("--page-tokens " + std::to_string(o.page_tokens) + ": the trace's " +
                        "pages are " + std::to_string(header) + " tokens (its header)");
    }
    p.page_tokens = header;
  }
  if (p.page_tokens == 0) p.page_tokens = o.pattern == "quest" ? 16 : 64;
  if (o.context_blocks == 0 || o.context_blocks > (1u << 24)) {
    throw usage_error("--context-blocks: must be in [1, 2^24]");
  }
  if (o.steps == 0 || o.steps > 10000000) throw usage_error("--steps: must be in [1, 10^7]");
  if (o.requests == 0 || o.requests > 100000) throw usage_error("--requests: must be in [1, 10^5]");
  if (!(o.zipf >= 0)) throw usage_error("--zipf: must be >= 0");
  if (o.persistence && !(*o.persistence >= 0 && *o.persistence <= 1)) {
    throw usage_error("--persistence: must be in [0, 1]");
  }
  p.common = common_of(o, p.page_tokens);
  if (o.prefetch.empty()) throw usage_error("--prefetch: empty list");
  for (const auto& pf : o.prefetch) parse_prefetch(pf);
  const std::vector<double> drift_list = drifts_of(o, from_trace);
  if (drift_list.empty()) throw usage_error("--drift: empty list");
  check_names(o);
  // Drift outermost: the jobs of one drift share their generated patterns.
  for (double d : drift_list) {
    for (const auto& m : o.manager) {
      for (const auto& s : o.scorer) {
        for (const auto& b : o.budget) {
          // Prefetch applies to the offload manager only; a lossy job runs once.
          for (const auto& pf : m == "offload" ? o.prefetch : std::vector<std::string>{"none"}) {
            const auto [mode, acc] = parse_prefetch(pf);
            p.jobs.push_back({m, s, b, parse_budget(b), d, pf, mode, acc, pf == "layer-ahead"});
          }
        }
      }
    }
  }
  pattern_of(o, from_trace, p);
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

void validate(const sparse_options& o) { (void)make_plan(o); }

sparse_result run(const sparse_options& o) {
  const plan p = make_plan(o);
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
      {"page_bytes", p.common.block_bytes},
      {"link",
       {{"alpha_s", p.common.link.alpha_s}, {"beta_s", p.common.link.beta_s},
        {"bytes_per_s", p.common.link.bytes_per_s}}},
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
