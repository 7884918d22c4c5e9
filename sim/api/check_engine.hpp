// sim/api/check_engine.hpp — `kvtk check-engine`: does kvtk's engine model behave as the user's
// engine did? A KV-event recording of the engine (`kvtk trace record`) is compared, block by
// block, with the events kvtk's model of that engine predicts for the same requests.
//
//   kvtk::sim::check_engine_options o;
//   o.events = "recorded.jsonl";   // kvtk trace record's file
//   o.trace = "requests.kvtb";     // the same requests: kvtk trace import of their token ids
//   o.gpu_blocks = 1025;           // vLLM's log line "GPU KV cache size: ... (# GPU blocks)"
//   auto r = kvtk::sim::run(o);    // r.equal, r.first_divergence
//
// What is compared (vLLM 0.33.0, one full-attention group, prefix caching on; or SGLang 0.5.23's
// RadixCache, LRU, through include/kvtk/prefix/sglang_radix_cache.hpp): the stream of
// blocks the engine stored (BlockStored: the blocks each request newly cached, in order) and the
// stream it removed (BlockRemoved: the cached blocks it evicted to make room, in order), each
// against kvtk's vllm_block_pool (include/kvtk/prefix/vllm_block_pool.hpp) running the trace's
// requests one at a time to completion, prompt only. So the recording must be sequential (each
// request finished before the next arrived) and prompt-only (max_tokens=1: no decode block is
// ever full): under concurrency, running requests pin blocks and the eviction order depends on
// the batch, which `kvtk simulate` models and this check does not. Stored and removed streams
// are compared separately, so chunked prefill (a request's blocks stored over several steps,
// with evictions between) does not matter. Keys come from api/event_keys.hpp (`keys`).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace kvtk::sim {

struct check_engine_options {
  std::string events;               ///< the recording (required)
  std::string trace;                ///< the requests (required; any request format)
  std::string format = "auto";      ///< the trace's format
  std::string engine = "vllm";      ///< whose model: vllm | sglang
  std::uint64_t gpu_blocks = 0;     ///< the engine's logged number of GPU blocks (required;
                                    ///< vLLM counts its null block in it: usable = gpu_blocks - 1;
                                    ///< SGLang: max_total_num_tokens / page size, all usable)
  std::uint32_t block_tokens = 16;  ///< the engine's block size / SGLang page size (the
                                    ///< trace's must equal it)
  std::string hash_algo = "sha256";  ///< as trace import's, for derived keys
  std::string hash_seed;             ///< as trace import's
  std::string keys = "derived";      ///< derived | engine (api/event_keys.hpp)
  std::string report_mode = "incremental";  ///< vLLM's kv_cache_report_mode: full = the engine
                                    ///< also reported each request's reused prefix (a stored
                                    ///< event with no parent, every block cached): compared as a
                                    ///< third stream, "reused", against the model's hits
};

nlohmann::json to_json(const check_engine_options& o);
/// Throws usage_error naming an unknown key or a value of the wrong type.
check_engine_options check_engine_options_from_json(const nlohmann::json& j);
/// Throws usage_error naming the option.
void validate(check_engine_options& o);

struct check_engine_result {
  bool equal = false;  ///< both streams equal, whole, every block resolved, nothing lost, ended
  bool recording_ended = false;  ///< the recording has its end line
  std::uint64_t requests = 0;
  std::uint64_t recorded_stored = 0, predicted_stored = 0;
  std::uint64_t recorded_removed = 0, predicted_removed = 0;
  std::uint64_t recorded_reused = 0, predicted_reused = 0;  ///< report mode full
  /// Report mode incremental: stored events that re-report cached blocks (a full-mode recording,
  /// or a repeated one-block prompt): a hint printed when the streams differ, not a failure.
  std::uint64_t reuse_reports = 0;
  std::uint64_t restarts = 0;  ///< the engine restarted (restart lines; also counted in cleared)
  /// lost_batches: gap lines' batches plus sequence numbers skipped without one.
  /// cleared: AllBlocksCleared after the first stored block (one before it changes nothing).
  std::uint64_t unresolved_blocks = 0, lost_batches = 0, cleared = 0, other_media_events = 0;
  std::string first_divergence;  ///< "" when equal: the first difference, in words
  nlohmann::json divergence;     ///< null when equal: stream, index, recorded and predicted
};

nlohmann::json to_json(const check_engine_result& r);
/// Throws: as validate(); trace_error naming the recording's or the trace's line.
check_engine_result run(check_engine_options o);
/// What `kvtk check-engine` prints.
std::string to_text(const check_engine_result& r);

}  // namespace kvtk::sim
