#include "api/compare.hpp"

#include <chrono>
#include <kvtk/registry.hpp>
#include <sstream>

#include "api/options_json.hpp"
#include "api/text.hpp"
#include "api/trace_options.hpp"
#include "formats/flat_traces.hpp"

namespace kvtk::sim {
namespace {


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

std::vector<std::string> policies_of(const compare_options& o) {
  if (o.policy.size() == 1 && o.policy[0] == "all") {
    return {policy_names.begin(), policy_names.end()};
  }
  for (const auto& n : o.policy) {
    if (!is_policy_name(n)) {
      try {
        visit_policy(n, []<class P>() {});
      } catch (const unknown_policy& e) {
        throw usage_error(std::string("--policy: ") + e.what());
      }
    }
  }
  return o.policy;
}

std::vector<std::uint64_t> capacities_of(const compare_options& o) {
  std::vector<std::uint64_t> caps;
  for (const auto& c : o.capacity) caps.push_back(parse_blocks(c));
  return caps;
}

}  // namespace

nlohmann::json to_json(const compare_options& o) {
  return {{"trace", o.trace}, {"format", o.format}, {"policy", o.policy}, {"capacity", o.capacity}};
}

compare_options compare_options_from_json(const nlohmann::json& j) {
  compare_options o;
  detail::options_reader in(j, "compare options");
  in.get("trace", o.trace);
  in.get("format", o.format);
  in.get("policy", o.policy);
  in.get("capacity", o.capacity);
  in.finish();
  return o;
}

void validate(const compare_options& o) {
  const auto names = policies_of(o);
  const auto caps = capacities_of(o);
  if (names.empty()) throw usage_error("--policy: empty list");
  if (caps.empty()) throw usage_error("--capacity: empty list");
  if (o.format != "auto" && o.format != "mooncake" && o.format != "ids" &&
      o.format != "oracle-general") {
    throw usage_error("--format: '" + o.format + "' (supported: mooncake, ids, oracle-general, auto)");
  }
}

compare_result run(const compare_options& o, const progress_callback& progress) {
  validate(o);
  const auto names = policies_of(o);
  const auto caps = capacities_of(o);
  require_trace_file(o.trace);
  const std::vector<std::uint64_t> keys = load_flat(o.trace, o.format);
  std::vector<std::uint64_t> next_use;
  // Offline policies read the future; computing it is preparation, not replay time.
  for (const auto& name : names) {
    visit_policy(name, [&]<class P>() {
      if constexpr (is_offline_policy<P>) {
        if (next_use.empty()) next_use = next_use_positions(keys);
      }
    });
  }
  detail::progress_relay bar(progress, keys.size() * names.size() * caps.size());
  compare_result out;
  out.trace = {{"path", o.trace}, {"block_requests", keys.size()}};
  out.results = nlohmann::json::array();
  for (const auto& name : names) {
    for (std::uint64_t cap : caps) {
      const auto t0 = std::chrono::steady_clock::now();
      const flat_replay_counts r = visit_policy(name, [&]<class P>() {
        typename block_cache<P>::config cfg{};
        cfg.capacity = allocation_capacity(cap, keys.size());
        return replay_flat<P>(keys, cfg, next_use);
      });
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      bar.add(keys.size());
      out.results.push_back({{"policy", name},
                             {"capacity_blocks", cap},
                             {"requests", r.requests},
                             {"misses", r.misses},
                             {"miss_ratio", r.miss_ratio()},
                             {"hits", r.requests - r.misses},
                             {"hit_ratio", 1.0 - r.miss_ratio()},
                             {"seconds", secs}});
    }
  }
  return out;
}

nlohmann::json to_json(const compare_result& r) {
  return {{"trace", r.trace}, {"results", r.results}};
}

std::string to_csv(const compare_result& r) {
  std::string csv = "policy,capacity_blocks,requests,misses,miss_ratio,hits,hit_ratio,seconds\n";
  for (const auto& row : r.results) {
    csv += detail::format("%s,%llu,%llu,%llu,%.6f,%llu,%.6f,%.6f\n",
                          row["policy"].get<std::string>().c_str(),
                          row["capacity_blocks"].get<unsigned long long>(),
                          row["requests"].get<unsigned long long>(),
                          row["misses"].get<unsigned long long>(), row["miss_ratio"].get<double>(),
                          row["hits"].get<unsigned long long>(), row["hit_ratio"].get<double>(),
                          row["seconds"].get<double>());
  }
  return csv;
}

std::string to_text(const compare_result& r) {
  std::string s = detail::format("trace: %s (%zu block requests)\n\n",
                                 r.trace["path"].get<std::string>().c_str(),
                                 r.trace["block_requests"].get<std::size_t>());
  s += detail::format("%-14s %10s %12s %10s %10s %10s\n", "policy", "capacity", "hits",
                      "hit ratio", "miss ratio", "Mreq/s");
  for (const auto& row : r.results) {
    s += detail::format("%-14s %10llu %12llu %10.4f %10.4f %10.1f\n",
                        row["policy"].get<std::string>().c_str(),
                        row["capacity_blocks"].get<unsigned long long>(),
                        row["hits"].get<unsigned long long>(), row["hit_ratio"].get<double>(),
                        row["miss_ratio"].get<double>(),
                        row["requests"].get<double>() / row["seconds"].get<double>() / 1e6);
  }
  return s;
}

}  // namespace kvtk::sim
