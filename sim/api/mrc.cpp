#include "api/mrc.hpp"

#include <cmath>
#include <kvtk/prefix/engine_index.hpp>
#include <kvtk/prefix/mrc.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

#include "api/next_uses.hpp"
#include "api/options_json.hpp"
#include "api/text.hpp"
#include "api/trace_options.hpp"
#include "formats/requests.hpp"

namespace kvtk::sim {
namespace {

using namespace kvtk::prefix;

// A handful of sampled references gives a curve that looks like a result and is noise.
constexpr std::uint64_t min_sampled_refs = 1000;
constexpr double warn_error = 0.05;

std::set<std::uint64_t> parse_capacities(const mrc_options& o) {
  const std::uint64_t bytes_per_token = o.model.empty() ? 0 : bytes_per_token_of(o.model);
  std::set<std::uint64_t> caps;
  for (const auto& c : o.capacity) {
    if (c.empty()) throw usage_error("--capacity: empty item in the list");
    caps.insert(parse_capacity(c, o.block_tokens, bytes_per_token));
  }
  return caps;
}

std::set<std::uint64_t> log_spaced(std::uint64_t saturation, std::uint32_t points) {
  std::set<std::uint64_t> caps;
  const double top = static_cast<double>(std::max<std::uint64_t>(saturation, 2));
  for (std::uint32_t i = 0; i < points; ++i) {
    caps.insert(static_cast<std::uint64_t>(
        std::llround(std::pow(top, static_cast<double>(i) / (points - 1)))));
  }
  return caps;
}

}  // namespace

nlohmann::json to_json(const mrc_options& o) {
  return {{"trace", o.trace},       {"format", o.format},       {"block_tokens", o.block_tokens},
          {"partial_block", o.partial_block}, {"capacity", o.capacity}, {"points", o.points},
          {"model", o.model},       {"sample", o.sample},       {"opt", o.opt},
          {"engine", o.engine},     {"skip_invalid", o.skip_invalid},
          {"next_use_cache", o.next_use_cache}};
}

mrc_options mrc_options_from_json(const nlohmann::json& j) {
  mrc_options o;
  detail::options_reader in(j, "mrc options");
  in.get("trace", o.trace);
  in.get("format", o.format);
  in.get("block_tokens", o.block_tokens);
  in.get("partial_block", o.partial_block);
  in.get("capacity", o.capacity);
  in.get("points", o.points);
  in.get("model", o.model);
  in.get("sample", o.sample);
  in.get("opt", o.opt);
  in.get("engine", o.engine);
  in.get("skip_invalid", o.skip_invalid);
  in.get("next_use_cache", o.next_use_cache);
  in.finish();
  return o;
}

void validate(mrc_options& o) {
  check_request_format(o.format);
  (void)parse_partial_block(o.partial_block);
  if (!(o.sample > 0.0 && o.sample <= 1.0)) throw usage_error("--sample: must be in (0, 1]");
  if (o.points < 2 || o.points > 10000) throw usage_error("--points: must be in [2, 10000]");
  for (const auto& e : o.engine) {
    if (parse_engine(e) != kvtk::prefix::engine_accounting::ideal &&
        parse_partial_block(o.partial_block) == 1) {
      throw usage_error("--engine " + e +
                        ": the engine caches full blocks only; drop --partial-block cache");
    }
  }
  resolve_trace(o.trace, o.format, o.block_tokens);
  check_next_use_cache(o.next_use_cache);
  (void)parse_capacities(o);
}

namespace {

// The result's "sample" object; warns when the estimated error at some capacity exceeds
// warn_error.
nlohmann::json sample_summary(double rate, const sampled_prefix_mrc& sampled,
                              const std::set<std::uint64_t>& caps, std::uint64_t block_refs,
                              std::vector<std::string>& warnings) {
  double worst_error = 0;
  std::uint64_t worst_at = 0;
  for (std::uint64_t c : caps) {
    if (sampled.error_estimate(c) > worst_error) {
      worst_error = sampled.error_estimate(c);
      worst_at = c;
    }
  }
  if (worst_error > warn_error) {
    std::ostringstream m;
    m << "the sampled curve's estimated error reaches " << worst_error << " (token hit ratio) at "
      << worst_at << " blocks with " << sampled.sample.block_refs
      << " sampled block references; raise --sample for a tighter curve";
    warnings.push_back(m.str());
  }
  return {{"rate", rate},
          {"unit", "block keys"},
          {"block_refs", sampled.sample.block_refs},
          {"block_refs_fraction", static_cast<double>(sampled.sample.block_refs) /
                                      static_cast<double>(std::max<std::uint64_t>(block_refs, 1))},
          {"max_error_estimate", worst_error},
          {"error_note",
           "token_hit_ratio_error = |h1 - h2| / 2 of two half-samples: about one standard error"}};
}

// The sampled curve; refuses a sample too small to mean anything.
sampled_prefix_mrc sample_curve(const prefix_trace_view& t, double rate, partial_block pb,
                                std::uint64_t block_refs) {
  sampled_prefix_mrc sampled = sampled_prefix_lru_mrc(t, rate, pb, true);
  if (sampled.sample.block_refs < min_sampled_refs) {
    std::ostringstream m;
    m << "--sample " << rate << " kept " << sampled.sample.block_refs << " of " << block_refs
      << " block references (fewer than " << min_sampled_refs
      << ", too few for a curve); raise the rate (or use the exact curve, the default)";
    throw std::runtime_error(m.str());
  }
  return sampled;
}

}  // namespace

namespace {

// One engine-mode replay (include/kvtk/prefix/engine_index.hpp) at capacity c.
prefix_counts replay_engine(const prefix_trace_view& t, const std::string& engine, std::uint32_t c) {
  if (engine == "vllm") {
    vllm_engine_index idx(c);
    return replay(t, idx);
  }
  sglang_engine_index idx(c);
  return replay(t, idx);
}

}  // namespace

mrc_result run(mrc_options o, const progress_callback& progress) {
  validate(o);
  const partial_block pb =
      parse_partial_block(o.partial_block) == 1 ? partial_block::cache : partial_block::skip;
  read_report skipped;
  std::vector<std::string> warnings;
  const loaded_trace loaded =
      load_trace_for(o.trace, o.format, o.block_tokens, o.skip_invalid, skipped, warnings);
  const prefix_trace_view& t = loaded.view();
  std::set<std::uint64_t> caps = parse_capacities(o);
  // The exact curve, or the sample's: not both (a sample is asked for to save the exact pass).
  prefix_mrc exact;
  sampled_prefix_mrc sampled;
  std::uint64_t block_refs = 0, token_refs = 0, saturation = 0;
  for (std::size_t r = 0; r < t.requests(); ++r) {
    block_refs += t.cacheable(r, pb).size();
    token_refs += t.input_tokens(r);
  }
  const bool sampling = o.sample < 1.0;
  if (sampling) {
    sampled = sample_curve(t, o.sample, pb, block_refs);
    saturation = static_cast<std::uint64_t>(
        std::ceil(static_cast<double>(sampled.sample.saturation()) / o.sample));
  } else {
    exact = exact_prefix_lru_mrc(t, pb);
    saturation = exact.saturation();
  }
  if (caps.empty()) caps = log_spaced(saturation, o.points);
  std::vector<std::string> engines;  // the engine modes that need replays
  for (const auto& e : o.engine) {
    if (e != "ideal") engines.push_back(e);
  }
  detail::progress_relay bar(
      progress, block_refs * (1 + (o.opt ? caps.size() : 0) + engines.size() * caps.size()));
  bar.add(block_refs);

  mrc_result r;
  r.warnings = std::move(warnings);
  r.trace = {{"path", o.trace},
             {"format", o.format},
             {"requests", t.requests()},
             {"block_refs", block_refs},
             {"token_refs", token_refs},
             {"block_tokens", t.block_tokens},
             {"partial_block", pb == partial_block::cache ? "cache" : "skip"},
             {"skipped_lines", skipped.skipped_lines},
             {"saturation_blocks", saturation},
             {"span_s", t.arrival_s.size() > 1 ? t.arrival_s.back() - t.arrival_s.front() : 0.0}};
  if (sampling) r.sample = sample_summary(o.sample, sampled, caps, block_refs, r.warnings);
  r.curve = nlohmann::json::array();
  // The optimum at every capacity shares one next-use pass (or sidecar), and one decision of
  // which index it runs; each replay goes in slices that drop the pages they have passed.
  const next_use_column next =
      o.opt ? next_uses_for(o.trace, loaded, pb, o.next_use_cache) : next_use_column{};
  const bool opt_flat = o.opt && detail::optimum_runs_flat(loaded, pb);
  for (std::uint64_t c : caps) {
    nlohmann::json row = {
        {"capacity_blocks", c},
        {"block_hit_ratio", sampling ? sampled.block_hit_ratio(c) : exact.block_hit_ratio(c)},
        {"token_hit_ratio", sampling ? sampled.token_hit_ratio(c) : exact.token_hit_ratio(c)}};
    if (sampling) row["token_hit_ratio_error"] = sampled.error_estimate(c);
    if (o.opt) {
      const auto opt = detail::optimum_sliced(
          loaded, allocation_capacity(c, t.keys.size()), opt_flat, pb, next, &bar);
      row["opt_block_hit_ratio"] = opt.counts.block_hit_ratio();
      row["opt_token_hit_ratio"] = opt.counts.token_hit_ratio();
      row["opt_policy"] = opt.policy;
      row["bound_block_hit_ratio"] =
          block_refs ? static_cast<double>(opt.bound_block_hits) / static_cast<double>(block_refs)
                     : 0.0;
    }
    for (const auto& e : engines) {
      const prefix_counts got = replay_engine(t, e, allocation_capacity(c, t.keys.size()));
      row[e + "_block_hit_ratio"] = got.block_hit_ratio();
      row[e + "_token_hit_ratio"] = got.token_hit_ratio();
      bar.add(block_refs);
    }
    r.curve.push_back(row);
  }
  return r;
}

nlohmann::json to_json(const mrc_result& r) {
  nlohmann::json out = {{"trace", r.trace}};
  if (!r.sample.is_null()) out["sample"] = r.sample;
  out["curve"] = r.curve;
  return out;
}

std::string to_csv(const mrc_result& r) {
  std::ostringstream csv;
  csv << "capacity_blocks,block_hit_ratio,token_hit_ratio,opt_block_hit_ratio,opt_token_hit_"
         "ratio";
  for (const char* e : {"vllm", "sglang"}) csv << ',' << e << "_block_hit_ratio," << e << "_token_hit_ratio";
  csv << ",bound_block_hit_ratio\n";
  auto cell = [](const nlohmann::json& row, const std::string& key) {
    return row.contains(key) ? std::to_string(row[key].get<double>()) : std::string();
  };
  for (const auto& row : r.curve) {
    csv << row["capacity_blocks"].get<std::uint64_t>() << ',' << row["block_hit_ratio"].get<double>()
        << ',' << row["token_hit_ratio"].get<double>() << ',' << cell(row, "opt_block_hit_ratio")
        << ',' << cell(row, "opt_token_hit_ratio");
    for (const std::string e : {"vllm", "sglang"}) {
      csv << ',' << cell(row, e + "_block_hit_ratio") << ',' << cell(row, e + "_token_hit_ratio");
    }
    csv << ',' << cell(row, "bound_block_hit_ratio") << '\n';
  }
  return csv.str();
}

std::string to_text(const mrc_result& r) {
  const bool opt = !r.curve.empty() && r.curve[0].contains("opt_block_hit_ratio");
  std::string s = detail::format("%12s %16s %16s", "capacity", "block hit ratio", "token hit ratio");
  if (opt) s += detail::format(" %12s %12s", "optimum", "bound");
  std::vector<std::string> engines;  // block hit ratio columns of the engine modes
  for (const std::string e : {"vllm", "sglang"}) {
    if (!r.curve.empty() && r.curve[0].contains(e + "_block_hit_ratio")) {
      engines.push_back(e);
      s += detail::format(" %12s", e.c_str());
    }
  }
  s += "\n";
  for (const auto& row : r.curve) {
    s += detail::format("%12llu %16.4f %16.4f", row["capacity_blocks"].get<unsigned long long>(),
                        row["block_hit_ratio"].get<double>(), row["token_hit_ratio"].get<double>());
    if (opt) {
      s += detail::format(" %12.4f %12.4f", row["opt_block_hit_ratio"].get<double>(),
                          row["bound_block_hit_ratio"].get<double>());
    }
    for (const auto& e : engines) {
      s += detail::format(" %12.4f", row[e + "_block_hit_ratio"].get<double>());
    }
    s += "\n";
  }
  return s;
}

}  // namespace kvtk::sim
