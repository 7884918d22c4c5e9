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
#include <unordered_map>

#include "cli/common.hpp"
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
  opts.add_options()("help,h", "show this help")("trace", po::value(&trace)->required(),
                                                 "trace file (Mooncake or Bailian JSONL)")(
      "format", po::value(&format)->default_value("auto"), "mooncake | bailian | auto")(
      "block-tokens", po::value(&block_tokens)->default_value(0),
      "tokens per block (0 = the format's default)")(
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
  prefix_trace t;
  read_report skipped;
  t = load_trace_for("trace stats", trace, format, block_tokens, vm.count("skip-invalid") != 0,
                     skipped);

  std::vector<double> input, output, reuse;
  std::unordered_map<block_key, std::uint64_t> last;
  std::uint64_t refs = 0;
  for (std::size_t r = 0; r < t.requests(); ++r) {
    input.push_back(static_cast<double>(t.input_length[r]));
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

int gen(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  using namespace cli;
  po::options_description opts(
      "kvtk trace gen: a synthetic DeepSeek-style workload as Mooncake-format JSONL (timestamp "
      "ms,\n"
      "input_length, output_length, hash_ids = prefix ids). Profiles: chat (multi-turn sessions\n"
      "re-sending their history under popular system prompts), agent (tool loops re-sending a "
      "long\n"
      "context), api (one-off requests), mixed (45/25/30). Deterministic for a seed.\nOptions");
  gen_options g;
  std::string out_path;
  opts.add_options()("help,h", "show this help")(
      "profile", po::value(&g.profile)->default_value("mixed"), "chat | agent | api | mixed")(
      "requests", po::value(&g.requests)->default_value(10000), "number of requests")(
      "seed", po::value(&g.seed)->default_value(1), "random seed")(
      "block-tokens", po::value(&g.block_tokens)->default_value(64), "tokens per block")(
      "rate", po::value(&g.rate_per_s)->default_value(5.0), "mean arrivals per second")(
      "output,o", po::value(&out_path)->required(), "output file, or - for stdout")(
      "force", "overwrite an existing output file");
  po::variables_map vm;
  if (const int rc = parse_command(
          "trace gen", opts, args, vm,
          [&] {
            if (g.profile != "chat" && g.profile != "agent" && g.profile != "api" &&
                g.profile != "mixed") {
              throw usage_error("--profile: unknown profile '" + g.profile +
                                "' (known: chat agent api mixed)");
            }
            if (g.requests == 0) throw usage_error("--requests: must be positive");
            if (g.block_tokens == 0 || g.block_tokens > 65536) {
              throw usage_error("--block-tokens: must be in [1, 65536]");
            }
            if (!(g.rate_per_s > 0) || !std::isfinite(g.rate_per_s)) {
              throw usage_error("--rate: must be positive");
            }
            if (out_path != "-" && std::filesystem::exists(out_path) && !vm.count("force")) {
              throw usage_error("-o: '" + out_path + "' exists; pass --force to overwrite it");
            }
          });
      rc >= 0) {
    return rc;
  }
  if (out_path == "-") {
    generate_trace(g, std::cout);
    return 0;
  }
  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  if (!out) {
    std::cerr << "kvtk trace gen: cannot write '" << out_path << "'\n";
    return 1;
  }
  generate_trace(g, out);
  out.flush();
  if (!out) {
    std::cerr << "kvtk trace gen: error writing '" << out_path << "'\n";
    return 1;
  }
  return 0;
}

}  // namespace

int run_trace(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs("usage: kvtk trace stats F [options] | kvtk trace gen -o F [options]\n",
               args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "stats") return stats(std::vector<std::string>(args.begin() + 1, args.end()));
  if (args[0] == "gen") return gen(std::vector<std::string>(args.begin() + 1, args.end()));
  std::fprintf(stderr, "kvtk trace: unknown subcommand '%s' (known: stats gen)\n", args[0].c_str());
  return 2;
}

}  // namespace kvtk::sim
