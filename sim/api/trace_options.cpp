// sim/api/trace_options.cpp — option values every command shares (api/trace_options.hpp).
#include "api/trace_options.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include "des/profiles.hpp"
#include "kvtk/prefix/block_keys.hpp"
#include "kvtk/prefix/engine_index.hpp"
#include "util/output_file.hpp"

namespace kvtk::sim {

std::vector<std::string> split_list(const std::string& s, const std::string& option) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    // "10,,20" or a trailing comma is a typo, not a shorter list.
    if (item.empty()) throw usage_error(option + ": empty item in '" + s + "' (a doubled or trailing comma)");
    out.push_back(item);
  }
  return out;
}

const std::map<std::string, std::uint64_t>& model_bytes_per_token() {
  // Derived from the simulator's model presets (des/profiles.cpp): one table of models.
  static const std::map<std::string, std::uint64_t> m = [] {
    std::map<std::string, std::uint64_t> out;
    for (const auto& [name, profile] : des::model_presets()) out[name] = profile.kv_bytes_per_token;
    return out;
  }();
  return m;
}

std::uint32_t allocation_capacity(std::uint64_t capacity, std::uint64_t refs) {
  const std::uint64_t c = std::min(capacity, std::max<std::uint64_t>(refs, 1));
  if (c >= (std::uint64_t{1} << 31)) {
    throw usage_error("--capacity: " + std::to_string(capacity) +
                      " blocks; a cache holds at most 2^31-1 entries");
  }
  return static_cast<std::uint32_t>(c);
}

std::uint64_t parse_capacity(const std::string& text, std::uint32_t block_tokens,
                             std::uint64_t bytes_per_token) {
  std::size_t pos = 0;
  double v = 0;
  // Decimal only: stod would also read hexadecimal ("0x10" = 16), "inf" and "nan".
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.') ||
      (text.size() > 1 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X'))) {
    throw usage_error("--capacity: '" + text + "' is not a decimal number with an optional unit");
  }
  try {
    v = std::stod(text, &pos);
  } catch (const std::exception&) {
    throw usage_error("--capacity: '" + text + "' does not start with a number");
  }
  if (!(v > 0) || !std::isfinite(v))
    throw usage_error("--capacity: '" + text + "' is not positive");
  const std::string unit = text.substr(pos);
  static const std::map<std::string, double> scale = {{"", 1},
                                                      {"k", 1e3},
                                                      {"M", 1e6},
                                                      {"G", 1e9},
                                                      {"B", 1},
                                                      {"KB", 1e3},
                                                      {"MB", 1e6},
                                                      {"GB", 1e9},
                                                      {"TB", 1e12},
                                                      {"KiB", 1024.0},
                                                      {"MiB", 1048576.0},
                                                      {"GiB", 1073741824.0},
                                                      {"TiB", 1099511627776.0}};
  double blocks = 0;
  if (unit.size() >= 3 && unit.compare(unit.size() - 3, 3, "tok") == 0) {
    const auto it = scale.find(unit.substr(0, unit.size() - 3));
    if (it == scale.end() || it->first.size() > 1) {
      throw usage_error("--capacity: unknown token unit in '" + text +
                        "' (use tok, ktok, Mtok, Gtok)");
    }
    blocks = std::floor(v * it->second / block_tokens);
  } else if (unit.empty()) {
    if (std::floor(v) != v)
      throw usage_error("--capacity: '" + text + "' is not a whole number of blocks");
    blocks = v;
  } else {
    const auto it = scale.find(unit);
    if (it == scale.end() || it->first.size() < 1 || it->first.back() != 'B') {
      throw usage_error("--capacity: unknown unit in '" + text +
                        "' (blocks: a number; tokens: 3Mtok; bytes: 64GiB, 500MB)");
    }
    if (bytes_per_token == 0) {
      throw usage_error("--capacity: '" + text +
                        "' is in bytes; give --model to know KV bytes per token");
    }
    blocks = std::floor(v * it->second / static_cast<double>(bytes_per_token * block_tokens));
  }
  if (blocks < 1) throw usage_error("--capacity: '" + text + "' is less than one block");
  if (blocks >= 2147483648.0) throw usage_error("--capacity: '" + text + "' is over 2^31-1 blocks");
  return static_cast<std::uint64_t>(blocks);
}

std::uint64_t bytes_per_token_of(const std::string& model) {
  const auto it = model_bytes_per_token().find(model);
  if (it != model_bytes_per_token().end()) return it->second;
  if (model.size() > 5 && model.compare(model.size() - 5, 5, ".json") == 0) {
    return model_file_bytes_per_token(model);
  }
  std::string known;
  for (const auto& [n, b] : model_bytes_per_token()) known += " " + n;
  throw usage_error("--model: unknown model '" + model + "' (known:" + known +
                    ", or a JSON file: docs/formats.md)");
}

std::string json_error_text(const std::exception& e) {
  // nlohmann's messages start "[json.exception.parse_error.101] parse error at line 1, column 5:
  // ": the user needs the place and the reason, not the library's error id.
  std::string what = e.what();
  if (what.rfind("[json.exception.", 0) == 0) {
    if (const auto end = what.find("] "); end != std::string::npos) what.erase(0, end + 2);
  }
  return what;
}

nlohmann::json read_json_file(const std::string& option, const std::string& path) {
  // A directory opens as a stream and fails later with "basic_filebuf::underflow"; a FIFO or
  // device may never end. Say what the path is instead.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw usage_error(option + ": cannot open '" + path + "': " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) throw usage_error(option + ": '" + path + "' is a directory");
  if (!S_ISREG(st.st_mode)) throw usage_error(option + ": '" + path + "' is not a regular file");
  if (st.st_size > (std::int64_t{64} << 20)) {
    throw usage_error(option + ": '" + path + "' is over 64 MiB (not a config file?)");
  }
  if (st.st_size == 0) throw usage_error(option + ": '" + path + "' is empty (a JSON object expected)");
  std::ifstream in(path);
  if (!in) throw usage_error(option + ": cannot open '" + path + "'");
  try {
    return nlohmann::json::parse(in);
  } catch (const std::exception& e) {  // nlohmann's parse errors, and stream failures
    throw usage_error(option + ": '" + path + "' is not valid JSON: " + json_error_text(e));
  }
}

std::uint64_t model_file_bytes_per_token(const std::string& path) {
  const nlohmann::json j = read_json_file("--model", path);
  if (!j.is_object()) throw usage_error("--model: '" + path + "' must hold a JSON object");
  auto field = [&](const char* name) -> std::uint64_t {
    if (!j.contains(name)) throw usage_error("--model: '" + path + "' lacks '" + name + "'");
    const auto& v = j[name];
    if (!v.is_number_unsigned() || v.get<std::uint64_t>() == 0 ||
        v.get<std::uint64_t>() >= (1ull << 32)) {
      throw usage_error("--model: '" + path + "': '" + name +
                        "' must be a positive integer below 2^32");
    }
    return v.get<std::uint64_t>();
  };
  // Either the figure itself, or the attention shape it follows from (bf16 = 2 bytes):
  //   MHA/GQA: 2 (K and V) * layers * kv_heads * head_dim * dtype_bytes
  //   MLA:     layers * (kv_lora_rank + qk_rope_head_dim) * dtype_bytes (one latent per token)
  if (j.contains("kv_bytes_per_token")) return field("kv_bytes_per_token");
  const std::uint64_t dtype = j.contains("dtype_bytes") ? field("dtype_bytes") : 2;
  // The product must stay below 2^32 bytes per token like the figure itself (each factor is
  // below 2^32, so checking step by step cannot itself overflow).
  auto product = [&](std::initializer_list<std::uint64_t> factors) {
    std::uint64_t p = 1;
    for (const std::uint64_t f : factors) {
      if (__builtin_mul_overflow(p, f, &p) || p >= (1ull << 32)) {
        throw usage_error("--model: '" + path +
                          "': the shape makes 2^32 or more KV bytes per token (check the fields)");
      }
    }
    return p;
  };
  if (j.contains("kv_lora_rank")) {
    return product({field("layers"), field("kv_lora_rank") + field("qk_rope_head_dim"), dtype});
  }
  return product({2, field("layers"), field("kv_heads"), field("head_dim"), dtype});
}

void resolve_trace(const std::string& path, std::string& format, std::uint32_t& block_tokens) {
  require_trace_file(path);
  if (block_tokens > (1u << 20)) throw usage_error("--block-tokens: must be in [0, 2^20]");
  const auto f = format == "auto" ? detect_trace_format(path) : parse_format_name(format);
  if (!f) throw usage_error("--format: unknown format '" + format + "'");
  format = std::string(format_name(*f));
  if (block_tokens == 0) block_tokens = default_block_tokens(path, *f);
}

bool stream_text_trace(const std::string& path) {
  std::uint64_t limit = std::uint64_t{256} << 20;
  if (const char* env = std::getenv("KVTK_STREAM_BYTES"); env != nullptr && *env != '\0') {
    const std::string text = env;
    try {
      if (text.find_first_not_of("0123456789") != std::string::npos) throw std::invalid_argument("");
      limit = std::stoull(text);
    } catch (const std::exception&) {
      throw usage_error("KVTK_STREAM_BYTES: '" + text + "' is not a decimal number of bytes");
    }
  }
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  return static_cast<std::uint64_t>(st.st_size) > limit || limit == 0;
}

loaded_trace load_trace_for(const std::string& path, std::string& format,
                            std::uint32_t& block_tokens, bool skip_invalid, read_report& report,
                            std::vector<std::string>& warnings, bool decode_records_used,
                            unsigned threads, bool stream) {
  resolve_trace(path, format, block_tokens);
  read_options opts;
  opts.skip_invalid = skip_invalid;
  const trace_format f = *parse_format_name(format);
  const bool jsonl = f == trace_format::mooncake || f == trace_format::bailian ||
                     f == trace_format::kvtk;
  loaded_trace t;
  bool in_memory = !(stream && jsonl);
  if (!in_memory) {
    try {
      t = loaded_trace::spill(path, f, block_tokens, opts, &report);
    } catch (const spill_failed& e) {
      warnings.push_back(std::string("could not stream the trace through a temporary file (") +
                         e.what() + "): read it into memory instead");
      report = read_report{};
      in_memory = true;
    }
  }
  if (in_memory) t = loaded_trace::load(path, f, block_tokens, opts, &report, threads);
  if (report.skipped_lines > 0 && t.view().requests() == 0) {
    // Nothing left to replay is not a result: say so rather than print empty tables.
    throw trace_error(path, 0,
                      "every request line is invalid (" + std::to_string(report.skipped_lines) +
                          " skipped); the first: " + report.first_error);
  }
  if (report.skipped_lines > 0) {
    warnings.push_back("skipped " + std::to_string(report.skipped_lines) +
                       " invalid line(s); the first: " + report.first_error);
  }
  if (report.decode_records > 0 && !decode_records_used) {
    warnings.push_back(std::to_string(report.decode_records) +
                       " decode-step record(s) not used here (they are kvtk sparse's input)");
  }
  return t;
}

void check_request_format(const std::string& format) {
  if (format != "auto" && !parse_format_name(format)) {
    throw usage_error("--format: unknown format '" + format + "' (known: " + format_names() +
                      "|auto)");
  }
}

int parse_partial_block(const std::string& text) {
  try {
    return static_cast<int>(kvtk::prefix::partial_block_names.parse(text));
  } catch (const kvtk::unknown_name& e) {
    throw usage_error("--partial-block: " + std::string(e.what()));
  }
}

kvtk::prefix::engine_accounting parse_engine(const std::string& text) {
  try {
    return kvtk::prefix::engine_names.parse(text);
  } catch (const kvtk::unknown_name& e) {
    throw usage_error("--engine: " + std::string(e.what()));
  }
}

}  // namespace kvtk::sim
