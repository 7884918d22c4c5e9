// kvtk/prefix/sglang_radix_cache.hpp — SGLang's own prefix-cache accounting (`--engine sglang`):
// RadixCache of SGLang 0.5.23 (LRU eviction, page size = one block) with its paged token
// allocator, as its scheduler drives them for one request run to completion.
//
// What SGLang does that kvtk's radix index (one node per block, prefix_tree.hpp) does not, each
// visible in hit counts (docs/prefix.md "Engine accounting"; checked against SGLang's real code by
// tools/engine-check/engine_accounting.py):
//  1. The match is capped at prompt length - 1 tokens, page-aligned (Req._compute_max_prefix_len).
//  2. Nodes are compressed runs of pages and eviction removes whole leaf nodes (RadixCache.evict
//     frees leaves until at least the shortfall is freed), so a request's private multi-block
//     suffix goes at once even when one block was needed: the cache runs below capacity.
//  3. The allocator asks for one page more than the extend needs (alloc_paged_token_slots_extend
//     reserves a page per request) and evicts the shortfall against that.
//  4. A match refreshes a node's access time before splitting it, so when a match ends inside a
//     node the unmatched tail becomes most recently used without being used; the new head node
//     gets its creation time, later still.
//  5. Times are time.monotonic() calls; here a counter that ticks once per call in the same order
//     (the start of a match or an insert, a node's creation), so ties never occur, as with a real
//     clock, and runs are deterministic.
//
// One request: match (capped; touches, may split) -> lock the matched node -> evict if the free
// pages are fewer than (blocks - hit + 1) -> take the pages -> insert the full pages (touches,
// may split, adds a leaf of the new pages; pages the tree already had are freed) -> match the
// inserted key again (checkpoint) -> free the partial page -> unlock.
//
// Design
// ------
// Page slots (one per page of the tree: key, node, next page of the node) and node slots (first
// page, length, depth of the first page, parent, children, locks, time, heap position) live in
// arrays of `capacity` entries, free ones on stacks. Block keys are prefix ids, so a key names its
// position: one key table (key -> page slot) replaces per-node child maps. Evictable nodes
// (unlocked leaves) sit in an indexed binary min-heap on time. Nothing allocates after
// construction. Memory: 56 bytes per page of capacity + 16 of hash table.
#pragma once

#include <cassert>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/indexed_heap.hpp"
#include "kvtk/detail/key_table.hpp"

namespace kvtk::prefix {

/// Thread safety: as block_cache (lock() is SGLang's lock_ref count, not a thread lock).
class sglang_radix_cache {
  static constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
  struct page {
    block_key key = 0;
    std::uint32_t node = none, next = none;
  };
  struct node {
    std::uint32_t first = none, len = 0, depth = 0, parent = none, children = 0, locks = 0;
    std::uint32_t heap_pos = none;
    std::uint64_t time = 0;
  };
  struct key_of {
    const page* pages;
    std::uint64_t operator()(std::uint32_t i) const noexcept { return pages[i].key; }
  };
  // The leaf heap's callables (detail/indexed_heap.hpp): older first, and a node's place.
  struct older {
    const node* nodes;
    bool operator()(std::uint32_t a, std::uint32_t b) const noexcept { return nodes[a].time < nodes[b].time; }
  };
  struct heap_pos {
    node* nodes;
    std::uint32_t& operator()(std::uint32_t x) const noexcept { return nodes[x].heap_pos; }
  };

 public:
  static constexpr const char* engine_version = "SGLang 0.5.23";
  static constexpr std::uint32_t root = none;

  struct request_result {
    std::uint32_t hit_blocks = 0;
    bool scheduled = true;  ///< false: more pages than the pool has; nothing changed
  };

  /// Requires: 0 < capacity < 2^31 (pages).  Throws: std::invalid_argument, std::bad_alloc.
  explicit sglang_radix_cache(std::uint32_t capacity)
      : pages_(check(capacity)), nodes_(capacity), table_(capacity, key_of{pages_.data()}, 2),
        free_pages_(capacity) {
    heap_.reserve(capacity);
    page_stack_.reserve(capacity);
    node_stack_.reserve(capacity);
    for (std::uint32_t i = capacity; i-- > 0;) {
      page_stack_.push_back(i);
      node_stack_.push_back(i);
    }
  }
  sglang_radix_cache(const sglang_radix_cache&) = delete;
  sglang_radix_cache& operator=(const sglang_radix_cache&) = delete;

  /// Effects: one request of `input_tokens` tokens (pages of `block_tokens`) whose full pages
  /// have the prefix keys `full_keys`, run to completion as described above.
  /// Complexity: O(pages of the request + pages evicted + log nodes per node touched).
  /// Throws: nothing.
  request_result run_request(std::span<const block_key> full_keys, std::uint64_t input_tokens,
                             std::uint32_t block_tokens) noexcept {
    request_result out;
    if (input_tokens == 0) return out;
    const std::uint64_t f = std::min<std::uint64_t>(input_tokens / block_tokens, full_keys.size());
    const std::uint64_t n = (input_tokens + block_tokens - 1) / block_tokens;
    if (n > pages_.size()) {
      out.scheduled = false;
      return out;
    }
    const auto capped = static_cast<std::uint32_t>(
        std::min<std::uint64_t>((input_tokens - 1) / block_tokens, f));
    const auto [m, last] = match(full_keys.first(capped));
    lock(last);
    (void)reserve(n - m, 1);  // the allocator's spare page in the demand
    finish(full_keys.first(f), n - m);
    unlock(last);
    out.hit_blocks = m;
    return out;
  }

  // The steps of run_request, for a scheduler that holds several requests' pages at once
  // (kvtk simulate's SGLang scheduler).

  struct match_result {
    std::uint32_t length;  ///< pages matched
    std::uint32_t node;    ///< the deepest matched node (root when none): lock it
  };
  /// _match_prefix_helper: every node entered gets this call's time; a match ending inside a
  /// node splits it (the new head node gets its creation time).
  match_result match(std::span<const block_key> keys) noexcept {
    const std::uint64_t t = ++clock_;
    std::uint32_t i = 0, at = root;
    while (i < keys.size()) {
      const std::uint32_t x = child_at(at, keys[i]);
      if (x == none) break;
      set_time(x, t);
      const std::uint32_t j = run_in(x, keys, i);
      i += j;
      if (j < nodes_[x].len) {
        at = split(x, j);
        break;
      }
      at = x;
    }
    return {i, at};
  }
  /// The pages match() would give, without touching anything (longest-prefix-match ordering).
  [[nodiscard]] std::uint32_t peek(std::span<const block_key> keys) const noexcept {
    std::uint32_t i = 0;
    for (std::uint32_t at = root; i < keys.size();) {
      const std::uint32_t x = child_at(at, keys[i]);
      if (x == none) break;
      const std::uint32_t j = run_in(x, keys, i);
      i += j;
      if (j < nodes_[x].len) break;
      at = x;
    }
    return i;
  }
  /// inc_lock_ref / dec_lock_ref on x and its ancestors (locked nodes are never evicted).
  void lock(std::uint32_t x) noexcept {
    for (; x != root; x = nodes_[x].parent) {
      if (nodes_[x].locks++ != 0) continue;
      protected_pages_ += nodes_[x].len;
      if (nodes_[x].heap_pos != none) heap_erase(x);
    }
  }
  void unlock(std::uint32_t x) noexcept {
    for (; x != root; x = nodes_[x].parent) {
      if (--nodes_[x].locks != 0) continue;
      protected_pages_ -= nodes_[x].len;
      if (nodes_[x].children == 0) heap_push(x);
    }
  }
  /// Free pages plus the tree's unlocked pages (evictable_size_): what an admission may count
  /// on (PrefillAdder's rem_total_tokens, without its reserve for future decode tokens).
  [[nodiscard]] std::uint64_t available() const noexcept {
    return free_pages_ + table_.size() - protected_pages_;
  }
  /// Takes `pages` free pages for a request, first evicting leaves when fewer than
  /// pages + spare are free (evict_to_free_tokens with the allocator's demand). Returns false,
  /// taking nothing, when even then fewer than `pages` are free.
  bool reserve(std::uint64_t pages, std::uint64_t spare) noexcept {
    if (free_pages_ < pages + spare) evict(pages + spare - free_pages_);
    if (free_pages_ < pages) return false;
    free_pages_ -= pages;
    return true;
  }
  /// Pages a request held go back to the allocator.
  void give_back(std::uint64_t pages) noexcept { free_pages_ += pages; }
  /// checkpoint_kv_cache: a running request's computed full pages go into the tree (insert), and
  /// the key is matched again. Returns the pages the new leaf took from the request, and the
  /// node to lock now. The caller frees its copies of pages the tree already had.
  struct checkpoint_result {
    std::uint32_t added;
    match_result path;
  };
  checkpoint_result checkpoint(std::span<const block_key> full_keys) noexcept {
    const std::uint32_t added = insert(full_keys);
    return {added, match(full_keys)};
  }
  /// A request that reserved `own` pages finishes with its full pages' keys: the tree keeps the
  /// new ones (insert), the rest go back, and the key is matched again (checkpoint). The caller
  /// unlocks its matched node afterwards.
  void finish(std::span<const block_key> full_keys, std::uint64_t own) noexcept {
    give_back(own - insert(full_keys));
    (void)match(full_keys);
  }

  [[nodiscard]] std::uint32_t capacity() const noexcept {
    return static_cast<std::uint32_t>(pages_.size());
  }
  /// Pages held by the tree.
  [[nodiscard]] std::uint64_t cached_blocks() const noexcept { return table_.size(); }
  [[nodiscard]] std::uint64_t free_pages() const noexcept { return free_pages_; }
  [[nodiscard]] std::uint64_t evictions() const noexcept { return evicted_pages_; }

  /// Effects: from now on, every evicted page is logged (key, depth in its request) until
  /// drain_evictions(); a top over lower tiers demotes them (tier/engine_tier_hierarchy.hpp).
  /// Complexity: O(capacity) once.  Throws: std::bad_alloc.
  void log_evictions() { evicted_log_.reserve(pages_.size()); logging_ = true; }
  /// Effects: calls f(key, depth) for every page evicted since the last call, in eviction order,
  /// and forgets them.  Complexity: O(logged).  Throws: nothing (f must not throw).
  template <class F>
  void drain_evictions(F&& f) noexcept {
    for (const evicted_page& e : evicted_log_) f(e.key, e.depth);
    evicted_log_.clear();
  }
  [[nodiscard]] std::uint64_t evicted_nodes() const noexcept { return evicted_nodes_; }
  [[nodiscard]] bool contains(block_key k) const noexcept { return table_.find(k) != none; }

  /// Checks the invariants (tests): pages add up, every node's pages, children and heap
  /// membership are consistent. Returns "" or the first violation.
  [[nodiscard]] const char* audit() const noexcept {
    if (table_.size() + free_pages_ != pages_.size()) return "pages do not add up";
    if (protected_pages_ != 0) return "protected pages outlived their locks";
    std::vector<std::uint32_t> kids(nodes_.size(), 0);
    std::uint64_t in_nodes = 0;
    for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
      const node& x = nodes_[i];
      if (x.len == 0) continue;
      if (x.locks != 0) return "a lock outlived its request";
      if (x.parent != root) ++kids[x.parent];
      std::uint32_t p = x.first;
      for (std::uint32_t j = 0; j < x.len; ++j, p = pages_[p].next) {
        if (p == none || pages_[p].node != i) return "a node's page chain";
        if (table_.find(pages_[p].key) != p) return "a page is not in the key table";
      }
      if (p != none) return "a node's chain is longer than its length";
      in_nodes += x.len;
    }
    if (in_nodes != table_.size()) return "pages outside nodes";
    for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i].len == 0) continue;
      if (kids[i] != nodes_[i].children) return "children counts";
      if ((nodes_[i].heap_pos != none) != (kids[i] == 0)) return "heap membership";
    }
    if (const char* e = heap_.check(older{nodes_.data()}, [this](std::uint32_t x) { return nodes_[x].heap_pos; });
        *e != 0) {
      return e;
    }
    return "";
  }

 private:
  static std::size_t check(std::uint32_t n) {
    if (n == 0 || n >= (1u << 31)) {
      throw std::invalid_argument("sglang_radix_cache: capacity must be in [1, 2^31) pages");
    }
    return n;
  }

  // _insert_helper: walks like match (splitting where the key leaves a node), then hangs the
  // rest of the key below as one new leaf of the request's pages. Returns the pages the leaf
  // took.
  std::uint32_t insert(std::span<const block_key> keys) noexcept {
    const std::uint64_t t = ++clock_;
    std::uint32_t i = 0, at = root;
    while (i < keys.size()) {
      const std::uint32_t x = child_at(at, keys[i]);
      if (x == none) break;
      set_time(x, t);
      const std::uint32_t j = run_in(x, keys, i);
      i += j;
      at = j < nodes_[x].len ? split(x, j) : x;
    }
    return i < keys.size() ? add_leaf(at, keys.subspan(i), i) : 0;
  }

  // The child of `at` whose first page has key k, or none. Keys are prefix ids, so a key found
  // anywhere else means a malformed trace (the same id under two prefixes): treated as absent
  // here, and add_leaf stops before it, so the tree stays consistent.
  std::uint32_t child_at(std::uint32_t at, block_key k) const noexcept {
    const std::uint32_t p = table_.find(k);
    if (p == none) return none;
    const std::uint32_t x = pages_[p].node;
    return nodes_[x].first == p && nodes_[x].parent == at ? x : none;
  }

  // The number of x's leading pages equal to keys[i...].
  std::uint32_t run_in(std::uint32_t x, std::span<const block_key> keys,
                       std::uint32_t i) const noexcept {
    std::uint32_t j = 0;
    for (std::uint32_t p = nodes_[x].first; j < nodes_[x].len && i + j < keys.size();
         p = pages_[p].next, ++j) {
      if (pages_[p].key != keys[i + j]) break;
    }
    return j;
  }

  // _split_node: a new node takes x's first s pages and becomes x's parent.
  std::uint32_t split(std::uint32_t x, std::uint32_t s) noexcept {
    const std::uint32_t h = node_stack_.back();
    node_stack_.pop_back();
    node& head = nodes_[h];
    node& tail = nodes_[x];
    head.first = tail.first;
    head.len = s;
    head.depth = tail.depth;
    head.parent = tail.parent;
    head.children = 1;
    head.locks = tail.locks;
    head.heap_pos = none;
    head.time = ++clock_;
    std::uint32_t p = tail.first;
    for (std::uint32_t j = 0; j < s; ++j) {
      pages_[p].node = h;
      if (j + 1 == s) {
        const std::uint32_t rest = pages_[p].next;
        pages_[p].next = none;
        p = rest;
      } else {
        p = pages_[p].next;
      }
    }
    tail.first = p;
    tail.len -= s;
    tail.depth += s;
    tail.parent = h;
    return h;
  }

  std::uint32_t add_leaf(std::uint32_t parent, std::span<const block_key> keys,
                         std::uint32_t depth) noexcept {
    std::size_t fresh = 0;  // stop before a key the tree holds elsewhere (malformed trace)
    while (fresh < keys.size() && table_.find(keys[fresh]) == none) ++fresh;
    keys = keys.first(fresh);
    if (keys.empty()) return 0;
    const std::uint32_t x = node_stack_.back();
    node_stack_.pop_back();
    node& leaf = nodes_[x];
    leaf.len = static_cast<std::uint32_t>(keys.size());
    leaf.depth = depth;
    leaf.parent = parent;
    leaf.children = 0;
    leaf.locks = 0;
    leaf.heap_pos = none;
    leaf.time = ++clock_;
    std::uint32_t prev = none;
    for (const block_key k : keys) {
      const std::uint32_t p = page_stack_.back();
      page_stack_.pop_back();
      pages_[p] = {k, x, none};
      table_.insert(k, p);
      if (prev == none) {
        leaf.first = p;
      } else {
        pages_[prev].next = p;
      }
      prev = p;
    }
    if (parent != root && nodes_[parent].children++ == 0 && nodes_[parent].heap_pos != none) {
      heap_erase(parent);
    }
    heap_push(x);
    return leaf.len;
  }

  // RadixCache.evict: the least recently used evictable leaf goes whole, until `pages` are
  // freed or nothing is evictable; a parent left childless and unlocked becomes a candidate.
  void evict(std::uint64_t pages) noexcept {
    std::uint64_t freed = 0;
    while (freed < pages && !heap_.empty()) {
      const std::uint32_t x = heap_.top();
      heap_erase(x);
      node& leaf = nodes_[x];
      std::uint32_t depth = leaf.depth;
      for (std::uint32_t p = leaf.first; p != none; ++depth) {
        const std::uint32_t next = pages_[p].next;
        // At most capacity pages are resident, so at most capacity are evicted between drains
        // of a request run alone; the log never reallocates.
        assert(!logging_ || evicted_log_.size() < evicted_log_.capacity());
    if (logging_ && evicted_log_.size() < evicted_log_.capacity()) {
          evicted_log_.push_back({pages_[p].key, depth});
        }
        table_.erase(pages_[p].key);
        page_stack_.push_back(p);
        p = next;
      }
      freed += leaf.len;
      free_pages_ += leaf.len;
      evicted_pages_ += leaf.len;
      ++evicted_nodes_;
      const std::uint32_t parent = leaf.parent;
      leaf = node{};
      node_stack_.push_back(x);
      if (parent != root && --nodes_[parent].children == 0 && nodes_[parent].locks == 0) {
        heap_push(parent);
      }
    }
  }

  void set_time(std::uint32_t x, std::uint64_t t) noexcept {
    nodes_[x].time = t;
    if (nodes_[x].heap_pos != none) heap_.fix(x, older{nodes_.data()}, heap_pos{nodes_.data()});
  }

  // The unlocked leaves by time (detail/indexed_heap.hpp).
  void heap_push(std::uint32_t x) noexcept { heap_.push(x, older{nodes_.data()}, heap_pos{nodes_.data()}); }
  void heap_erase(std::uint32_t x) noexcept { heap_.erase(x, older{nodes_.data()}, heap_pos{nodes_.data()}); }

  std::vector<page> pages_;
  std::vector<node> nodes_;
  detail::key_table<key_of> table_;
  struct evicted_page {
    block_key key;
    std::uint32_t depth;
  };
  std::vector<evicted_page> evicted_log_;  // log_evictions(): the evictions since the last drain
  bool logging_ = false;
  detail::indexed_heap heap_;
  std::vector<std::uint32_t> page_stack_, node_stack_;
  std::uint64_t free_pages_ = 0, clock_ = 0, evicted_pages_ = 0, evicted_nodes_ = 0;
  std::uint64_t protected_pages_ = 0;  // pages of locked nodes
};

}  // namespace kvtk::prefix
