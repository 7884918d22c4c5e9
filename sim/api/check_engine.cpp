#include "api/check_engine.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "api/event_keys.hpp"
#include "api/options_json.hpp"
#include "api/trace_options.hpp"
#include "api/usage_error.hpp"
#include "formats/kv_events.hpp"
#include "kvtk/prefix/sglang_radix_cache.hpp"
#include "kvtk/prefix/vllm_block_pool.hpp"

namespace kvtk::sim {

nlohmann::json to_json(const check_engine_options& o) {
  return {{"events", o.events},       {"trace", o.trace},         {"format", o.format},
          {"engine", o.engine},       {"gpu_blocks", o.gpu_blocks}, {"block_tokens", o.block_tokens},
          {"hash_algo", o.hash_algo}, {"hash_seed", o.hash_seed}, {"keys", o.keys}, {"report_mode", o.report_mode}};
}

check_engine_options check_engine_options_from_json(const nlohmann::json& j) {
  check_engine_options o;
  detail::options_reader in(j, "check-engine options");
  in.get("events", o.events);
  in.get("trace", o.trace);
  in.get("format", o.format);
  in.get("engine", o.engine);
  in.get("gpu_blocks", o.gpu_blocks);
  in.get("block_tokens", o.block_tokens);
  in.get("hash_algo", o.hash_algo);
  in.get("hash_seed", o.hash_seed);
  in.get("keys", o.keys);
  in.get("report_mode", o.report_mode);
  in.finish();
  return o;
}

void validate(check_engine_options& o) {
  if (o.events.empty()) throw usage_error("--events: give the recording (kvtk trace record's file)");
  if (o.trace.empty()) throw usage_error("--trace: give the requests the engine served");
  if (o.engine != "vllm" && o.engine != "sglang") {
    throw usage_error("--engine: '" + o.engine + "' is not vllm or sglang");
  }
  if (o.gpu_blocks < 2 || o.gpu_blocks >= (std::uint64_t{1} << 31)) {
    throw usage_error("--gpu-blocks: give the engine's logged number of GPU blocks (2 to 2^31 - 1; "
                      "vLLM's count includes its null block; SGLang: max_total_num_tokens / page size)");
  }
  if (o.engine == "sglang" && (o.hash_algo != "sha256" || !o.hash_seed.empty())) {
    throw usage_error("--hash-algo and --hash-seed are vLLM's: SGLang's page hashes have neither");
  }
  if (o.block_tokens == 0 || o.block_tokens > (1u << 20)) {
    throw usage_error("--block-tokens: " + std::to_string(o.block_tokens) + " is outside [1, 2^20]");
  }
  try {
    (void)kvtk::prefix::parse_vllm_hash_algo(o.hash_algo);
  } catch (const std::invalid_argument&) {
    throw usage_error("--hash-algo: '" + o.hash_algo + "' is not one of vLLM's (sha256 sha256_cbor xxhash xxhash_cbor)");
  }
  if (o.report_mode != "incremental" && o.report_mode != "full") {
    throw usage_error("--report-mode: '" + o.report_mode + "' is not incremental or full");
  }
  if (o.report_mode == "full" && o.engine != "vllm") {
    throw usage_error("--report-mode full is vLLM's kv_cache_report_mode (--engine vllm)");
  }
  if (o.keys != "derived" && o.keys != "engine") throw usage_error("--keys: '" + o.keys + "' is not derived or engine");
  check_request_format(o.format);
  std::uint32_t bt = o.block_tokens;
  resolve_trace(o.trace, o.format, bt);
}

namespace {

// One block of a stream, and where it came from.
struct entry {
  std::optional<kvtk::block_key> key;  // nullopt: unresolved (recorded side only)
  std::uint64_t where = 0, block = 0;  // recorded: line, block in the event; predicted: request, block
  std::int64_t seq = 0;                // recorded: the batch's sequence number
};

std::string hex(const std::optional<kvtk::block_key>& k) {
  if (!k) return "(unresolved)";
  char s[24];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(*k));
  return s;
}

// The first difference of two streams, or null.
nlohmann::json first_difference(const char* stream, const std::vector<entry>& rec,
                                const std::vector<entry>& pred, std::string& text) {
  const std::size_t n = std::min(rec.size(), pred.size());
  std::size_t i = 0;
  while (i < n && rec[i].key && rec[i].key == pred[i].key) ++i;
  if (i == n && rec.size() == pred.size()) return nullptr;
  nlohmann::json d = {{"stream", stream}, {"index", i}};
  std::string what = std::string(stream) + " block #" + std::to_string(i) + ": ";
  if (i < rec.size()) {
    d["recorded"] = {{"key", hex(rec[i].key)}, {"line", rec[i].where}, {"seq", rec[i].seq},
                     {"block_in_event", rec[i].block}};
    what += "the recording has " + hex(rec[i].key) + " (line " + std::to_string(rec[i].where) +
            ", seq " + std::to_string(rec[i].seq) + ", block " + std::to_string(rec[i].block) +
            " of its event)";
  } else {
    what += "the recording ends (" + std::to_string(rec.size()) + " blocks)";
  }
  if (i < pred.size()) {
    d["predicted"] = {{"key", hex(pred[i].key)}, {"request", pred[i].where}, {"block", pred[i].block}};
    what += ", kvtk predicts " + hex(pred[i].key) + " (request " + std::to_string(pred[i].where) +
            ", its block " + std::to_string(pred[i].block) + ")";
  } else {
    what += ", kvtk predicts no more (" + std::to_string(pred.size()) + " blocks)";
  }
  text = what;
  return d;
}


// The trace's requests, checked against the engine's block size, in order.
template <class F>
std::uint64_t each_request(const check_engine_options& o, F&& f) {
  std::uint64_t request = 0;
  for_each_request(o.trace, *parse_format_name(o.format), o.block_tokens, {}, nullptr,
                   [&](const request_record& q) {
                     if (q.block_tokens != o.block_tokens) {
                       throw trace_error(o.trace, q.line, "has blocks of " + std::to_string(q.block_tokens) +
                                                              " tokens, the engine's are " +
                                                              std::to_string(o.block_tokens));
                     }
                     f(q, request++);
                   });
  return request;
}

// vLLM's BlockPool (gpu_blocks - 1 usable: the null block): a request stores the full blocks past
// its hit; evictions in the pool's order.
std::uint64_t predict_vllm(const check_engine_options& o, std::vector<entry>& stored, std::vector<entry>& removed,
                           std::vector<entry>& reused) {
  kvtk::prefix::vllm_block_pool pool(static_cast<std::uint32_t>(o.gpu_blocks - 1));
  pool.log_evictions();
  std::vector<std::uint32_t> held;
  return each_request(o, [&](const request_record& q, std::uint64_t request) {
    const std::uint64_t L = q.input_length, bt = o.block_tokens;
    const std::uint64_t full = std::min<std::uint64_t>(L / bt, q.keys.size());
    held.resize(std::max<std::size_t>(held.size(), (L + bt - 1) / bt));
    const auto res = pool.run_request(q.keys.first(full), L, o.block_tokens, held);
    pool.drain_evictions([&](kvtk::block_key k, std::uint32_t depth) { removed.push_back({k, request, depth, 0}); });
    if (!res.scheduled) return;
    // kv_cache_report_mode="full": get_computed_blocks reports the hit prefix.
    if (o.report_mode == "full") {
      for (std::uint64_t i = 0; i < res.hit_blocks; ++i) reused.push_back({q.keys[i], request, i, 0});
    }
    for (std::uint64_t i = res.hit_blocks; i < full; ++i) stored.push_back({q.keys[i], request, i, 0});
  });
}

// SGLang's RadixCache (gpu_blocks pages): a request stores the pages of the leaf its insert adds
// (the last `added` full pages: RadixCache._insert_helper publishes one BlockStored per new node),
// and evicted leaves are removed whole, in eviction order (one BlockRemoved per node). The steps
// are sglang_radix_cache::run_request's, with checkpoint() in place of finish() to learn `added`.
std::uint64_t predict_sglang(const check_engine_options& o, std::vector<entry>& stored, std::vector<entry>& removed) {
  kvtk::prefix::sglang_radix_cache cache(static_cast<std::uint32_t>(o.gpu_blocks));
  cache.log_evictions();
  return each_request(o, [&](const request_record& q, std::uint64_t request) {
    const std::uint64_t L = q.input_length, bt = o.block_tokens;
    if (L == 0) return;
    const std::uint64_t f = std::min<std::uint64_t>(L / bt, q.keys.size());
    const std::uint64_t n = (L + bt - 1) / bt;
    if (n > cache.capacity()) return;  // never scheduled: nothing changes
    const auto full = q.keys.first(f);
    const auto capped = std::min<std::uint64_t>((L - 1) / bt, f);
    const auto m = cache.match(full.first(capped));
    cache.lock(m.node);
    (void)cache.reserve(n - m.length, 1);
    const auto c = cache.checkpoint(full);
    cache.give_back(n - m.length - c.added);
    cache.unlock(m.node);
    cache.drain_evictions([&](kvtk::block_key k, std::uint32_t depth) { removed.push_back({k, request, depth, 0}); });
    for (std::uint64_t i = f - c.added; i < f; ++i) stored.push_back({q.keys[i], request, i, 0});
  });
}

}  // namespace

check_engine_result run(check_engine_options o) {
  validate(o);
  check_engine_result r;
  // What the engine did.
  event_keys keys = make_event_keys(o.engine, o.block_tokens, o.hash_algo, o.hash_seed, o.keys == "derived");
  std::vector<entry> rec_stored, rec_removed, rec_reused;
  std::vector<std::optional<kvtk::block_key>> got;
  // Resident engine hashes (formats/kv_events.hpp): with report mode full, a stored event with no
  // parent whose blocks are all resident is a reuse report, not a store.
  resident_blocks resident;
  one_cache cache;
  // A Dynamo recording relays the engine's events with the engine's own hashes and no tokens.
  const bool dynamo = recorded_engine(o.events) == "dynamo";
  if (dynamo && o.keys != "engine") {
    throw usage_error("--keys: a Dynamo recording carries no token ids; give --keys engine (the "
                      "engine's own hashes, which Dynamo passes through)");
  }
  const kv_recording recording = read_kv_events(o.events, dynamo ? "dynamo" : o.engine, [&](const kv_batch& b) {
    for (const kv_event& e : b.events) {
      cache.check(o.events, b, e);
      if (e.type == kv_event::kind::cleared) {
        r.restarts += b.restart ? 1 : 0;
        // SGLang's RadixCache publishes one when it starts (reset()): a clear before anything was
        // stored changes nothing.
        if (!rec_stored.empty()) ++r.cleared;
        resident.cleared();
        continue;
      }
      if (!e.medium.empty() && e.medium != "GPU") {
        ++r.other_media_events;
        continue;
      }
      if (e.type == kv_event::kind::removed) {
        for (std::size_t i = 0; i < e.hashes.size(); ++i) {
          const auto k = keys.key_of(e.hashes[i]);
          if (!k) ++r.unresolved_blocks;
          rec_removed.push_back({k, b.line, i, b.seq});
        }
        resident.removed(e);
        continue;
      }
      got.clear();
      event_keys::unresolved why{};
      keys.stored(e, got, why);
      const bool reuse_like = resident.reuse_report(e);
      const bool reuse = reuse_like && o.report_mode == "full";
      if (reuse_like && !reuse) ++r.reuse_reports;  // a hint only: the streams decide
      auto& stream = reuse ? rec_reused : rec_stored;
      for (std::size_t i = 0; i < got.size(); ++i) {
        if (!got[i]) ++r.unresolved_blocks;
        stream.push_back({got[i], b.line, i, b.seq});
      }
      if (!reuse) resident.stored(e);
    }
  });
  r.lost_batches = recording.lost_batches + recording.unrecorded_seqs;
  r.recording_ended = recording.ended;
  // What kvtk's model of the engine does with the same requests, one at a time.
  std::vector<entry> pred_stored, pred_removed, pred_reused;
  const std::uint64_t requests = o.engine == "sglang" ? predict_sglang(o, pred_stored, pred_removed)
                                                      : predict_vllm(o, pred_stored, pred_removed, pred_reused);
  r.requests = requests;
  r.recorded_stored = rec_stored.size();
  r.predicted_stored = pred_stored.size();
  r.recorded_removed = rec_removed.size();
  r.predicted_removed = pred_removed.size();
  r.recorded_reused = rec_reused.size();
  r.predicted_reused = pred_reused.size();
  std::string stored_text, removed_text, reused_text;
  const auto ds = first_difference("stored", rec_stored, pred_stored, stored_text);
  const auto dr = first_difference("removed", rec_removed, pred_removed, removed_text);
  const auto du = first_difference("reused", rec_reused, pred_reused, reused_text);
  r.first_divergence = !ds.is_null() ? stored_text : !dr.is_null() ? removed_text : reused_text;
  if (!ds.is_null() || !dr.is_null() || !du.is_null()) r.divergence = {{"stored", ds}, {"removed", dr}, {"reused", du}};
  r.equal = ds.is_null() && dr.is_null() && du.is_null() && r.unresolved_blocks == 0 && r.lost_batches == 0 &&
            r.cleared == 0 && r.restarts == 0 && r.recording_ended;
  return r;
}

nlohmann::json to_json(const check_engine_result& r) {
  return {{"equal", r.equal},
          {"requests", r.requests},
          {"recorded_stored", r.recorded_stored},
          {"predicted_stored", r.predicted_stored},
          {"recorded_removed", r.recorded_removed},
          {"predicted_removed", r.predicted_removed},
          {"recorded_reused", r.recorded_reused},
          {"predicted_reused", r.predicted_reused},
          {"reuse_reports", r.reuse_reports},
          {"restarts", r.restarts},
          {"unresolved_blocks", r.unresolved_blocks},
          {"lost_batches", r.lost_batches},
          {"cleared", r.cleared},
          {"other_media_events", r.other_media_events},
          {"recording_ended", r.recording_ended},
          {"first_divergence", r.first_divergence},
          {"divergence", r.divergence}};
}

std::string to_text(const check_engine_result& r) {
  std::string s = "kvtk check-engine: " + std::to_string(r.requests) + " requests; stored blocks: " +
                  std::to_string(r.recorded_stored) + " recorded, " + std::to_string(r.predicted_stored) +
                  " predicted; removed: " + std::to_string(r.recorded_removed) + " recorded, " +
                  std::to_string(r.predicted_removed) + " predicted" +
                  (r.recorded_reused + r.predicted_reused > 0
                       ? "; reused: " + std::to_string(r.recorded_reused) + " recorded, " +
                             std::to_string(r.predicted_reused) + " predicted"
                       : std::string()) +
                  "\n";
  if (r.equal) return s + "kvtk check-engine: no divergence: kvtk's model did what the engine did\n";
  if (!r.first_divergence.empty()) s += "kvtk check-engine: first divergence: " + r.first_divergence + "\n";
  if (r.unresolved_blocks > 0) {
    s += "kvtk check-engine: " + std::to_string(r.unresolved_blocks) +
         " recorded blocks have no key (see kvtk trace import --format vllm-events)\n";
  }
  if (r.reuse_reports > 0) {
    s += "kvtk check-engine: " + std::to_string(r.reuse_reports) + " stored events re-report cached blocks "
         "(no parent): if the engine ran with kv_cache_report_mode=\"full\", give --report-mode full\n";
  }
  if (r.lost_batches > 0) s += "kvtk check-engine: the recording lost " + std::to_string(r.lost_batches) + " batches\n";
  if (r.restarts > 0) s += "kvtk check-engine: the engine restarted " + std::to_string(r.restarts) + " time(s) during the recording\n";
  if (r.cleared > 0) s += "kvtk check-engine: the engine cleared its cache (AllBlocksCleared), which the model does not\n";
  if (!r.recording_ended) s += "kvtk check-engine: the recording has no end line (the recorder was killed)\n";
  return s;
}

}  // namespace kvtk::sim
