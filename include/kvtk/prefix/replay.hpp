// kvtk/prefix/replay.hpp — order-only replay of a request trace through a prefix-cache index.
//
// Semantics (pinned; tests and users depend on them). Requests in trace order. For a request with
// cacheable blocks k_0..k_{n-1} (n = cacheable_blocks(L, block_tokens, partial), at most the
// number of keys listed) and input length L:
//  1. hit blocks h = the number of leading blocks resident *before* any update;
//     hit tokens = min(h * block_tokens, L). Block refs += n, token refs += L.
//  2. Then the index is updated in forward order:
//     * flat_index<P> (any core policy over the keys): a resident block gets an access; a missing
//       one is inserted, evicting the policy's victims while over capacity — possibly one of this
//       request's own earlier blocks.
//     * radix_index<Leaf, Admit> (prefix_tree): the matched path is locked and touched (one stamp
//       per block, forward), the rest is inserted below it, each new block locked; a victim is the
//       evictable (unlocked, childless) leaf of smallest rank; when no leaf is evictable, or the
//       tree is full and the admission rule declines a block (admission.hpp; the default admits
//       all), the rest of the request is not inserted. All locks are released after the request.
//     * hash_chain_index (vLLM): the request acquires its blocks (hits touched, misses take the
//       free queue's front block) and releases them, deepest first, after the request.
//  Offline policies (Belady) get next_use = the position of the key's next reference in the
//  stream of cacheable block references (next_use_positions(trace, partial)). The offline
//  optimum and the upper bound every result is compared with are in optimum.hpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kvtk/cache/block_cache.hpp"
#include "kvtk/detail/key_map.hpp"
#include "kvtk/offline.hpp"
#include "kvtk/policy/belady.hpp"
#include "kvtk/prefix/admission.hpp"
#include "kvtk/prefix/block_keys.hpp"
#include "kvtk/prefix/hash_chain_pool.hpp"
#include "kvtk/prefix/prefix_tree.hpp"

namespace kvtk::prefix {

/// Read-only view of a request trace: the layout replay needs, whether the arrays live in a
/// prefix_trace or in a memory-mapped .kvtb file (the simulator's binary format). Empty optional
/// columns mean "not in the trace".
///
/// Unit layout: when `offsets` is empty, request r is the single block keys[r] of block_tokens
/// tokens, and input_length is empty too. Flat block traces (ids, oracle-general) load this way:
/// 8 bytes per reference instead of 24 (bench/RESULTS.md, "End to end"). Read requests through
/// requests(), blocks() and input_tokens(), which handle both layouts.
/// Thread safety: read-only: any number of threads may read one view while nobody writes it.
/// The parent of a request with none (a session's root) in prefix_trace::parent; also the
/// request_id of a request without one.
inline constexpr std::uint64_t no_parent = ~std::uint64_t{0};
/// The turn of a request without one in prefix_trace::turn.
inline constexpr std::uint32_t no_turn = ~std::uint32_t{0};

struct prefix_trace_view {
  std::uint32_t block_tokens = 512;  ///< tokens per block (requests without their own size)
  std::span<const block_key> keys;
  std::span<const std::uint64_t> offsets;  ///< request r owns keys[offsets[r], offsets[r+1])
  std::span<const std::uint64_t> input_length;
  std::span<const std::uint32_t> priority;  ///< access_hint::priority per request
  std::span<const double> arrival_s;
  std::span<const std::uint64_t> output_length;
  std::span<const std::uint64_t> session;            ///< session / conversation id per request
  std::span<const std::uint32_t> tenant;             ///< tenant index per request
  std::span<const std::uint32_t> request_block_tokens;  ///< per-request block size
  // Session structure (traces that record it: Bailian, kvtk JSONL "id"/"parent"/"turn"/"kind").
  std::span<const std::uint64_t> request_id;  ///< the request's own id (Bailian chat_id), or no_parent
  std::span<const std::uint64_t> parent;      ///< its parent request's id, or no_parent
  std::span<const std::uint32_t> turn;        ///< its turn in the session, or no_turn
  std::span<const std::uint32_t> kind;        ///< index into the trace's kind names (0 = none)
  /// Seconds the tool call that ended the request's reply took; NaN where the reply made none.
  std::span<const double> tool_s;
  /// Per request, 1 when its reply ended in a tool call (session_signals; never in a trace file).
  std::span<const std::uint8_t> awaits_tool;
  /// Fan-in: request r also waits for the requests whose ids are
  /// join_ids[join_offsets[r], join_offsets[r+1]) (its parents after `parent`, which is the one
  /// whose session and turn it continues). Both empty when no request has several parents.
  std::span<const std::uint64_t> join_offsets;
  std::span<const std::uint64_t> join_ids;

  /// The ids of the parents of request r after the first (fan-in); empty for most requests.
  [[nodiscard]] std::span<const std::uint64_t> joins(std::size_t r) const noexcept {
    if (join_offsets.empty()) return {};
    return join_ids.subspan(join_offsets[r], join_offsets[r + 1] - join_offsets[r]);
  }

  /// True for the unit layout (see above).
  [[nodiscard]] bool unit_requests() const noexcept { return offsets.empty(); }
  [[nodiscard]] std::size_t requests() const noexcept {
    return unit_requests() ? keys.size() : input_length.size();
  }
  [[nodiscard]] std::uint32_t block_tokens_of(std::size_t r) const noexcept {
    return request_block_tokens.empty() ? block_tokens : request_block_tokens[r];
  }
  /// The request's prompt length in tokens.
  [[nodiscard]] std::uint64_t input_tokens(std::size_t r) const noexcept {
    return unit_requests() ? block_tokens_of(r) : input_length[r];
  }
  /// Tokens of request r's block i (tokens_in_block: the last block may be partial).
  [[nodiscard]] std::uint64_t tokens_of_block(std::size_t r, std::uint64_t i) const noexcept {
    return tokens_in_block(input_tokens(r), block_tokens_of(r), i);
  }
  [[nodiscard]] std::span<const block_key> blocks(std::size_t r) const noexcept {
    if (unit_requests()) return keys.subspan(r, 1);
    return keys.subspan(offsets[r], offsets[r + 1] - offsets[r]);
  }
  /// The request's cacheable blocks under `partial`.
  [[nodiscard]] std::span<const block_key> cacheable(std::size_t r,
                                                     partial_block p) const noexcept {
    const auto all = blocks(r);
    const std::uint64_t n = cacheable_blocks(input_tokens(r), block_tokens_of(r), p);
    return all.first(std::min<std::uint64_t>(n, all.size()));
  }
  /// True when every request's cacheable blocks are all its blocks, so that the stream of
  /// cacheable references is `keys` itself.  Complexity: O(requests), O(1) for the unit layout.
  [[nodiscard]] bool all_blocks_cacheable(partial_block p) const noexcept {
    if (unit_requests()) return true;  // a unit request is one whole block
    for (std::size_t r = 0; r < requests(); ++r) {
      if (cacheable(r, p).size() != offsets[r + 1] - offsets[r]) return false;
    }
    return true;
  }
};

/// A request trace held in memory: every request's block keys, concatenated, plus per-request
/// columns (empty when the trace does not have them). With `offsets` empty it is in the unit
/// layout (prefix_trace_view); add() is for the general layout only. Session, tenant and output
/// length are carried for the simulator and statistics; prefix replay reads keys, lengths, block
/// sizes and priorities only.
struct prefix_trace {
  std::uint32_t block_tokens = 512;
  std::vector<block_key> keys;
  std::vector<std::uint64_t> offsets{0};  ///< request r owns keys[offsets[r], offsets[r+1])
  std::vector<std::uint64_t> input_length;
  std::vector<std::uint32_t> priority;       ///< per request; empty = access_hint's default
  std::vector<double> arrival_s;             ///< per request when the trace has times, else empty
  std::vector<std::uint64_t> output_length;  ///< per request when the trace has them, else empty
  std::vector<std::uint64_t> session;        ///< per request when the trace has them, else empty
  std::vector<std::uint32_t> tenant;         ///< index into tenant_names, or empty
  std::vector<std::string> tenant_names;
  std::vector<std::uint32_t> request_block_tokens;  ///< empty = block_tokens for every request
  std::vector<std::uint64_t> request_id;  ///< per request when the trace has them, else empty
  std::vector<std::uint64_t> parent;      ///< parent's request id (no_parent: a root), or empty
  std::vector<std::uint32_t> turn;        ///< per request when the trace has them, else empty
  std::vector<std::uint32_t> kind;        ///< index into kind_names (0 = none), or empty
  std::vector<std::string> kind_names;    ///< "" first, then each kind ("chat", "tool", ...)
  std::vector<double> tool_s;             ///< per request (NaN: no tool call), or empty
  std::vector<std::uint64_t> join_offsets;  ///< fan-in (prefix_trace_view::joins), or empty
  std::vector<std::uint64_t> join_ids;

  void add(std::span<const block_key> blocks, std::uint64_t input_tokens) {
    keys.insert(keys.end(), blocks.begin(), blocks.end());
    offsets.push_back(keys.size());
    input_length.push_back(input_tokens);
  }
  [[nodiscard]] prefix_trace_view view() const noexcept {
    return {block_tokens, keys,    offsets, input_length, priority,
            arrival_s,    output_length, session, tenant,       request_block_tokens,
            request_id,   parent,        turn,    kind,          tool_s, {},
            join_offsets, join_ids};
  }
  // Implicit on purpose: every function taking a view accepts a trace.
  operator prefix_trace_view() const noexcept { return view(); }  // NOLINT
  [[nodiscard]] std::size_t requests() const noexcept { return view().requests(); }
  [[nodiscard]] std::uint32_t block_tokens_of(std::size_t r) const noexcept {
    return view().block_tokens_of(r);
  }
  [[nodiscard]] std::uint64_t input_tokens(std::size_t r) const noexcept {
    return view().input_tokens(r);
  }
  [[nodiscard]] std::span<const block_key> blocks(std::size_t r) const noexcept {
    return view().blocks(r);
  }
  [[nodiscard]] std::span<const block_key> cacheable(std::size_t r,
                                                     partial_block p) const noexcept {
    return view().cacheable(r, p);
  }
};

/// Counters of a prefix replay.
struct prefix_counts {
  std::uint64_t requests = 0, block_refs = 0, block_hits = 0, token_refs = 0, token_hits = 0;
  std::uint64_t evictions = 0;
  [[nodiscard]] double block_hit_ratio() const noexcept {
    return block_refs ? static_cast<double>(block_hits) / static_cast<double>(block_refs) : 0.0;
  }
  [[nodiscard]] double token_hit_ratio() const noexcept {
    return token_refs ? static_cast<double>(token_hits) / static_cast<double>(token_refs) : 0.0;
  }
  /// This replay's block hits as a fraction of another's (e.g. the offline optimum's at the same
  /// capacity, from replay_optimum); 1 when the other has no hits.
  [[nodiscard]] double fraction_of(const prefix_counts& optimum) const noexcept {
    return optimum.block_hits
               ? static_cast<double>(block_hits) / static_cast<double>(optimum.block_hits)
               : 1.0;
  }
};

/// next_use for every cacheable block reference of the trace, in replay order.
/// Complexity: one backward sweep (kvtk::next_use_positions); the stream of references is copied
/// only when some request has blocks that are not cacheable.
inline std::vector<std::uint64_t> next_use_positions(const prefix_trace_view& t,
                                                     partial_block p) {
  if (t.all_blocks_cacheable(p)) return kvtk::next_use_positions(t.keys);
  std::vector<block_key> stream;
  stream.reserve(t.keys.size());
  for (std::size_t r = 0; r < t.requests(); ++r) {
    const auto b = t.cacheable(r, p);
    stream.insert(stream.end(), b.begin(), b.end());
  }
  return kvtk::next_use_positions(stream);
}

/// The ideal (infinite-cache) replay's counts and the number of distinct cacheable blocks.
struct ideal_counts {
  prefix_counts counts;  ///< as replay() through any index that never evicts
  std::uint64_t unique_blocks = 0;
};

/// The ideal replay of t, pass by pass: request r hits its leading blocks that some earlier
/// request referenced (the same as flat_index<lru> of unbounded capacity, and as radix LRU: with
/// nothing evicted, a referenced block's whole prefix is resident too). One detail::key_set, no
/// cache. add() takes consecutive ranges of requests, so a caller can do other work between
/// them (drop the pages of a mapped trace it has passed, say); the ranges add up to one pass.
/// Thread safety: as block_cache (one counter per thread).
class ideal_counter {
 public:
  /// `key_refs`: the trace's number of keys (sizes the set's first table).
  explicit ideal_counter(std::size_t key_refs)
      : seen_(detail::key_set::expected_for_refs(key_refs)) {}

  /// Effects: counts requests [first, last) of t (the next range after the previous call's).
  /// Complexity: O(block refs) expected.  Throws: std::bad_alloc.
  void add(const prefix_trace_view& t, partial_block p, std::size_t first, std::size_t last) {
    constexpr std::size_t ahead = detail::key_set::prefetch_distance;
    prefix_counts& c = out_.counts;
    for (std::size_t r = first; r < last; ++r) {
      const auto blocks = t.cacheable(r, p);
      const std::uint64_t L = t.input_tokens(r);
      std::uint64_t h = 0;
      const std::size_t at = static_cast<std::size_t>(blocks.data() - t.keys.data());
      for (std::size_t i = at + ahead; i < std::min(at + ahead + blocks.size(), t.keys.size());
           ++i) {
        seen_.prefetch(t.keys[i]);
      }
      if (blocks.size() == 1) {  // flat traces: one probe answers both questions
        h = seen_.try_emplace(blocks[0]).second ? 0 : 1;
      } else {
        while (h < blocks.size() && seen_.contains(blocks[h])) ++h;
        for (block_key k : blocks) seen_.try_emplace(k);
      }
      ++c.requests;
      c.block_refs += blocks.size();
      c.block_hits += h;
      c.token_refs += L;
      c.token_hits += tokens_in_blocks(L, t.block_tokens_of(r), h);
    }
    out_.unique_blocks = seen_.size();
  }
  [[nodiscard]] const ideal_counts& result() const noexcept { return out_; }
  /// Bytes held by the set of distinct blocks.
  [[nodiscard]] std::size_t memory_bytes() const noexcept { return seen_.memory_bytes(); }

 private:
  detail::key_set seen_;
  ideal_counts out_;
};

/// The ideal replay of t in one pass (ideal_counter).
/// Complexity: O(block refs) expected; memory 16 bytes per distinct block at most.
/// Throws: std::bad_alloc.
inline ideal_counts replay_ideal(const prefix_trace_view& t,
                                 partial_block p = partial_block::skip) {
  ideal_counter c(t.keys.size());
  c.add(t, p, 0, t.requests());
  return c.result();
}

/// The same counts from next_use = next_use_positions(t, p), when a caller has it anyway (for
/// the optimum): no set, one forward pass over next_use with a bit per reference. A reference is
/// "seen before its request" when its previous occurrence lies in an earlier request, or in the
/// same request and was itself seen before (a key repeated inside one request). As ideal_counter,
/// add() takes consecutive ranges of requests, so that a caller can let go of the stretches of
/// the trace and of next_use it has passed (add reads next_use only at the positions of the
/// requests it is given); the ranges add up to one pass.
/// Thread safety: one counter per thread; next_use and the trace are only read.
class next_use_ideal_counter {
 public:
  /// Requires: next_use outlives the counter.  Throws: std::bad_alloc.
  explicit next_use_ideal_counter(std::span<const std::uint64_t> next_use)
      : next_(next_use), seen_before_(next_use.size(), false) {}

  /// Effects: counts requests [first, last) of t (the next range after the previous call's).
  /// Throws: std::invalid_argument when next_use is too short or not a list of later positions.
  void add(const prefix_trace_view& t, partial_block p, std::size_t first, std::size_t last) {
    prefix_counts& c = out_.counts;
    for (std::size_t r = first; r < last; ++r) {
      const auto blocks = t.cacheable(r, p);
      const std::uint64_t begin = pos_, end = pos_ + blocks.size(), L = t.input_tokens(r);
      if (end > next_.size()) throw std::invalid_argument("replay_ideal: next_use too short");
      // Forward order makes seen_before[j] final before j passes it on; the leading run is read
      // after the loop because a repeat inside this request gets its bit here.
      for (std::uint64_t j = begin; j < end; ++j) {
        const std::uint64_t nx = next_[j];
        if (nx == access_hint::never) continue;
        ++repeats_;
        if (nx <= j || nx >= next_.size()) {
          throw std::invalid_argument("replay_ideal: next_use is not a list of later positions");
        }
        seen_before_[nx] = nx >= end || seen_before_[j];
      }
      std::uint64_t h = 0;
      while (h < blocks.size() && seen_before_[begin + h]) ++h;
      pos_ = end;
      ++c.requests;
      c.block_refs += blocks.size();
      c.block_hits += h;
      c.token_refs += L;
      c.token_hits += tokens_in_blocks(L, t.block_tokens_of(r), h);
    }
  }
  /// The position in next_use of the next request's first cacheable block.
  [[nodiscard]] std::uint64_t position() const noexcept { return pos_; }
  /// Returns the counts once every request was added.
  /// Throws: std::invalid_argument when next_use is longer than the references added.
  [[nodiscard]] ideal_counts finish() const {
    if (pos_ != next_.size()) throw std::invalid_argument("replay_ideal: next_use too long");
    ideal_counts out = out_;
    out.unique_blocks = pos_ - repeats_;
    return out;
  }

 private:
  std::span<const std::uint64_t> next_;
  std::vector<bool> seen_before_;
  std::uint64_t pos_ = 0, repeats_ = 0;
  ideal_counts out_;
};

/// The ideal replay of t from next_use in one pass (next_use_ideal_counter).
/// Requires: next_use.size() == the number of cacheable references.
/// Complexity: O(block refs); memory 1 bit per reference.  Throws: std::invalid_argument when
/// next_use has the wrong size; std::bad_alloc.
inline ideal_counts replay_ideal(const prefix_trace_view& t, partial_block p,
                                 std::span<const std::uint64_t> next_use) {
  next_use_ideal_counter c(next_use);
  c.add(t, p, 0, t.requests());
  return c.finish();
}

/// Flat index: every block is an independent entry of a block_cache<P>.
/// Thread safety: as block_cache (one index per thread; the trace may be shared).
template <eviction_policy P>
class flat_index {
 public:
  static constexpr bool offline = is_offline_policy<P>;
  explicit flat_index(std::uint32_t capacity_blocks) : cache_(make_config(capacity_blocks)) {}
  std::uint32_t process(std::span<const block_key> blocks, std::span<const std::uint64_t> next,
                        const access_hint& base) noexcept {
    access_hint hint = base;
    if (blocks.size() == 1) {  // flat traces: the access's own result says whether it hit
      if constexpr (is_offline_policy<P>) hint.next_use = next[0];
      hint.depth = 0;
      return cache_.access(blocks[0], hint).result == access_result::hit ? 1 : 0;
    }
    std::uint32_t h = 0;
    while (h < blocks.size() && cache_.contains(blocks[h])) ++h;
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      if constexpr (is_offline_policy<P>) hint.next_use = next[i];
      hint.depth = static_cast<std::uint32_t>(i);
      cache_.access(blocks[i], hint);
    }
    return h;
  }
  [[nodiscard]] std::uint64_t evictions() const noexcept { return cache_.stats().evictions; }
  [[nodiscard]] const block_cache<P>& cache() const noexcept { return cache_; }

 private:
  static typename block_cache<P>::config make_config(std::uint32_t c) {
    typename block_cache<P>::config cfg{};
    cfg.capacity = c;
    promise_next_use<P>(cfg.policy);  // process() passes next uses to offline policies
    return cfg;
  }
  block_cache<P> cache_;
};

/// Radix index: a prefix_tree with leaf-only eviction ordered by Leaf, and new blocks admitted by
/// Admit (admission.hpp; admit_all, the default, inserts every block as the engines do).
/// Thread safety: as block_cache (one index per thread; the trace may be shared).
template <leaf_policy Leaf, admission_rule Admit = admit_all>
class radix_index {
 public:
  static constexpr bool offline = requires { Leaf::offline; } || requires { Admit::offline; };
  static_assert(!requires { Admit::needs_belady_leaf; } || std::is_same_v<Leaf, leaf_belady>,
                "admit_belady compares next uses with leaf_belady's ranks");
  explicit radix_index(std::uint32_t capacity_blocks)
      : tree_(capacity_blocks), admit_(capacity_blocks) {}
  std::uint32_t process(std::span<const block_key> blocks, std::span<const std::uint64_t> next,
                        const access_hint& base) {
    if (path_.size() < blocks.size()) path_.resize(blocks.size());  // grows to the longest request
    const std::span<std::uint32_t> path(path_.data(), blocks.size());
    if constexpr (requires { admit_.begin_request(blocks); }) admit_.begin_request(blocks);
    if constexpr (requires { tree_.leaf_state().on_request(base); }) tree_.leaf_state().on_request(base);
    const auto m = tree_.match(blocks, path);
    access_hint hint = base;
    auto hint_for = [&](std::size_t i) -> const access_hint& {
      if constexpr (offline) hint.next_use = next[i];
      hint.depth = static_cast<std::uint32_t>(i);
      return hint;
    };
    if constexpr (requires { tree_.leaf_state().begin_request(path.first(m.length)); }) {
      tree_.leaf_state().begin_request(path.first(m.length));
    }
    tree_.lock_and_touch_path(path.first(m.length), hint_for);
    const auto tail = blocks.subspan(m.length);
    bool declined = false;
    const auto ins = tree_.insert(
        m.node, tail,
        [&](block_key k, std::uint32_t, const no_payload&) {
          if constexpr (requires { admit_.on_evict(k); }) admit_.on_evict(k);
        },
        [&](std::uint32_t i) -> const access_hint& { return hint_for(m.length + i); },
        [](std::uint32_t) { return no_payload{}; }, path.subspan(m.length),
        [&](std::uint32_t i) {
          if constexpr (std::is_same_v<Admit, admit_all>) {
            return true;
          } else {
            if (!tree_.full()) return true;
            const std::uint32_t d = m.length + i;
            declined = !admit_.admit(tree_, blocks[d], d, hint_for(d));
            return !declined;
          }
        });
    if constexpr (requires { admit_.on_declined(tail); }) {
      if (declined) admit_.on_declined(tail.subspan(ins.inserted));
    }
    tree_.unlock_path(path.first(m.length + ins.inserted));
    return m.length;
  }
  [[nodiscard]] std::uint64_t evictions() const noexcept { return tree_.evictions(); }
  [[nodiscard]] const prefix_tree<Leaf>& tree() const noexcept { return tree_; }
  [[nodiscard]] const typename Admit::state& admission() const noexcept { return admit_; }
  /// The leaf order's state (stateful orders only), e.g. leaf_session_ttl's fix_ttl.
  [[nodiscard]] auto& leaf_state() noexcept { return tree_.leaf_state(); }

 private:
  prefix_tree<Leaf> tree_;
  typename Admit::state admit_;
  std::vector<std::uint32_t> path_;
};

/// Hash-chain index: vLLM v1's block pool.
/// Thread safety: as block_cache (one index per thread; the trace may be shared).
class hash_chain_index {
 public:
  static constexpr bool offline = false;
  explicit hash_chain_index(std::uint32_t capacity_blocks) : pool_(capacity_blocks) {}
  std::uint32_t process(std::span<const block_key> blocks, std::span<const std::uint64_t>,
                        const access_hint&) {
    const std::uint32_t h = pool_.match(blocks);
    if (held_.size() < blocks.size()) held_.resize(blocks.size());  // grows to the longest request
    const std::uint32_t n = pool_.acquire(blocks, held_, [](block_key, std::uint32_t) {});
    pool_.release(std::span<const std::uint32_t>(held_.data(), n));
    return h;
  }
  [[nodiscard]] std::uint64_t evictions() const noexcept { return pool_.evictions(); }

 private:
  hash_chain_pool pool_;
  std::vector<std::uint32_t> held_;
};

/// Replays requests [first, last) of trace t through idx, adding to c (evictions excepted).
/// `pos` is the index in next_use of request first's first cacheable block, and is advanced: a
/// replay split into consecutive ranges (to report progress, say) equals one whole replay.
/// Requires: next_use holds one entry per cacheable block reference when Index::offline.
/// Throws: std::invalid_argument when next_use is missing or too short for an offline index.
template <class Index>
void replay_requests(const prefix_trace_view& t, Index& idx, partial_block p,
                     std::span<const std::uint64_t> next_use, std::size_t first,
                     std::size_t last, prefix_counts& c, std::uint64_t& pos) {
  if (Index::offline && next_use.empty()) {
    throw std::invalid_argument("prefix replay: an offline policy needs next_use");
  }
  access_hint base;
  if (t.unit_requests() && t.request_block_tokens.empty() && t.block_tokens > 0) {
    // The unit layout (flat traces): one whole block per request, so the per-request work of
    // the general loop below (cacheable lengths, token minimums) folds into a few additions.
    const std::uint64_t bt = t.block_tokens, n = last - first;
    if (!next_use.empty() && pos + n > next_use.size()) {
      throw std::invalid_argument("prefix replay: next_use shorter than the trace");
    }
    std::uint64_t hits = 0;
    for (std::size_t r = first; r < last; ++r) {
      if (!t.priority.empty()) base.priority = t.priority[r];
      if constexpr (requires { idx.begin_request(bt, t.block_tokens); }) {
        idx.begin_request(bt, t.block_tokens);
      }
      hits +=
          idx.process(t.keys.subspan(r, 1),
                      next_use.empty() ? next_use : next_use.subspan(pos + (r - first), 1), base);
    }
    pos += n;
    c.requests += n;
    c.block_refs += n;
    c.block_hits += hits;
    c.token_refs += n * bt;
    c.token_hits += hits * bt;
    return;
  }
  for (std::size_t r = first; r < last; ++r) {
    const auto blocks = t.cacheable(r, p);
    if (!t.priority.empty()) base.priority = t.priority[r];
    std::span<const std::uint64_t> next;
    if (!next_use.empty()) {
      if (pos + blocks.size() > next_use.size()) {
        throw std::invalid_argument("prefix replay: next_use shorter than the trace");
      }
      next = next_use.subspan(pos, blocks.size());
    }
    const std::uint64_t L = t.input_tokens(r);
    const std::uint32_t bt = t.block_tokens_of(r);
    if (!t.arrival_s.empty()) base.time_s = t.arrival_s[r];
    if (!t.session.empty()) base.session = t.session[r];
    if (!t.turn.empty()) base.turn = t.turn[r] == no_turn ? 0 : t.turn[r];
    if (!t.awaits_tool.empty()) base.awaits_tool = t.awaits_tool[r] != 0;
    base.full_blocks = bt == 0 ? ~std::uint32_t{0}
                               : static_cast<std::uint32_t>(
                                     std::min<std::uint64_t>(L / bt, ~std::uint32_t{0}));
    if constexpr (requires { idx.begin_request(L, t.block_tokens_of(r)); }) {
      idx.begin_request(L, t.block_tokens_of(r));  // indexes that count tokens themselves
    }
    if constexpr (requires { idx.set_time(0.0); }) {  // indexes with a clock (KVBM's filter)
      idx.set_time(t.arrival_s.empty() ? 0.0 : t.arrival_s[r]);
    }
    const std::uint64_t h = idx.process(blocks, next, base);
    pos += blocks.size();
    ++c.requests;
    c.block_refs += blocks.size();
    c.block_hits += h;
    c.token_refs += L;
    c.token_hits += tokens_in_blocks(L, t.block_tokens_of(r), h);
  }
}

/// Replays trace t through idx (see the semantics above). next_use is required (one entry per
/// cacheable block reference) for offline policies and ignored otherwise.
/// Complexity: one Index::process per request.  Throws: as replay_requests.
template <class Index>
prefix_counts replay(const prefix_trace_view& t, Index& idx, partial_block p = partial_block::skip,
                     std::span<const std::uint64_t> next_use = {}) {
  prefix_counts c;
  std::uint64_t pos = 0;
  replay_requests(t, idx, p, next_use, 0, t.requests(), c, pos);
  c.evictions = idx.evictions();
  return c;
}

/// True when no request in [first, last) has more than one cacheable block (always for the unit
/// layout). Over the whole trace it decides which index replay_optimum runs (with_optimum_index).
/// Complexity: O(last - first), O(1) for the unit layout.
inline bool single_block_requests(const prefix_trace_view& t, partial_block p, std::size_t first,
                                  std::size_t last) noexcept {
  if (t.unit_requests()) return true;
  for (std::size_t r = first; r < last; ++r) {
    if (t.cacheable(r, p).size() > 1) return false;
  }
  return true;
}

}  // namespace kvtk::prefix
