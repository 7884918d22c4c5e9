// sim/des/engine_kv.hpp — the KV accounting of kvtk simulate's engine schedulers (internal to
// sim/des): one instance's KV cache, which is at once the memory running requests compute into
// and the engine's prefix cache, as vLLM's block pool (vllm_kv) or SGLang's radix cache with its
// paged allocator (sglang_kv). A scheduler (engine_sched.cpp) asks it to admit a request (hit
// and blocks for the tokens it schedules), to grow it (more prefill chunks, decode tokens), to
// finish it and to preempt it. Both share one interface so that the scheduler is a template on
// it: no virtual call per iteration.
#pragma once

#include <cstdint>
#include <kvtk/prefix/block_keys.hpp>
#include <kvtk/prefix/sglang_radix_cache.hpp>
#include <kvtk/prefix/vllm_block_pool.hpp>
#include <span>
#include <vector>

namespace kvtk::sim::des::detail {

/// A request as the KV accounting sees it.
struct kv_request {
  std::uint64_t id = 0;                          ///< the request's index (generated blocks' keys)
  std::span<const kvtk::block_key> prompt_keys;  ///< the prompt's full blocks' keys
  std::vector<std::uint32_t> held;               ///< vllm: its blocks, in order
  std::uint32_t cached = 0;                      ///< vllm: blocks already cached
  std::uint32_t matched = 0, node = 0;           ///< sglang: pages matched, the locked node
  std::uint64_t own = 0;                         ///< sglang: pages it allocated
  std::uint64_t inserted = 0;                    ///< sglang HiCache: pages it inserted (checkpoints)
  std::uint32_t load_pages = 0;                  ///< sglang HiCache: pages loaded back, not yet acked
  bool admitted = false;
};

/// The key of block i of a request: its prompt's, then, for blocks that hold generated tokens
/// (or the prompt's partial tail with them), keys of its own (request index and position under
/// its prompt's last key): engines hash every full block, and the text a request generated is
/// its own.
inline kvtk::block_key key_at(const kv_request& q, std::uint64_t i) {
  if (i < q.prompt_keys.size()) return q.prompt_keys[i];
  const kvtk::block_key parent = q.prompt_keys.empty() ? 0 : q.prompt_keys.back();
  return kvtk::prefix::chain_hash{}(parent, (q.id << 24) ^ i ^ 0x6b76746bULL);
}

inline std::uint64_t blocks_for(std::uint64_t tokens, std::uint32_t bt) {
  return (tokens + bt - 1) / bt;
}

/// What admitting a request scheduled: its hit and the new tokens computed this iteration.
/// hit_tokens includes loaded_tokens: KV the instance did not have and takes from outside (a
/// lower tier, or the prefill instance of a disaggregated pair), computed no more.
struct admission {
  bool ok = false;
  std::uint64_t hit_tokens = 0, new_tokens = 0, loaded_tokens = 0;
};

/// No KV from outside: the instance's own cache is all there is.
struct no_external_kv {
  std::uint64_t operator()(std::uint64_t /*hit_tokens*/, std::uint64_t /*seq*/) const noexcept {
    return 0;
  }
};

/// The tokens an admission schedules: min(seq - hit, max_new), a cut chunk ending on a multiple
/// of `page` tokens when page > 0 (SGLang); none when that is 0, or when `whole` and it is not
/// all of them.
inline admission plan(std::uint64_t hit_tokens, std::uint64_t seq, std::uint64_t max_new,
                      bool whole, std::uint64_t page = 0) {
  const std::uint64_t rest = seq - hit_tokens;
  std::uint64_t n = std::min(rest, max_new);
  if (page > 0 && n < rest) n = n / page * page;  // hit_tokens is a whole number of pages
  if (n == 0 || (whole && n < rest)) return {};
  return {true, hit_tokens, n};
}

/// What an SGLang admission must leave for the requests already running (PrefillAdder): tokens
/// held back for their remaining outputs and this batch's earlier admissions.
struct admission_reserve {
  std::uint64_t out_rest = 0;  ///< this request's remaining output tokens (capped at 4096)
  std::uint64_t held = 0;      ///< tokens held back for the others
  /// Pages this batch's earlier admissions already took: SGLang allocates only after the
  /// PrefillAdder has chosen the whole batch, so its checks still count them as free (their
  /// cost is in `held`).
  std::uint64_t taken_pages = 0;
};

/// vLLM 0.33.0: KVCacheManager over vllm_block_pool (include/kvtk/prefix/vllm_block_pool.hpp).
class vllm_kv {
 public:
  static constexpr const char* engine = "vllm";
  vllm_kv(std::uint32_t blocks, std::uint32_t bt) : pool_(blocks), bt_(bt), scratch_(0) {}

  /// get_computed_blocks + allocate_slots: the hit (capped at seq - 1 tokens), then the tokens
  /// `external(hit tokens, seq)` loads beyond it (as a KV connector's external computed
  /// tokens), then blocks for all of them and min(seq - hit, max_new) new tokens (all of them
  /// when `whole`). Fails, changing nothing, when that is 0 tokens or the blocks are not there.
  /// Full prompt blocks are cached as they are allocated (loaded ones too), as vLLM does.
  template <class External = no_external_kv>
  admission admit(kv_request& q, std::uint64_t seq, std::uint64_t max_new, bool whole,
                  const admission_reserve& /*unused: vLLM reserves nothing for outputs*/,
                  External&& external = {}) {
    const std::uint32_t cap = kvtk::prefix::vllm_block_pool::hit_cap(seq, bt_, seq / bt_);
    if (scratch_.size() < cap) scratch_.resize(cap);
    std::uint32_t h = 0;
    for (; h < cap; ++h) {
      scratch_[h] = pool_.find(key_at(q, h));
      if (scratch_[h] == kvtk::prefix::vllm_block_pool::npos) break;
    }
    const std::uint64_t loaded = external(std::uint64_t{h} * bt_, seq);
    admission a = plan(std::uint64_t{h} * bt_ + loaded, seq, max_new, whole);
    a.loaded_tokens = loaded;
    // scheduler_reserve_full_isl: the blocks of the whole sequence must fit, though only the
    // chunk's are taken now.
    if (!a.ok || !pool_.can_allocate(std::span(scratch_).first(h), blocks_for(seq, bt_) - h)) {
      return {};
    }
    pool_.touch(std::span(scratch_).first(h));
    q.held.assign(scratch_.begin(), scratch_.begin() + h);
    q.cached = h;
    q.admitted = true;
    take(q, a.hit_tokens + a.new_tokens);
    return a;
  }
  /// A KV connector's asynchronous load (load_kv_async: the request waits in
  /// WAITING_FOR_REMOTE_KVS): the hit (capped as admit's), then the tokens `external(hit tokens,
  /// seq)` loads past it; blocks for both are allocated (the whole sequence's must fit, as admit
  /// checks) and the hit touched; the loaded blocks are cached only when loaded() says the load
  /// is done (delay_cache_blocks). Returns new_tokens 0 and hit_tokens capped at seq - 1 (vLLM
  /// recomputes the last token); not ok, changing nothing, when nothing loads (loaded_tokens 0:
  /// admit instead) or the blocks are not there (loaded_tokens > 0).
  template <class External>
  admission admit_loading(kv_request& q, std::uint64_t seq, External&& external) {
    const std::uint32_t cap = kvtk::prefix::vllm_block_pool::hit_cap(seq, bt_, seq / bt_);
    if (scratch_.size() < cap) scratch_.resize(cap);
    std::uint32_t h = 0;
    for (; h < cap; ++h) {
      scratch_[h] = pool_.find(key_at(q, h));
      if (scratch_[h] == kvtk::prefix::vllm_block_pool::npos) break;
    }
    admission a;
    a.loaded_tokens = external(std::uint64_t{h} * bt_, seq);
    if (a.loaded_tokens == 0 ||
        !pool_.can_allocate(std::span(scratch_).first(h), blocks_for(seq, bt_) - h)) {
      return a;
    }
    pool_.touch(std::span(scratch_).first(h));
    q.held.assign(scratch_.begin(), scratch_.begin() + h);
    q.cached = h;
    q.admitted = true;
    const std::uint64_t upto = std::uint64_t{h} * bt_ + a.loaded_tokens;
    while (q.held.size() < blocks_for(upto, bt_)) q.held.push_back(pool_.take_free());
    a.ok = true;
    a.hit_tokens = std::min(upto, seq - 1);
    return a;
  }
  /// The load of the request's first `tokens` tokens is done: their full blocks are cached.
  void loaded(kv_request& q, std::uint64_t tokens) {
    for (; q.cached < tokens / bt_ && q.cached < q.held.size(); ++q.cached) {
      pool_.cache(q.held[q.cached], key_at(q, q.cached));
    }
  }
  /// The blocks get_computed_blocks would hit, touching nothing (the cache-aware router).
  [[nodiscard]] std::uint32_t peek(const kv_request& q, std::uint64_t seq) const {
    const std::uint32_t cap = kvtk::prefix::vllm_block_pool::hit_cap(
        seq, bt_, std::min<std::uint64_t>(seq / bt_, q.prompt_keys.size()));
    std::uint32_t h = 0;
    while (h < cap && pool_.find(q.prompt_keys[h]) != kvtk::prefix::vllm_block_pool::npos) ++h;
    return h;
  }
  /// allocate_slots for a running request: blocks for tokens [0, upto). False when short.
  bool grow(kv_request& q, std::uint64_t upto) {
    const std::uint64_t need = blocks_for(upto, bt_);
    if (need <= q.held.size()) return true;
    if (!pool_.can_allocate({}, need - q.held.size())) return false;
    take(q, upto);
    return true;
  }
  /// free(request): its blocks, last first (`computed` tokens: unused, the blocks are cached).
  void finish(kv_request& q, std::uint64_t /*computed*/) { release(q); }
  void preempt(kv_request& q) { release(q); }
  /// Nothing to do: vLLM caches full blocks as it allocates them.
  void checkpoint(kv_request& /*q*/, std::uint64_t /*computed*/) {}
  [[nodiscard]] std::uint64_t cached_blocks() const { return pool_.cached_blocks(); }
  [[nodiscard]] std::uint64_t evictions() const { return pool_.evictions(); }
  [[nodiscard]] std::uint64_t free_blocks() const { return pool_.free_blocks(); }
  [[nodiscard]] std::uint64_t capacity() const { return pool_.capacity(); }

 private:
  void take(kv_request& q, std::uint64_t upto) {
    const std::uint64_t need = blocks_for(upto, bt_);
    while (q.held.size() < need) q.held.push_back(pool_.take_free());
    for (; q.cached < upto / bt_; ++q.cached) pool_.cache(q.held[q.cached], key_at(q, q.cached));
  }
  void release(kv_request& q) {
    pool_.release(q.held);
    q.held.clear();
    q.cached = 0;
    q.admitted = false;
  }
  kvtk::prefix::vllm_block_pool pool_;
  std::uint32_t bt_;
  std::vector<std::uint32_t> scratch_;
};

/// SGLang 0.5.23: RadixCache + paged allocator (include/kvtk/prefix/sglang_radix_cache.hpp).
class sglang_kv {
 public:
  static constexpr const char* engine = "sglang";
  sglang_kv(std::uint32_t pages, std::uint32_t bt) : cache_(pages), bt_(bt) {}

  /// match_prefix (capped at seq - 1 tokens, page-aligned), lock, the tokens `external(hit
  /// tokens, seq)` loads beyond the match (a lower tier, a prefill instance), and pages for them
  /// and the extend of min(seq - hit, max_new) tokens (all when `whole`), with the allocator's
  /// spare page in the demand, when the whole rest of the request fits in free + evictable
  /// pages. Fails when that is 0 tokens or the pages are not there: the lock is dropped, the
  /// match's touches stay (as in SGLang).
  template <class External = no_external_kv>
  admission admit(kv_request& q, std::uint64_t seq, std::uint64_t max_new, bool whole,
                  const admission_reserve& reserve, External&& external = {}) {
    const auto cap = static_cast<std::uint32_t>((seq - 1) / bt_);
    keys_.clear();
    for (std::uint32_t k = 0; k < cap; ++k) keys_.push_back(key_at(q, k));
    const auto m = cache_.match(keys_);
    const std::uint64_t loaded = external(std::uint64_t{m.length} * bt_, seq);
    admission a = plan(std::uint64_t{m.length} * bt_ + loaded, seq, max_new, whole, bt_);
    a.loaded_tokens = loaded;
    if (!a.ok) return {};
    cache_.lock(m.node);
    // PrefillAdder.add_one_req: the rest of the request past the match (tokens, not pages),
    // its remaining output and a page must be fewer than the free and evictable tokens (as they
    // were before this batch's allocations) less what is held back for the others, even when
    // only a chunk of it is scheduled now.
    const std::uint64_t rest = seq - std::uint64_t{m.length} * bt_;
    const std::uint64_t pages = blocks_for(a.hit_tokens + a.new_tokens, bt_) - m.length;
    if (rest + reserve.out_rest + bt_ + reserve.held >=
            (cache_.available() + reserve.taken_pages) * bt_ ||
        !cache_.reserve(pages, 1)) {
      cache_.unlock(m.node);
      return {};
    }
    q.matched = m.length;
    q.node = m.node;
    q.own = pages;
    q.admitted = true;
    return a;
  }
  /// Free and evictable pages (SGLang's available_size() + evictable_size(), in pages).
  [[nodiscard]] std::uint64_t available_pages() const { return cache_.available(); }
  [[nodiscard]] std::uint32_t peek(const kv_request& q, std::uint64_t seq) const {
    const auto cap = static_cast<std::uint32_t>(
        std::min<std::uint64_t>((seq - 1) / bt_, q.prompt_keys.size()));
    return cache_.peek(q.prompt_keys.first(cap));
  }
  /// checkpoint_kv_cache after a prefill iteration: the full pages of its `computed` tokens
  /// into the tree, its copies of pages the tree already had freed, the lock moved down.
  void checkpoint(kv_request& q, std::uint64_t computed) {
    keys_.clear();
    for (std::uint64_t k = 0; k < computed / bt_; ++k) keys_.push_back(key_at(q, k));
    if (keys_.size() <= q.matched) return;
    const auto c = cache_.checkpoint(keys_);
    const std::uint64_t duplicates = keys_.size() - c.added - q.matched;
    cache_.give_back(duplicates);
    q.own -= c.added + duplicates;
    cache_.lock(c.path.node);
    cache_.unlock(q.node);
    q.node = c.path.node;
    q.matched = c.path.length;
  }
  bool grow(kv_request& q, std::uint64_t upto) {
    const std::uint64_t need = blocks_for(upto, bt_);
    const std::uint64_t have = q.matched + q.own;
    if (need <= have) return true;
    if (!cache_.reserve(need - have, 0)) return false;
    q.own += need - have;
    return true;
  }
  /// cache_finished_req: the full pages of its `computed` tokens (prompt and generated) into
  /// the tree, the rest back, unlock.
  void finish(kv_request& q, std::uint64_t computed) {
    keys_.clear();
    for (std::uint64_t i = 0; i < computed / bt_; ++i) keys_.push_back(key_at(q, i));
    cache_.finish(keys_, q.own);
    drop(q);
  }
  /// Retraction: every page it allocated back, unlock.
  void preempt(kv_request& q) {
    cache_.give_back(q.own);
    drop(q);
  }
  [[nodiscard]] std::uint64_t cached_blocks() const { return cache_.cached_blocks(); }
  [[nodiscard]] std::uint64_t evictions() const { return cache_.evictions(); }

 private:
  void drop(kv_request& q) {
    cache_.unlock(q.node);
    q.own = 0;
    q.matched = 0;
    q.admitted = false;
  }
  kvtk::prefix::sglang_radix_cache cache_;
  std::uint32_t bt_;
  std::vector<kvtk::block_key> keys_;  // finish's scratch: grows to the longest request
};

}  // namespace kvtk::sim::des::detail
