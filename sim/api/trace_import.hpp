// sim/api/trace_import.hpp — `kvtk trace import` as a library call: a user's request log with
// token ids (JSONL, one object per request) turned into a kvtk trace whose block keys are the
// ones the chosen engine computes (vLLM v1's block hashes or SGLang's page hashes, byte for byte
// through kvtk::prefix::block_hasher), streaming, the hashing spread over threads.
//
//   kvtk::sim::trace_import_options o;
//   o.log = "requests.jsonl";      // {"timestamp": 0.5, "token_ids": [...], "output_length": 64}
//                                  // or a CSV log: a header line naming the columns, token ids
//                                  // in one cell ("[1, 2, 3]" or "1 2 3")
//   o.output = "mine.kvtb";
//   o.engine = "vllm";
//   o.block_tokens = 16;
//   std::cout << kvtk::sim::run(o).requests << "\n";
//
// Keys: a request's full blocks get the engine's keys (its 64-bit key of each block hash, as
// replay --engine uses them); its partial last block, which neither engine caches (vLLM; SGLang
// by default), gets a key kvtk derives from the block's tokens and the key before it, so the
// written trace has one key per block as every kvtk format does. Replays skip partial blocks by
// default, so the import replays as the engine accounts.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "api/progress.hpp"

namespace kvtk::sim {

/// What `kvtk trace import` does; each field is the option of the same name.
struct trace_import_options {
  std::string log;                     ///< the request log (required; a regular file)
  std::string format = "token-ids";    ///< the log's kind: token-ids (JSONL or CSV) |
                                       ///< vllm-events | sglang-events | dynamo-events (a `kvtk
                                       ///< trace record` recording of that engine) |
                                       ///< dynamo (Dynamo's DYN_REQUEST_TRACE records)
  std::string log_format = "auto";     ///< jsonl | csv | auto (JSONL when the first non-blank
                                       ///< line opens an object, else a CSV header)
  std::string output;                  ///< output file, or - for stdout (required)
  std::string to;                      ///< kvtb | kvtk | mooncake; "" = kvtb for a .kvtb name
  std::string engine;                  ///< whose block keys: vllm | sglang ("" = the format's:
                                       ///< sglang for sglang-events, else vllm)
  std::uint32_t block_tokens = 16;     ///< vLLM --block-size / SGLang --page-size (tokens)
  std::string hash_algo = "sha256";    ///< vLLM --prefix-caching-hash-algo: sha256 | sha256_cbor
                                       ///< | xxhash | xxhash_cbor
  std::string hash_seed;               ///< vLLM: PYTHONHASHSEED ("" = unset: vLLM's default seed)
  std::string preset = "kvtk";         ///< field names: kvtk | vllm (below)
  std::string field_timestamp;         ///< "" = the preset's (kvtk: timestamp; vllm: arrival_time)
  std::string field_tokens;            ///< (kvtk: token_ids; vllm: prompt_token_ids)
  std::string field_output;            ///< (kvtk: output_length; vllm: max_tokens)
  std::string field_session;           ///< (both: session)
  std::string field_lora;              ///< (both: lora_name)
  std::string field_lora_path;         ///< vLLM's LoRA key is (name, path) (both: lora_path)
  std::string field_cache_salt;        ///< (both: cache_salt)
  std::string field_mm;                ///< vLLM's multimodal items (both: mm_hashes): a JSON
                                       ///< array of {identifier, offset, length}
  std::string time_unit = "s";         ///< the timestamps' unit: s | ms
  std::uint32_t threads = 0;           ///< hashing threads; 0 = the machine's
  std::string keys;                    ///< events: derived (from token ids and parents) |
                                       ///< engine (the events' own hashes; api/event_keys.hpp);
                                       ///< "" = derived, or engine for dynamo-events
  std::string report_mode = "incremental";  ///< vllm-events: incremental (stores only: the miss
                                       ///< stream) | full (the engine reported reused prefixes
                                       ///< too, kv_cache_report_mode="full": requests rebuilt,
                                       ///< api/trace_import_events.cpp)
  bool force = false;                  ///< replace an existing output file (never the input)
};

nlohmann::json to_json(const trace_import_options& o);
/// Throws usage_error naming an unknown key or a value of the wrong type.
trace_import_options trace_import_options_from_json(const nlohmann::json& j);
/// Checks the options and resolves `to` and the preset's field names, in place. Throws
/// usage_error naming the option.
void validate(trace_import_options& o);

struct trace_import_result {
  std::uint64_t requests = 0, tokens = 0, full_blocks = 0;
  double seconds = 0;             ///< the whole import (read, parse, hash, write)
  double hash_seconds = 0;        ///< wall time of the parallel parse-and-hash phases
  double tokens_per_s = 0;        ///< tokens / hash_seconds (all threads)
  std::uint32_t threads = 0;
  std::string engine, to, output;
  std::uint32_t block_tokens = 0;
  std::string log_format;         ///< jsonl | csv | events: what the log was read as
  /// Events: batches, stored and removed blocks (GPU), other media's events (skipped),
  /// AllBlocksCleared, lost batches (gaps), blocks whose keys could not be derived.
  std::uint64_t batches = 0, stored_blocks = 0, removed_blocks = 0, other_media_events = 0,
                cleared = 0, lost_batches = 0, unresolved_blocks = 0;
  /// Events, report mode full: blocks of reuse reports (hits), blocks whose parent ended no
  /// request's chain (left out of the requests), requests left out for an unresolved block.
  std::uint64_t reused_blocks = 0, unattributed_blocks = 0, dropped_requests = 0;
  /// Events, report mode incremental: stores that look like reuse reports (no parent, every
  /// block already resident): the recording was probably made with kv_cache_report_mode="full".
  std::uint64_t reuse_like_events = 0;
  /// Events: the engine restarted (restart lines; each also counted as an AllBlocksCleared).
  std::uint64_t restarts = 0;
  bool recording_ended = true;  ///< events: the recording has its end line
  /// dynamo: records skipped, by event type (tool events, request_end without replay data)
  std::map<std::string, std::uint64_t> skipped_records;
  double start_unix_s = 0;  ///< dynamo: the earliest request's arrival (the trace's time 0)
  std::string first_unresolved;  ///< events: why the first unresolved block was
};

nlohmann::json to_json(const trace_import_result& r);
/// Progress counts requests (total unknown: 0). Throws: as validate(); trace_error naming the
/// log's line (malformed JSON, a missing or mistyped field, time going backwards, a token id
/// that is not an integer); output_refused / output_error naming the output.
trace_import_result run(trace_import_options options, const progress_callback& progress = {});

namespace detail {
/// The 64-bit id a token-id import gives a session name (FNV-1a, mixed).
std::uint64_t string_id(std::string_view s) noexcept;
/// run() for format vllm-events (api/trace_import_events.cpp); `o` validated.
trace_import_result run_events(const trace_import_options& o, const progress_callback& progress);
/// run() for format dynamo (api/trace_import_dynamo.cpp); `o` validated.
trace_import_result run_dynamo(const trace_import_options& o, const progress_callback& progress);
}  // namespace detail

/// What `kvtk trace import` prints on stderr.
std::string to_text(const trace_import_result& r);

}  // namespace kvtk::sim
