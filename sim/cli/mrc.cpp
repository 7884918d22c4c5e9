#include "cli/mrc.hpp"

#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <kvtk/kvtk.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli/common.hpp"
#include "formats/requests.hpp"

namespace kvtk::sim {

int run_mrc(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  using namespace kvtk::prefix;
  using namespace cli;
  po::options_description opts(
      "kvtk mrc: the exact prefix-LRU miss-ratio curve of a trace in one pass (flat LRU index;\n"
      "a block hits at capacity C iff the largest LRU stack depth of it and the blocks before it\n"
      "is <= C), or a SHARDS-style sampled curve, optionally with the offline optimum beside it.\n"
      "Options");
  std::string trace, format, partial, capacities, model, json_out, csv_out;
  std::uint32_t block_tokens = 0, points = 24;
  double sample = 1.0;
  opts.add_options()("help,h", "show this help");
  add_trace_options(opts, trace, format, block_tokens);
  opts.add_options()(
      "partial-block", po::value(&partial)->default_value("skip"), "skip | cache")(
      "capacity", po::value(&capacities),
      "capacities to report (blocks, tokens or bytes); default: --points log-spaced sizes up to "
      "where the curve saturates")("points", po::value(&points)->default_value(24),
                                   "number of log-spaced capacities when --capacity is absent")(
      "model", po::value(&model), "model preset for byte capacities")(
      "sample", po::value(&sample)->default_value(1.0),
      "sampling rate in (0, 1]; below 1 the SHARDS-style sampled curve")(
      "opt", "also replay the offline optimum (leaf-only Belady) at every capacity")(
      "json", po::value(&json_out), "write JSON to a file, or - for stdout")(
      "csv", po::value(&csv_out), "write CSV to a file, or - for stdout")(
      "skip-invalid", "skip malformed trace lines (counted and reported) instead of stopping");
  po::variables_map vm;
  partial_block pb = partial_block::skip;
  std::uint64_t bytes_per_token = 0;
  if (const int rc = parse_command("mrc", opts, args, vm,
                                   [&] {
                                     check_request_format(format);
                                     pb = parse_partial_block(partial) == 1 ? partial_block::cache
                                                                            : partial_block::skip;
                                     if (!(sample > 0.0 && sample <= 1.0))
                                       throw usage_error("--sample: must be in (0, 1]");
                                     if (points < 2 || points > 10000)
                                       throw usage_error("--points: must be in [2, 10000]");
                                     if (vm.count("model"))
                                       bytes_per_token = bytes_per_token_of(model);
                                   });
      rc >= 0) {
    return rc;
  }
  read_report skipped;
  const loaded_trace loaded =
      load_trace_for("mrc", trace, format, block_tokens, vm.count("skip-invalid") != 0, skipped);
  const prefix_trace_view& t = loaded.view();
  std::set<std::uint64_t> caps;
  try {
    if (vm.count("capacity")) {
      for (const auto& c : split_list(capacities, "--capacity")) {
        caps.insert(parse_capacity(c, t.block_tokens, bytes_per_token));
      }
      if (caps.empty()) throw usage_error("--capacity: empty list");
    }
  } catch (const usage_error& e) {
    std::cerr << "kvtk mrc: " << e.what() << "\n";
    return 2;
  }
  // The exact curve, or the sample's: not both (a sample is asked for to save the exact pass).
  prefix_mrc exact;
  sampled_prefix_mrc sampled;
  std::uint64_t block_refs = 0, token_refs = 0, saturation = 0;
  for (std::size_t r = 0; r < t.requests(); ++r) {
    block_refs += t.cacheable(r, pb).size();
    token_refs += t.input_tokens(r);
  }
  if (sample < 1.0) {
    sampled = sampled_prefix_lru_mrc(t, sample, pb, true);
    // A handful of sampled references gives a curve that looks like a result and is noise.
    constexpr std::uint64_t min_sampled = 1000;
    if (sampled.sample.block_refs < min_sampled) {
      std::cerr << "kvtk mrc: --sample " << sample << " kept " << sampled.sample.block_refs
                << " of " << block_refs << " block references (fewer than " << min_sampled
                << ", too few for a curve); raise the rate (or use the exact curve, the default)\n";
      return 1;
    }
    saturation = static_cast<std::uint64_t>(
        std::ceil(static_cast<double>(sampled.sample.saturation()) / sample));
  } else {
    exact = exact_prefix_lru_mrc(t, pb);
    saturation = exact.saturation();
  }
  if (caps.empty()) {
    const double top = static_cast<double>(std::max<std::uint64_t>(saturation, 2));
    for (std::uint32_t i = 0; i < points; ++i) {
      caps.insert(static_cast<std::uint64_t>(
          std::llround(std::pow(top, static_cast<double>(i) / (points - 1)))));
    }
  }

  nlohmann::json out;
  out["trace"] = {{"path", trace},
                  {"format", format},
                  {"requests", t.requests()},
                  {"block_refs", block_refs},
                  {"token_refs", token_refs},
                  {"block_tokens", t.block_tokens},
                  {"partial_block", pb == partial_block::cache ? "cache" : "skip"},
                  {"skipped_lines", skipped.skipped_lines},
                  {"saturation_blocks", saturation},
                  {"span_s", t.arrival_s.size() > 1 ? t.arrival_s.back() - t.arrival_s.front()
                                                    : 0.0}};
  double worst_error = 0;
  std::uint64_t worst_at = 0;
  if (sample < 1.0) {
    for (std::uint64_t c : caps) {
      if (sampled.error_estimate(c) > worst_error) {
        worst_error = sampled.error_estimate(c);
        worst_at = c;
      }
    }
    out["sample"] = {
        {"rate", sample},
        {"unit", "block keys"},
        {"block_refs", sampled.sample.block_refs},
        {"block_refs_fraction", static_cast<double>(sampled.sample.block_refs) /
                                    static_cast<double>(std::max<std::uint64_t>(block_refs, 1))},
        {"max_error_estimate", worst_error},
        {"error_note",
         "token_hit_ratio_error = |h1 - h2| / 2 of two half-samples: about one standard error"}};
    if (worst_error > 0.05) {
      std::cerr << "kvtk mrc: the sampled curve's estimated error reaches " << worst_error
                << " (token hit ratio) at " << worst_at << " blocks with "
                << sampled.sample.block_refs << " sampled block references; raise --sample for a "
                   "tighter curve\n";
    }
  }
  out["curve"] = nlohmann::json::array();
  std::ostringstream csv;
  csv << "capacity_blocks,block_hit_ratio,token_hit_ratio,opt_block_hit_ratio,opt_token_hit_"
         "ratio\n";
  // The optimum at every capacity shares one next-use pass.
  const std::vector<std::uint64_t> next =
      vm.count("opt") ? next_use_positions(t, pb) : std::vector<std::uint64_t>{};
  for (std::uint64_t c : caps) {
    const double b = sample < 1.0 ? sampled.block_hit_ratio(c) : exact.block_hit_ratio(c);
    const double tk = sample < 1.0 ? sampled.token_hit_ratio(c) : exact.token_hit_ratio(c);
    nlohmann::json row = {{"capacity_blocks", c}, {"block_hit_ratio", b}, {"token_hit_ratio", tk}};
    if (sample < 1.0) row["token_hit_ratio_error"] = sampled.error_estimate(c);
    std::string opt_b, opt_t;
    if (vm.count("opt")) {
      const prefix_counts o = replay_optimum(t, allocation_capacity(c, t.keys.size()), pb, next);
      row["opt_block_hit_ratio"] = o.block_hit_ratio();
      row["opt_token_hit_ratio"] = o.token_hit_ratio();
      opt_b = std::to_string(o.block_hit_ratio());
      opt_t = std::to_string(o.token_hit_ratio());
    }
    out["curve"].push_back(row);
    csv << c << ',' << b << ',' << tk << ',' << opt_b << ',' << opt_t << '\n';
  }
  try {
    if (vm.count("json")) write_to(json_out, out.dump(2) + "\n");
    if (vm.count("csv")) write_to(csv_out, csv.str());
  } catch (const std::exception& e) {
    std::cerr << "kvtk mrc: " << e.what() << "\n";
    return 1;
  }
  if (!vm.count("json") && !vm.count("csv")) {
    std::printf("%12s %16s %16s", "capacity", "block hit ratio", "token hit ratio");
    if (vm.count("opt")) std::printf(" %12s", "optimum");
    std::printf("\n");
    for (const auto& row : out["curve"]) {
      std::printf("%12llu %16.4f %16.4f", row["capacity_blocks"].get<unsigned long long>(),
                  row["block_hit_ratio"].get<double>(), row["token_hit_ratio"].get<double>());
      if (vm.count("opt")) std::printf(" %12.4f", row["opt_block_hit_ratio"].get<double>());
      std::printf("\n");
    }
  }
  return 0;
}

}  // namespace kvtk::sim
