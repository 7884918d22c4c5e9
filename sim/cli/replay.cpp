#include "cli/replay.hpp"

#include <atomic>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <kvtk/kvtk.hpp>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli/common.hpp"
#include "cli/cost.hpp"
#include "cli/phase_clock.hpp"
#include "cli/progress.hpp"
#include "cli/tiers.hpp"
#include "formats/requests.hpp"
#include "move/calibration.hpp"
#include "util/memory_budget.hpp"

namespace kvtk::sim {
namespace {

namespace po = boost::program_options;
using namespace kvtk::prefix;
using namespace kvtk::sim::cli;

struct job {
  std::string index, policy;
  std::uint64_t capacity;
  int hierarchy = -1;          // index into the tier hierarchies (index "tiers")
  std::string capacity_given;  // the capacity as the user wrote it ("64GiB", "3Mtok", "1000")
};
struct outcome {
  prefix_counts counts;
  double seconds = 0;
  nlohmann::json tiers;  // per-tier report of a hierarchy job
};

bool known_for(const std::string& index, const std::string& policy) {
  if (index == "flat") return is_policy_name(policy);
  if (index == "radix") {
    for (auto n : leaf_policy_names) {
      if (n == policy) return true;
    }
    return false;
  }
  return index == "hashchain" && policy == "vllm";
}

std::string known_list(const std::string& index) {
  std::string out;
  if (index == "flat") {
    for (auto n : policy_names) out += " " + std::string(n);
  } else if (index == "radix") {
    for (auto n : leaf_policy_names) out += " " + std::string(n);
  } else {
    out = " vllm";
  }
  return out;
}

// Replays in slices of requests so that a long job reports progress and lets go of the pages of
// a mapped trace it has passed (loaded_trace::release); the slices add up to one replay
// (replay_requests), so results do not depend on the slicing.
template <class Index>
prefix_counts replay_with_progress(const loaded_trace& lt, Index& idx, partial_block p,
                                   std::span<const std::uint64_t> next, progress* bar) {
  const prefix_trace_view& t = lt.view();
  prefix_counts c;
  std::uint64_t pos = 0;
  constexpr std::size_t slice = 1 << 14;
  for (std::size_t r = 0; r < t.requests(); r += slice) {
    const std::uint64_t before = c.block_refs;
    const std::size_t end = std::min(t.requests(), r + slice);
    replay_requests(t, idx, p, next, r, end, c, pos);
    lt.release(r, end);
    if (bar != nullptr) bar->add(c.block_refs - before);
  }
  c.evictions = idx.evictions();
  return c;
}

outcome run_job(const job& j, const loaded_trace& t, partial_block p,
                const std::vector<std::uint64_t>& next, progress* bar,
                const std::vector<kvtk::tier::hierarchy_config>& hierarchies, double trace_days) {
  const std::uint32_t cap = allocation_capacity(j.capacity, t.view().keys.size());
  const auto t0 = std::chrono::steady_clock::now();
  outcome o;
  if (j.hierarchy >= 0) {
    const auto& requested = hierarchies[static_cast<std::size_t>(j.hierarchy)];
    kvtk::tier::tier_index<> idx(allocation_config(requested, t.view().keys.size()));
    o.counts = replay_with_progress(t, idx, p, {}, bar);
    o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    o.tiers = tier_report(idx, requested, o.counts, trace_days);
    return o;
  }
  if (j.index == "flat") {
    o.counts = visit_policy(j.policy, [&]<class P>() {
      flat_index<P> idx(cap);
      return replay_with_progress(t, idx, p, next, bar);
    });
  } else if (j.index == "radix") {
    o.counts = visit_leaf_policy(j.policy, [&]<class L>() {
      radix_index<L> idx(cap);
      return replay_with_progress(t, idx, p, next, bar);
    });
  } else {
    hash_chain_index idx(cap);
    o.counts = replay_with_progress(t, idx, p, {}, bar);
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

}  // namespace

int run_replay(const std::vector<std::string>& args) {
  po::options_description opts(
      "kvtk replay: replay a request trace through prefix-cache indexes, policies and capacities\n"
      "(order-only; semantics in include/kvtk/prefix/replay.hpp). Every (index, policy, capacity)\n"
      "combination runs on the same trace; results do not depend on --threads.\nOptions");
  std::string trace, format, indexes, policies, capacities, model, partial, json_out, csv_out;
  std::uint32_t block_tokens = 0, threads = 1;
  std::vector<std::string> tier_specs, tier_files, price_storage;
  std::string pricing, calibration_file, calibration_mechanism;
  std::vector<nlohmann::json> calibration_reports;
  kvtk::cost::price_table table;
  tier_flags flags;
  std::vector<kvtk::tier::hierarchy_config> hierarchies;
  opts.add_options()("help,h", "show this help")("trace", po::value(&trace)->required(),
                                                 "trace file (any format below)")(
      "format", po::value(&format)->default_value("auto"),
      "mooncake | bailian | kvtk | kvtb | oracle-general | ids | auto (detected from content)")(
      "block-tokens", po::value(&block_tokens)->default_value(0),
      "tokens per block (0 = the trace's: kvtb/kvtk header, else 512 Mooncake, 16 Bailian, 64 "
      "kvtk, 1 flat)")("index", po::value(&indexes)->default_value("radix"),
                       "radix | flat | hashchain (a list)")(
      "policy", po::value(&policies)->default_value("lru"),
      "policies (a list, or all): radix leaf orders, flat core policies, vllm for hashchain; "
      "each runs with every listed index that knows it")(
      "capacity", po::value(&capacities)->default_value("1000,10000,100000"),
      "capacities (a list): blocks (1000), tokens (3Mtok) or bytes (64GiB, needs --model)")(
      "model", po::value(&model),
      "model preset for byte capacities: deepseek-v3, llama-3-70b, "
      "qwen2.5-7b, qwen3-235b-a22b")(
      "partial-block", po::value(&partial)->default_value("skip"),
      "skip: cache full blocks only; cache: also the partial last block (how Mooncake's "
      "published hit ratios count)")(
      "threads", po::value(&threads)->default_value(1),
      "worker threads (also parse JSONL traces in parallel; results do not depend on it)")(
      "json", po::value(&json_out), "write JSON results to a file, or - for stdout")(
      "csv", po::value(&csv_out), "write CSV results to a file, or - for stdout")(
      "no-opt", "skip the offline optimum (opt_fraction)")(
      "no-ideal",
      "skip the ideal (infinite-cache) ratios and the distinct-block count, whose set costs 16 "
      "bytes per distinct block (they are reported as null)")(
      "pricing", po::value(&pricing),
      "attach an API cost estimate to each result (kvtk cost --help: presets or a .json)")(
      "tiers", po::value(&tier_specs)->composing(),
      "a tier hierarchy name:capacity:policy[:usd_per_gb_month],... top first, e.g. "
      "hbm:80GiB:lru,dram:1TiB:arc:2.5,ssd:30TiB:s3fifo:0.08 (repeat to compare several; "
      "docs/tiers.md \"Command line\")")(
      "tier-config", po::value(&tier_files)->composing(),
      "a tier hierarchy as a JSON file (docs/tiers.md \"Command line\"; repeatable)")(
      "inclusive", "tiers: lower tiers keep copies of blocks held above")(
      "exclusive", "tiers: a block lives in one tier (the default)")(
      "write-policy", po::value(&flags.write_policy)->default_value("write-back"),
      "tiers: write-back | write-through | write-through-selective[:N] (inclusive only but "
      "write-back)")("admission", po::value(&flags.admission)->default_value("always"),
                     "tiers: filter on writes into lower tiers: always | frequency[:N] | "
                     "tinylfu[:N] | decay[:HALF_LIFE_REQUESTS[:N]]")(
      "calibration", po::value(&calibration_file),
      "tiers: take link figures from a calibration JSON (kvtk move bench --json, "
      "cuda/validate.sh): latency = alpha, per block = beta, bandwidth = B per measured path")(
      "calibration-mechanism", po::value(&calibration_mechanism),
      "tiers: the copy mechanism whose fit to use (default: the fastest for 256 blocks)")(
      "skip-invalid", "skip malformed trace lines (counted and reported) instead of stopping")(
      "timings",
      "report where the time went (read, next_use, ideal, replay incl. optimum, output, write) "
      "and the peak RSS: a \"timings\" object in the JSON and a line on stderr");
  po::variables_map vm;
  std::vector<job> jobs;
  partial_block pb = partial_block::skip;
  std::uint64_t bytes_per_token = 0;
  if (const int rc = parse_command(
          "replay", opts, args, vm,
          [&] {
            check_request_format(format);
            resolve_trace(trace, format, block_tokens);  // trace_error: exit 1 via main
            pb = parse_partial_block(partial) == 1 ? partial_block::cache : partial_block::skip;
            if (threads == 0 || threads > 256) throw usage_error("--threads: must be in [1, 256]");
            if (vm.count("model")) bytes_per_token = bytes_per_token_of(model);
            if (vm.count("pricing")) table = load_price_table(pricing, price_storage);
            if (vm.count("inclusive") && vm.count("exclusive")) {
              throw usage_error("--inclusive and --exclusive contradict each other");
            }
            if (vm.count("inclusive")) flags.inclusion = "inclusive";
            for (const auto& spec : tier_specs) {
              hierarchies.push_back(parse_tier_spec(spec, flags, block_tokens, bytes_per_token));
            }
            for (const auto& file : tier_files) {
              hierarchies.push_back(load_tier_config(file, block_tokens, bytes_per_token));
            }
            if (vm.count("calibration-mechanism") && !vm.count("calibration")) {
              throw usage_error("--calibration-mechanism needs --calibration");
            }
            if (vm.count("calibration")) {
              if (hierarchies.empty()) throw usage_error("--calibration needs --tiers or --tier-config");
              try {
                const auto cal = kvtk::sim::move::calibration::load(calibration_file);
                for (auto& h : hierarchies) {
                  calibration_reports.push_back(
                      kvtk::sim::move::apply_calibration(h, cal, calibration_mechanism));
                }
              } catch (const std::runtime_error& e) {
                throw usage_error(std::string("--calibration ") + e.what());
              }
            }
            for (std::size_t h = 0; h < hierarchies.size(); ++h) {
              std::uint64_t total = 0;
              for (const auto& tier : hierarchies[h].tiers) total += tier.capacity_blocks;
              jobs.push_back({"tiers", describe(hierarchies[h]), total, static_cast<int>(h), ""});
            }
            // With tiers, the index x policy x capacity grid runs only when asked for.
            if (!hierarchies.empty() && vm["capacity"].defaulted()) return;
            std::vector<std::uint64_t> caps;
            std::vector<std::string> caps_given = split_list(capacities, "--capacity");
            for (const auto& c : caps_given)
              caps.push_back(parse_capacity(c, block_tokens, bytes_per_token));
            if (caps.empty()) throw usage_error("--capacity: empty list");
            const auto idx_list = split_list(indexes, "--index");
            const auto pol_list = split_list(policies, "--policy");
            if (idx_list.empty()) throw usage_error("--index: empty list");
            if (pol_list.empty()) throw usage_error("--policy: empty list");
            // Every valid index x policy pair runs: "all" is each index's whole list, and a
            // policy only some of the indexes know runs with those. Only a name that no listed
            // index knows is an error.
            for (const auto& i : idx_list) {
              if (i != "radix" && i != "flat" && i != "hashchain") {
                throw usage_error("--index: unknown index '" + i +
                                  "' (known: radix flat hashchain)");
              }
            }
            const bool all = pol_list.size() == 1 && pol_list[0] == "all";
            for (const auto& p : pol_list) {
              if (all) break;
              bool anywhere = false;
              for (const auto& i : idx_list) anywhere |= i == "hashchain" || known_for(i, p);
              if (!anywhere) {
                std::string known;
                for (const auto& i : idx_list) known += " " + i + ":" + known_list(i) + ";";
                throw usage_error("--policy: unknown policy '" + p + "' (known per index:" +
                                  known + " or all)");
              }
            }
            for (const auto& i : idx_list) {
              std::vector<std::string> names;
              if (i == "hashchain") {
                names = {"vllm"};  // the hash-chain index is vLLM's block pool: one policy
              } else if (all) {
                if (i == "flat") {
                  for (auto n : policy_names) names.emplace_back(n);
                } else {
                  for (auto n : leaf_policy_names) names.emplace_back(n);
                }
              } else {
                for (const auto& p : pol_list) {
                  if (known_for(i, p)) names.push_back(p);
                }
              }
              for (const auto& p : names) {
                for (std::size_t k = 0; k < caps.size(); ++k) {
                  jobs.push_back({i, p, caps[k], -1, caps_given[k]});
                }
              }
            }
          });
      rc >= 0) {
    return rc;
  }

  phase_clock clock;
  read_report skipped;
  const loaded_trace loaded =
      load_trace_for("replay", trace, format, block_tokens, vm.count("skip-invalid") != 0, skipped,
                     false, threads);
  const prefix_trace_view& t = loaded.view();
  clock.lap("read");
  // Offline policies and the optimum need every reference's next use; nothing else does.
  const bool want_opt = vm.count("no-opt") == 0;
  bool any_offline = want_opt;
  for (const job& j : jobs) {
    if (j.hierarchy >= 0) continue;
    if (j.index == "flat") {
      any_offline |= visit_policy(j.policy, []<class P>() { return flat_index<P>::offline; });
    } else if (j.index == "radix") {
      any_offline |= visit_leaf_policy(j.policy, []<class L>() { return radix_index<L>::offline; });
    }
  }
  const std::vector<std::uint64_t> next =
      any_offline ? next_use_positions(t, pb) : std::vector<std::uint64_t>{};
  clock.lap("next_use");
  // Ideal: every distinct block fits (the same counts as an unbounded LRU): from the next uses
  // when they were needed anyway, else one pass with a set (in slices, releasing mapped pages).
  const bool want_ideal = vm.count("no-ideal") == 0;
  ideal_counts ideal_pass;
  if (!next.empty()) {
    ideal_pass = replay_ideal(t, pb, next);
  } else if (want_ideal) {
    ideal_counter counter(t.keys.size());
    constexpr std::size_t slice = 1 << 16;
    for (std::size_t r = 0; r < t.requests(); r += slice) {
      const std::size_t end = std::min(t.requests(), r + slice);
      counter.add(t, pb, r, end);
      loaded.release(r, end);
    }
    ideal_pass = counter.result();
  } else {
    for (std::size_t r = 0; r < t.requests(); ++r) {  // the reference count only
      ideal_pass.counts.block_refs += t.cacheable(r, pb).size();
    }
  }
  const prefix_counts& ideal = ideal_pass.counts;
  const std::uint64_t block_refs = ideal.block_refs;
  const std::uint64_t unique_blocks = ideal_pass.unique_blocks;
  clock.lap("ideal");

  std::vector<outcome> results(jobs.size());
  std::map<std::uint64_t, prefix_counts> optimum;
  if (want_opt) {
    for (const job& j : jobs) {
      if (j.hierarchy < 0) optimum.emplace(j.capacity, prefix_counts{});
    }
  }
  std::vector<std::uint64_t> opt_caps;
  for (auto& [c, v] : optimum) opt_caps.push_back(c);
  std::vector<double> optimum_seconds(opt_caps.size());
  const std::size_t total = jobs.size() + opt_caps.size();
  const double trace_days =
      t.arrival_s.size() > 1 ? (t.arrival_s.back() - t.arrival_s.front()) / 86400.0 : 0.0;
  std::uint64_t output_tokens = 0;
  for (const std::uint64_t o : t.output_length) output_tokens += o;
  progress bar("kvtk replay", "block refs", block_refs * total);
  {  // Fail before replaying anything when the largest concurrent jobs cannot fit.
    double largest = 0;
    for (const job& j : jobs) {
      if (j.hierarchy < 0) {
        largest = std::max(largest, static_cast<double>(allocation_capacity(j.capacity, t.keys.size())));
      }
    }
    for (const auto& h : hierarchies) (void)allocation_config(h, t.keys.size());
    check_memory("--capacity " + capacities + " with --threads " + std::to_string(threads) +
                     " (capacities capped at the trace's block references)",
                 largest * cache_entry_bytes * static_cast<double>(std::min<std::size_t>(threads, total)));
  }
  std::atomic<std::size_t> cursor{0};
  std::exception_ptr failure;
  std::mutex failure_lock;
  auto work = [&](std::atomic<std::size_t>& next_job, std::size_t n) {
    for (std::size_t i; (i = next_job.fetch_add(1)) < n;) {
      if (i < jobs.size()) {
        results[i] = run_job(jobs[i], loaded, pb, next, &bar, hierarchies, trace_days);
      } else {
        const std::uint64_t c = opt_caps[i - jobs.size()];
        const auto t0 = std::chrono::steady_clock::now();
        optimum[c] = replay_optimum(t, allocation_capacity(c, t.keys.size()), pb, next);
        bar.add(optimum[c].block_refs);
        optimum_seconds[i - jobs.size()] =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
    }
  };
  auto worker = [&] {
    try {
      work(cursor, total);
    } catch (...) {
      const std::lock_guard<std::mutex> hold(failure_lock);
      if (!failure) failure = std::current_exception();
      cursor = total;  // the other workers stop after their current job
    }
  };
  std::vector<std::thread> pool;
  for (std::uint32_t w = 1; w < std::min<std::size_t>(threads, total); ++w)
    pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  if (failure) std::rethrow_exception(failure);
  clock.lap("replay");
  double optimum_s = 0;
  for (const double x : optimum_seconds) optimum_s += x;

  nlohmann::json out;
  out["trace"] = {{"path", trace},
                  {"format", format},
                  {"requests", t.requests()},
                  {"block_refs", block_refs},
                  {"unique_blocks", unique_blocks},
                  {"block_tokens", block_tokens},
                  {"partial_block", pb == partial_block::cache ? "cache" : "skip"},
                  {"skipped_lines", skipped.skipped_lines},
                  {"ideal_block_hit_ratio", ideal.block_hit_ratio()},
                  {"ideal_token_hit_ratio", ideal.token_hit_ratio()},
                  {"output_tokens", output_tokens},
                  {"span_s", trace_days * 86400.0}};
  if (!want_ideal && next.empty()) {
    for (const char* k : {"unique_blocks", "ideal_block_hit_ratio", "ideal_token_hit_ratio"}) {
      out["trace"][k] = nullptr;
    }
  }
  out["results"] = nlohmann::json::array();
  std::ostringstream csv;
  csv << "index,policy,capacity_blocks,requests,block_refs,block_hits,token_refs,token_hits,"
         "block_hit_ratio,token_hit_ratio,evictions,opt_fraction,seconds,block_refs_per_second\n";
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const prefix_counts& c = results[i].counts;
    nlohmann::json r = {
        {"index", jobs[i].index},
        {"policy", jobs[i].policy},
        {"capacity_blocks", jobs[i].capacity},
        {"capacity", jobs[i].capacity_given.empty() ? std::to_string(jobs[i].capacity)
                                                    : jobs[i].capacity_given},
        {"requests", c.requests},
        {"block_refs", c.block_refs},
        {"block_hits", c.block_hits},
        {"token_refs", c.token_refs},
        {"token_hits", c.token_hits},
        {"block_hit_ratio", c.block_hit_ratio()},
        {"token_hit_ratio", c.token_hit_ratio()},
        {"evictions", c.evictions},
        {"seconds", results[i].seconds},
        {"block_refs_per_second",
         results[i].seconds > 0 ? static_cast<double>(c.block_refs) / results[i].seconds : 0.0}};
    std::string opt_text;
    if (jobs[i].hierarchy >= 0) {
      r["tiers"] = results[i].tiers;
      if (!calibration_reports.empty()) {
        r["tiers"]["calibration"] = calibration_reports[static_cast<std::size_t>(jobs[i].hierarchy)];
      }
    }
    if (vm.count("pricing")) {
      r["cost"] = api_cost_json(table, {static_cast<double>(c.token_hits),
                                        static_cast<double>(c.token_refs - c.token_hits),
                                        static_cast<double>(output_tokens)},
                                0.0);
    }
    if (want_opt && jobs[i].hierarchy < 0) {
      const double f = c.fraction_of(optimum[jobs[i].capacity]);
      r["opt_fraction"] = f;
      opt_text = std::to_string(f);
    }
    out["results"].push_back(r);
    csv << jobs[i].index << ',' << jobs[i].policy << ',' << jobs[i].capacity << ',' << c.requests
        << ',' << c.block_refs << ',' << c.block_hits << ',' << c.token_refs << ',' << c.token_hits
        << ',' << r["block_hit_ratio"].get<double>() << ',' << r["token_hit_ratio"].get<double>()
        << ',' << c.evictions << ',' << opt_text << ',' << results[i].seconds << ','
        << r["block_refs_per_second"].get<double>() << '\n';
  }
  const bool timings = vm.count("timings") != 0;
  if (timings) {
    clock.lap("output");  // building the results; writing them is timed below
    out["timings"] = clock.json({{"optimum_in_replay", optimum_s}});
  }
  try {
    if (vm.count("json")) write_to(json_out, out.dump(2) + "\n");
    if (vm.count("csv")) write_to(csv_out, csv.str());
  } catch (const std::exception& e) {
    std::cerr << "kvtk replay: " << e.what() << "\n";
    return 1;
  }
  if (!vm.count("json") && !vm.count("csv")) {
    const bool ideal_known = want_ideal || !next.empty();
    std::printf("trace: %s  (%zu requests, %llu block refs, ", trace.c_str(), t.requests(),
                static_cast<unsigned long long>(block_refs));
    if (ideal_known) {
      std::printf("%llu unique blocks, ", static_cast<unsigned long long>(unique_blocks));
    }
    std::printf("%u-token blocks, partial blocks: %s)\n", block_tokens,
                pb == partial_block::cache ? "cached" : "skipped");
    if (ideal_known) {
      std::printf("ideal (infinite cache): block hit ratio %.4f, token hit ratio %.4f\n\n",
                  ideal.block_hit_ratio(), ideal.token_hit_ratio());
    } else {
      std::printf("ideal (infinite cache): not computed (--no-ideal)\n\n");
    }
    std::printf("%-10s %-13s %10s %10s %11s %11s %9s %9s\n", "index", "policy", "capacity",
                "blocks", "block hits", "token hits", "of opt", "Mrefs/s");
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      const prefix_counts& c = results[i].counts;
      const bool with_opt = want_opt && jobs[i].hierarchy < 0;
      char of_opt[16] = "-";  // no optimum computed (--no-opt, or a tier hierarchy)
      if (with_opt) {
        std::snprintf(of_opt, sizeof of_opt, "%.3f", c.fraction_of(optimum[jobs[i].capacity]));
      }
      const std::string given = jobs[i].capacity_given.empty()
                                    ? std::to_string(jobs[i].capacity)
                                    : jobs[i].capacity_given;
      std::printf("%-10s %-13s %10s %10llu %11.4f %11.4f %9s %9.1f\n", jobs[i].index.c_str(),
                  jobs[i].policy.c_str(), given.c_str(),
                  static_cast<unsigned long long>(jobs[i].capacity), c.block_hit_ratio(),
                  c.token_hit_ratio(), of_opt,
                  results[i].seconds > 0
                      ? static_cast<double>(c.block_refs) / results[i].seconds / 1e6
                      : 0.0);
    }
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      if (jobs[i].hierarchy < 0) continue;
      const auto& rep = results[i].tiers;
      std::printf("\ntiers %s (%s, %s): load time mean %.3g s, max %.3g s\n",
                  rep["hierarchy"].get<std::string>().c_str(),
                  rep["inclusion"].get<std::string>().c_str(),
                  rep["write_policy"].get<std::string>().c_str(),
                  rep["load_time"]["mean_s"].get<double>(), rep["load_time"]["max_s"].get<double>());
      std::printf("  %-8s %-10s %10s %10s %9s %10s %10s %10s %10s %10s\n", "tier", "policy",
                  "capacity", "hits", "cum.ratio", "promoted", "written", "evicted", "demoted",
                  "dropped");
      for (const auto& row : rep["tiers"]) {
        std::printf("  %-8s %-10s %10llu %10llu %9.4f %10llu %10llu %10llu %10llu %10llu\n",
                    row["name"].get<std::string>().c_str(), row["policy"].get<std::string>().c_str(),
                    row["capacity_blocks"].get<unsigned long long>(),
                    row["hits"].get<unsigned long long>(),
                    row["cumulative_block_hit_ratio"].get<double>(),
                    row["promotions"].get<unsigned long long>(),
                    row["writes"].get<unsigned long long>(),
                    row["evictions"].get<unsigned long long>(),
                    row["demotions"].get<unsigned long long>(),
                    row["drops"].get<unsigned long long>());
      }
    }
  }
  if (timings) {
    clock.lap("write");
    std::fprintf(stderr, "%s\n", clock.text({{"optimum_in_replay", optimum_s}}).c_str());
  }
  return 0;
}

}  // namespace kvtk::sim
