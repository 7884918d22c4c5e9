// `kvtk trace import --format vllm-events|sglang-events`: a KV-event recording to the engine's
// miss stream (the keys of the blocks it stored, in order), as a flat block trace (ids,
// oracle-general).
#include <chrono>

#include "api/event_keys.hpp"
#include "api/trace_import.hpp"
#include "formats/kv_events.hpp"
#include "formats/writers.hpp"

namespace kvtk::sim::detail {

namespace {

bool gpu(const kv_event& e) { return e.medium.empty() || e.medium == "GPU"; }

}  // namespace

trace_import_result run_events(const trace_import_options& o, const progress_callback& progress) {
  const auto start = std::chrono::steady_clock::now();
  event_keys keys = make_event_keys(o.engine, o.block_tokens, o.hash_algo, o.hash_seed, o.keys == "derived");
  auto writer = trace_writer::open(o.output, *parse_format_name(o.to), o.block_tokens, o.force);
  progress_relay bar(progress, 0);
  trace_import_result r;
  std::vector<std::optional<kvtk::block_key>> got;
  std::vector<kvtk::block_key> resolved;
  const kv_recording rec = read_kv_events(o.log, o.engine, [&](const kv_batch& b) {
    ++r.batches;
    for (const kv_event& e : b.events) {
      if (e.type == kv_event::kind::cleared) {
        ++r.cleared;
        continue;
      }
      if (!gpu(e)) {
        ++r.other_media_events;
        continue;
      }
      if (e.type == kv_event::kind::removed) {
        r.removed_blocks += e.hashes.size();
        continue;
      }
      got.clear();
      event_keys::unresolved why{};
      keys.stored(e, got, why);
      r.stored_blocks += got.size();
      resolved.clear();
      for (const auto& k : got) {
        if (k) resolved.push_back(*k);
      }
      if (resolved.size() < got.size()) {
        if (r.unresolved_blocks == 0) {
          r.first_unresolved = "line " + std::to_string(b.line) + " (seq " + std::to_string(b.seq) +
                               "): " + keys.reason(why);
        }
        r.unresolved_blocks += got.size() - resolved.size();
      }
      if (resolved.empty()) continue;
      // One record per event: its blocks, block_size tokens each, at the batch's time.
      request_record out;
      out.keys = resolved;
      out.input_length = resolved.size() * std::uint64_t{e.block_size};
      out.block_tokens = e.block_size;
      out.line = b.line;
      out.arrival_s = b.ts >= 0 ? std::optional<double>(b.ts) : std::nullopt;
      writer->add(out);
      r.tokens += out.input_length;
      r.full_blocks += resolved.size();
      ++r.requests;
      bar.add(1);
    }
  });
  writer->finish();
  r.lost_batches = rec.lost_batches;
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
