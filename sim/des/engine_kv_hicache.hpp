// sim/des/engine_kv_hicache.hpp — SGLang 0.5.23's HiCache as the KV accounting of kvtk
// simulate's sglang scheduler (internal to sim/des; the config key `offload`, "host:SIZE,..."):
// the device radix tree over a host pool (kvtk::tier::sglang_hicache, the code `kvtk replay
// --engine sglang --offload host:...` runs), driven step by step as SGLang's scheduler drives
// it, with the interface of sglang_kv (engine_kv.hpp) so that the scheduler is the same template.
//
// Per admission (PrefillAdder.add_one_req):
//  1. match over both tiers (capped at seq - 1 tokens, page-aligned): the device prefix, then the
//     host-only pages after it;
//  2. the token budget counts the tokens past the device prefix and a loadable host hit (at least
//     10 tokens); with the device prefix locked, the memory check counts every page past it
//     (loaded pages are memory too), as sglang_kv's;
//  3. load back (init_load_back): the host hit whole or not at all (the device evicts first); a
//     declined load is recomputed (planned again from the device prefix);
//  4. lock the path, take the pages of the scheduled chunk (the allocator's spare page in the
//     demand).
// The loaded pages cost H2D time on the instance's host link in the iteration that admits the
// request, overlapping its compute layer by layer (engine_sched.cpp's `overlap_load`); their host
// copies stay pinned until that iteration ends (the load's acknowledgement).
// Checkpoints (each prefill chunk, the prompt after its prefill) and the finish insert the
// request's full pages; nodes past what it inserted before count a hit, which backs them up
// (write_through: at once; write_through_selective: at the second) as the tree's insert does.
// Backups are acknowledged when the iteration ends (D2H overlaps compute: no time charged; bytes
// counted); with an L3 tier they are logged for its writer (take_backups), and a prefetch's pages
// land in the host through insert_prefetched (engine_hicache_l3.cpp). What is not modelled: a
// backup's device lock until its acknowledgement, the merged batch load's single latency.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "des/engine_kv.hpp"
#include "kvtk/tier/sglang_hicache.hpp"

namespace kvtk::sim::des::detail {

class sglang_hicache_kv {
  using hicache = kvtk::tier::sglang_hicache;

 public:
  static constexpr const char* engine = "sglang";
  static constexpr bool has_host_tier = true;
  /// `log_backups`: keep every page backed up to the host for an L3 writer (take_backups).
  sglang_hicache_kv(const kvtk::tier::sglang_hicache_config& c, std::uint32_t bt, bool log_backups = false)
      : h_(c), bt_(bt), logging_(log_backups) {
    if (logging_) h_.log_backups();
  }

  /// As sglang_kv::admit, with the host tier (the header comment). `external` is unused: the host
  /// hit is the tree's own; a.loaded_tokens are the tokens loaded back.
  template <class External = no_external_kv>
  admission admit(kv_request& q, std::uint64_t seq, std::uint64_t max_new, bool whole,
                  const admission_reserve& reserve, External&& /*external*/ = {}) {
    const auto cap = static_cast<std::uint32_t>((seq - 1) / bt_);
    keys_.clear();
    for (std::uint32_t k = 0; k < cap; ++k) keys_.push_back(key_at(q, k));
    const hicache::match_result m = h_.match_prefix(keys_);
    const std::uint64_t host_tokens = std::uint64_t{m.host} * bt_;
    const bool loadable = m.host > 0 && host_tokens >= h_.config().load_back_threshold_tokens;
    admission a = plan(std::uint64_t{m.device} * bt_ + (loadable ? host_tokens : 0), seq, max_new, whole, bt_);
    if (!a.ok) return {};
    // As SGLang (and sglang_kv): the device prefix is locked before the memory check, so the
    // request's own matched pages do not count as evictable.
    h_.lock_path(m.last_device);
    auto fail = [&](std::uint32_t locked) {
      h_.unlock_path(locked);
      collect();  // a load-back's write_back evictions may have backed pages up
      return admission{};
    };
    const std::uint64_t rest = seq - std::uint64_t{m.device} * bt_;  // as sglang_kv::admit
    if (rest + reserve.out_rest + bt_ + reserve.held >= (h_.available() + reserve.taken_pages) * bt_) {
      return fail(m.last_device);
    }
    std::uint32_t node = m.last_device, matched = m.device, loaded = 0;
    if (m.host > 0) {
      if (loadable && h_.load_back_pages(m.best, m.host, bt_)) {
        node = m.best;
        matched += m.host;
        loaded = m.host;
        h_.lock_path(m.best);
        h_.unlock_path(m.last_device);
      } else {
        a = plan(std::uint64_t{m.device} * bt_, seq, max_new, whole, bt_);
        if (!a.ok) return fail(m.last_device);
      }
    }
    a.loaded_tokens = std::uint64_t{loaded} * bt_;
    const std::uint64_t pages = blocks_for(a.hit_tokens + a.new_tokens, bt_) - matched;
    if (!h_.take(pages, 1)) {
      if (loaded > 0) h_.loaded(node, loaded);  // the loaded pages stay in the tree
      h_.record(m.device, loaded, false, false);
      return fail(node);
    }
    h_.record(m.device, loaded, m.host > 0 && loaded == 0);
    collect();
    q.matched = matched;
    q.node = node;
    q.own = pages;
    q.load_pages = loaded;
    q.admitted = true;
    return a;
  }
  /// Free and evictable device pages (as sglang_kv::available_pages).
  [[nodiscard]] std::uint64_t available_pages() const { return h_.available(); }
  /// The device prefix match would give (lpm ordering, routing), touching nothing.
  [[nodiscard]] std::uint32_t peek(const kv_request& q, std::uint64_t seq) const {
    const auto cap = static_cast<std::uint32_t>(
        std::min<std::uint64_t>((seq - 1) / bt_, q.prompt_keys.size()));
    return h_.peek_device(q.prompt_keys.first(cap));
  }
  /// After a prefill iteration: the full pages of its `computed` tokens into the tree, its copies
  /// of pages the tree had back, the lock moved down.
  void checkpoint(kv_request& q, std::uint64_t computed) {
    fill_keys(q, computed);
    // Even with nothing new the insert walks the path: its nodes count the request's hit.
    const std::uint64_t taken = h_.insert_pages(keys_, q.inserted);
    settle_load(q);  // the load's ack is reaped at the next step start, after this insert
    const std::uint64_t duplicates = keys_.size() - taken - q.matched;
    h_.give_back(duplicates);
    q.own -= taken + duplicates;
    q.inserted = keys_.size();
    const hicache::match_result m = h_.match_prefix(keys_);
    h_.lock_path(m.best);
    h_.unlock_path(q.node);
    q.node = m.best;
    q.matched = m.device + m.host;
    collect();
  }
  bool grow(kv_request& q, std::uint64_t upto) {
    const std::uint64_t need = blocks_for(upto, bt_);
    const std::uint64_t have = q.matched + q.own;
    if (need <= have) return true;
    const bool ok = h_.take(need - have, 0);
    collect();  // its evictions may have backed pages up (write_back)
    if (!ok) return false;
    q.own += need - have;
    return true;
  }
  /// cache_finished_req: the full pages of its `computed` tokens into the tree, the rest back.
  /// No second match (run_request has none): its touches would order the path after a split's
  /// tail, which the one insert stamps alike.
  void finish(kv_request& q, std::uint64_t computed) {
    fill_keys(q, computed);
    const std::uint64_t taken = h_.insert_pages(keys_, q.inserted);
    settle_load(q);
    h_.give_back(q.own - taken);
    drop(q);
    collect();
  }
  /// Retraction: every page it allocated back, unlock.
  void preempt(kv_request& q) {
    settle_load(q);
    h_.give_back(q.own);
    drop(q);
  }
  [[nodiscard]] std::uint64_t cached_blocks() const {
    return h_.tree_device_pages();
  }
  [[nodiscard]] std::uint64_t evictions() const { return h_.counters().device_evicted_blocks; }
  [[nodiscard]] const hicache& tree() const { return h_; }

  // L3 storage and prefetch (engine_hicache_l3.cpp).

  /// What a prefetch at arrival sees: the match over both tiers (touching, as SGLang's
  /// _prefetch_kvcache matches), and whether its deepest node is backed up or the root.
  struct prefetch_view {
    std::uint32_t matched = 0;  ///< pages on the device or the host
    bool anchor_backed_up = false;
  };
  prefetch_view prefetch_match(const kv_request& q, std::uint64_t seq) {
    const auto cap = static_cast<std::uint32_t>((seq - 1) / bt_);
    keys_.clear();
    for (std::uint32_t k = 0; k < cap; ++k) keys_.push_back(key_at(q, k));
    const hicache::match_result m = h_.match_prefix(keys_);
    return {m.device + m.host, h_.backed_up(m.best)};
  }
  /// A prefetch's pages [0, upto) land in the host under the anchor's `anchor` pages
  /// (sglang_hicache::insert_host). Returns the pages added.
  std::uint32_t insert_prefetched(const kv_request& q, std::uint32_t anchor, std::uint32_t upto,
                                  std::uint32_t min_pages) {
    keys_.clear();
    for (std::uint32_t k = 0; k < upto; ++k) keys_.push_back(key_at(q, k));
    return h_.insert_host(keys_, anchor, min_pages);
  }
  /// Calls f(key) for every page backed up to the host since the last call, in order.
  template <class F>
  void take_backups(F&& f) {
    for (const kvtk::block_key k : backups_) f(k);
    backups_.clear();
  }

 private:
  // The load's acknowledgement: before q.node moves (it is the loaded path's end).
  void settle_load(kv_request& q) {
    if (q.load_pages == 0) return;
    h_.loaded(q.node, q.load_pages);
    q.load_pages = 0;
  }
  void fill_keys(const kv_request& q, std::uint64_t computed) {
    keys_.clear();
    for (std::uint64_t i = 0; i < computed / bt_; ++i) keys_.push_back(key_at(q, i));
  }
  void collect() {
    if (logging_) h_.drain_backups([this](kvtk::block_key k) { backups_.push_back(k); });
  }
  void drop(kv_request& q) {
    h_.unlock_path(q.node);
    q.own = 0;
    q.matched = 0;
    q.inserted = 0;
    q.admitted = false;
  }
  hicache h_;
  std::uint32_t bt_;
  std::vector<kvtk::block_key> keys_;  // scratch: grows to the longest request
  std::vector<kvtk::block_key> backups_;  // pages backed up, not yet taken by the L3 writer
  bool logging_ = false;
};

}  // namespace kvtk::sim::des::detail
