// sim/api/trace_stats.cpp — `kvtk trace stats` (api/trace_stats.hpp).
#include "api/trace_stats.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "api/options_json.hpp"
#include "api/trace_options.hpp"
#include "util/phase_clock.hpp"
#include "formats/requests.hpp"
#include "kvtk/prefix/sessions.hpp"

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

// Session structure: requests and turns per session, durations, gaps between a session's
// consecutive requests and from a parent's arrival to its child's; null for a trace with neither
// session fields nor one continuation to infer.
nlohmann::json session_stats(const kvtk::prefix::prefix_trace_view& t) {
  const kvtk::prefix::session_columns c = kvtk::prefix::session_columns_of(t);
  if (c.session.empty()) return nullptr;
  struct info {
    std::uint64_t requests = 0;
    std::uint32_t min_turn = kvtk::prefix::no_turn, max_turn = 0;  // turns may start at 0 or 1
    double first = NAN, last = NAN;
  };
  const bool timed = !t.arrival_s.empty();
  std::unordered_map<std::uint64_t, info> by_id;
  std::vector<double> gaps, parent_gaps;
  bool any_turn = false;
  std::uint64_t children = 0;
  for (std::size_t r = 0; r < t.requests(); ++r) {
    info& s = by_id[c.session[r]];
    ++s.requests;
    if (c.turn[r] != kvtk::prefix::no_turn) {
      any_turn = true;
      s.min_turn = std::min(s.min_turn, c.turn[r]);
      s.max_turn = std::max(s.max_turn, c.turn[r]);
    }
    if (c.parent[r] != kvtk::prefix::no_parent) {
      ++children;
      const double a = timed ? t.arrival_s[r] : NAN, b = timed ? t.arrival_s[c.parent[r]] : NAN;
      if (!std::isnan(a) && !std::isnan(b)) parent_gaps.push_back(a - b);
    }
    if (timed && !std::isnan(t.arrival_s[r])) {
      if (!std::isnan(s.last)) gaps.push_back(t.arrival_s[r] - s.last);
      if (std::isnan(s.first)) s.first = t.arrival_s[r];
      s.last = t.arrival_s[r];
    }
  }
  if (c.inferred && children == 0) return nullptr;  // nothing continues anything: no sessions
  std::uint64_t several = 0;  // fan-in: requests listing further parents (as written; the closed
                              // loop waits only for those it finds earlier in the trace)
  for (std::size_t r = 0; r < t.requests() && !t.join_offsets.empty(); ++r) several += !t.joins(r).empty();
  std::vector<double> requests, turns, duration;
  std::uint64_t multi = 0, in_multi = 0;
  for (const auto& [id, s] : by_id) {
    requests.push_back(static_cast<double>(s.requests));
    if (any_turn && s.min_turn != kvtk::prefix::no_turn) turns.push_back(static_cast<double>(s.max_turn - s.min_turn + 1));
    if (s.requests > 1) {
      ++multi;
      in_multi += s.requests;
      if (!std::isnan(s.first)) duration.push_back(s.last - s.first);
    }
  }
  nlohmann::json out = {{"sessions", by_id.size()},
                        {"multi_request_sessions", multi},
                        {"requests_in_multi_request_sessions", in_multi},
                        {"requests_per_session", distribution(requests)},
                        {"turns_per_session", distribution(turns)},
                        {"multi_request_session_duration_s", distribution(duration)},
                        {"gap_between_requests_of_a_session_s", distribution(gaps)},
                        {"requests_with_a_parent", children},
                        {"requests_with_several_parents", several},
                        {"gap_from_parent_arrival_s", distribution(parent_gaps)}};
  if (c.inferred) {
    out["inferred"] = "from prefixes: a request whose keys begin with an earlier, shorter request's "
                      "full blocks continues it (kvtk/prefix/sessions.hpp, docs/formats.md)";
  }
  return out;
}

}  // namespace

nlohmann::json to_json(const trace_stats_options& o) {
  return {{"trace", o.trace},
          {"format", o.format},
          {"block_tokens", o.block_tokens},
          {"partial_block", o.partial_block},
          {"skip_invalid", o.skip_invalid},
          {"timings", o.timings}};
}

trace_stats_options trace_stats_options_from_json(const nlohmann::json& j) {
  trace_stats_options o;
  detail::options_reader in(j, "trace stats options");
  in.get("trace", o.trace);
  in.get("format", o.format);
  in.get("block_tokens", o.block_tokens);
  in.get("partial_block", o.partial_block);
  in.get("skip_invalid", o.skip_invalid);
  in.get("timings", o.timings);
  in.finish();
  return o;
}

void validate(const trace_stats_options& o) {
  check_request_format(o.format);
  (void)parse_partial_block(o.partial_block);
}

namespace {

using kvtk::prefix::partial_block;
using kvtk::prefix::prefix_counts;
using kvtk::prefix::prefix_trace_view;

struct reference_pass {
  std::vector<std::uint64_t> input, output, reuse;  // tokens per request; reuse distances
  std::uint64_t refs = 0, unique = 0;               // block references, distinct blocks
  prefix_counts ideal;                              // every distinct block fits
};

// One pass: lengths, and per reference its key's previous position (reuse time, distinct
// blocks, and whether an earlier request had it: the ideal hit).
reference_pass pass_over(const prefix_trace_view& t, partial_block pb) {
  reference_pass out;
  auto& [input, output, reuse, refs, unique, ideal] = out;
  input.reserve(t.requests());
  if (!t.output_length.empty()) output.reserve(t.requests());
  kvtk::detail::key_map<std::uint64_t> last(
      kvtk::detail::key_map<std::uint64_t>::expected_for_refs(t.keys.size()));
  constexpr std::size_t ahead = kvtk::detail::key_map<std::uint64_t>::prefetch_distance;
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
  unique = last.size();
  return out;
}

// Burstiness: Poisson arrivals have a coefficient of variation of 1; bursty traffic more.
double inter_arrival_cv(const prefix_trace_view& t) {
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
  return mean > 0 ? std::sqrt(std::max(var, 0.0)) / mean : 0.0;
}

}  // namespace

trace_stats_result run(trace_stats_options o) {
  using namespace kvtk::prefix;
  validate(o);
  const partial_block pb =
      parse_partial_block(o.partial_block) == 1 ? partial_block::cache : partial_block::skip;
  trace_stats_result r;
  auto clock = std::make_shared<phase_clock>();
  read_report skipped;
  std::vector<std::string>& warnings = r.warnings;
  const loaded_trace loaded = load_trace_for(o.trace, o.format, o.block_tokens, o.skip_invalid,
                                             skipped, warnings, false, 1,
                                             stream_text_trace(o.trace));
  const prefix_trace_view& t = loaded.view();

  clock->lap("read");

  reference_pass ref = pass_over(t, pb);
  clock->lap("pass");

  nlohmann::json& out = r.stats;
  out["trace"] = {{"path", o.trace},
                  {"format", o.format},
                  {"block_tokens", t.block_tokens},
                  {"partial_block", pb == partial_block::cache ? "cache" : "skip"},
                  {"skipped_lines", skipped.skipped_lines}};
  out["requests"] = t.requests();
  if (!t.arrival_s.empty() && t.requests() > 1) {
    const double span = t.arrival_s.back() - t.arrival_s.front();
    out["span_s"] = span;
    out["arrival_rate_per_s"] = span > 0 ? static_cast<double>(t.requests() - 1) / span : 0.0;
  }
  out["input_tokens"] = distribution(std::move(ref.input));
  out["output_tokens"] = distribution(std::move(ref.output));
  out["block_refs"] = ref.refs;
  out["unique_blocks"] = ref.unique;
  out["ideal_block_hit_ratio"] = ref.ideal.block_hit_ratio();
  out["ideal_token_hit_ratio"] = ref.ideal.token_hit_ratio();
  out["reuse_distance_block_refs"] = distribution(std::move(ref.reuse));
  if (!t.arrival_s.empty() && t.requests() > 2) out["inter_arrival_cv"] = inter_arrival_cv(t);
  out["sessions"] = session_stats(t);
  if (!t.tenant.empty()) {
    std::map<std::string, std::uint64_t> per_tenant;
    const auto names = loaded.tenant_names();
    for (std::uint32_t x : t.tenant) ++per_tenant[x ? names[x] : std::string("(none)")];
    out["requests_per_tenant"] = per_tenant;
  }
  clock->lap("summary");
  if (o.timings) r.clock = clock;
  return r;
}

nlohmann::json to_json(const trace_stats_result& r) { return r.stats; }

std::string to_text(const trace_stats_result& r) { return r.stats.dump(2) + "\n"; }

}  // namespace kvtk::sim
