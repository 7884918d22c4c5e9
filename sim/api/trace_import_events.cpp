// `kvtk trace import --format vllm-events|sglang-events|dynamo-events`: a KV-event recording to
//  * the engine's miss stream (the keys of the blocks it stored, in order) as a flat block trace
//    (`--to ids|oracle-general`), or
//  * with vLLM's reuse reports (`--report-mode full`: every request ran with
//    kv_cache_report_mode="full"), the requests themselves, rebuilt from the parent chains, as a
//    request trace (`--to kvtb|kvtk|mooncake`).
//
// Rebuilding requests (docs/formats.md "KV-event recordings"). With reuse reporting, vLLM's
// get_computed_blocks publishes, for a request that hit the cache, a BlockStored of its whole hit
// prefix (parent null, every block already cached); then cache_full_blocks publishes the blocks
// the request newly caches, each event's parent the block before it. So, reading GPU events in
// order and keeping the resident hashes (formats/kv_events.hpp resident_blocks: stored adds,
// removed takes away, cleared empties):
//  * a stored event with no parent whose blocks are all resident is a reuse report: a new request
//    whose first blocks are those (its hit); it is not a miss;
//  * a stored event with no parent and a block not resident: a new request that hit nothing;
//  * a stored event with a parent extends the request whose chain ends at that parent (the latest
//    such request: two requests on the same prefix are told apart only by order, exact when
//    requests do not overlap);
//  * a parent that ends no chain (the recording started late, a lost batch): its blocks are
//    counted as unattributed and left out of the requests (they stay in the miss stream).
// A request is its chain's blocks (prompt and full decode blocks alike: events do not say which
// was which), input length = blocks x block size, arrival = the batch time of its first event,
// session = its events' session_id (the same id a token-id import gives that string). Requests
// are kept in memory until the end (one chain per request).
#include <chrono>
#include <optional>
#include <utility>
#include <unordered_map>

#include "api/event_keys.hpp"
#include "api/trace_import.hpp"
#include "formats/kv_events.hpp"
#include "formats/trace_error.hpp"
#include "formats/writers.hpp"

namespace kvtk::sim::detail {

namespace {

bool gpu(const kv_event& e) { return e.medium.empty() || e.medium == "GPU"; }

// The requests of a full-report recording, as their chains grow.
class request_chains {
 public:
  struct request {
    double ts = 0;
    std::uint64_t line = 0;
    std::vector<std::optional<kvtk::block_key>> keys;
    std::optional<std::uint64_t> session;
    std::uint64_t reused = 0;  ///< blocks of its reuse report (its hit)
  };

  // Effects: the event's blocks (keys `got`) start a request or extend one; returns false when
  // its parent ends no chain (the blocks are unattributed).
  bool add(const kv_event& e, bool reuse, const std::vector<std::optional<kvtk::block_key>>& got,
           const kv_batch& b) {
    std::size_t at = requests_.size();
    if (e.parent) {
      const auto it = tail_.find(*e.parent);
      if (it == tail_.end()) return false;
      at = it->second;
      tail_.erase(it);
    } else {
      request q;
      q.ts = b.ts;
      q.line = b.line;
      if (e.session_id) q.session = string_id(*e.session_id);
      q.reused = reuse ? got.size() : 0;
      requests_.push_back(std::move(q));
    }
    auto& keys = requests_[at].keys;
    keys.insert(keys.end(), got.begin(), got.end());
    tail_[e.hashes.back()] = at;
    return true;
  }

  // A clear (or a restart) ends every chain: nothing stored later extends one from before.
  void cleared() { tail_.clear(); }

  [[nodiscard]] const std::vector<request>& requests() const noexcept { return requests_; }

 private:
  std::unordered_map<std::string, std::size_t> tail_;  // a chain's last hash -> its request
  std::vector<request> requests_;
};

}  // namespace

trace_import_result run_events(const trace_import_options& o, const progress_callback& progress) {
  const auto start = std::chrono::steady_clock::now();
  event_keys keys = make_event_keys(o.engine, o.block_tokens, o.hash_algo, o.hash_seed, o.keys == "derived");
  const bool full = o.report_mode == "full";
  const bool requests_out = o.to != "ids" && o.to != "oracle-general";
  auto writer = trace_writer::open(o.output, *parse_format_name(o.to), o.block_tokens, o.force);
  progress_relay bar(progress, 0);
  trace_import_result r;
  request_chains chains;
  std::vector<std::optional<kvtk::block_key>> got;
  std::vector<kvtk::block_key> resolved;
  one_cache cache;
  resident_blocks resident;
  const auto note_unresolved = [&](const kv_batch& b, event_keys::unresolved why) {
    if (r.unresolved_blocks == 0) {
      r.first_unresolved = "line " + std::to_string(b.line) + " (seq " + std::to_string(b.seq) +
                           "): " + keys.reason(why);
    }
  };
  const kv_recording rec = read_kv_events(o.log, o.engine, [&](const kv_batch& b) {
    ++r.batches;
    for (const kv_event& e : b.events) {
      cache.check(o.log, b, e);
      if (e.type == kv_event::kind::cleared) {
        ++r.cleared;
        chains.cleared();
        resident.cleared();
        continue;
      }
      if (!gpu(e)) {
        ++r.other_media_events;
        continue;
      }
      if (e.type == kv_event::kind::removed) {
        r.removed_blocks += e.hashes.size();
        resident.removed(e);
        continue;
      }
      got.clear();
      event_keys::unresolved why{};
      keys.stored(e, got, why);
      if (requests_out && e.block_size != 0 && e.block_size != o.block_tokens) {  // one block size a request
        for (auto& k : got) k.reset();
        why = event_keys::unresolved::block_size;
      }
      const bool reuse_like = resident.reuse_report(e);
      if (!full && reuse_like) ++r.reuse_like_events;
      const bool reuse = full && reuse_like;
      if (full && !chains.add(e, reuse, got, b)) r.unattributed_blocks += got.size();
      if (!reuse) resident.stored(e);  // a reuse report names blocks already counted
      if (reuse) {
        r.reused_blocks += got.size();
        continue;  // a hit, not a miss
      }
      r.stored_blocks += got.size();
      resolved.clear();
      for (const auto& k : got) {
        if (k) resolved.push_back(*k);
      }
      if (resolved.size() < got.size()) {
        note_unresolved(b, why);
        r.unresolved_blocks += got.size() - resolved.size();
      }
      if (requests_out || resolved.empty()) continue;
      // The miss stream: one record per event, its blocks, block_size tokens each, at the
      // batch's time.
      request_record out;
      out.keys = resolved;
      // Dynamo's events do not say their block size: the option's.
      const std::uint32_t bt = e.block_size != 0 ? e.block_size : o.block_tokens;
      out.input_length = resolved.size() * std::uint64_t{bt};
      out.block_tokens = bt;
      out.line = b.line;
      out.arrival_s = b.ts >= 0 ? std::optional<double>(b.ts) : std::nullopt;
      writer->add(out);
      r.tokens += out.input_length;
      r.full_blocks += resolved.size();
      ++r.requests;
      bar.add(1);
    }
  });
  if (requests_out) {
    for (const auto& q : chains.requests()) {
      resolved.clear();
      for (const auto& k : q.keys) {
        if (!k) break;
        resolved.push_back(*k);
      }
      if (resolved.size() < q.keys.size()) {  // a request without all its keys is left out whole
        ++r.dropped_requests;
        continue;
      }
      request_record out;
      out.keys = resolved;
      out.input_length = resolved.size() * std::uint64_t{o.block_tokens};
      out.block_tokens = o.block_tokens;
      out.line = q.line;
      out.arrival_s = q.ts >= 0 ? std::optional<double>(q.ts) : std::nullopt;
      out.session = q.session;
      writer->add(out);
      r.tokens += out.input_length;
      r.full_blocks += resolved.size();
      ++r.requests;
      bar.add(1);
    }
  }
  writer->finish();
  r.lost_batches = rec.lost_batches;
  r.restarts = rec.restarts;
  r.recording_ended = rec.ended;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.threads = 1;
  r.engine = o.engine;
  r.to = o.to;
  r.output = o.output;
  r.block_tokens = o.block_tokens;
  r.log_format = "events";
  return r;
}

}  // namespace kvtk::sim::detail
