// The generator models what a DeepSeek-style API serves:
//  * chat: multi-turn sessions. A session starts with one of a few popular system prompts
//    (Zipf-distributed) and re-sends its whole history every turn: input = system prompt +
//    all previous user messages and answers + the new message. Sessions last 1-12 turns.
//  * agent: tool loops. A task context (system prompt + a long document or codebase excerpt) is
//    re-sent with a small tool result appended at every step, 5-40 steps.
//  * api: one-off requests; 40 % of them start with a popular system prompt, the rest are unique.
//  * mixed: new work is 35 % chat sessions, 5 % agent loops, 60 % api requests, and 22 % of
//    requests continue a live session (the default; its ideal token hit ratio lands near
//    DeepSeek's published 56.3 %: 0.557-0.565 for seeds 1-3 at 20,000 requests, checked in tests).
// Block content ids are unique per (session, position) except for shared system prompts, and are
// chained into prefix ids, so a block hits iff its whole prefix was sent before. Arrivals are
// Poisson (or, with arrivals=bursty, gamma inter-arrivals with coefficient of variation
// burst_cv: clustered bursts and lulls at the same mean rate) with a day/night sinusoid
// (period 24 h of trace time, +-50 %). Every chat or agent session has its own session id and a
// tenant (Zipf over `tenants`); a one-off API request is a session of its own.
#include "api/trace_gen.hpp"

#include "api/options_json.hpp"
#include "cli/common.hpp"
#include "formats/writers.hpp"
#include "util/output_file.hpp"

#include <cmath>
#include <deque>
#include <kvtk/prefix/block_keys.hpp>
#include <random>
#include <vector>

namespace kvtk::sim {
namespace {

struct session {
  std::vector<std::uint64_t> content;  // content ids of the blocks sent so far
  std::uint64_t tokens = 0;            // tokens sent so far
  int turns_left = 0;
  int kind = 0;                     // 0 chat, 1 agent
  std::uint32_t append_tokens = 0;  // agent: tokens appended per step
  std::uint64_t id = 0;
  std::uint32_t tenant = 0;
};

}  // namespace

void generate_trace(const gen_options& o, const request_sink& sink) {
  std::mt19937_64 rng(o.seed);
  std::mt19937_64 tenant_rng(o.seed ^ 0x5DEECE66Dull);  // separate: tenants never change requests
  std::vector<std::string> tenant_names;
  for (std::uint32_t i = 0; i < o.tenants; ++i) tenant_names.push_back("t" + std::to_string(i));
  auto pick_tenant = [&]() -> std::uint32_t {
    if (o.tenants == 0) return 0;
    double total = 0;
    for (std::uint32_t i = 0; i < o.tenants; ++i) total += 1.0 / (i + 1);
    double x = std::uniform_real_distribution<double>(0.0, total)(tenant_rng);
    for (std::uint32_t i = 0; i < o.tenants; ++i) {
      x -= 1.0 / (i + 1);
      if (x <= 0) return i;
    }
    return o.tenants - 1;
  };
  std::uint64_t next_session = 1;
  // Gamma(k, mean/k) inter-arrivals have the requested mean and a CV of 1/sqrt(k).
  const double shape = 1.0 / (o.burst_cv * o.burst_cv);
  std::gamma_distribution<double> burst_gap(shape, 1.0 / shape);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  const std::uint32_t bt = o.block_tokens;
  std::uint64_t next_content = 1'000'000;  // ids below are system prompts
  auto fresh = [&] { return next_content++; };
  constexpr int prompts = 8;
  const std::uint32_t prompt_tokens[prompts] = {2048, 1536, 3072, 1024, 4096, 768, 2560, 512};
  auto popular_prompt = [&] {  // Zipf-like: prompt i with weight 1/(i+1)
    double total = 0;
    for (int i = 0; i < prompts; ++i) total += 1.0 / (i + 1);
    double x = u01(rng) * total;
    for (int i = 0; i < prompts; ++i) {
      x -= 1.0 / (i + 1);
      if (x <= 0) return i;
    }
    return prompts - 1;
  };
  auto push_tokens = [&](session& s, std::uint64_t tokens, std::uint64_t prompt_base) {
    // Appends `tokens` tokens; a partial last block is completed by the next append (its content
    // id is replaced, as the block's text changes).
    const std::uint64_t before_blocks = (s.tokens + bt - 1) / bt;
    s.tokens += tokens;
    const std::uint64_t after_blocks = (s.tokens + bt - 1) / bt;
    if (s.tokens - tokens > 0 && (s.tokens - tokens) % bt != 0 && !s.content.empty()) {
      s.content.back() = prompt_base ? prompt_base : fresh();  // the partial block changed
    }
    for (std::uint64_t b = before_blocks; b < after_blocks; ++b) {
      s.content.push_back(prompt_base ? prompt_base * 4096 + b : fresh());
    }
  };
  // Share of requests that continue a live session (the rest start new work). "mixed" is tuned so
  // its ideal token hit ratio lands near DeepSeek's published 56.3 % (tests check 0.53-0.60).
  const double p_continue = o.profile == "chat" ? 0.7 : o.profile == "agent" ? 0.85 : 0.22;
  std::deque<session> live;
  std::vector<std::uint64_t> keys;
  double t_ms = 0;
  const double day_ms = 24.0 * 3600 * 1000;
  for (std::uint64_t r = 0; r < o.requests; ++r) {
    // Arrival: Poisson, rate modulated by a day/night curve.
    const double rate = o.rate_per_s * (1.0 + 0.5 * std::sin(2 * M_PI * t_ms / day_ms));
    const double unit_gap = o.arrivals == "bursty" ? burst_gap(rng) : -std::log(1.0 - u01(rng));
    t_ms += unit_gap / rate * 1000.0;
    const double p_mix_chat = o.profile == "chat" ? 1.0 : o.profile == "agent" ? 0.0 : 0.35;
    const double p_mix_agent = o.profile == "agent" ? 1.0 : o.profile == "chat" ? 0.0 : 0.05;
    const bool api_only = o.profile == "api";
    // Continue a live session with probability 0.7 (if any), else start new work.
    std::uint64_t input = 0, output = 0, session_id = 0;
    std::uint32_t tenant = 0;
    if (!api_only && !live.empty() && u01(rng) < p_continue) {
      const std::size_t i = static_cast<std::size_t>(rng() % live.size());
      session& s = live[i];
      session_id = s.id;
      tenant = s.tenant;
      if (s.kind == 0) {
        push_tokens(s, 50 + rng() % 400, 0);  // the new user message
      } else {
        push_tokens(s, s.append_tokens, 0);  // a tool result
      }
      input = s.tokens;
      keys.resize(s.content.size());
      prefix::chain_keys(s.content, keys);
      output = s.kind == 0 ? 100 + rng() % 600 : 20 + rng() % 200;
      if (s.kind == 0) push_tokens(s, output, 0);  // the answer joins the history
      if (--s.turns_left <= 0) live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      const double x = u01(rng) * (p_mix_chat + p_mix_agent + (api_only ? 1.0 : 0.60));
      session s;
      s.id = next_session++;
      s.tenant = pick_tenant();
      session_id = s.id;
      tenant = s.tenant;
      if (!api_only && x < p_mix_chat + p_mix_agent) {
        s.kind = x < p_mix_chat ? 0 : 1;
        const int p = popular_prompt();
        push_tokens(s, prompt_tokens[p], static_cast<std::uint64_t>(p + 1));
        if (s.kind == 0) {
          s.turns_left = 1 + static_cast<int>(rng() % 12);
          push_tokens(s, 50 + rng() % 400, 0);
        } else {
          s.turns_left = 5 + static_cast<int>(rng() % 36);
          s.append_tokens = 100 + static_cast<std::uint32_t>(rng() % 700);
          push_tokens(s, 4000 + rng() % 28000, 0);  // the task's document or code
        }
        input = s.tokens;
        keys.resize(s.content.size());
        prefix::chain_keys(s.content, keys);
        output = s.kind == 0 ? 100 + rng() % 600 : 20 + rng() % 200;
        if (s.kind == 0) push_tokens(s, output, 0);
        if (--s.turns_left > 0) {
          live.push_back(std::move(s));
          if (live.size() > 2000) live.pop_front();  // bounded memory
        }
      } else {  // a one-off API request
        if (u01(rng) < 0.4) {
          const int p = popular_prompt();
          push_tokens(s, prompt_tokens[p], static_cast<std::uint64_t>(p + 1));
        }
        push_tokens(s, 100 + rng() % 3000, 0);
        input = s.tokens;
        keys.resize(s.content.size());
        prefix::chain_keys(s.content, keys);
        output = 50 + rng() % 500;
      }
    }
    request_record rec;
    rec.keys = keys;
    rec.input_length = input;
    rec.block_tokens = bt;
    rec.line = r + 1;
    // Millisecond arrival times, as Mooncake writes them (whole ms keep both formats exact).
    rec.arrival_s = std::floor(t_ms) / 1000.0;
    rec.output_length = output;
    rec.session = session_id;
    if (o.tenants > 0) rec.tenant = tenant_names[tenant];
    sink(rec);
  }
}

nlohmann::json to_json(const trace_gen_options& o) {
  return {{"profile", o.gen.profile},     {"requests", o.gen.requests},
          {"seed", o.gen.seed},           {"block_tokens", o.gen.block_tokens},
          {"rate", o.gen.rate_per_s},     {"arrivals", o.gen.arrivals},
          {"burst_cv", o.gen.burst_cv},   {"tenants", o.gen.tenants},
          {"output", o.output},           {"to", o.to},
          {"force", o.force}};
}

trace_gen_options trace_gen_options_from_json(const nlohmann::json& j) {
  trace_gen_options o;
  detail::options_reader in(j, "trace gen options");
  in.get("profile", o.gen.profile);
  in.get("requests", o.gen.requests);
  in.get("seed", o.gen.seed);
  in.get("block_tokens", o.gen.block_tokens);
  in.get("rate", o.gen.rate_per_s);
  in.get("arrivals", o.gen.arrivals);
  in.get("burst_cv", o.gen.burst_cv);
  in.get("tenants", o.gen.tenants);
  in.get("output", o.output);
  in.get("to", o.to);
  in.get("force", o.force);
  in.finish();
  return o;
}

void validate(trace_gen_options& o) {
  using cli::usage_error;
  const gen_options& g = o.gen;
  if (g.profile != "chat" && g.profile != "agent" && g.profile != "api" && g.profile != "mixed") {
    throw usage_error("--profile: unknown profile '" + g.profile + "' (known: chat agent api mixed)");
  }
  if (g.requests == 0 || g.requests > 1000000000) throw usage_error("--requests: must be in [1, 10^9]");
  if (g.block_tokens == 0 || g.block_tokens > 65536) {
    throw usage_error("--block-tokens: must be in [1, 65536]");
  }
  if (!(g.rate_per_s > 0) || !std::isfinite(g.rate_per_s)) throw usage_error("--rate: must be positive");
  if (g.arrivals != "poisson" && g.arrivals != "bursty") {
    throw usage_error("--arrivals: '" + g.arrivals + "' (use poisson or bursty)");
  }
  if (!(g.burst_cv >= 1.0 && g.burst_cv <= 100.0)) throw usage_error("--burst-cv: must be in [1, 100]");
  if (g.tenants > 1000000) throw usage_error("--tenants: at most 10^6");
  if (o.output.empty()) throw usage_error("--output: give a file, or - for stdout");
  const bool kvtb_name = o.output.size() > 5 && o.output.compare(o.output.size() - 5, 5, ".kvtb") == 0;
  // kvtk JSONL by default: its header carries the block size, so every command reads the trace
  // back with default flags (a Mooncake file has no header; readers assume 512).
  if (o.to.empty()) o.to = kvtb_name ? "kvtb" : "kvtk";
  if (o.to != "mooncake" && o.to != "kvtk" && o.to != "kvtb") {
    throw usage_error("--to: '" + o.to + "' (use mooncake, kvtk or kvtb)");
  }
  check_output(o.output, o.force, "-o");
}

trace_gen_result run(trace_gen_options o) {
  validate(o);
  trace_gen_result r;
  const trace_format f = *parse_format_name(o.to);
  if (f == trace_format::mooncake && o.gen.block_tokens != 512) {
    r.warnings.push_back("a Mooncake trace has no block size and readers assume 512 tokens; read "
                         "this one with --block-tokens " + std::to_string(o.gen.block_tokens));
  }
  auto w = trace_writer::open(o.output, f, o.gen.block_tokens, o.force);
  generate_trace(o.gen, [&](const request_record& rec) {
    w->add(rec);
    ++r.requests;
  });
  w->finish();
  r.output = o.output;
  r.format = o.to;
  return r;
}

}  // namespace kvtk::sim
