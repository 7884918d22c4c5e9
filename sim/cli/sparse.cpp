// sim/cli/sparse.cpp — `kvtk sparse`: replays decode-step selections (recorded in a kvtk JSONL
// trace, or generated) against a per-request HBM budget through the residency managers of
// include/kvtk/sparse/, and reports recall traffic, stalls, prefetch use and, for the lossy
// managers, the attention mass dropped. Semantics: docs/sparse.md.
#include "cli/sparse.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/common.hpp"
#include "formats/decode_records.hpp"
#include "des/profiles.hpp"
#include "des/sparse_decode.hpp"
#include "formats/requests.hpp"
#include "kvtk/sparse/pattern_gen.hpp"
#include "kvtk/sparse/residency.hpp"
#include "move/calibration.hpp"

namespace kvtk::sim {
namespace {

namespace sp = kvtk::sparse;
using cli::usage_error;

struct link_model {
  double alpha_s = 10e-6, beta_s = 0, bytes_per_s = 50e9;
  [[nodiscard]] double seconds(std::uint64_t blocks, double block_bytes) const noexcept {
    if (blocks == 0) return 0;
    return alpha_s + static_cast<double>(blocks) * beta_s +
           (bytes_per_s > 0 ? static_cast<double>(blocks) * block_bytes / bytes_per_s : 0.0);
  }
};

struct run_options {
  double block_bytes = 0;
  double step_s = 0.025;  // decode compute per step: prefetches hide behind it
  link_model link;
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

void add_counters(sp::residency_counters& a, const sp::residency_counters& b) {
  a.steps += b.steps;
  a.selections += b.selections;
  a.invalid_selections += b.invalid_selections;
  a.hits += b.hits;
  a.recalls += b.recalls;
  a.prefetches_issued += b.prefetches_issued;
  a.prefetch_hits += b.prefetch_hits;
  a.wasted_prefetches += b.wasted_prefetches;
  a.prefetches_dropped += b.prefetches_dropped;
  a.evictions += b.evictions;
  a.dropped_selections += b.dropped_selections;
  a.over_budget_steps += b.over_budget_steps;
  a.budget_raised_steps += b.budget_raised_steps;
  a.total_mass += b.total_mass;
  a.dropped_mass += b.dropped_mass;
}

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
    const double link_s = o.link.seconds(recalls, o.block_bytes);
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
      prefetch_due_s = o.link.seconds(m.counters().prefetches_issued - before, o.block_bytes);
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
  add_counters(t.c, m.counters());
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

}  // namespace

int run_sparse(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  po::options_description opts(
      "kvtk sparse: replay sparse-attention block selections of decode steps against a\n"
      "per-request HBM budget. offload = lossless (the full KV in host memory, selected blocks\n"
      "recalled on the critical path unless prefetched); lossy = evicted blocks are dropped for\n"
      "good. Input: --trace F (kvtk JSONL decode records, docs/sparse.md) or a generated pattern.\n"
      "Lists (comma-separated) of --manager, --scorer, --budget and --drift run as a grid.\nOptions");
  std::string trace, pattern, managers, scorers, budgets, drifts, model, prefetch, json_out, csv_out;
  std::string cal_file, cal_mech;
  std::uint32_t context = 0, steps = 0, page_tokens = 0, top_k = 0, requests = 1, heavy = 0;
  double persistence = -1, zipf = 1.0, link_gbps = 50, link_latency_us = 10, step_ms = 25;
  std::uint64_t seed = 1;
  run_options o;
  opts.add_options()("help,h", "show this help")(
      "trace", po::value(&trace), "kvtk JSONL with decode-step records (instead of a pattern)")(
      "pattern", po::value(&pattern)->default_value("dsa"),
      "generated selections: dsa (top-2048 tokens in 64-token pages) | quest (top-K pages)")(
      "context-blocks", po::value(&context)->default_value(2048), "pattern: context at step 0, in pages")(
      "steps", po::value(&steps)->default_value(2000), "pattern: decode steps per request")(
      "requests", po::value(&requests)->default_value(1), "pattern: independent requests (seeds)")(
      "grow", "pattern: the context grows by one page every page-tokens steps")(
      "page-tokens", po::value(&page_tokens)->default_value(0), "tokens per page (0: dsa 64, quest 16)")(
      "top-k", po::value(&top_k)->default_value(0), "quest: pages per step (default 32)")(
      "heavy", po::value(&heavy)->default_value(0), "pattern: heavy-hitter pages per step (0: the preset's)")(
      "persistence", po::value(&persistence)->default_value(-1),
      "pattern: fraction of heavy hitters kept step to step (default the preset's 0.9)")(
      "drift", po::value(&drifts)->default_value("0.02"), "pattern: drift rates in [0,1] (a list)")(
      "zipf", po::value(&zipf)->default_value(1.0), "pattern: Zipf exponent of heavy-hitter importance")(
      "seed", po::value(&seed)->default_value(1), "pattern and predictor seed")(
      "manager", po::value(&managers)->default_value("offload"), "offload | lossy (a list)")(
      "scorer", po::value(&scorers)->default_value("selection-lru"),
      "victim order (a list): selection-lru, streaming-llm, h2o, tova, snapkv, infllm-lru-s")(
      "budget", po::value(&budgets)->default_value("256"),
      "HBM budget per request (a list): pages (256), tokens (16384tok) or % of the context")(
      "sinks", po::value(&o.sinks), "protected sink pages, always selected (default 1)")(
      "recent", po::value(&o.recent),
      "protected recent pages, always selected (default: dsa 2, quest 1)")(
      "prefetch", po::value(&prefetch)->default_value("none"),
      "offload (a list): none | layer-ahead (each layer's recalls load during the previous "
      "layer: --layers shares) | next-step (the next step's selection) | next-step:ACC (a "
      "predictor right for a fraction ACC of the blocks)")(
      "layers", po::value(&o.layers),
      "model layers for layer-ahead (default: the --model preset's, deepseek-v3 61)")(
      "model", po::value(&model)->default_value("deepseek-v3"),
      "KV bytes per token for page bytes: a preset or a .json model file")(
      "link-gb-per-s", po::value(&link_gbps)->default_value(50), "host -> HBM link bandwidth")(
      "link-latency-us", po::value(&link_latency_us)->default_value(10), "fixed cost per transfer")(
      "calibration", po::value(&cal_file), "link from a calibration JSON's dram->hbm (h2d) fit")(
      "calibration-mechanism", po::value(&cal_mech), "the mechanism whose fit to use")(
      "step-ms", po::value(&step_ms)->default_value(25),
      "decode compute per step: a prefetch longer than this stalls the excess")(
      "json", po::value(&json_out), "write JSON results to a file, or - for stdout")(
      "csv", po::value(&csv_out), "write one row per request and step to a file, or -");
  po::variables_map vm;
  std::vector<job> jobs;
  std::vector<sp::pattern_trace> fixed_streams;
  std::vector<std::vector<std::uint64_t>> fixed_steps;  // recorded step numbers
  std::vector<std::string> names;
  sp::pattern_config base;
  std::vector<double> drift_list;
  if (const int rc = cli::parse_command("sparse", opts, args, vm, [&] {
        const bool from_trace = vm.count("trace") != 0;
        if (pattern != "dsa" && pattern != "quest") {
          throw usage_error("--pattern: '" + pattern + "' (dsa, quest)");
        }
        if (from_trace) {
          // Decode records count pages of the trace's block size (its kvtk header's).
          const std::uint32_t header = default_block_tokens(trace, trace_format::kvtk);
          if (page_tokens != 0 && page_tokens != header) {
            throw usage_error("--page-tokens " + std::to_string(page_tokens) + ": the trace's " +
                              "pages are " + std::to_string(header) + " tokens (its header)");
          }
          page_tokens = header;
        }
        if (page_tokens == 0) page_tokens = pattern == "quest" ? 16 : 64;
        if (context == 0 || context > (1u << 24)) throw usage_error("--context-blocks: must be in [1, 2^24]");
        if (steps == 0 || steps > 10000000) throw usage_error("--steps: must be in [1, 10^7]");
        if (requests == 0 || requests > 100000) throw usage_error("--requests: must be in [1, 10^5]");
        if (!(zipf >= 0)) throw usage_error("--zipf: must be >= 0");
        if (persistence != -1 && !(persistence >= 0 && persistence <= 1)) {
          throw usage_error("--persistence: must be in [0, 1]");
        }
        if (!(link_gbps > 0) || !(link_latency_us >= 0) || !(step_ms >= 0)) {
          throw usage_error("--link-gb-per-s must be > 0, --link-latency-us and --step-ms >= 0");
        }
        o.link = {link_latency_us * 1e-6, 0, link_gbps * 1e9};
        if (vm.count("calibration-mechanism") && !vm.count("calibration")) {
          throw usage_error("--calibration-mechanism needs --calibration");
        }
        const std::uint64_t bpt = cli::bytes_per_token_of(model);
        if (!vm.count("layers")) {
          const auto& presets = des::model_presets();
          const auto it = presets.find(model);
          o.layers = it != presets.end() ? it->second.layers : 0;
        }
        if (o.layers == 0 || o.layers > 100000) {
          if (prefetch.find("layer-ahead") != std::string::npos) {
            throw usage_error("--prefetch layer-ahead needs --layers (1..100000) for this model");
          }
          o.layers = 1;
        }
        o.block_bytes = static_cast<double>(bpt) * page_tokens;
        if (vm.count("calibration")) {
          try {
            const auto cal = move::calibration::load(cal_file);
            const auto fit = cal.find("dram", "hbm", static_cast<std::uint64_t>(o.block_bytes), cal_mech);
            if (!fit) throw std::runtime_error(cal.source + ": no dram->hbm (h2d) fit");
            o.link = {fit->model.alpha_s, fit->model.beta_s, fit->model.bytes_per_s};
          } catch (const std::runtime_error& e) {
            throw usage_error(std::string("--calibration ") + e.what());
          }
        }
        o.step_s = step_ms * 1e-3;
        o.seed = seed;
        std::vector<std::string> prefetch_list = cli::split_list(prefetch, "--prefetch");
        if (prefetch_list.empty()) throw usage_error("--prefetch: empty list");
        for (const auto& p : prefetch_list) parse_prefetch(p);
        for (const auto& d : cli::split_list(drifts, "--drift")) {
          double v = -1;
          try {
            v = std::stod(d);
          } catch (const std::exception&) {
          }
          if (!(v >= 0 && v <= 1)) throw usage_error("--drift: '" + d + "' must be in [0, 1]");
          drift_list.push_back(v);
        }
        if (from_trace) {
          if (!vm["drift"].defaulted()) throw usage_error("--drift applies to generated patterns, not --trace");
          drift_list = {-1};
        }
        if (drift_list.empty()) throw usage_error("--drift: empty list");
        const auto mgrs = cli::split_list(managers, "--manager"), scs = cli::split_list(scorers, "--scorer"),
                   bus = cli::split_list(budgets, "--budget");
        if (mgrs.empty() || scs.empty() || bus.empty()) {
          throw usage_error("--manager, --scorer and --budget need at least one value");
        }
        for (const auto& m : mgrs) {
          if (m != "offload" && m != "lossy") throw usage_error("--manager: '" + m + "' (offload, lossy)");
        }
        for (const auto& s : scs) {
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
        // Drift outermost: the jobs of one drift share their generated patterns.
        for (double d : drift_list) {
          for (const auto& m : mgrs) {
            for (const auto& s : scs) {
              for (const auto& b : bus) {
                // Prefetch applies to the offload manager only; a lossy job runs once.
                for (const auto& p : m == "offload" ? prefetch_list
                                                    : std::vector<std::string>{"none"}) {
                  const auto [mode, acc] = parse_prefetch(p);
                  jobs.push_back({m, s, b, parse_budget(b), d, p, mode, acc, p == "layer-ahead"});
                }
              }
            }
          }
        }
        base = pattern == "quest" ? sp::pattern_config::quest(context, top_k ? top_k : 32, seed)
                                  : sp::pattern_config::dsa(context, seed);
        if (pattern == "dsa" && top_k != 0) throw usage_error("--top-k applies to --pattern quest");
        // Pages per step: DSA's top-2048 tokens in pages, or Quest's K; sinks and the recent
        // window are part of them, heavy hitters fill the rest (unless --heavy says otherwise).
        const std::uint32_t per_step = pattern == "quest" ? (top_k ? top_k : 32)
                                                          : std::max(1u, 2048 / page_tokens);
        if (!vm.count("sinks")) o.sinks = base.sinks;
        if (!vm.count("recent")) o.recent = base.recent_window;
        base.sinks = o.sinks;
        base.recent_window = o.recent;
        const std::uint32_t guarded = o.sinks + o.recent;
        base.heavy_blocks = heavy != 0 ? heavy : (per_step > guarded ? per_step - guarded : 0);
        base.block_tokens = page_tokens;
        base.grow = vm.count("grow") != 0;
        base.zipf_exponent = zipf;
        if (persistence != -1) base.persistence = persistence;
        const double selections = static_cast<double>(steps) * requests *
                                  (static_cast<double>(base.heavy_blocks) + guarded);
        if (!from_trace && selections * 8.0 > 4.0 * (1ull << 30)) {
          throw usage_error("--steps x --requests x pages per step = " +
                            std::to_string(static_cast<unsigned long long>(selections)) +
                            " selections: more than the 4 GiB of patterns kvtk sparse holds");
        }
      });
      rc >= 0) {
    return rc;
  }
  const bool from_trace = vm.count("trace") != 0;
  if (from_trace) {
    for (const auto& req : load_decode_records(trace)) {  // trace_error: exit 1 via main
      fixed_streams.push_back(to_pattern(req));
      names.push_back(req.id);
      std::vector<std::uint64_t> numbers;
      for (const auto& st : req.steps) numbers.push_back(st.step);
      fixed_steps.push_back(std::move(numbers));
    }
  }
  nlohmann::json results = nlohmann::json::array();
  std::ostringstream csv;
  if (vm.count("csv")) csv << "job,request,step,context_blocks,selected,resident,recalls,stall_s\n";
  try {
    std::vector<sp::pattern_trace> generated;
    std::vector<std::vector<std::uint64_t>> generated_steps;  // empty: step = index
    double generated_drift = -2;
    for (const auto& j : jobs) {
      const std::vector<sp::pattern_trace>* streams = &fixed_streams;
      const std::vector<std::vector<std::uint64_t>>* numbers = &fixed_steps;
      if (!from_trace) {
        if (j.drift != generated_drift) {  // the jobs of one drift share their patterns
          generated.clear();
          generated_steps.clear();
          names.clear();
          for (std::uint32_t r = 0; r < requests; ++r) {
            sp::pattern_config pc = base;
            pc.drift = j.drift;
            pc.seed = seed + r;
            generated.push_back(sp::generate_pattern(pc, steps));
            names.push_back(std::to_string(r));
            generated_steps.emplace_back();
          }
          generated_drift = j.drift;
        }
        streams = &generated;
        numbers = &generated_steps;
      }
      results.push_back(
          run_job(j, *streams, *numbers, names, o, page_tokens, vm.count("csv") ? &csv : nullptr));
    }
  } catch (const std::invalid_argument& e) {
    std::cerr << "kvtk sparse: " << e.what() << "\n";
    return 2;
  }
  nlohmann::json out = {
      {"input", from_trace ? nlohmann::json{{"trace", trace}, {"requests", fixed_streams.size()}}
                           : nlohmann::json{{"pattern", pattern},
                                            {"context_blocks", context},
                                            {"steps", steps},
                                            {"requests", requests},
                                            {"grow", base.grow},
                                            {"heavy_blocks", base.heavy_blocks},
                                            {"persistence", base.persistence},
                                            {"zipf", zipf},
                                            {"seed", seed}}},
      {"page_tokens", page_tokens},
      {"page_bytes", o.block_bytes},
      {"link", {{"alpha_s", o.link.alpha_s}, {"beta_s", o.link.beta_s}, {"bytes_per_s", o.link.bytes_per_s}}},
      {"step_s", o.step_s},
      {"sinks", o.sinks},
      {"recent", o.recent},
      {"results", results}};
  try {
    if (vm.count("json")) cli::write_to(json_out, out.dump(2) + "\n");
    if (vm.count("csv")) cli::write_to(csv_out, csv.str());
  } catch (const std::exception& e) {
    std::cerr << "kvtk sparse: " << e.what() << "\n";
    return 1;
  }
  if (!vm.count("json")) {
    std::printf("%-8s %-14s %-10s %6s %-16s %9s %10s %10s %9s %11s %9s %10s\n", "manager",
                "scorer", "budget", "drift", "prefetch", "steps", "recalls", "per step", "stalled",
                "stall s", "pf hit", "dropped");
    for (const auto& r : results) {
      const bool off = r["manager"] == "offload";
      std::printf("%-8s %-14s %-10s %6s %-16s %9llu %10s %10s %9s %11s %9s %10s\n",
                  r["manager"].get<std::string>().c_str(), r["scorer"].get<std::string>().c_str(),
                  r["budget"].get<std::string>().c_str(),
                  r.contains("drift") ? std::to_string(r["drift"].get<double>()).substr(0, 5).c_str() : "-",
                  off ? r["prefetch"].get<std::string>().c_str() : "-",
                  static_cast<unsigned long long>(r["steps"].get<std::uint64_t>()),
                  off ? std::to_string(r["recalls"].get<std::uint64_t>()).c_str() : "-",
                  off ? std::to_string(r["recalls_per_step"].get<double>()).substr(0, 7).c_str() : "-",
                  off ? std::to_string(r["stalled_steps"].get<std::uint64_t>()).c_str() : "-",
                  off ? std::to_string(r["stall_s"].get<double>()).substr(0, 9).c_str() : "-",
                  off ? std::to_string(r["prefetch_hit_ratio"].get<double>()).substr(0, 5).c_str() : "-",
                  off ? "-" : std::to_string(r["dropped_mass_fraction"].get<double>()).substr(0, 6).c_str());
    }
    std::printf("dropped: the fraction of selected attention mass that fell on dropped pages (lossy)\n");
  }
  return 0;
}

}  // namespace kvtk::sim
