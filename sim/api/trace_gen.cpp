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
// With session_fields, agents also run on their own clock: a step's reply ends in a tool call
// (tool_s: lognormal, median 2 s) and the next step arrives when the reply and the tool are done
// (the step's arrival + its latency estimate 0.1 s + input / 50,000 tok/s + 20 ms per output token
// + tool_s), instead of at a random later pick; the Poisson stream (at `rate`) carries new work
// and chat turns, so agent steps add to it. One agent step in 16 (not its first nor its last two) fans out
// instead: its reply starts 2-4 sub-agents (kind "sub-agent", each its own session whose first
// request's parent is that step; 1-3 steps with tool calls between them), and the agent's next
// step joins them: it is due 0.1 s after the last sub-agent's reply ends, lists the step and
// every sub-agent's last request as its parents (fan-in), and appends their results.
#include "api/trace_gen.hpp"

#include "api/options_json.hpp"
#include "api/trace_options.hpp"
#include "formats/writers.hpp"
#include "util/output_file.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <queue>
#include <kvtk/prefix/block_keys.hpp>
#include <random>
#include <vector>

namespace kvtk::sim {
namespace {

constexpr int prompts = 8;
constexpr std::uint32_t prompt_tokens[prompts] = {2048, 1536, 3072, 1024, 4096, 768, 2560, 512};

// Draws i in [0, n) with weight 1 / (i + 1) (Zipf-like), from u uniform in [0, 1).
int zipf_pick(int n, double u) {
  double total = 0;
  for (int i = 0; i < n; ++i) total += 1.0 / (i + 1);
  double x = u * total;
  for (int i = 0; i < n; ++i) {
    x -= 1.0 / (i + 1);
    if (x <= 0) return i;
  }
  return n - 1;
}

// Gamma(k, 1/k) inter-arrivals have mean 1 and a CV of 1/sqrt(k).
double gamma_shape(double cv) { return 1.0 / (cv * cv); }

// One request's fields, before they become a request_record.
struct drawn {
  std::uint64_t input = 0, output = 0, session = 0;
  std::uint32_t tenant = 0;
  // Session fields (gen_options::session_fields).
  std::uint64_t parent = kvtk::prefix::no_parent;  // the session's previous request, or none
  std::uint32_t turn = 0;
  const char* kind = "chat";
  double tool_s = -1;  // < 0: the reply makes no tool call
  std::vector<std::uint64_t> joins = {};  // fan-in: the sub-agents' last requests it waits for
};

// The generator's state; the order of its random draws is the trace (same seed, same trace), so
// the steps below keep one fixed order.
class generator {
 public:
  explicit generator(const gen_options& o)
      : o_(o),
        rng_(o.seed),
        tenant_rng_(o.seed ^ 0x5DEECE66Dull),  // separate: tenants never change requests
        tool_rng_(o.seed ^ 0x7F4A7C15ull),     // separate: tool times never change requests
        fan_rng_(o.seed ^ 0x2545F491ull),      // fan-out choices
        burst_gap_(gamma_shape(o.burst_cv), 1.0 / gamma_shape(o.burst_cv)),
        bt_(o.block_tokens),
        // Share of requests that continue a live session (the rest start new work). "mixed" is
        // tuned so its ideal token hit ratio lands near DeepSeek's published 56.3 % (tests check
        // 0.53-0.60).
        p_continue_(o.profile == "chat" ? 0.7 : o.profile == "agent" ? 0.85 : 0.22) {}

  // Arrival: Poisson (or Gamma-bursty) with a rate modulated by a day/night curve.
  double next_arrival_ms() {
    constexpr double day_ms = 24.0 * 3600 * 1000;
    const double rate = o_.rate_per_s * (1.0 + 0.5 * std::sin(2 * M_PI * t_ms_ / day_ms));
    const double unit_gap = o_.arrivals == "bursty" ? burst_gap_(rng_) : -std::log(1.0 - u01_(rng_));
    t_ms_ += unit_gap / rate * 1000.0;
    return t_ms_;
  }

  // The next request and its arrival (ms): the earlier of the Poisson stream's next event and,
  // with timed agents, the next agent step due. Its keys land in keys().
  drawn next(double& t_ms) {
    if (!o_.session_fields) {
      t_ms = next_arrival_ms();
      return next_request();
    }
    if (poisson_ms_ < 0) poisson_ms_ = next_arrival_ms();
    if (!due_.empty() && due_.top().ms <= poisson_ms_) {
      const step st = due_.top();
      due_.pop();
      t_ms = now_ms_ = st.ms;
      return agent_step(st.slot);
    }
    t_ms = now_ms_ = poisson_ms_;
    poisson_ms_ = -1;
    return next_request();
  }

  // The next request: a live session continues, or new work starts. Its keys land in keys().
  drawn next_request() {
    const bool api_only = o_.profile == "api";
    if (!api_only && !live_.empty() && u01_(rng_) < p_continue_) return continue_session();
    return start_work(api_only);
  }

  [[nodiscard]] const std::vector<std::uint64_t>& keys() const noexcept { return keys_; }

 private:
  struct session {
    std::vector<std::uint64_t> content;  // content ids of the blocks sent so far
    std::uint64_t tokens = 0;            // tokens sent so far
    int turns_left = 0;
    int kind = 0;                     // 0 chat, 1 agent
    std::uint32_t append_tokens = 0;  // agent: tokens appended per step
    std::uint64_t id = 0;
    std::uint32_t tenant = 0;
    std::uint64_t last_request = kvtk::prefix::no_parent;  // its latest request's index
    std::uint32_t sent = 0;                                // requests sent so far
    // Fan-out (timed agents): an agent waits for `waiting` sub-agents, whose last requests are
    // `joins`, until the last reply ends at ready_ms; a sub-agent reports to owner's slot.
    std::uint32_t waiting = 0;
    std::vector<std::uint64_t> joins;
    double ready_ms = 0;
    std::size_t owner = 0;
  };

  std::uint32_t pick_tenant() {
    if (o_.tenants == 0) return 0;
    return static_cast<std::uint32_t>(zipf_pick(
        static_cast<int>(o_.tenants), std::uniform_real_distribution<double>(0.0, 1.0)(tenant_rng_)));
  }

  // Appends `tokens` tokens; a partial last block is completed by the next append (its content
  // id is replaced, as the block's text changes). prompt_base != 0: a shared system prompt.
  void push_tokens(session& s, std::uint64_t tokens, std::uint64_t prompt_base) {
    const std::uint64_t before_blocks = (s.tokens + bt_ - 1) / bt_;
    s.tokens += tokens;
    const std::uint64_t after_blocks = (s.tokens + bt_ - 1) / bt_;
    if (s.tokens - tokens > 0 && (s.tokens - tokens) % bt_ != 0 && !s.content.empty()) {
      s.content.back() = prompt_base ? prompt_base : next_content_++;  // the partial block changed
    }
    for (std::uint64_t b = before_blocks; b < after_blocks; ++b) {
      s.content.push_back(prompt_base ? prompt_base * 4096 + b : next_content_++);
    }
  }

  void push_prompt(session& s) {
    const int p = zipf_pick(prompts, u01_(rng_));
    push_tokens(s, prompt_tokens[p], static_cast<std::uint64_t>(p + 1));
  }

  // The session's request: its keys, and (chat) the answer joins the history.
  drawn send(session& s) {
    drawn d{s.tokens, 0, s.id, s.tenant};
    d.parent = s.last_request;
    d.turn = s.sent++;
    d.kind = s.kind == 0 ? "chat" : d.turn == 0 ? (s.kind == 2 ? "sub-agent" : "agent") : "tool";
    s.last_request = requests_;
    keys_.resize(s.content.size());
    prefix::chain_keys(s.content, keys_);
    d.output = s.kind == 0 ? 100 + rng_() % 600 : 20 + rng_() % 200;
    if (s.kind == 0) push_tokens(s, d.output, 0);
    return d;
  }

  drawn continue_session() {
    const std::size_t i = static_cast<std::size_t>(rng_() % live_.size());
    session& s = live_[i];
    if (s.kind == 0) {
      push_tokens(s, 50 + rng_() % 400, 0);  // the new user message
    } else {
      push_tokens(s, s.append_tokens, 0);  // a tool result
    }
    const drawn d = send(s);
    if (--s.turns_left <= 0) live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(i));
    ++requests_;
    return d;
  }

  // Timed agents: the session's reply calls a tool; its next step is due after the reply's
  // latency and the tool's time.
  static double latency_s(const drawn& d) {
    return 0.1 + static_cast<double>(d.input) / 50000.0 + 0.02 * static_cast<double>(d.output);
  }
  void schedule(std::size_t slot, drawn& d) {
    d.tool_s = std::round(tool_seconds() * 1000.0) / 1000.0;
    due_.push({now_ms_ + (latency_s(d) + d.tool_s) * 1000.0, slot});
  }
  // The agent at `slot` sent request `d` (index requests_): its reply starts `count` sub-agents,
  // each due when the reply ends.
  void fan_out(std::size_t slot, const drawn& d, std::uint32_t count) {
    agents_[slot].waiting = count;
    agents_[slot].joins.clear();
    agents_[slot].ready_ms = 0;
    for (std::uint32_t i = 0; i < count; ++i) {
      session sub;
      sub.id = next_session_++;
      sub.tenant = agents_[slot].tenant;
      sub.kind = 2;
      sub.owner = slot;
      sub.last_request = requests_;  // the spawning step is its first request's parent
      sub.turns_left = 1 + static_cast<int>(rng_() % 3);
      sub.append_tokens = 100 + static_cast<std::uint32_t>(rng_() % 400);
      push_prompt(sub);
      push_tokens(sub, 500 + rng_() % 2000, 0);  // its task
      due_.push({now_ms_ + latency_s(d) * 1000.0, park(std::move(sub))});
    }
  }
  // A sub-agent's last request `d` (index requests_) was sent: its owner joins when every
  // sub-agent's reply has ended.
  void report(std::size_t owner, const drawn& d) {
    session& o = agents_[owner];
    o.joins.push_back(requests_);
    o.ready_ms = std::max(o.ready_ms, now_ms_ + latency_s(d) * 1000.0);
    if (--o.waiting == 0) due_.push({o.ready_ms + 100.0, owner});
  }
  std::size_t park(session&& s) {  // a slot for a waiting agent
    if (free_.empty()) {
      agents_.push_back(std::move(s));
      return agents_.size() - 1;
    }
    const std::size_t slot = free_.back();
    free_.pop_back();
    agents_[slot] = std::move(s);
    return slot;
  }

  drawn agent_step(std::size_t slot) {
    session& s = agents_[slot];
    const std::uint64_t results = s.joins.empty() ? 1 : s.joins.size();  // a tool's, or each sub-agent's
    if (s.kind != 2 || s.sent > 0) push_tokens(s, s.append_tokens * results, 0);
    drawn d = send(s);
    d.joins = std::move(s.joins);  // fan-in: each sub-agent's last request, after the parent
    s.joins.clear();
    const bool last = --s.turns_left <= 0;
    const std::size_t owner = s.owner;
    const bool sub = s.kind == 2;
    const bool spawn = !sub && !last && s.turns_left > 1 && fan_rng_() % 16 == 0;
    if (last) {
      agents_[slot] = session{};
      free_.push_back(slot);
      if (sub) report(owner, d);
    } else if (spawn) {
      fan_out(slot, d, 2 + static_cast<std::uint32_t>(fan_rng_() % 3));  // the reply waits for them
    } else {
      schedule(slot, d);  // the same slot waits for the next step
    }
    ++requests_;
    return d;
  }

  drawn start_work(bool api_only) {
    const double p_chat = o_.profile == "chat" ? 1.0 : o_.profile == "agent" ? 0.0 : 0.35;
    const double p_agent = o_.profile == "agent" ? 1.0 : o_.profile == "chat" ? 0.0 : 0.05;
    const double x = u01_(rng_) * (p_chat + p_agent + (api_only ? 1.0 : 0.60));
    session s;
    s.id = next_session_++;
    s.tenant = pick_tenant();
    if (api_only || x >= p_chat + p_agent) return api_request(s);
    s.kind = x < p_chat ? 0 : 1;
    push_prompt(s);
    if (s.kind == 0) {
      s.turns_left = 1 + static_cast<int>(rng_() % 12);
      push_tokens(s, 50 + rng_() % 400, 0);
    } else {
      s.turns_left = 5 + static_cast<int>(rng_() % 36);
      s.append_tokens = 100 + static_cast<std::uint32_t>(rng_() % 700);
      push_tokens(s, 4000 + rng_() % 28000, 0);  // the task's document or code
    }
    drawn d = send(s);
    if (--s.turns_left > 0 && s.kind == 1 && o_.session_fields) {
      schedule(park(std::move(s)), d);
    } else if (s.turns_left > 0) {
      live_.push_back(std::move(s));
      if (live_.size() > 2000) live_.pop_front();  // bounded memory
    }
    ++requests_;
    return d;
  }

  drawn api_request(session& s) {  // a one-off request, perhaps behind a system prompt
    if (u01_(rng_) < 0.4) push_prompt(s);
    push_tokens(s, 100 + rng_() % 3000, 0);
    drawn d{s.tokens, 0, s.id, s.tenant};
    keys_.resize(s.content.size());
    prefix::chain_keys(s.content, keys_);
    d.output = 50 + rng_() % 500;
    ++requests_;
    return d;
  }

  // A tool call's duration, seconds: lognormal, median 2 s, sigma 1 (a search or a test run;
  // from its own stream, so the requests are the same with or without session fields).
  double tool_seconds() { return std::exp(std::log(2.0) + tool_normal_(tool_rng_)); }

  const gen_options& o_;
  std::mt19937_64 rng_, tenant_rng_, tool_rng_, fan_rng_;
  std::normal_distribution<double> tool_normal_{0.0, 1.0};
  std::uint64_t requests_ = 0;  // requests drawn so far (the next one's index)
  // Timed agents (session_fields): sessions waiting on a tool, by the time their next step is due.
  struct step {
    double ms;
    std::size_t slot;
    bool operator>(const step& o) const noexcept { return ms > o.ms || (ms == o.ms && slot > o.slot); }
  };
  std::priority_queue<step, std::vector<step>, std::greater<step>> due_;
  std::vector<session> agents_;
  std::vector<std::size_t> free_;
  double poisson_ms_ = -1, now_ms_ = 0;
  std::gamma_distribution<double> burst_gap_;  // Gamma(k, 1/k): mean 1, CV 1/sqrt(k)
  std::uniform_real_distribution<double> u01_{0.0, 1.0};
  std::uint32_t bt_;
  double p_continue_;
  double t_ms_ = 0;
  std::uint64_t next_content_ = 1'000'000;  // ids below are system prompts
  std::uint64_t next_session_ = 1;
  std::deque<session> live_;
  std::vector<std::uint64_t> keys_;
};

}  // namespace

void generate_trace(const gen_options& o, const request_sink& sink) {
  std::vector<std::string> tenant_names;
  for (std::uint32_t i = 0; i < o.tenants; ++i) tenant_names.push_back("t" + std::to_string(i));
  generator g(o);
  for (std::uint64_t r = 0; r < o.requests; ++r) {
    double t_ms = 0;
    const drawn d = g.next(t_ms);
    request_record rec;
    rec.keys = g.keys();
    rec.input_length = d.input;
    rec.block_tokens = o.block_tokens;
    rec.line = r + 1;
    // Millisecond arrival times, as Mooncake writes them (whole ms keep both formats exact).
    rec.arrival_s = std::floor(t_ms) / 1000.0;
    rec.output_length = d.output;
    rec.session = d.session;
    if (o.tenants > 0) rec.tenant = tenant_names[d.tenant];
    if (o.session_fields) {
      rec.request_id = r;
      if (d.parent != kvtk::prefix::no_parent) rec.parent = d.parent;
      rec.joins = d.joins;
      rec.turn = d.turn;
      rec.kind = d.kind;
      if (d.tool_s >= 0) rec.tool_s = std::round(d.tool_s * 1000.0) / 1000.0;  // ms, exact in text
    }
    sink(rec);
  }
}

nlohmann::json to_json(const trace_gen_options& o) {
  return {{"profile", o.gen.profile},     {"requests", o.gen.requests},
          {"seed", o.gen.seed},           {"block_tokens", o.gen.block_tokens},
          {"rate", o.gen.rate_per_s},     {"arrivals", o.gen.arrivals},
          {"burst_cv", o.gen.burst_cv},   {"tenants", o.gen.tenants},
          {"session_fields", o.gen.session_fields},
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
  in.get("session_fields", o.gen.session_fields);
  in.get("output", o.output);
  in.get("to", o.to);
  in.get("force", o.force);
  in.finish();
  return o;
}

void validate(trace_gen_options& o) {
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
  if (g.session_fields && o.to == "mooncake") {
    throw usage_error("--session-fields: a Mooncake trace cannot hold them (use --to kvtk or kvtb)");
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
