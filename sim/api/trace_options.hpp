// sim/api/trace_options.hpp — option values every command shares: lists, capacities with units,
// models' KV bytes per token, trace formats and loading, JSON option files. Each throws
// usage_error naming the option and the reason (never prints: warnings are returned).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <exception>
#include <string>
#include <vector>

#include "api/usage_error.hpp"
#include "formats/requests.hpp"

namespace kvtk::prefix {
enum class engine_accounting : std::uint8_t;
}  // namespace kvtk::prefix

namespace kvtk::sim {

/// "a,b,c" -> {"a", "b", "c"}. Throws usage_error "<option>: empty item ..." for "a,,b" or a
/// trailing comma (a typo, not a shorter list).
std::vector<std::string> split_list(const std::string& s, const std::string& option = "list");

/// KV bytes per token of the model presets (bf16; des::model_presets(), the one table of
/// models): deepseek-v3, llama-3-70b, qwen2.5-7b, qwen3-235b-a22b.
const std::map<std::string, std::uint64_t>& model_bytes_per_token();

/// Bytes per token of `model`: a preset name, or a path ending in .json (model_file_...).
/// Throws usage_error listing the presets for an unknown name.
std::uint64_t bytes_per_token_of(const std::string& model);

/// KV bytes per token from a JSON model file: {"kv_bytes_per_token": N}, or the attention shape
/// {"layers", "kv_heads", "head_dim", "dtype_bytes" (default 2)} -> 2*layers*kv_heads*head_dim*
/// dtype_bytes, or for MLA {"layers", "kv_lora_rank", "qk_rope_head_dim", "dtype_bytes"} ->
/// layers*(kv_lora_rank+qk_rope_head_dim)*dtype_bytes. Throws usage_error naming the problem.
std::uint64_t model_file_bytes_per_token(const std::string& path);

/// A capacity in blocks from "1000" (blocks), "3Mtok" (tokens) or "64GiB" (bytes; needs
/// bytes_per_token > 0). Throws usage_error naming the text and the reason.
std::uint64_t parse_capacity(const std::string& text, std::uint32_t block_tokens,
                             std::uint64_t bytes_per_token);

/// The capacity to allocate for a cache of `capacity` blocks replaying a stream of `refs` block
/// references: at most refs (and at least 1). A cache evicts only when full, so one that can
/// hold every reference never evicts, and any capacity from refs up gives the same results; this
/// keeps a huge --capacity on a small trace from allocating memory it can never use.
/// Throws: usage_error when the result does not fit the caches' 2^31-1 entries.
std::uint32_t allocation_capacity(std::uint64_t capacity, std::uint64_t refs);

/// Checks a --format value of the request-trace commands (auto or a format_names() name).
void check_request_format(const std::string& format);

/// Resolves format "auto" (detecting it from the file) and block_tokens 0 (the trace's default:
/// kvtb / kvtk header, else the format's). Throws trace_error when the file cannot be read.
void resolve_trace(const std::string& path, std::string& format, std::uint32_t& block_tokens);

/// kvtk::prefix::partial_block from a partial_block_names name ("skip" / "cache"); throws
/// usage_error "--partial-block: unknown partial-block rule ..." otherwise.
/// (Declared with an int result to keep this header free of the prefix headers: 0 skip, 1 cache.)
int parse_partial_block(const std::string& text);

/// An engine_names name ("ideal", "vllm", "sglang"); throws usage_error "--engine: unknown
/// engine ..." otherwise.
kvtk::prefix::engine_accounting parse_engine(const std::string& text);

/// Loads a request trace (resolve_trace first, so format and block_tokens name what was read). A
/// kvtb file is mapped; other formats are read into memory. Skips bad lines when asked and adds
/// "skipped N invalid line(s); the first: ..." to `warnings` (the caller shows them: the CLI on
/// stderr after "kvtk <cmd>: "); also a note on decode-step records the command does not use.
/// Throws trace_error (the executable reports it and exits 1), also when every line was skipped.
/// `decode_records_used`: the command reads the file's decode-step records itself (no note).
/// `threads` > 1 parses JSONL in parallel (parse_jsonl_parallel; the same result).
/// `stream`: a JSONL trace goes through a temporary kvtb file (loaded_trace::spill), so memory
/// does not grow with the trace; the same trace.
loaded_trace load_trace_for(const std::string& path, std::string& format,
                            std::uint32_t& block_tokens, bool skip_invalid, read_report& report,
                            std::vector<std::string>& warnings, bool decode_records_used = false,
                            unsigned threads = 1, bool stream = false);

/// Whether replay and trace stats should stream the JSONL trace at `path` (load_trace_for's
/// `stream`) rather than parse it into memory: when it is larger than 256 MiB, or than
/// $KVTK_STREAM_BYTES bytes when that is set (0: always). In memory, --threads parses in
/// parallel; streamed, memory does not grow with the trace (docs/formats.md "Streaming").
/// Throws usage_error when KVTK_STREAM_BYTES is not a decimal number of bytes.
bool stream_text_trace(const std::string& path);

/// Reads a JSON file for option `option` (e.g. "--tier-config"). Throws usage_error "option:
/// cannot open 'path'" or "option: 'path' is not valid JSON: reason".
nlohmann::json read_json_file(const std::string& option, const std::string& path);

/// A JSON library error's text without its "[json.exception.NAME.ID] " prefix: the place and the
/// reason, for messages users read.
std::string json_error_text(const std::exception& e);

}  // namespace kvtk::sim
