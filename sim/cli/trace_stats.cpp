#include "cli/trace_stats.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <kvtk/kvtk.hpp>
#include <nlohmann/json.hpp>
#include <map>
#include <unordered_map>

#include "cli/common.hpp"
#include "cli/trace_convert.hpp"
#include "cli/trace_gen.hpp"

namespace kvtk::sim {
namespace {

nlohmann::json distribution(std::vector<double> v) {
  if (v.empty()) return nullptr;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  auto q = [&](double p) {
    return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
  };
  return {{"count", v.size()}, {"mean", sum / static_cast<double>(v.size())},
          {"p50", q(0.5)},     {"p90", q(0.9)},
          {"p99", q(0.99)},    {"max", v.back()}};
}

// Session structure from the trace's session ids (kvtk `session`, Bailian's chat chains); null
// when the format has none (Mooncake).
nlohmann::json session_stats(const kvtk::prefix::prefix_trace_view& t) {
  if (t.session.empty()) return nullptr;
  struct info {
    std::uint64_t requests = 0;
    double first = NAN, last = NAN;
  };
  std::unordered_map<std::uint64_t, info> by_id;
  std::vector<double> gaps;
  for (std::size_t r = 0; r < t.requests(); ++r) {
    info& s = by_id[t.session[r]];
    ++s.requests;
    if (!t.arrival_s.empty() && !std::isnan(t.arrival_s[r])) {
      if (!std::isnan(s.last)) gaps.push_back(t.arrival_s[r] - s.last);
      if (std::isnan(s.first)) s.first = t.arrival_s[r];
      s.last = t.arrival_s[r];
    }
  }
  std::vector<double> turns, duration;
  std::uint64_t multi = 0, in_multi = 0;
  for (const auto& [id, s] : by_id) {
    turns.push_back(static_cast<double>(s.requests));
    if (s.requests > 1) {
      ++multi;
      in_multi += s.requests;
      if (!std::isnan(s.first)) duration.push_back(s.last - s.first);
    }
  }
  return {{"sessions", by_id.size()},
          {"multi_request_sessions", multi},
          {"requests_in_multi_request_sessions", in_multi},
          {"requests_per_session", distribution(turns)},
          {"multi_request_session_duration_s", distribution(duration)},
          {"gap_between_requests_of_a_session_s", distribution(gaps)}};
}

int stats(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  using namespace kvtk::prefix;
  using namespace cli;
  po::options_description opts(
      "kvtk trace stats: requests, time span and arrival rate, input/output length distributions,\n"
      "block references, unique blocks, ideal (infinite-cache) prefix hit ratios, reuse distances\n"
      "and session structure of a request trace.\nOptions");
  std::string trace, format, partial, json_out;
  std::uint32_t block_tokens = 0;
  opts.add_options()("help,h", "show this help");
  add_trace_options(opts, trace, format, block_tokens);
  opts.add_options()(
      "partial-block", po::value(&partial)->default_value("skip"), "skip | cache")(
      "json", po::value(&json_out), "write JSON to a file, or - for stdout")(
      "skip-invalid", "skip malformed trace lines (counted and reported) instead of stopping");
  po::positional_options_description pos;
  pos.add("trace", 1);
  po::variables_map vm;
  partial_block pb = partial_block::skip;
  if (const int rc = parse_command(
          "trace stats", opts, args, vm,
          [&] {
            check_request_format(format);
            pb = parse_partial_block(partial) == 1 ? partial_block::cache : partial_block::skip;
          },
          &pos);
      rc >= 0) {
    return rc;
  }
  read_report skipped;
  const loaded_trace loaded = load_trace_for("trace stats", trace, format, block_tokens,
                                             vm.count("skip-invalid") != 0, skipped);
  const prefix_trace_view& t = loaded.view();

  std::vector<double> input, output, reuse;
  std::unordered_map<block_key, std::uint64_t> last;
  std::uint64_t refs = 0;
  for (std::size_t r = 0; r < t.requests(); ++r) {
    input.push_back(static_cast<double>(t.input_tokens(r)));
    if (!t.output_length.empty()) output.push_back(static_cast<double>(t.output_length[r]));
    for (block_key k : t.cacheable(r, pb)) {
      auto [it, fresh] = last.try_emplace(k, refs);
      if (!fresh) {
        reuse.push_back(static_cast<double>(refs - it->second));
        it->second = refs;
      }
      ++refs;
    }
  }
  const auto ideal_cap = static_cast<std::uint32_t>(std::max<std::size_t>(last.size(), 1));
  flat_index<kvtk::lru> ideal_idx(ideal_cap);
  const prefix_counts ideal = replay(t, ideal_idx, pb);

  nlohmann::json out;
  out["trace"] = {{"path", trace},
                  {"format", format},
                  {"block_tokens", t.block_tokens},
                  {"partial_block", pb == partial_block::cache ? "cache" : "skip"},
                  {"skipped_lines", skipped.skipped_lines}};
  out["requests"] = t.requests();
  if (!t.arrival_s.empty() && t.requests() > 1) {
    const double span = t.arrival_s.back() - t.arrival_s.front();
    out["span_s"] = span;
    out["arrival_rate_per_s"] = span > 0 ? static_cast<double>(t.requests() - 1) / span : 0.0;
  }
  out["input_tokens"] = distribution(input);
  out["output_tokens"] = distribution(output);
  out["block_refs"] = refs;
  out["unique_blocks"] = last.size();
  out["ideal_block_hit_ratio"] = ideal.block_hit_ratio();
  out["ideal_token_hit_ratio"] = ideal.token_hit_ratio();
  out["reuse_distance_block_refs"] = distribution(reuse);
  if (!t.arrival_s.empty() && t.requests() > 2) {
    // Burstiness: Poisson arrivals have a coefficient of variation of 1; bursty traffic more.
    double sum = 0, sq = 0;
    std::size_t n = 0;
    for (std::size_t r = 1; r < t.requests(); ++r) {
      const double gap = t.arrival_s[r] - t.arrival_s[r - 1];
      if (std::isnan(gap)) continue;
      sum += gap;
      sq += gap * gap;
      ++n;
    }
    const double mean = n ? sum / static_cast<double>(n) : 0.0;
    const double var = n ? sq / static_cast<double>(n) - mean * mean : 0.0;
    out["inter_arrival_cv"] = mean > 0 ? std::sqrt(std::max(var, 0.0)) / mean : 0.0;
  }
  out["sessions"] = session_stats(t);
  if (!t.tenant.empty()) {
    std::map<std::string, std::uint64_t> per_tenant;
    const auto names = loaded.tenant_names();
    for (std::uint32_t x : t.tenant) ++per_tenant[x ? names[x] : std::string("(none)")];
    out["requests_per_tenant"] = per_tenant;
  }
  if (vm.count("json")) {
    try {
      write_to(json_out, out.dump(2) + "\n");
    } catch (const std::exception& e) {
      std::cerr << "kvtk trace stats: " << e.what() << "\n";
      return 1;
    }
    return 0;
  }
  std::printf("%s", out.dump(2).c_str());
  std::printf("\n");
  return 0;
}

}  // namespace

int run_trace(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(
        "usage: kvtk trace stats F [options] | kvtk trace gen -o F [options] |\n"
        "       kvtk trace convert IN -o OUT [--to FORMAT] [options]\n",
               args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "stats") return stats(std::vector<std::string>(args.begin() + 1, args.end()));
  if (args[0] == "gen") return run_trace_gen(std::vector<std::string>(args.begin() + 1, args.end()));
  if (args[0] == "convert") {
    return run_trace_convert(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  std::fprintf(stderr, "kvtk trace: unknown subcommand '%s' (known: stats gen convert)\n",
               args[0].c_str());
  return 2;
}

}  // namespace kvtk::sim
