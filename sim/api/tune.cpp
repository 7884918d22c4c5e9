#include "api/tune.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <span>

#include "api/index_runs.hpp"
#include "api/next_uses.hpp"
#include "api/options_json.hpp"
#include "util/parallel.hpp"
#include "api/segments.hpp"
#include "api/text.hpp"
#include "api/trace_options.hpp"
#include "formats/requests.hpp"
#include "kvtk/prefix/leaf_registry.hpp"

namespace kvtk::sim {
namespace {

using namespace kvtk::prefix;
using index_runs::replay_segments;
using optimum_result = kvtk::prefix::offline_optimum::result;

struct candidate {
  std::string index, policy;
};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

bool online_flat(std::string_view name) { return !index_runs::flat_offline(name); }
bool online_radix(std::string_view name) { return !index_runs::radix_offline(name); }
bool knows(const std::string& index, const std::string& policy) {
  if (index == "radix") {
    const auto& names = radix_policy_names();
    return std::find(names.begin(), names.end(), policy) != names.end();
  }
  return std::find(policy_names.begin(), policy_names.end(), policy) != policy_names.end();
}
bool online(const std::string& index, const std::string& policy) {
  return index == "radix" ? online_radix(policy) : online_flat(policy);
}

// Every (index, policy) pair to try, in the order given (indexes), then registry order.
std::vector<candidate> candidates(const tune_options& o) {
  std::vector<candidate> out;
  const bool all = o.policy.size() == 1 && o.policy[0] == "all";
  for (const std::string& index : o.index) {
    if (index != "radix" && index != "flat") {
      throw usage_error("--index: unknown index '" + index + "' (tune knows: radix flat)");
    }
    std::vector<std::string> names;
    if (all) {
      if (index == "radix") names = radix_policy_names();
      if (index == "flat") names.assign(policy_names.begin(), policy_names.end());
    } else {
      names = o.policy;
    }
    for (const std::string& p : names) {
      if (knows(index, p) && online(index, p)) out.push_back({index, p});
    }
  }
  if (!all) {
    for (const std::string& p : o.policy) {
      bool known = false, found = false;
      for (const std::string& index : o.index) {
        if (!knows(index, p)) continue;
        known = true;
        if (!online(index, p)) {
          throw usage_error("--policy: '" + p +
                            "' needs the future (an offline policy); tune picks among online "
                            "policies and reports the optimum beside them");
        }
      }
      for (const candidate& c : out) found |= c.policy == p;
      if (!known || !found) {
        throw usage_error("--policy: unknown policy '" + p + "' for index " +
                          join(o.index));
      }
    }
  }
  if (out.empty()) throw usage_error("--policy: no online candidate policy");
  return out;
}

std::vector<prefix_counts> run_candidate(const candidate& c, const prefix_trace_view& t,
                                         std::uint32_t cap, partial_block pb,
                                         std::span<const std::size_t> bounds) {
  if (c.index == "flat") return index_runs::replay_flat_segments(c.policy, cap, t, pb, bounds);
  return index_runs::replay_radix_segments(c.policy, cap, t, pb, bounds);
}

prefix_counts sum(const std::vector<prefix_counts>& v) {
  prefix_counts s;
  for (const prefix_counts& c : v) {
    s.requests += c.requests;
    s.block_refs += c.block_refs;
    s.block_hits += c.block_hits;
    s.token_refs += c.token_refs;
    s.token_hits += c.token_hits;
    s.evictions += c.evictions;
  }
  return s;
}

// The choice: the candidate whose worst scored segment, relative to the reference (radix LRU when
// it is a candidate, else the first), is best; ties by total hits, then candidate order.
struct choice {
  std::size_t index = 0;
  std::vector<double> worst;  // per candidate: min over segments of (hits + 1) / (ref hits + 1)
};
choice choose(const std::vector<candidate>& cands,
              const std::vector<std::vector<prefix_counts>>& tune) {
  std::size_t ref = 0;
  for (std::size_t c = 0; c < cands.size(); ++c) {
    if (cands[c].index == "radix" && cands[c].policy == "lru") ref = c;
  }
  choice ch;
  for (std::size_t c = 0; c < cands.size(); ++c) {
    double w = 1e300;
    for (std::size_t s = 0; s < tune[c].size(); ++s) {
      w = std::min(w, double(tune[c][s].block_hits + 1) / double(tune[ref][s].block_hits + 1));
    }
    ch.worst.push_back(w);
    const bool better = w > ch.worst[ch.index] ||
                        (w == ch.worst[ch.index] &&
                         sum(tune[c]).block_hits > sum(tune[ch.index]).block_hits);
    if (c > 0 && better) ch.index = c;
  }
  return ch;
}

nlohmann::json counts_json(const candidate& c, const prefix_counts& n, const optimum_result* opt) {
  nlohmann::json j = {{"index", c.index},
                      {"policy", c.policy},
                      {"block_hits", n.block_hits},
                      {"block_refs", n.block_refs},
                      {"block_hit_ratio", n.block_hit_ratio()},
                      {"token_hit_ratio", n.token_hit_ratio()}};
  if (opt != nullptr) {
    j["opt_fraction"] = n.fraction_of(opt->counts);
    j["bound_fraction"] = opt->bound_fraction(n);
  }
  return j;
}

std::string quote(const std::string& s) {
  return s.find_first_of(" \t'\"$") == std::string::npos ? s : "'" + s + "'";
}

nlohmann::json recommendation(const tune_options& o, const candidate& c,
                              const std::string& capacity) {
  nlohmann::json r = {
      {"command", "kvtk replay --trace " + quote(o.trace) + " --index " + c.index + " --policy " +
                      c.policy + " --capacity " + capacity + " --partial-block " + o.partial_block},
      {"replay_options",
       {{"index", {c.index}}, {"policy", {c.policy}}, {"capacity", {capacity}},
        {"partial_block", o.partial_block}}}};
  // The simulator's instance caches are flat tiers: a flat choice carries over as it is.
  if (c.index == "flat") r["simulate_set"] = "local_policy=" + c.policy;
  return r;
}

// The optimum on the holdout: the best candidate, named as index and policy ("flat min" is the
// flat index running MIN with bypass), with the bound and every candidate's hits beside it.
nlohmann::json optimum_json(const optimum_result& opt) {
  const std::string_view name = opt.policy;
  const std::size_t sp = name.find(' ');
  nlohmann::json j = counts_json({std::string(name.substr(0, sp)), std::string(name.substr(sp + 1))},
                                 opt.counts, &opt);
  j["bound_block_hits"] = opt.bound_block_hits;
  j["candidates"] = nlohmann::json::array();
  for (std::size_t i = 0; i < opt.candidate_count; ++i) {
    j["candidates"].push_back(
        {{"policy", opt.candidates[i].policy}, {"block_hits", opt.candidates[i].counts.block_hits}});
  }
  return j;
}

// One capacity's result from its jobs: per candidate (tune segments, holdout), then the optimum.
nlohmann::json capacity_row(const tune_options& o, std::size_t ci, std::uint64_t blocks,
                            const std::vector<candidate>& cands,
                            std::span<const std::vector<prefix_counts>> jobs,
                            const optimum_result& opt) {
  std::vector<std::vector<prefix_counts>> tune;
  std::vector<prefix_counts> hold;
  for (std::size_t c = 0; c < cands.size(); ++c) {
    tune.push_back(jobs[2 * c]);
    hold.push_back(jobs[2 * c + 1][0]);
  }
  const choice ch = choose(cands, tune);
  std::size_t hindsight = 0;
  nlohmann::json tj = nlohmann::json::array(), hj = nlohmann::json::array();
  for (std::size_t c = 0; c < cands.size(); ++c) {
    if (hold[c].block_hits > hold[hindsight].block_hits) hindsight = c;
    tj.push_back(counts_json(cands[c], sum(tune[c]), nullptr));
    tj.back()["worst_segment_vs_lru"] = ch.worst[c];
    hj.push_back(counts_json(cands[c], hold[c], &opt));
  }
  nlohmann::json row = {{"capacity", o.capacity[ci]},
                        {"capacity_blocks", blocks},
                        {"chosen", hj[ch.index]},
                        {"best_in_hindsight", hj[hindsight]},
                        {"optimum", optimum_json(opt)},
                        {"tune", tj},
                        {"holdout", hj},
                        {"recommendation", recommendation(o, cands[ch.index], o.capacity[ci])}};
  for (std::size_t c = 0; c < cands.size(); ++c) {
    if (cands[c].index == "radix" && cands[c].policy == "lru") row["lru"] = hj[c];
  }
  return row;
}

}  // namespace

nlohmann::json to_json(const tune_options& o) {
  return {{"trace", o.trace},       {"format", o.format},
          {"block_tokens", o.block_tokens}, {"capacity", o.capacity},
          {"model", o.model},       {"holdout", o.holdout},
          {"partial_block", o.partial_block}, {"index", o.index},
          {"policy", o.policy},     {"threads", o.threads},
          {"skip_invalid", o.skip_invalid}, {"next_use_cache", o.next_use_cache}};
}

tune_options tune_options_from_json(const nlohmann::json& j) {
  tune_options o;
  detail::options_reader in(j, "tune options");
  in.get("trace", o.trace);
  in.get("format", o.format);
  in.get("block_tokens", o.block_tokens);
  in.get("capacity", o.capacity);
  in.get("model", o.model);
  in.get("holdout", o.holdout);
  in.get("partial_block", o.partial_block);
  in.get("index", o.index);
  in.get("policy", o.policy);
  in.get("threads", o.threads);
  in.get("skip_invalid", o.skip_invalid);
  in.get("next_use_cache", o.next_use_cache);
  in.finish();
  return o;
}

void validate(tune_options& o) {
  check_request_format(o.format);
  if (!(o.holdout > 0.0 && o.holdout < 1.0)) {
    throw usage_error("--holdout: must be in (0, 1), the share of requests held out");
  }
  if (o.capacity.empty()) throw usage_error("--capacity: required (one or more capacities)");
  if (o.partial_block != "skip" && o.partial_block != "cache") {
    throw usage_error("--partial-block: '" + o.partial_block + "' is not skip or cache");
  }
  if (o.threads < 1 || o.threads > 256) throw usage_error("--threads: must be in [1, 256]");
  if (o.index.empty()) throw usage_error("--index: empty list");
  (void)candidates(o);
  resolve_trace(o.trace, o.format, o.block_tokens);
  check_next_use_cache(o.next_use_cache);
  const std::uint64_t bpt = o.model.empty() ? 0 : bytes_per_token_of(o.model);
  for (const std::string& c : o.capacity) (void)parse_capacity(c, o.block_tokens, bpt);
}

tune_result run(tune_options o) {
  validate(o);
  const partial_block pb = o.partial_block == "cache" ? partial_block::cache : partial_block::skip;
  const std::vector<candidate> cands = candidates(o);
  read_report skipped;
  std::vector<std::string> warnings;
  loaded_trace loaded = load_trace_for(o.trace, o.format, o.block_tokens,
                                                  o.skip_invalid, skipped, warnings, false, o.threads);
  // Session signals when a candidate reads them (kvtk/prefix/sessions.hpp); they come from the
  // whole trace's fields (or inference), which hold nothing of the future: an engine knows a
  // request's session and turn when it arrives, and a tool call when its reply ends.
  bool sessions_read = false;
  for (const candidate& c : cands) {
    if (c.index != "radix") continue;
    sessions_read |= (kvtk::prefix::visit_radix_policy(c.policy, []<class L, class A>() {
                        return kvtk::hints_read_by<L>() | kvtk::hints_read_by<A>();
                      }) & kvtk::hint_fields::session) != 0;
  }
  const std::string sessions = sessions_read ? loaded.attach_session_signals() : "";
  const prefix_trace_view& t = loaded.view();
  const std::size_t n = t.requests();
  const auto k = static_cast<std::size_t>(std::floor(double(n) * (1.0 - o.holdout)));
  if (k < 1 || k >= n) {
    throw usage_error("--holdout " + detail::format("%g", o.holdout) + ": the trace's " +
                      std::to_string(n) + " requests leave an empty tune or holdout part");
  }
  const next_use_column next_uses = next_uses_for(o.trace, loaded, pb, o.next_use_cache);
  const std::span<const std::uint64_t> next = next_uses.span();
  const std::uint64_t bpt = o.model.empty() ? 0 : bytes_per_token_of(o.model);

  // Tune: warm-up [0, k/4), scored in three segments up to k. Holdout: warm-up [0, k), then [k, n).
  const std::array<std::size_t, 4> tune_bounds{k / 4, k / 2, 3 * k / 4, k};
  const std::array<std::size_t, 2> hold_bounds{k, n};
  // Jobs per capacity: every candidate twice (tune, holdout), then the optimum.
  const std::size_t per = 2 * cands.size() + 1;
  std::vector<std::vector<prefix_counts>> out(per * o.capacity.size());
  std::vector<optimum_result> opts(o.capacity.size());
  std::vector<std::uint64_t> asked;  // as replay reports them; caps: what is allocated
  std::vector<std::uint32_t> caps;
  for (const std::string& c : o.capacity) {
    asked.push_back(parse_capacity(c, o.block_tokens, bpt));
    caps.push_back(allocation_capacity(asked.back(), t.keys.size()));
  }
  detail::parallel_for(o.threads, out.size(), [&](std::size_t i) {
    const std::size_t ci = i / per, j = i % per;
    if (j == per - 1) {
      opts[ci] = kvtk::prefix::optimum_and_bound(t, caps[ci], pb, next, k);
    } else if (j % 2 == 1) {
      out[i] = run_candidate(cands[j / 2], t, caps[ci], pb, hold_bounds);
    } else {
      out[i] = run_candidate(cands[j / 2], t, caps[ci], pb, tune_bounds);
    }
  });

  tune_result r;
  r.warnings = std::move(warnings);
  r.trace = {{"path", o.trace},
             {"format", o.format},
             {"requests", n},
             {"tune_requests", k},
             {"tune_segments", {{0, k / 4}, {k / 4, k / 2}, {k / 2, 3 * k / 4}, {3 * k / 4, k}}},
             {"holdout_requests", n - k},
             {"holdout", o.holdout},
             {"partial_block", o.partial_block},
             {"skipped_lines", skipped.skipped_lines},
             {"session_signals", sessions.empty() ? nlohmann::json(nullptr) : nlohmann::json(sessions)}};
  r.results = nlohmann::json::array();
  for (std::size_t ci = 0; ci < o.capacity.size(); ++ci) {
    r.results.push_back(capacity_row(o, ci, asked[ci], cands,
                                     std::span(out).subspan(ci * per, per - 1), opts[ci]));
  }
  return r;
}

nlohmann::json to_json(const tune_result& r) { return {{"trace", r.trace}, {"results", r.results}}; }

std::string to_text(const tune_result& r) {
  using detail::format;
  const auto& seg = r.trace["tune_segments"];
  auto at = [&](std::size_t i, std::size_t e) { return seg[i][e].get<unsigned long long>(); };
  std::string s = format(
      "kvtk tune: %s: chosen on requests [%llu, %llu) (three segments, after a warm-up on "
      "[0, %llu)), reported on [%llu, %llu) after a warm-up on [0, %llu)\n",
      r.trace["path"].get<std::string>().c_str(), at(1, 0), at(3, 1), at(0, 1), at(3, 1),
      r.trace["requests"].get<unsigned long long>(), at(3, 1));
  for (const auto& row : r.results) {
    const auto& c = row["chosen"];
    s += format("\ncapacity %s (%llu blocks): chose %s/%s\n", row["capacity"].get<std::string>().c_str(),
                row["capacity_blocks"].get<unsigned long long>(),
                c["index"].get<std::string>().c_str(), c["policy"].get<std::string>().c_str());
    s += format("  %-26s %12s %14s %10s\n", "on the holdout", "block hits", "of optimum",
                "of bound");
    auto line = [&](const std::string& what, const nlohmann::json& x) {
      s += format("  %-26s %12.4f %14.3f %10.3f\n", what.c_str(), x["block_hit_ratio"].get<double>(),
                  x["opt_fraction"].get<double>(), x["bound_fraction"].get<double>());
    };
    line("chosen", c);
    if (row.contains("lru")) line("radix lru", row["lru"]);
    const auto& opt = row["optimum"];
    line("optimum (" + opt["index"].get<std::string>() + " " + opt["policy"].get<std::string>() + ")",
         opt);
    const auto& h = row["best_in_hindsight"];
    s += format("  best in hindsight: %s/%s at %.3f of optimum\n",
                h["index"].get<std::string>().c_str(), h["policy"].get<std::string>().c_str(),
                h["opt_fraction"].get<double>());
    s += "  use: " + row["recommendation"]["command"].get<std::string>() + "\n";
    if (row["recommendation"].contains("simulate_set")) {
      s += "  simulate: --set " + row["recommendation"]["simulate_set"].get<std::string>() + "\n";
    }
  }
  return s;
}

}  // namespace kvtk::sim
