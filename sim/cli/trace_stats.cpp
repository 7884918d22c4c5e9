#include "cli/trace_stats.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <kvtk/kvtk.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "cli/common.hpp"
#include "cli/phase_clock.hpp"
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

// The same figures for whole numbers, in linear time: the quantiles by nth_element on shrinking
// upper ranges, the mean from an integer sum (equal to the sorted double sum above whenever that
// one was exact, i.e. below 2^53; more accurate above).
nlohmann::json distribution(std::vector<std::uint64_t> v) {
  if (v.empty()) return nullptr;
  std::uint64_t sum = 0;
  bool exact = true;
  for (const std::uint64_t x : v) exact = exact && !__builtin_add_overflow(sum, x, &sum);
  double mean_sum = static_cast<double>(sum);
  if (!exact) {  // beyond 2^64: a double sum (rounded, as the sorted sum would be)
    mean_sum = 0;
    for (const std::uint64_t x : v) mean_sum += static_cast<double>(x);
  }
  const std::size_t n = v.size();
  auto at = [&](double p) {
    return std::min(n - 1, static_cast<std::size_t>(p * static_cast<double>(n)));
  };
  auto lo = v.begin();
  double quantile[3];
  const double ps[3] = {0.5, 0.9, 0.99};
  for (int i = 0; i < 3; ++i) {  // each quantile's index is >= the previous one's
    const auto nth = v.begin() + static_cast<std::ptrdiff_t>(at(ps[i]));
    std::nth_element(lo, nth, v.end());
    quantile[i] = static_cast<double>(*nth);
    lo = nth;
  }
  const double max = static_cast<double>(*std::max_element(lo, v.end()));
  return {{"count", n},         {"mean", mean_sum / static_cast<double>(n)},
          {"p50", quantile[0]}, {"p90", quantile[1]},
          {"p99", quantile[2]}, {"max", max}};
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
  opts.add_options()("partial-block", po::value(&partial)->default_value("skip"), "skip | cache")(
      "json", po::value(&json_out), "write JSON to a file, or - for stdout")(
      "skip-invalid", "skip malformed trace lines (counted and reported) instead of stopping")(
      "timings", "report where the time went and the peak RSS on stderr");
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
  phase_clock clock;
  read_report skipped;
  const loaded_trace loaded = load_trace_for("trace stats", trace, format, block_tokens,
                                             vm.count("skip-invalid") != 0, skipped);
  const prefix_trace_view& t = loaded.view();

  clock.lap("read");

  // One pass: lengths, and per reference its key's previous position (reuse time, distinct
  // blocks, and whether an earlier request had it: the ideal hit).
  std::vector<std::uint64_t> input, output, reuse;
  input.reserve(t.requests());
  if (!t.output_length.empty()) output.reserve(t.requests());
  kvtk::detail::key_map<std::uint64_t> last(
      kvtk::detail::key_map<std::uint64_t>::expected_for_refs(t.keys.size()));
  constexpr std::size_t ahead = kvtk::detail::key_map<std::uint64_t>::prefetch_distance;
  std::uint64_t refs = 0;
  prefix_counts ideal;
  for (std::size_t r = 0; r < t.requests(); ++r) {
    const std::uint64_t L = t.input_tokens(r);
    input.push_back(L);
    if (!t.output_length.empty()) output.push_back(t.output_length[r]);
    const auto blocks = t.cacheable(r, pb);
    const std::size_t at = static_cast<std::size_t>(blocks.data() - t.keys.data());
    for (std::size_t i = at + ahead; i < std::min(at + ahead + blocks.size(), t.keys.size()); ++i) {
      last.prefetch(t.keys[i]);
    }
    const std::uint64_t first = refs;
    std::uint64_t h = 0;  // leading blocks an earlier request referenced
    if (blocks.size() > 1) {
      while (h < blocks.size()) {
        const std::uint64_t* p = last.find(blocks[h]);
        if (p == nullptr || *p >= first) break;
        ++h;
      }
    }
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      auto [pos, fresh] = last.try_emplace(blocks[i], refs);
      if (!fresh) {
        if (blocks.size() == 1) h = 1;  // a single block: seen before means an earlier request
        reuse.push_back(refs - *pos);
        *pos = refs;
      }
      ++refs;
    }
    ++ideal.requests;
    ideal.block_refs += blocks.size();
    ideal.block_hits += h;
    ideal.token_refs += L;
    ideal.token_hits += std::min<std::uint64_t>(h * t.block_tokens_of(r), L);
  }
  clock.lap("pass");

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
  out["input_tokens"] = distribution(std::move(input));
  out["output_tokens"] = distribution(std::move(output));
  out["block_refs"] = refs;
  out["unique_blocks"] = last.size();
  out["ideal_block_hit_ratio"] = ideal.block_hit_ratio();
  out["ideal_token_hit_ratio"] = ideal.token_hit_ratio();
  out["reuse_distance_block_refs"] = distribution(std::move(reuse));
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
  clock.lap("summary");
  if (vm.count("json")) {
    try {
      write_to(json_out, out.dump(2) + "\n");
    } catch (const std::exception& e) {
      std::cerr << "kvtk trace stats: " << e.what() << "\n";
      return 1;
    }
  } else {
    std::printf("%s", out.dump(2).c_str());
    std::printf("\n");
  }
  clock.lap("write");
  if (vm.count("timings")) std::fprintf(stderr, "%s\n", clock.text().c_str());
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
