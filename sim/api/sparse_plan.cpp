// sim/api/sparse_plan.cpp — `kvtk sparse`'s options checked and turned into a plan
// (api/sparse_plan.hpp).
#include "api/sparse_plan.hpp"

#include <cmath>
#include <stdexcept>

#include "api/trace_options.hpp"
#include "des/profiles.hpp"
#include "formats/requests.hpp"
#include "move/calibration.hpp"

namespace kvtk::sim::sparse_detail {
namespace {

namespace sp = kvtk::sparse;

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
  c.link.link = {o.link_latency_us * 1e-6, 0, o.link_gb_per_s * 1e9};
  if (!o.calibration_mechanism.empty() && o.calibration.empty()) {
    throw usage_error("--calibration-mechanism needs --calibration");
  }
  const std::uint64_t bpt = bytes_per_token_of(o.model);
  if (o.layers) {
    c.link.layers = *o.layers;
  } else {
    const auto& presets = des::model_presets();
    const auto it = presets.find(o.model);
    c.link.layers = it != presets.end() ? it->second.layers : 0;
  }
  if (c.link.layers == 0 || c.link.layers > 100000) {
    for (const auto& p : o.prefetch) {
      if (p.find("layer-ahead") != std::string::npos) {
        throw usage_error("--prefetch layer-ahead needs --layers (1..100000) for this model");
      }
    }
    c.link.layers = 1;
  }
  c.link.page_bytes = static_cast<double>(bpt) * page_tokens;
  if (!o.calibration.empty()) {
    try {
      const auto cal = move::calibration::load(o.calibration);
      const auto fit = cal.find("dram", "hbm", static_cast<std::uint64_t>(c.link.page_bytes),
                                o.calibration_mechanism);
      if (!fit) throw std::runtime_error(cal.source + ": no dram->hbm (h2d) fit");
      c.link.link = {fit->model.alpha_s, fit->model.beta_s, fit->model.bytes_per_s};
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

}  // namespace

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


}  // namespace kvtk::sim::sparse_detail
