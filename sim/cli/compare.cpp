#include "cli/compare.hpp"

#include <boost/program_options.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <cstdio>
#include <iostream>
#include <kvtk/kvtk.hpp>
#include <sstream>

#include "cli/common.hpp"
#include "formats/flat_traces.hpp"

namespace kvtk::sim {
namespace {

namespace po = boost::program_options;
using cli::split_list;
using cli::usage_error;

std::uint64_t parse_blocks(const std::string& s) {
  std::size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(s, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos != s.size() || s.empty() || s[0] == '-' || v == 0) {
    throw usage_error("--capacity: '" + s + "' is not a positive integer number of blocks");
  }
  if (v >= (1ull << 31)) throw usage_error("--capacity: '" + s + "' is over 2^31-1 blocks");
  return v;
}

}  // namespace

int run_compare(const std::vector<std::string>& args) {
  po::options_description opts(
      "kvtk compare: replay a flat block trace (each record one unit-size request: every hash_id "
      "of\n"
      "a Mooncake JSONL trace, every line of an ids file, every oracleGeneral record) through "
      "each\n"
      "eviction policy at each capacity and print hit (and miss) ratios.\n"
      "Options");
  std::string trace, format, policies, capacities, csv_out, json_out;
  opts.add_options()("help,h", "show this help")("trace", po::value(&trace)->required(),
                                                 "flat trace file")(
      "format", po::value(&format)->default_value("auto"),
      "mooncake | ids | oracle-general | auto (detected from the content)")(
      "policy", po::value(&policies)->default_value("all"),
      "comma-separated policy names, or 'all'")(
      "capacity", po::value(&capacities)->default_value("1000,5859,10000"),
      "comma-separated capacities in blocks")(
      "csv", po::value(&csv_out), "write CSV to a file, or - for stdout")(
      "json", po::value(&json_out), "write JSON to a file, or - for stdout");
  po::variables_map vm;
  std::vector<std::string> names;
  std::vector<std::uint64_t> caps;
  if (const int rc = cli::parse_command("compare", opts, args, vm, [&] {
        if (policies == "all") {
          names.assign(policy_names.begin(), policy_names.end());
        } else {
          names = split_list(policies, "--policy");
          for (const auto& n : names) {
            if (!is_policy_name(n)) {
              try {
                visit_policy(n, []<class P>() {});
              } catch (const unknown_policy& e) {
                throw usage_error(std::string("--policy: ") + e.what());
              }
            }
          }
        }
        for (const auto& c : split_list(capacities, "--capacity")) caps.push_back(parse_blocks(c));
        if (names.empty()) throw usage_error("--policy: empty list");
        if (caps.empty()) throw usage_error("--capacity: empty list");
        if (format != "auto" && format != "mooncake" && format != "ids" &&
            format != "oracle-general") {
          throw usage_error("--format: '" + format +
                            "' (supported: mooncake, ids, oracle-general, auto)");
        }
      });
      rc >= 0) {
    if (rc == 0) {
      std::cout << "\nPolicies:";
      for (auto n : policy_names) std::cout << ' ' << n;
      std::cout << "\n";
    }
    return rc;
  }

  std::vector<std::uint64_t> keys;
  try {
    require_trace_file(trace);
    keys = load_flat(trace, format);
  } catch (const trace_error& e) {
    std::cerr << "kvtk compare: " << e.what() << "\n";
    return 1;
  }
  std::vector<std::uint64_t> next_use;
  // Offline policies read the future; computing it is preparation, not replay time.
  for (const auto& name : names) {
    visit_policy(name, [&]<class P>() {
      if constexpr (is_offline_policy<P>) {
        if (next_use.empty()) next_use = next_use_positions(keys);
      }
    });
  }
  std::ostringstream csv;
  csv << "policy,capacity_blocks,requests,misses,miss_ratio,hits,hit_ratio,seconds\n";
  nlohmann::json out = {{"trace", {{"path", trace}, {"block_requests", keys.size()}}},
                        {"results", nlohmann::json::array()}};
  const bool table = !vm.count("csv") && !vm.count("json");
  if (table) {
    std::printf("trace: %s (%zu block requests)\n\n", trace.c_str(), keys.size());
    std::printf("%-14s %10s %12s %10s %10s %10s\n", "policy", "capacity", "hits", "hit ratio",
                "miss ratio", "Mreq/s");
  }
  for (const auto& name : names) {
    for (std::uint64_t cap : caps) {
      const auto t0 = std::chrono::steady_clock::now();
      const flat_replay_counts r = visit_policy(name, [&]<class P>() {
        typename block_cache<P>::config cfg{};
        cfg.capacity = cli::allocation_capacity(cap, keys.size());
        return replay_flat<P>(keys, cfg, next_use);
      });
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const std::uint64_t hits = r.requests - r.misses;
      const double hit_ratio = 1.0 - r.miss_ratio();
      char row[256];
      std::snprintf(row, sizeof row, "%s,%llu,%llu,%llu,%.6f,%llu,%.6f,%.6f\n", name.c_str(),
                    static_cast<unsigned long long>(cap),
                    static_cast<unsigned long long>(r.requests),
                    static_cast<unsigned long long>(r.misses), r.miss_ratio(),
                    static_cast<unsigned long long>(hits), hit_ratio, secs);
      csv << row;
      out["results"].push_back({{"policy", name},
                                {"capacity_blocks", cap},
                                {"requests", r.requests},
                                {"misses", r.misses},
                                {"miss_ratio", r.miss_ratio()},
                                {"hits", hits},
                                {"hit_ratio", hit_ratio},
                                {"seconds", secs}});
      if (table) {
        std::printf("%-14s %10llu %12llu %10.4f %10.4f %10.1f\n", name.c_str(),
                    static_cast<unsigned long long>(cap), static_cast<unsigned long long>(hits),
                    hit_ratio, r.miss_ratio(), static_cast<double>(r.requests) / secs / 1e6);
      }
    }
  }
  if (vm.count("json")) cli::write_to(json_out, out.dump(2) + "\n");
  if (vm.count("csv")) cli::write_to(csv_out, csv.str());
  return 0;
}

}  // namespace kvtk::sim
