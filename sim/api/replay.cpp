#include "api/replay.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <kvtk/prefix/engine_index.hpp>
#include <kvtk/prefix/leaf_registry.hpp>
#include <kvtk/registry.hpp>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "api/index_runs.hpp"
#include "api/next_uses.hpp"
#include "api/options_json.hpp"
#include "util/parallel.hpp"
#include "api/replay_plan.hpp"
#include "api/text.hpp"
#include "api/trace_options.hpp"
#include "api/pricing.hpp"
#include "util/phase_clock.hpp"
#include "api/tiers.hpp"
#include "formats/requests.hpp"
#include "move/calibration.hpp"
#include "util/memory_budget.hpp"

namespace kvtk::sim {
namespace {

using namespace kvtk::prefix;
using optimum_result = kvtk::prefix::offline_optimum::result;

using replay_detail::job;
using replay_detail::outcome;
using replay_detail::plan;
using replay_detail::make_plan;
using replay_detail::default_capacities;

// Replays in slices of requests so that a long job reports progress and lets go of the pages of
// a mapped trace (loaded_trace::release) and of a sidecar's next uses it has passed; the slices
// add up to one replay (replay_requests), so results do not depend on the slicing. Only offline
// indexes read `next`.
template <class Index>
prefix_counts replay_with_progress(const loaded_trace& lt, Index& idx, partial_block p,
                                   const next_use_column* next, detail::progress_relay& bar) {
  return detail::replay_sliced(lt, idx, p, next, &bar);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

outcome run_job(const job& j, const loaded_trace& t, const plan& p,
                const next_use_column& next, detail::progress_relay& bar,
                double trace_days) {
  const std::uint32_t cap = allocation_capacity(j.capacity, t.view().keys.size());
  const auto t0 = std::chrono::steady_clock::now();
  outcome o;
  if (j.hierarchy >= 0) {
    const auto& requested = p.hierarchies[static_cast<std::size_t>(j.hierarchy)];
    auto cfg = allocation_config(requested, t.view().keys.size());
    index_runs::tier_run run;
    if (p.tier_top == "radix") {
      run = visit_leaf_policy(requested.tiers[0].policy, [&]<class L>() {
        if constexpr (requires { L::offline; }) {  // as radix_index<L>::offline
          throw usage_error("--index radix with --tiers: the top tier's policy '" +
                            requested.tiers[0].policy + "' is offline (it needs next uses)");
          return index_runs::tier_run{};
        } else {
          return index_runs::replay_radix_tiers<L>(std::move(cfg), t, p.pb, bar);
        }
      });
    } else if (p.tier_top == "vllm" || p.tier_top == "sglang") {
      run = index_runs::replay_engine_tiers(p.tier_top, std::move(cfg), t, p.pb, bar, o.engine);
    } else {
      run = index_runs::replay_flat_tiers(std::move(cfg), t, p.pb, bar);
    }
    o.counts = run.counts;
    o.seconds = seconds_since(t0);
    o.tiers = tier_report(run.state, requested, o.counts, trace_days);
    return o;
  }
  if (j.offload >= 0 && p.offloads[static_cast<std::size_t>(j.offload)].engine == "sglang") {
    const offload_spec& spec = p.offloads[static_cast<std::size_t>(j.offload)];
    auto cfg = spec.hicache;
    // The device as given (not capped at the trace's references: its size decides what fits and
    // the host's ratio); the slots allocated are capped instead (max_tree_pages).
    const std::uint64_t device = j.capacity;
    const std::uint64_t host = hicache_host_pages(spec, device, t.view().block_tokens);
    if (device + host >= (1ull << 31)) {
      throw usage_error("--offload '" + spec.text + "': device and host pages must be below 2^31 "
                        "together");
    }
    cfg.device_pages = static_cast<std::uint32_t>(device);
    cfg.host_pages = static_cast<std::uint32_t>(host);
    cfg.max_tree_pages = static_cast<std::uint32_t>(
        std::min<std::uint64_t>(device + host, std::max<std::size_t>(t.view().keys.size(), 1)));
    kvtk::tier::sglang_hicache_index idx(cfg);
    o.counts = replay_with_progress(t, idx, p.pb, nullptr, bar);
    o.engine = {{"version", kvtk::tier::sglang_hicache::engine_version},
                {"unscheduled_requests", idx.counters().unscheduled}};
    o.offload = hicache_report(spec, idx.counters(), device, host, t.view().block_tokens, trace_days);
  } else if (j.offload >= 0 && p.offloads[static_cast<std::size_t>(j.offload)].medium == "kvbm") {
    const offload_spec& spec = p.offloads[static_cast<std::size_t>(j.offload)];
    auto cfg = spec.kvbm;
    cfg.gpu_blocks = cap;
    // A tier that can hold every block reference never evicts: allocate no more (as caps).
    const std::size_t refs = t.view().keys.size();
    if (cfg.host_blocks > 0) cfg.host_blocks = allocation_capacity(cfg.host_blocks, refs);
    if (cfg.disk_blocks > 0) cfg.disk_blocks = allocation_capacity(cfg.disk_blocks, refs);
    kvtk::tier::dynamo_kvbm_index idx(cfg);
    o.counts = replay_with_progress(t, idx, p.pb, nullptr, bar);
    o.engine = {{"version", kvtk::tier::dynamo_kvbm::engine_version},
                {"unscheduled_requests", idx.counters().unscheduled}};
    o.offload = kvbm_report(spec, idx.counters(), cap, t.view().block_tokens, trace_days);
  } else if (j.offload >= 0 && p.offloads[static_cast<std::size_t>(j.offload)].medium == "lmcache-cpu") {
    const offload_spec& spec = p.offloads[static_cast<std::size_t>(j.offload)];
    auto cfg = spec.lmcache;
    cfg.gpu_blocks = cap;
    // A CPU tier that can hold every chunk reference never evicts: allocate no more (as caps).
    cfg.cpu_chunks = allocation_capacity(cfg.cpu_chunks, t.view().keys.size());
    if (cfg.disk_chunks > 0) cfg.disk_chunks = allocation_capacity(cfg.disk_chunks, t.view().keys.size());
    kvtk::tier::lmcache_offload_index idx(cfg);
    o.counts = replay_with_progress(t, idx, p.pb, nullptr, bar);
    o.engine = {{"version", kvtk::tier::lmcache_offload::engine_version},
                {"unscheduled_requests", idx.counters().unscheduled}};
    o.offload = lmcache_report(spec, idx.counters(), cap, t.view().block_tokens, trace_days);
  } else if (j.offload >= 0) {
    const offload_spec& spec = p.offloads[static_cast<std::size_t>(j.offload)];
    auto cfg = spec.cfg;
    cfg.gpu_blocks = cap;
    // A CPU tier that can hold every chunk reference never evicts: allocate no more (as caps).
    cfg.cpu_chunks = allocation_capacity(cfg.cpu_chunks, t.view().keys.size());
    kvtk::tier::vllm_offload_index<> idx(cfg);
    o.counts = replay_with_progress(t, idx, p.pb, nullptr, bar);
    o.engine = {{"version", kvtk::tier::vllm_offload<>::engine_version},
                {"unscheduled_requests", idx.counters().unscheduled}};
    o.offload = offload_report(spec, idx.counters(), cap, t.view().block_tokens, trace_days);
  } else if (j.engine == "vllm") {
    vllm_engine_index idx(cap);
    o.counts = replay_with_progress(t, idx, p.pb, nullptr, bar);
    o.engine = {{"version", vllm_engine_index::engine_version},
                {"unscheduled_requests", idx.unscheduled()},
                {"cached_blocks", idx.pool().cached_blocks()},
                {"distinct_cached_blocks", idx.pool().distinct_keys()}};
  } else if (j.engine == "sglang") {
    sglang_engine_index idx(cap);
    o.counts = replay_with_progress(t, idx, p.pb, nullptr, bar);
    o.engine = {{"version", sglang_engine_index::engine_version},
                {"unscheduled_requests", idx.unscheduled()},
                {"cached_blocks", idx.cache().cached_blocks()},
                {"evicted_leaves", idx.cache().evicted_nodes()}};
  } else if (j.index == "flat") {
    o.counts = index_runs::replay_flat(j.policy, cap, t, p.pb, &next, bar);
  } else if (j.index == "radix") {
    o.counts = index_runs::replay_radix(j.policy, cap, t, p.pb, &next, bar);
  } else {
    hash_chain_index idx(cap);
    o.counts = replay_with_progress(t, idx, p.pb, nullptr, bar);
  }
  o.seconds = seconds_since(t0);
  return o;
}

// The trace's cacheable block references (the progress total).
std::uint64_t block_refs_of(const prefix_trace_view& t, partial_block pb) {
  if (t.unit_requests() && t.request_block_tokens.empty() && t.block_tokens > 0) {
    return t.keys.size();  // one whole block per request (replay_requests's unit layout)
  }
  std::uint64_t refs = 0;
  for (std::size_t r = 0; r < t.requests(); ++r) refs += t.cacheable(r, pb).size();
  return refs;
}

// Ideal: every distinct block fits (the same counts as an unbounded LRU): from the next uses
// when they were needed anyway, else one pass with a set (in slices, releasing mapped pages).
// release: drop the mapped pages passed (not when jobs read the same pages beside it).
ideal_counts ideal_of(const loaded_trace& loaded, partial_block pb, const next_use_column& next,
                      bool want_ideal, bool release = true) {
  const prefix_trace_view& t = loaded.view();
  ideal_counts ideal;
  if (!next.empty()) return detail::ideal_sliced(loaded, pb, next);
  if (want_ideal) {
    ideal_counter counter(t.keys.size());
    constexpr std::size_t slice = 1 << 16;
    for (std::size_t r = 0; r < t.requests(); r += slice) {
      const std::size_t end = std::min(t.requests(), r + slice);
      counter.add(t, pb, r, end);
      if (release) loaded.release(r, end);
    }
    return counter.result();
  }
  ideal.counts.block_refs = block_refs_of(t, pb);  // the reference count only
  return ideal;
}

// Fails before replaying anything when the largest concurrent jobs cannot fit.
void check_job_memory(const replay_options& o, const plan& p, std::size_t refs, std::size_t total,
                      std::size_t optimum_jobs) {
  double largest = 0;
  for (const job& j : p.jobs) {
    if (j.hierarchy < 0) {
      largest = std::max(largest, static_cast<double>(allocation_capacity(j.capacity, refs)));
    }
  }
  for (const auto& h : p.hierarchies) (void)allocation_config(h, refs);
  std::string caps;
  for (const auto& c : o.capacity.empty() ? default_capacities() : o.capacity) {
    caps += (caps.empty() ? "" : ",") + c;
  }
  // Every running job holds one index; an optimum job holds a second radix tree (its two radix
  // candidates, optimum.hpp) and the bound's bitmap (a bit per reference) on top.
  const double threads = static_cast<double>(std::min<std::size_t>(o.threads, total));
  const double optimum_threads = static_cast<double>(std::min<std::size_t>(o.threads, optimum_jobs));
  check_memory("--capacity " + caps + " with --threads " + std::to_string(o.threads) +
                   (optimum_jobs > 0 ? " and the optimum" : "") +
                   " (capacities capped at the trace's block references)",
               threads * largest * cache_entry_bytes +
                   optimum_threads * (largest * cache_entry_bytes + static_cast<double>(refs) / 8));
}

// The hint fields a job's policy reads (every tier's, for a hierarchy).
unsigned hints_read_by_job(const job& j, const plan& p) {
  unsigned read = 0;
  if (j.hierarchy >= 0) {
    const auto& tiers = p.hierarchies[static_cast<std::size_t>(j.hierarchy)].tiers;
    for (std::size_t t = 0; t < tiers.size(); ++t) {
      if (t == 0 && p.tier_top == "radix") {
        read |= visit_leaf_policy(tiers[t].policy, []<class L>() { return hints_read_by<L>(); });
      } else if (t == 0 && p.tier_top != "flat") {
        continue;  // an engine's GPU cache reads no hints
      } else {
        read |= visit_policy(tiers[t].policy, []<class P>() { return hints_read_by<P>(); });
      }
    }
  } else if (j.engine == "ideal" && j.index == "flat") {
    read = visit_policy(j.policy, []<class P>() { return hints_read_by<P>(); });
  } else if (j.engine == "ideal" && j.index == "radix") {
    read = visit_radix_policy(j.policy, []<class L, class A>() {
      return hints_read_by<L>() | hints_read_by<A>();
    });
  }
  return read;
}

bool reads_session(const plan& p) {
  for (const job& j : p.jobs) {
    if (hints_read_by_job(j, p) & hint_fields::session) return true;
  }
  return false;
}

nlohmann::json hint_names(unsigned bits) {
  nlohmann::json a = nlohmann::json::array();
  if (bits & hint_fields::depth) a.push_back("depth");
  if (bits & hint_fields::next_use) a.push_back("next_use");
  if (bits & hint_fields::priority) a.push_back("priority");
  if (bits & hint_fields::full_blocks) a.push_back("full_blocks");
  if (bits & hint_fields::session) a.push_back("session");
  return a;
}

// Which access_hint fields the job's policy reads and which this replay gave it: replays give
// every block's depth and the request's full-block count, next uses to offline policies, and no
// priorities (traces carry none), so priority-lru runs as LRU and says so here.
nlohmann::json hints_json(const job& j, const plan& p, bool sessions) {
  const unsigned read = hints_read_by_job(j, p);
  unsigned given = hint_fields::depth | hint_fields::full_blocks;
  if (j.hierarchy >= 0 && p.tier_top == "radix" && j.engine == "ideal") {
    // A radix tier hierarchy replays requests (replay_requests): depth, full blocks, and the
    // session signals its leaf order hears (radix_tier_hierarchy::process).
    if (sessions) given |= hint_fields::session;
  } else if (j.hierarchy >= 0 || j.engine != "ideal") {
    given = hint_fields::depth;  // hierarchies and engine modes give each block its depth
  } else if ((j.index == "flat" && index_runs::flat_offline(j.policy)) ||
             (j.index == "radix" && index_runs::radix_offline(j.policy))) {
    given |= hint_fields::next_use;
  }
  if (sessions && j.hierarchy < 0 && j.engine == "ideal" && j.index == "radix") {
    given |= hint_fields::session;  // the radix replay's per-request hints (not the unit layout)
  }
  return {{"read", hint_names(read)}, {"given", hint_names(given)},
          {"missing", hint_names(read & ~given)}};
}

nlohmann::json result_row(const job& j, const outcome& out, const plan& p,
                          const std::map<std::uint64_t, optimum_result>* optimum,
                          std::uint64_t output_tokens, bool sessions) {
  const prefix_counts& c = out.counts;
  nlohmann::json r = {
      {"engine", j.engine},
      {"index", j.index},
      {"policy", j.policy},
      {"capacity_blocks", j.capacity},
      {"capacity", j.capacity_given.empty() ? std::to_string(j.capacity) : j.capacity_given},
      {"requests", c.requests},
      {"block_refs", c.block_refs},
      {"block_hits", c.block_hits},
      {"token_refs", c.token_refs},
      {"token_hits", c.token_hits},
      {"block_hit_ratio", c.block_hit_ratio()},
      {"token_hit_ratio", c.token_hit_ratio()},
      {"evictions", c.evictions},
      {"seconds", out.seconds},
      {"block_refs_per_second",
       out.seconds > 0 ? static_cast<double>(c.block_refs) / out.seconds : 0.0}};
  if (!out.engine.is_null()) r["engine_state"] = out.engine;
  if (!out.offload.is_null()) r["offload"] = out.offload;
  r["hints"] = hints_json(j, p, sessions);
  if (j.hierarchy >= 0) {
    r["tiers"] = out.tiers;
    if (!p.calibration_reports.empty()) {
      r["tiers"]["calibration"] = p.calibration_reports[static_cast<std::size_t>(j.hierarchy)];
    }
  }
  if (p.priced) {
    r["cost"] = api_cost_json(p.table, {static_cast<double>(c.token_hits),
                                             static_cast<double>(c.token_refs - c.token_hits),
                                             static_cast<double>(output_tokens)},
                                   0.0);
  }
  if (optimum != nullptr && j.hierarchy < 0 && j.offload < 0) {  // the optimum is GPU-only
    const optimum_result& best = optimum->at(j.capacity);
    r["opt_fraction"] = c.fraction_of(best.counts);
    r["bound_fraction"] = best.bound_fraction(c);
  }
  return r;
}

}  // namespace

nlohmann::json to_json(const replay_options& o) {
  return {{"trace", o.trace},
          {"format", o.format},
          {"block_tokens", o.block_tokens},
          {"engine", o.engine},
          {"index", o.index},
          {"policy", o.policy},
          {"capacity", o.capacity},
          {"model", o.model},
          {"partial_block", o.partial_block},
          {"threads", o.threads},
          {"opt", o.opt},
          {"ideal", o.ideal},
          {"pricing", o.pricing},
          {"tiers", o.tiers},
          {"tier_config", o.tier_config},
          {"offload", o.offload},
          {"inclusion", o.inclusion},
          {"tier_top", o.tier_top},
          {"write_policy", o.write_policy},
          {"admission", o.admission},
          {"calibration", o.calibration},
          {"calibration_mechanism", o.calibration_mechanism},
          {"skip_invalid", o.skip_invalid},
          {"next_use_cache", o.next_use_cache},
          {"timings", o.timings}};
}

replay_options replay_options_from_json(const nlohmann::json& j) {
  replay_options o;
  detail::options_reader in(j, "replay options");
  in.get("trace", o.trace);
  in.get("format", o.format);
  in.get("block_tokens", o.block_tokens);
  in.get("engine", o.engine);
  in.get("index", o.index);
  in.get("policy", o.policy);
  in.get("capacity", o.capacity);
  in.get("model", o.model);
  in.get("partial_block", o.partial_block);
  in.get("threads", o.threads);
  in.get("opt", o.opt);
  in.get("ideal", o.ideal);
  in.get("pricing", o.pricing);
  in.get("tiers", o.tiers);
  in.get("tier_config", o.tier_config);
  in.get("offload", o.offload);
  in.get("inclusion", o.inclusion);
  in.get("tier_top", o.tier_top);
  in.get("write_policy", o.write_policy);
  in.get("admission", o.admission);
  in.get("calibration", o.calibration);
  in.get("calibration_mechanism", o.calibration_mechanism);
  in.get("skip_invalid", o.skip_invalid);
  in.get("next_use_cache", o.next_use_cache);
  in.get("timings", o.timings);
  in.finish();
  return o;
}

void validate(replay_options& o) {
  check_request_format(o.format);
  resolve_trace(o.trace, o.format, o.block_tokens);  // trace_error: exit 1 via main
  check_next_use_cache(o.next_use_cache);
  (void)make_plan(o);
}

namespace {

// Offline policies and the optimum need every reference's next use; nothing else does.
bool needs_next_use(const replay_options& o, const plan& p) {
  bool any = o.opt;
  for (const job& j : p.jobs) {
    if (j.hierarchy >= 0) continue;
    if (j.index == "flat") {
      any |= index_runs::flat_offline(j.policy);
    } else if (j.index == "radix") {
      any |= index_runs::radix_offline(j.policy);
    }
  }
  return any;
}

// The result's "trace" object.
nlohmann::json trace_summary(const replay_options& o, const plan& p, const prefix_trace_view& t,
                             const ideal_counts& ideal, const read_report& skipped,
                             bool ideal_known, std::uint64_t output_tokens, double trace_days) {
  nlohmann::json j = {{"path", o.trace},
                      {"format", o.format},
                      {"requests", t.requests()},
                      {"block_refs", ideal.counts.block_refs},
                      {"unique_blocks", ideal.unique_blocks},
                      {"block_tokens", o.block_tokens},
                      {"partial_block", p.pb == partial_block::cache ? "cache" : "skip"},
                      {"skipped_lines", skipped.skipped_lines},
                      {"ideal_block_hit_ratio", ideal.counts.block_hit_ratio()},
                      {"ideal_token_hit_ratio", ideal.counts.token_hit_ratio()},
                      {"output_tokens", output_tokens},
                      {"span_s", trace_days * 86400.0}};
  if (!ideal_known) {
    for (const char* k : {"unique_blocks", "ideal_block_hit_ratio", "ideal_token_hit_ratio"}) {
      j[k] = nullptr;
    }
  }
  return j;
}

// The jobs and the optimum at each grid capacity, on o.threads threads.
struct replayed {
  std::vector<outcome> results;
  std::map<std::uint64_t, optimum_result> optimum;  // empty without --opt
  double optimum_seconds = 0;                      // summed over capacities
};

// ideal_beside: the ideal pass (ideal_of) runs as one more task beside the jobs (with two or
// more threads and no next uses), filling *ideal_beside; ideal_refs is then block_refs_of.
replayed replay_jobs(const replay_options& o, const plan& p, const loaded_trace& loaded,
                     const next_use_column& next, std::uint64_t ideal_refs,
                     double trace_days, const progress_callback& progress,
                     ideal_counts* ideal_beside) {
  const prefix_trace_view& t = loaded.view();
  replayed r;
  r.results.resize(p.jobs.size());
  if (o.opt) {
    for (const job& j : p.jobs) {
      if (j.hierarchy < 0) r.optimum.emplace(j.capacity, optimum_result{});
    }
  }
  std::vector<std::uint64_t> opt_caps;
  for (auto& [c, v] : r.optimum) opt_caps.push_back(c);
  std::vector<double> optimum_seconds(opt_caps.size());
  const std::size_t total = p.jobs.size() + opt_caps.size();
  detail::progress_relay bar(progress, ideal_refs * total);
  check_job_memory(o, p, t.keys.size(), total, opt_caps.size());
  // Which index the optimum runs, decided once for every capacity (replay_optimum's rule).
  const bool opt_flat = !opt_caps.empty() && detail::optimum_runs_flat(loaded, p.pb);
  // The ideal pass, when it runs beside the jobs, is item 0: started first, as it is as long as
  // a job.
  const std::size_t extra = ideal_beside != nullptr ? 1 : 0;
  detail::parallel_for(o.threads, total + extra, [&](std::size_t item) {
    if (item < extra) {
      *ideal_beside = ideal_of(loaded, p.pb, next, true, false);
      return;
    }
    const std::size_t i = item - extra;
    if (i < p.jobs.size()) {
      r.results[i] = run_job(p.jobs[i], loaded, p, next, bar, trace_days);
      return;
    }
    const std::uint64_t c = opt_caps[i - p.jobs.size()];
    const auto t0 = std::chrono::steady_clock::now();
    r.optimum[c] = detail::optimum_sliced(loaded, allocation_capacity(c, t.keys.size()),
                                          opt_flat, p.pb, next, &bar);
    optimum_seconds[i - p.jobs.size()] = seconds_since(t0);
  });
  for (const double x : optimum_seconds) r.optimum_seconds += x;
  return r;
}

}  // namespace

replay_result run(replay_options o, const progress_callback& progress) {
  auto clock = std::make_shared<phase_clock>();
  validate(o);
  const plan p = make_plan(o);
  read_report skipped;
  std::vector<std::string> warnings;
  // A large JSONL trace is streamed through a temporary kvtb unless next uses are needed: their
  // pass reads the whole trace first, and a sidecar named after an unlinked temporary would be
  // left behind (convert to kvtb for that; docs/formats.md "Streaming").
  const bool stream = stream_text_trace(o.trace) && !needs_next_use(o, p);
  loaded_trace loaded = load_trace_for(o.trace, o.format, o.block_tokens, o.skip_invalid,
                                       skipped, warnings, false, o.threads, stream);
  // Session signals only when some policy reads them (inferring sessions costs a pass).
  const std::string sessions = reads_session(p) ? loaded.attach_session_signals() : "";
  const prefix_trace_view& t = loaded.view();
  clock->lap("read");
  const next_use_column next = needs_next_use(o, p)
                                   ? next_uses_for(o.trace, loaded, p.pb, o.next_use_cache)
                                   : next_use_column{};
  clock->lap("next_use");
  // With two threads or more, the ideal pass runs beside the replay jobs (it is one more pass
  // over the trace, as long as an LRU job); its phase time is then 0 and the replay's includes it.
  const bool ideal_beside = o.threads >= 2 && o.ideal && next.empty();
  ideal_counts ideal;
  if (!ideal_beside) ideal = ideal_of(loaded, p.pb, next, o.ideal);
  const std::uint64_t refs = ideal_beside ? block_refs_of(t, p.pb) : ideal.counts.block_refs;
  clock->lap("ideal");
  const double trace_days =
      t.arrival_s.size() > 1 ? (t.arrival_s.back() - t.arrival_s.front()) / 86400.0 : 0.0;
  std::uint64_t output_tokens = 0;
  for (const std::uint64_t out : t.output_length) output_tokens += out;
  const replayed done = replay_jobs(o, p, loaded, next, refs, trace_days, progress,
                                    ideal_beside ? &ideal : nullptr);
  clock->lap("replay");

  replay_result r;
  r.warnings = std::move(warnings);
  r.optimum_seconds = done.optimum_seconds;
  r.trace = trace_summary(o, p, t, ideal, skipped, o.ideal || !next.empty(), output_tokens,
                          trace_days);
  // Where session-aware policies' sessions came from: "trace", "inferred", or null (none ran).
  r.trace["session_signals"] = sessions.empty() ? nlohmann::json(nullptr) : nlohmann::json(sessions);
  r.results = nlohmann::json::array();
  for (std::size_t i = 0; i < p.jobs.size(); ++i) {
    r.results.push_back(
        result_row(p.jobs[i], done.results[i], p, o.opt ? &done.optimum : nullptr, output_tokens,
                   !sessions.empty() && !t.unit_requests()));  // the unit layout passes none
  }
  for (const auto& [cap, best] : done.optimum) {
    nlohmann::json cands = nlohmann::json::array();
    for (std::size_t i = 0; i < best.candidate_count; ++i) {
      cands.push_back({{"policy", best.candidates[i].policy},
                       {"block_hits", best.candidates[i].counts.block_hits},
                       {"token_hits", best.candidates[i].counts.token_hits}});
    }
    r.optimum.push_back({{"capacity_blocks", cap},
                         {"policy", best.policy},
                         {"block_hits", best.counts.block_hits},
                         {"token_hits", best.counts.token_hits},
                         {"block_hit_ratio", best.counts.block_hit_ratio()},
                         {"bound_block_hits", best.bound_block_hits},
                         {"candidates", cands}});
  }
  if (o.timings) {
    r.timings = clock->json({{"optimum_in_replay", r.optimum_seconds}});
    r.clock = clock;
  }
  return r;
}

}  // namespace kvtk::sim
