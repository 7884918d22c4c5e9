#include "api/trace_import.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <optional>
#include <thread>
#include <vector>

#include "api/options_json.hpp"
#include "api/parallel.hpp"
#include "api/usage_error.hpp"
#include "formats/jsonl_scan.hpp"
#include "formats/line_reader.hpp"
#include "formats/trace_limits.hpp"
#include "formats/utf8.hpp"
#include "formats/writers.hpp"
#include "kvtk/detail/mix.hpp"
#include "kvtk/prefix/block_hasher.hpp"
#include "util/output_file.hpp"

namespace kvtk::sim {

nlohmann::json to_json(const trace_import_options& o) {
  return {{"log", o.log},
          {"format", o.format},
          {"output", o.output},
          {"to", o.to},
          {"engine", o.engine},
          {"block_tokens", o.block_tokens},
          {"hash_algo", o.hash_algo},
          {"hash_seed", o.hash_seed},
          {"preset", o.preset},
          {"field_timestamp", o.field_timestamp},
          {"field_tokens", o.field_tokens},
          {"field_output", o.field_output},
          {"field_session", o.field_session},
          {"field_lora", o.field_lora},
          {"field_lora_path", o.field_lora_path},
          {"field_cache_salt", o.field_cache_salt},
          {"time_unit", o.time_unit},
          {"threads", o.threads},
          {"force", o.force}};
}

trace_import_options trace_import_options_from_json(const nlohmann::json& j) {
  trace_import_options o;
  detail::options_reader in(j, "trace import options");
  in.get("log", o.log);
  in.get("format", o.format);
  in.get("output", o.output);
  in.get("to", o.to);
  in.get("engine", o.engine);
  in.get("block_tokens", o.block_tokens);
  in.get("hash_algo", o.hash_algo);
  in.get("hash_seed", o.hash_seed);
  in.get("preset", o.preset);
  in.get("field_timestamp", o.field_timestamp);
  in.get("field_tokens", o.field_tokens);
  in.get("field_output", o.field_output);
  in.get("field_session", o.field_session);
  in.get("field_lora", o.field_lora);
  in.get("field_lora_path", o.field_lora_path);
  in.get("field_cache_salt", o.field_cache_salt);
  in.get("time_unit", o.time_unit);
  in.get("threads", o.threads);
  in.get("force", o.force);
  in.finish();
  return o;
}

void validate(trace_import_options& o) {
  if (o.log.empty()) throw usage_error("give the request log (kvtk trace import LOG -o OUT)");
  if (o.format != "token-ids") {
    throw usage_error("--format: '" + o.format + "' cannot be imported (token-ids: a JSONL log "
                      "with token ids; text logs, KV events and Dynamo traces are not supported yet)");
  }
  if (o.engine != "vllm" && o.engine != "sglang") {
    throw usage_error("--engine: '" + o.engine + "' is not vllm or sglang");
  }
  if (o.block_tokens == 0 || o.block_tokens > limits::max_block_tokens) {
    throw usage_error("--block-tokens: " + std::to_string(o.block_tokens) +
                      " is outside [1, 2^20] tokens");
  }
  try {
    (void)kvtk::prefix::parse_vllm_hash_algo(o.hash_algo);
  } catch (const std::invalid_argument&) {
    throw usage_error("--hash-algo: '" + o.hash_algo +
                      "' is not one of vLLM's (sha256 sha256_cbor xxhash xxhash_cbor)");
  }
  if (o.engine == "sglang" && (o.hash_algo != "sha256" || !o.hash_seed.empty())) {
    throw usage_error("--hash-algo and --hash-seed are vLLM's: SGLang's page hashes have neither");
  }
  if (o.engine == "vllm" && o.hash_seed.empty() && o.hash_algo.rfind("xxhash", 0) == 0) {
    throw usage_error("--hash-algo " + o.hash_algo + ": without PYTHONHASHSEED vLLM draws a random "
                      "NONE_HASH seed per process, so its keys cannot be reproduced; give "
                      "--hash-seed (the engine's PYTHONHASHSEED)");
  }
  if (o.preset != "kvtk" && o.preset != "vllm") {
    throw usage_error("--preset: '" + o.preset + "' is not kvtk or vllm");
  }
  const bool vllm_names = o.preset == "vllm";
  auto name = [](std::string& field, const char* preset) {
    if (field.empty()) field = preset;
  };
  name(o.field_timestamp, vllm_names ? "arrival_time" : "timestamp");
  name(o.field_tokens, vllm_names ? "prompt_token_ids" : "token_ids");
  name(o.field_output, vllm_names ? "max_tokens" : "output_length");
  name(o.field_session, "session");
  name(o.field_lora, "lora_name");
  name(o.field_lora_path, "lora_path");
  name(o.field_cache_salt, "cache_salt");
  if (o.threads > 256) {
    throw usage_error("--threads: " + std::to_string(o.threads) + " is over 256 (0 = every core)");
  }
  if (o.time_unit != "s" && o.time_unit != "ms") {
    throw usage_error("--time-unit: '" + o.time_unit + "' is not s or ms");
  }
  if (o.output.empty()) throw usage_error("-o: give the output file, or - for stdout");
  if (o.to.empty()) {
    if (o.output.size() < 5 || o.output.compare(o.output.size() - 5, 5, ".kvtb") != 0) {
      throw usage_error("--to: give the output format (kvtb kvtk mooncake)");
    }
    o.to = "kvtb";
  }
  if (o.to != "kvtb" && o.to != "kvtk" && o.to != "mooncake") {
    throw usage_error("--to: cannot write '" + o.to + "' here (kvtb kvtk mooncake)");
  }
  struct stat st {};
  if (::stat(o.log.c_str(), &st) != 0) throw usage_error("cannot open the log '" + o.log + "'");
  if (!S_ISREG(st.st_mode)) throw usage_error("the log '" + o.log + "' is not a regular file");
  note_input(o.log);
  check_output(o.output, o.force, "-o");
}

namespace {

// One log line, parsed and hashed by a worker.
struct imported {
  std::vector<kvtk::block_key> keys;
  std::uint64_t tokens = 0;
  std::optional<double> arrival_s;
  std::optional<std::uint64_t> output_length;
  std::optional<std::uint64_t> session;
  std::uint64_t full_blocks = 0;
  std::string error;  // "" = fine
};

std::uint64_t string_id(std::string_view s) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return kvtk::detail::mix64(h);
}

// The key of a partial last block: a content key kvtk derives (no engine hashes it), chained to
// the key before it so that two requests share it only when they share everything before it.
kvtk::block_key partial_key(kvtk::block_key before, std::span<const std::uint64_t> tokens) noexcept {
  std::uint64_t h = kvtk::detail::mix64(before ^ 0x7061727469616cull);  // "partial"
  for (const std::uint64_t t : tokens) h = kvtk::detail::mix64(h ^ t);
  return h;
}

class line_importer {
 public:
  line_importer(const trace_import_options& o, const kvtk::prefix::block_hasher& h) : o_(o), h_(h) {}

  void run(std::string_view line, imported& out) const {
    out = imported{};
    std::vector<std::uint64_t> tokens;
    bool have_tokens = false;
    kvtk::prefix::request_extras x;
    std::optional<std::string> lora_name, lora_path;
    std::string problem;
    auto fail = [&](std::string why) {
      if (problem.empty()) problem = std::move(why);
    };
    const std::string err = jsonl::scan_object(
        line, tokens, [&](std::string_view key) { return key == o_.field_tokens; },
        [&](std::string_view key, const jsonl::value& v) {
          if (key == o_.field_tokens) {
            if (v.type != jsonl::kind::int_array) {
              fail("'" + o_.field_tokens + "' is not an array of token ids");
            } else if (v.bad_element != jsonl::value::npos) {
              const std::string what = v.bad_type == "negative" ? "a negative number" : "a " + std::string(v.bad_type);
              fail("'" + o_.field_tokens + "'[" + std::to_string(v.bad_element) + "] is " + what +
                   ", not a token id (a non-negative integer)");
            }
            have_tokens = true;
          } else if (key == o_.field_timestamp) {
            if (v.type == jsonl::kind::null) return;  // absent
            if (v.type != jsonl::kind::integer && v.type != jsonl::kind::number) {
              fail("'" + o_.field_timestamp + "' is a " + std::string(v.type_name()) + ", not a number");
              return;
            }
            const double t = v.number;  // signed already
            out.arrival_s = o_.time_unit == "ms" ? t * 0.001 : t;
          } else if (key == o_.field_output) {
            if (v.type == jsonl::kind::null) return;  // absent (vLLM's max_tokens default)
            if (v.type != jsonl::kind::integer || v.negative) {
              fail("'" + o_.field_output + "' is not a non-negative integer");
              return;
            }
            out.output_length = v.magnitude;
          } else if (key == o_.field_session) {
            if (v.type == jsonl::kind::string) {
              if (!valid_utf8(v.text)) fail("'" + o_.field_session + "' is not valid UTF-8");
              out.session = string_id(v.text);
            } else if (v.type == jsonl::kind::integer && !v.negative) {
              out.session = v.magnitude;
            } else if (v.type != jsonl::kind::null) {
              fail("'" + o_.field_session + "' is not a string or a non-negative integer");
            }
          } else if (key == o_.field_lora || key == o_.field_lora_path || key == o_.field_cache_salt) {
            if (v.type == jsonl::kind::null) return;
            if (v.type != jsonl::kind::string || !valid_utf8(v.text)) {
              fail("'" + std::string(key) + "' is not a UTF-8 string");
              return;
            }
            // Raw JSON string contents: escapes are refused rather than guessed.
            if (v.text.find('\\') != std::string_view::npos) {
              fail("'" + std::string(key) + "' has escapes, which kvtk does not decode here");
              return;
            }
            if (key == o_.field_lora) {
              lora_name = std::string(v.text);
            } else if (key == o_.field_lora_path) {
              lora_path = std::string(v.text);
            } else {
              x.cache_salt = std::string(v.text);
            }
          }
        });
    if (!err.empty()) {
      out.error = err;
      return;
    }
    if (!problem.empty()) {
      out.error = problem;
      return;
    }
    if (lora_name && o_.engine == "vllm") {
      if (!lora_path) {
        out.error = "'" + o_.field_lora + "' without '" + o_.field_lora_path +
                    "': vLLM's LoRA extra key is the adapter's (name, path)";
        return;
      }
      x.lora = kvtk::prefix::vllm_lora_key{*lora_name, *lora_path};
    } else if (lora_name) {
      x.extra_key = *lora_name;  // SGLang: the LoRA id namespaces the radix key
    }
    if (!have_tokens) {
      out.error = "missing field '" + o_.field_tokens + "' (the prompt's token ids)";
      return;
    }
    if (tokens.empty()) {
      out.error = "'" + o_.field_tokens + "' is empty (a request has at least one token)";
      return;
    }
    if (tokens.size() >= limits::max_input_tokens) {
      out.error = "the prompt has 2^32 tokens or more";
      return;
    }
    if (out.arrival_s && (!std::isfinite(*out.arrival_s) || *out.arrival_s < 0 ||
                          *out.arrival_s > limits::max_arrival_s)) {
      out.error = "the timestamp " + std::to_string(*out.arrival_s) + " s is outside [0, 1e12] s";
      return;
    }
    try {
      h_.append_keys(tokens, out.keys, x);
    } catch (const std::exception& e) {
      out.error = e.what();
      return;
    }
    out.full_blocks = out.keys.size();
    const std::uint64_t bt = o_.block_tokens;
    const std::uint64_t blocks = (tokens.size() + bt - 1) / bt;
    if (out.keys.size() > blocks) out.keys.resize(blocks);  // never with full pages only
    out.full_blocks = std::min<std::uint64_t>(out.full_blocks, tokens.size() / bt);
    if (out.keys.size() < blocks) {
      // Chained to the last full key, which carries the request's extra keys; a prompt shorter
      // than a block starts from its extras (cache_salt, LoRA), so that they still separate it.
      kvtk::block_key before = 0;
      if (!out.keys.empty()) {
        before = out.keys.back();
      } else {
        before = string_id(x.cache_salt);
        if (x.lora) before = kvtk::detail::mix64(before ^ string_id(x.lora->name) ^ (string_id(x.lora->path) << 1));
        if (x.extra_key) before = kvtk::detail::mix64(before ^ string_id(*x.extra_key) ^ 0x65787472ull);
      }
      out.keys.push_back(partial_key(before, std::span<const std::uint64_t>(tokens).subspan(out.keys.size() * bt)));
    }
    out.tokens = tokens.size();
    // What every kvtk reader checks (formats/trace_limits.hpp), here on the log's line.
    if (auto p = limits::request_problem(out.tokens, out.keys.size(), o_.block_tokens, out.arrival_s,
                                         out.output_length);
        !p.empty()) {
      out.error = p;
      return;
    }
  }

 private:
  const trace_import_options& o_;
  const kvtk::prefix::block_hasher& h_;
};

kvtk::prefix::block_hasher make_hasher(const trace_import_options& o) {
  if (o.engine == "sglang") {
    kvtk::prefix::sglang_hash_options s;
    s.page_size = o.block_tokens;
    return kvtk::prefix::block_hasher(s);
  }
  kvtk::prefix::vllm_hash_options v;
  v.algo = kvtk::prefix::parse_vllm_hash_algo(o.hash_algo);
  v.block_size = o.block_tokens;
  if (!o.hash_seed.empty()) v.none_hash_seed = o.hash_seed;
  return kvtk::prefix::block_hasher(v);
}

}  // namespace

trace_import_result run(trace_import_options o, const progress_callback& progress) {
  validate(o);
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const kvtk::prefix::block_hasher hasher = make_hasher(o);
  const line_importer importer(o, hasher);
  const std::uint32_t threads =
      o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  std::ifstream in(o.log, std::ios::binary);
  if (!in) throw usage_error("cannot open the log '" + o.log + "'");
  line_reader lines(in, o.log);
  const trace_format out_format = *parse_format_name(o.to);
  auto writer = trace_writer::open(o.output, out_format, o.block_tokens, o.force);
  detail::progress_relay bar(progress, 0);
  trace_import_result r;
  // Batches of lines (bounded in count and bytes: streaming), parsed and hashed in parallel,
  // then written in order.
  constexpr std::size_t batch_lines = 4096, batch_bytes = std::size_t{64} << 20;
  std::vector<std::string> batch;
  std::vector<std::uint64_t> numbers;  // the batch's line numbers
  std::vector<imported> done(batch_lines);
  std::optional<double> last_time;
  bool any_untimed = false, any_timed = false;
  double hash_s = 0;
  for (bool more = true; more;) {
    batch.clear();
    numbers.clear();
    std::size_t bytes = 0;
    std::string_view line;
    std::exception_ptr read_failure;  // a line over the cap or a read error: after the lines before it
    try {
      while (batch.size() < batch_lines && bytes < batch_bytes && (more = lines.next(line))) {
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.find_first_not_of(" \t") == std::string_view::npos) continue;  // blank lines
        batch.emplace_back(line);
        numbers.push_back(lines.line_number());
        bytes += line.size();
      }
    } catch (const trace_error&) {
      read_failure = std::current_exception();
      more = false;
    }
    if (batch.empty()) {
      if (read_failure) std::rethrow_exception(read_failure);
      continue;
    }
    const auto t0 = clock::now();
    detail::parallel_for(threads, batch.size(), [&](std::size_t i) { importer.run(batch[i], done[i]); });
    hash_s += std::chrono::duration<double>(clock::now() - t0).count();
    for (std::size_t i = 0; i < batch.size(); ++i) {
      imported& q = done[i];
      if (!q.error.empty()) throw trace_error(o.log, numbers[i], q.error);
      if (q.arrival_s) {
        if (any_untimed) {
          throw trace_error(o.log, numbers[i], "has a timestamp, but an earlier line has none "
                                               "(a log times every request or none)");
        }
        if (last_time && *q.arrival_s < *last_time) {
          throw trace_error(o.log, numbers[i], "timestamp goes backwards (sort the log by arrival "
                                               "time first: a trace is in arrival order)");
        }
        last_time = q.arrival_s;
        any_timed = true;
      } else {
        if (any_timed) {
          throw trace_error(o.log, numbers[i], "has no timestamp ('" + o.field_timestamp +
                                                   "'), but earlier lines have one");
        }
        any_untimed = true;
      }
      request_record rec;
      rec.keys = q.keys;
      rec.input_length = q.tokens;
      rec.block_tokens = o.block_tokens;
      rec.line = numbers[i];
      rec.arrival_s = q.arrival_s;
      rec.output_length = q.output_length;
      rec.session = q.session;
      writer->add(rec);
      ++r.requests;
      r.tokens += q.tokens;
      r.full_blocks += q.full_blocks;
      bar.add(1);
    }
    if (read_failure) std::rethrow_exception(read_failure);
  }
  writer->finish();
  r.seconds = std::chrono::duration<double>(clock::now() - start).count();
  r.hash_seconds = hash_s;
  r.tokens_per_s = hash_s > 0 ? static_cast<double>(r.tokens) / hash_s : 0.0;
  r.threads = threads;
  r.engine = o.engine;
  r.to = o.to;
  r.output = o.output;
  r.block_tokens = o.block_tokens;
  return r;
}

nlohmann::json to_json(const trace_import_result& r) {
  return {{"requests", r.requests},     {"tokens", r.tokens},
          {"full_blocks", r.full_blocks}, {"seconds", r.seconds},
          {"hash_seconds", r.hash_seconds}, {"tokens_per_s", r.tokens_per_s},
          {"threads", r.threads},       {"engine", r.engine},
          {"to", r.to},                 {"output", r.output},
          {"block_tokens", r.block_tokens}};
}

std::string to_text(const trace_import_result& r) {
  char rate[64];
  std::snprintf(rate, sizeof rate, "%.1f M tokens/s", r.tokens_per_s / 1e6);
  return "kvtk trace import: wrote " + std::to_string(r.requests) + " requests (" +
         std::to_string(r.tokens) + " tokens, " + std::to_string(r.full_blocks) + " full " +
         r.engine + " blocks of " + std::to_string(r.block_tokens) + " tokens) to " + r.output +
         " (" + r.to + "); parsed and hashed at " + rate + " on " + std::to_string(r.threads) +
         " thread(s)\n";
}

}  // namespace kvtk::sim
