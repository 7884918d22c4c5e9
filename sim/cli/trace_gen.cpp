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
// Poisson with a day/night sinusoid (period 24 h of trace time, +-50 %).
#include "cli/trace_gen.hpp"

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
};

}  // namespace

void generate_trace(const gen_options& o, std::ostream& out) {
  std::mt19937_64 rng(o.seed);
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
    t_ms += -std::log(1.0 - u01(rng)) / rate * 1000.0;
    const double p_mix_chat = o.profile == "chat" ? 1.0 : o.profile == "agent" ? 0.0 : 0.35;
    const double p_mix_agent = o.profile == "agent" ? 1.0 : o.profile == "chat" ? 0.0 : 0.05;
    const bool api_only = o.profile == "api";
    // Continue a live session with probability 0.7 (if any), else start new work.
    std::uint64_t input = 0, output = 0;
    if (!api_only && !live.empty() && u01(rng) < p_continue) {
      const std::size_t i = static_cast<std::size_t>(rng() % live.size());
      session& s = live[i];
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
    out << "{\"timestamp\": " << static_cast<std::uint64_t>(t_ms) << ", \"input_length\": " << input
        << ", \"output_length\": " << output << ", \"hash_ids\": [";
    for (std::size_t k = 0; k < keys.size(); ++k) out << (k ? ", " : "") << keys[k];
    out << "]}\n";
  }
}

}  // namespace kvtk::sim
