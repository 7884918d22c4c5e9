// sim/formats/kv_events.hpp — KV-event recordings (`kvtk trace record`'s files): the batches an
// engine published (vLLM, SGLang), decoded into one event model.
//
// The file (docs/formats.md "KV-event recordings") is JSONL: a header {"kvtk_events": 1,
// "engine", ...}, one line per batch {"seq", "t", "topic", "payload": base64 of the msgpack bytes
// the engine sent}, {"gap": {"first", "last"}} for batches lost for good, and an end line
// {"restart": {"seq"}} where the engine restarted (read as AllBlocksCleared, numbering anew),
// and an end line {"kvtk_events_end": {...}} (absent when the recorder was killed).
//
// A payload is the engine's EventBatch: msgspec's array-like encoding [ts, events,
// data_parallel_rank] or a map {"ts", "events", ...}; each event is a tagged array
// ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, ...]
// or a map {"type": "BlockStored", ...}. The array form's fields after `medium` are the engine's
// own (vLLM: lora_name, extra_keys, ...; SGLang: cache_salt, session_id, lora_name), so the
// decoder is told whose recording it reads. SGLang publishes one BlockStored per radix node (its
// pages coalesced: token_ids holds block_size tokens per hash) and one BlockRemoved per evicted
// node.
//
// Dynamo (1.6.1, its event plane on ZMQ: what `kvtk trace record --engine dynamo` keeps): the
// payload is a frame version byte (1), a u32 big-endian length and a msgpack envelope map
// {publisher_id, sequence, published_at (ms), topic, payload: bin}, whose payload is a msgpack
// array of RouterEvents {worker_id, storage_tier, event: {event_id, data, dp_rank}} with data
// {"stored": {parent_hash, blocks: [{block_hash, tokens_hash}]}} | {"removed": {block_hashes}} |
// "cleared". block_hash is the engine's own hash passed through; there are no token ids (only
// Dynamo's XXH3 tokens_hash), so only the engine's keys can be used. storage_tier "device" is
// the GPU; host_pinned, disk and external are other media. Both encodings are read (vLLM changed from the first to
// the second in mid-2026; a reader that knows one breaks on the other). Block hashes arrive as
// integers or as bytes; each is kept as an opaque byte string, since only equality matters.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "formats/trace_error.hpp"

namespace kvtk::sim {

/// One decoded event.
struct kv_event {
  enum class kind : std::uint8_t { stored, removed, cleared };
  kind type = kind::stored;
  /// Engine block hashes, each as opaque bytes: an integer as its 8 big-endian bytes, a bytes
  /// hash as itself.
  std::vector<std::string> hashes;
  std::optional<std::string> parent;    ///< stored: the block before the first one, if any
  std::vector<std::uint64_t> token_ids;  ///< stored: block_size tokens per block, in order
  std::uint32_t block_size = 0;          ///< stored
  std::string medium;                    ///< "GPU", "CPU", ... ("" = not sent: GPU)
  std::optional<std::string> lora_name;  ///< stored
  bool has_extra_keys = false;           ///< stored: the event carried per-block extra keys
  std::optional<std::string> cache_salt;  ///< stored (SGLang): the request's salt
  std::optional<std::string> session_id;  ///< stored: the session that stored (or reused) it
  /// Dynamo: the worker and data-parallel rank whose cache it is (one cache per pair).
  std::uint64_t worker_id = 0;
  std::uint32_t dp_rank = 0;
};

/// Whose events: the array-like encoding's field order after `medium` differs; Dynamo's are
/// RouterEvents in its event plane's envelope.
enum class event_engine : std::uint8_t { vllm, sglang, dynamo };

/// One batch: the engine's EventBatch and where the recording had it.
struct kv_batch {
  std::int64_t seq = 0;
  double ts = 0;  ///< the engine's timestamp (seconds)
  std::uint64_t line = 0;
  std::vector<kv_event> events;
  /// A restart line: the engine restarted (its cache empty, its numbers anew); `events` is one
  /// AllBlocksCleared, `seq` the live number that showed the restart (the new run's batches
  /// follow, from its first).
  bool restart = false;
};

/// What the recording says about itself.
struct kv_recording {
  std::string engine;  ///< the header's
  std::uint64_t batches = 0, lost_batches = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> gaps;  ///< lost seq ranges (recorder's)
  std::uint64_t unrecorded_seqs = 0;  ///< seq numbers skipped with no gap line (should be 0)
  bool ended = false;                 ///< the end line is there (the recorder stopped cleanly)
  std::uint64_t restarts = 0;         ///< restart lines (the engine restarted)
};

/// Reads the recording at `path`, calling on_batch for each batch in file order. `engine`: the
/// engine the header must name ("vllm", "sglang" or "dynamo"; "" = any); the header's engine
/// picks the decoding.
/// Throws: trace_error naming the line (not a recording, a malformed line, bad base64, a
/// payload that is not a msgpack EventBatch, an event of unknown type, sequence numbers going
/// backwards, a header other than `engine` when engine is not empty).
kv_recording read_kv_events(const std::string& path, const std::string& engine,
                            const std::function<void(const kv_batch&)>& on_batch);

/// The blocks an engine holds, as its events say: a count per hash, since vLLM may hold two
/// copies of one hash (a recomputed block) and removes them one BlockRemoved each. A stored event
/// with no parent whose blocks are all resident is a reuse report when the engine reports reuse
/// (vLLM's kv_cache_report_mode="full"); vLLM also sends one when a prompt of exactly one block
/// repeats (its hit is capped below the prompt, so the block is stored again), which the wire
/// cannot tell apart.
class resident_blocks {
 public:
  void stored(const kv_event& e) {
    for (const auto& h : e.hashes) ++count_[h];
  }
  void removed(const kv_event& e) {
    for (const auto& h : e.hashes) {
      const auto it = count_.find(h);
      if (it != count_.end() && --it->second == 0) count_.erase(it);
    }
  }
  void cleared() { count_.clear(); }
  [[nodiscard]] bool reuse_report(const kv_event& e) const {
    if (e.type != kv_event::kind::stored || e.parent) return false;
    for (const auto& h : e.hashes) {
      if (!count_.contains(h)) return false;
    }
    return true;
  }

 private:
  std::unordered_map<std::string, std::uint32_t> count_;
};

/// A recording is one cache: Dynamo's events name their worker and data-parallel rank, and a
/// second pair is refused (vLLM's and SGLang's are always worker 0, rank 0).
class one_cache {
 public:
  /// Throws: trace_error naming the batch's line when `e` is another cache's.
  void check(const std::string& path, const kv_batch& b, const kv_event& e) {
    if (b.restart) return;
    if (!owner_) {
      owner_.emplace(e.worker_id, e.dp_rank);
    } else if (*owner_ != std::pair(e.worker_id, e.dp_rank)) {
      throw trace_error(path, b.line, "holds events of worker " + std::to_string(e.worker_id) + " rank " +
                                          std::to_string(e.dp_rank) + " after worker " +
                                          std::to_string(owner_->first) + " rank " +
                                          std::to_string(owner_->second) +
                                          ": one recording is one cache; record each worker apart");
    }
  }

 private:
  std::optional<std::pair<std::uint64_t, std::uint32_t>> owner_;
};

/// The engine a recording's header names ("" when it has none or is not a recording).
/// Throws: trace_error when the file cannot be opened.
std::string recorded_engine(const std::string& path);

/// Decodes one payload (the msgpack bytes of an EventBatch) into `out` (events replaced).
/// Returns "" or the reason it is not one. Exposed for the fuzz target.
std::string decode_event_batch(const std::string& msgpack, kv_batch& out,
                               event_engine engine = event_engine::vllm);

}  // namespace kvtk::sim
