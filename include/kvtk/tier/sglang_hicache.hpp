// kvtk/tier/sglang_hicache.hpp — SGLang 0.5.23's hierarchical cache (HiCache: the
// UnifiedRadixCache with `--enable-hierarchical-cache`, a device tree over a host memory pool),
// request by request as its scheduler drives it with nothing else running: `kvtk replay --engine
// sglang --offload host:SIZE,write_policy=POLICY`.
//
// What it reproduces (checked against SGLang's own cache, controller and host pool by
// tools/engine-check/sglang_hicache.py; the FULL-attention component, radix eviction lru, one
// page = one block of B tokens, prompt only, every backup and load acknowledged before the next
// request):
//  * One radix tree of page runs. A node's pages are on the device, on the host, or on both; the
//    device-resident nodes are closed under ancestors. A node on neither is deleted at once.
//  * A prompt of at least (device tokens - 6) tokens is refused before anything, as SGLang's
//    scheduler refuses it on arrival (max_req_input_len).
//  * Match (capped at L - 1 tokens, page-aligned): walks and splits like the plain radix cache;
//    the device hit is the path's device-resident prefix, the host hit the host-only rest. The
//    path (and a split's tail) gets the operation's time; hit counts do not change.
//  * Load back (PrefillAdder -> init_load_back): a host hit of at least 10 tokens is loaded
//    whole, or not at all: with the path pinned, the device evicts the shortfall first and gives
//    up when still short. Loaded nodes keep their host copy (they are on both). A declined load
//    is recomputed, and the insert below re-adopts those nodes with the request's fresh pages.
//  * Device eviction (on an allocation shortfall, the allocator's spare page included, as
//    sglang_radix_cache): least recently used D-leaves (unlocked, no child on the device), whole
//    nodes, until the shortfall is met. A backed-up victim is demoted (it stays, host-only); an
//    unbacked one is deleted, except under write_back, where it is first copied to the host
//    (host eviction below makes room; when it cannot, the node and its host-only subtree go).
//  * Insert at the request's end (floor(L / B) pages): every walked node gets the time, a
//    host-only one is re-adopted onto the device, and, except under write_back, its hit count
//    rises by one; the new tail leaf starts at one. A node not on the host whose count reaches
//    the threshold (write_through 1, write_through_selective 2) is backed up with its unbacked
//    ancestors, root first; a backup short of host room first evicts exactly the shortfall from
//    the host, and stops the chain when that fails (the host evictions stay done).
//  * Host eviction (only to make room for a backup): least recently used H-leaves (host-only,
//    no children at all, unlocked), whole nodes, until the shortfall is met. Under write_back,
//    host copies of nodes also on the device ("duplicates", in the order they became so) go
//    first, sparing device leaves in a first pass.
//  * Time: one tick per match and per insert; everything an operation stamps lies on one root
//    path, so its order within the operation never decides an eviction.
//
// Design: page slots (key, node, next page) and node slots in arrays sized for the device plus
// the host (the tree holds at most that many pages); one key table (block keys are prefix ids);
// two indexed min-heaps on time (D-leaves, H-leaves); an intrusive FIFO of duplicates
// (write_back). Nothing allocates after construction.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/indexed_heap.hpp"
#include "kvtk/detail/key_table.hpp"

namespace kvtk::tier {

enum class hicache_write_policy : std::uint8_t { write_through, write_through_selective, write_back };

/// The --hicache-write-policy name of p.
inline const char* name_of(hicache_write_policy p) noexcept {
  switch (p) {
    case hicache_write_policy::write_through: return "write_through";
    case hicache_write_policy::write_through_selective: return "write_through_selective";
    case hicache_write_policy::write_back: return "write_back";
  }
  return "?";
}

/// What `--offload host:SIZE,write_policy=...` configures.
struct sglang_hicache_config {
  std::uint32_t device_pages = 0;  ///< the device pool (pages; SGLang's max_total_num_tokens / B)
  std::uint32_t host_pages = 0;    ///< the host pool (pages; int(D x B x ratio) / B + 1 for a ratio)
  hicache_write_policy policy = hicache_write_policy::write_through;  ///< SGLang's default
  std::uint32_t load_back_threshold_tokens = 10;  ///< SGLang's constant: smaller host hits recompute
  /// Page and node slots to allocate (0: device + host pages). The tree never holds more pages
  /// than distinct keys, so a replay passes the trace's block references: a huge host costs no
  /// memory it cannot use.
  std::uint32_t max_tree_pages = 0;
};

/// What one request did.
struct sglang_hicache_request {
  std::uint32_t device_hit_blocks = 0;  ///< the device prefix the match found
  std::uint32_t loaded_blocks = 0;      ///< host pages loaded back (0: none, or declined)
  bool scheduled = true;                ///< false: refused, L >= device tokens - 6 (SGLang's limit)
};

/// Totals over a replay (pages; a page is one block).
struct sglang_hicache_counters {
  std::uint64_t requests = 0, unscheduled = 0;
  std::uint64_t device_hit_blocks = 0, host_hit_blocks = 0;
  std::uint64_t host_stored_blocks = 0;     ///< pages copied device -> host (backups)
  std::uint64_t host_freed_blocks = 0;      ///< host pages freed (evictions, write_back drops)
  std::uint64_t host_evicted_blocks = 0;    ///< host pages freed to make room for a backup
  std::uint64_t device_evicted_blocks = 0;  ///< device pages freed by eviction (demoted or deleted)
  std::uint64_t declined_loads = 0;         ///< host hits recomputed (below the threshold or no room)
  std::uint64_t failed_backups = 0;         ///< backups given up for want of host room
};

/// Thread safety: as block_cache: one per thread.
class sglang_hicache {
  static constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
  struct page {
    block_key key = 0;
    std::uint32_t node = none, next = none;
  };
  struct node {
    std::uint32_t first = none, len = 0, parent = none, children = 0, device_children = 0;
    std::uint32_t locks = 0, hits = 0;
    std::uint32_t dpos = none, hpos = none;    // positions in the D-leaf / H-leaf heaps
    std::uint32_t dup_prev = none, dup_next = none;
    std::uint32_t first_child = none, next_sibling = none, prev_sibling = none;
    bool device = false, host = false, in_dups = false;
    bool loading = false;  // loaded by the request in progress: its host copy is pinned
    bool pinned = false;   // a prefetch lands under it: its host copy is pinned
    std::uint64_t time = 0;
  };
  struct key_of {
    const page* pages;
    std::uint64_t operator()(std::uint32_t i) const noexcept { return pages[i].key; }
  };

 public:
  static constexpr const char* engine_version = "SGLang 0.5.23";

  /// Requires: device_pages and host_pages >= 1, their sum < 2^31.
  /// Throws: std::invalid_argument naming the size; std::bad_alloc.
  explicit sglang_hicache(const sglang_hicache_config& c)
      : cfg_(checked(c)), pages_(slots_for(c)),
        nodes_(pages_.size()), table_(static_cast<std::uint32_t>(pages_.size()), key_of{pages_.data()}, 2),
        free_device_(c.device_pages), free_host_(c.host_pages) {
    dheap_.reserve(nodes_.size());
    hheap_.reserve(nodes_.size());
    chain_.reserve(nodes_.size());
    subtree_.reserve(nodes_.size());
    page_stack_.reserve(pages_.size());
    node_stack_.reserve(nodes_.size());
    for (std::size_t i = pages_.size(); i-- > 0;) {
      page_stack_.push_back(static_cast<std::uint32_t>(i));
      node_stack_.push_back(static_cast<std::uint32_t>(i));
    }
  }
  sglang_hicache(const sglang_hicache&) = delete;
  sglang_hicache& operator=(const sglang_hicache&) = delete;

  [[nodiscard]] const sglang_hicache_config& config() const noexcept { return cfg_; }
  [[nodiscard]] const sglang_hicache_counters& counters() const noexcept { return totals_; }
  [[nodiscard]] std::uint64_t free_device_pages() const noexcept { return free_device_; }
  [[nodiscard]] std::uint64_t free_host_pages() const noexcept { return free_host_; }

  /// Effects: one request of L tokens (pages of B tokens) whose full pages have the prefix keys
  /// `keys` (at most floor(L / B) read), run to completion (the header comment).
  /// Complexity: O(pages of the request + pages evicted x log nodes).  Throws: nothing.
  sglang_hicache_request run_request(std::span<const block_key> keys, std::uint64_t L,
                                     std::uint32_t B) noexcept {
    sglang_hicache_request out;
    if (L == 0) return out;
    ++totals_.requests;
    const std::uint64_t n = (L + B - 1) / B;
    // SGLang refuses a prompt of max_req_input_len = (device tokens - 1) - 5 tokens or more on
    // arrival (validate_input_length), before it touches the cache.
    if (L + 6 > std::uint64_t{cfg_.device_pages} * B) {
      out.scheduled = false;
      ++totals_.unscheduled;
      return out;
    }
    const std::uint64_t f = std::min<std::uint64_t>(L / B, keys.size());
    const auto capped = static_cast<std::uint32_t>(std::min<std::uint64_t>((L - 1) / B, f));
    const match_result m = match(keys.first(capped));
    out.device_hit_blocks = m.device;
    std::uint32_t last = m.last_device;
    if (m.host > 0) {
      if (load_back(m.best, m.host, B)) {
        out.loaded_blocks = m.host;
        last = m.best;
      } else {
        ++totals_.declined_loads;
      }
    }
    const std::uint64_t hit = out.device_hit_blocks + out.loaded_blocks;
    lock(last);
    reserve(n - hit, 1);
    const std::uint64_t taken = insert(keys.first(f));
    free_device_ += n - hit - taken;
    unlock(last);
    register_loaded(m.best, out.loaded_blocks);
    totals_.device_hit_blocks += out.device_hit_blocks;
    totals_.host_hit_blocks += out.loaded_blocks;
    return out;
  }

  /// Checks the invariants (tests): page and node bookkeeping, device closure under ancestors,
  /// heap membership and order. Returns "" or the first violation.
  [[nodiscard]] const char* audit() const {
    std::uint64_t dev = 0, host = 0, in_nodes = 0;
    std::vector<std::uint32_t> kids(nodes_.size(), 0), dkids(nodes_.size(), 0);
    for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
      const node& x = nodes_[i];
      if (x.len == 0) continue;
      if (!x.device && !x.host) return "a node on neither tier";
      if (x.locks != 0) return "a lock outlived its request";
      if (x.parent != root) {
        ++kids[x.parent];
        if (x.device) ++dkids[x.parent];
        if (x.device && !nodes_[x.parent].device) return "a device node below a host-only one";
      }
      std::uint32_t p = x.first;
      for (std::uint32_t j = 0; j < x.len; ++j, p = pages_[p].next) {
        if (p == none || pages_[p].node != i || table_.find(pages_[p].key) != p) return "page chain";
      }
      if (p != none) return "a node's chain is longer than its length";
      if (x.loading) return "a load outlived its request";
      if (x.pinned) return "a host pin outlived its prefetch";
      in_nodes += x.len;
      dev += x.device ? x.len : 0;
      host += x.host ? x.len : 0;
    }
    if (in_nodes != table_.size()) return "pages outside nodes";
    if (dev + free_device_ != cfg_.device_pages) return "device pages do not add up";
    if (dev != tree_device_ || locked_device_ != 0) return "the device page counts";
    if (host + free_host_ != cfg_.host_pages) return "host pages do not add up";
    for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
      const node& x = nodes_[i];
      if (x.len == 0) continue;
      if (kids[i] != x.children || dkids[i] != x.device_children) return "children counts";
      std::uint32_t listed = 0;
      for (std::uint32_t c = x.first_child; c != none; c = nodes_[c].next_sibling) {
        if (nodes_[c].parent != i) return "a child list";
        ++listed;
      }
      if (listed != x.children) return "a child list's length";
      if ((x.dpos != none) != is_device_leaf(i)) return "D-leaf heap membership";
      if ((x.hpos != none) != is_host_leaf(i)) return "H-leaf heap membership";
    }
    std::size_t listed_dups = 0, flagged = 0;
    for (std::uint32_t x = dup_head_, prev = none; x != none; prev = x, x = nodes_[x].dup_next) {
      if (!nodes_[x].in_dups || nodes_[x].dup_prev != prev || nodes_[x].len == 0) return "the duplicate list";
      if (++listed_dups > nodes_.size()) return "the duplicate list loops";
    }
    for (const node& x : nodes_) flagged += x.in_dups ? 1 : 0;
    if (flagged != listed_dups) return "duplicate flags";
    const auto dpos = [this](std::uint32_t x) { return nodes_[x].dpos; };
    const auto hpos = [this](std::uint32_t x) { return nodes_[x].hpos; };
    if (*dheap_.check(older{nodes_.data()}, dpos) != 0) return "D-heap order";
    if (*hheap_.check(older{nodes_.data()}, hpos) != 0) return "H-heap order";
    return "";
  }

 private:
  static constexpr std::uint32_t root = none;

 public:
  /// What match() found: device pages, then host-only pages after them; the deepest matched
  /// node (`best`) and the deepest device one (`last_device`; root = `no_node` when none).
  struct match_result {
    std::uint32_t device = 0, host = 0;   // pages
    std::uint32_t best = root, last_device = root;
  };
  static constexpr std::uint32_t no_node = none;

  // The steps of run_request, public for a scheduler that holds several requests' pages at
  // once (kvtk simulate's SGLang scheduler, sim/des/engine_kv_hicache.hpp): match ->
  // load_back (or not) -> lock the path -> take pages -> insert at each checkpoint and at the
  // end (give back the request's copies of pages the tree already had) -> loaded() once the load
  // is acknowledged -> unlock. None allocates or throws.

  /// Free device pages plus the tree's unlocked device pages (SGLang's evictable size): what an
  /// admission may count on.
  [[nodiscard]] std::uint64_t available() const noexcept {
    return free_device_ + tree_device_ - locked_device_;
  }
  /// Takes `pages` free device pages for a request, first evicting when fewer than pages +
  /// spare are free. Returns false, taking nothing, when even then fewer than `pages` are free.
  bool take(std::uint64_t pages, std::uint64_t spare) noexcept {
    if (free_device_ < pages + spare) evict_device(pages + spare - free_device_);
    if (free_device_ < pages) return false;
    free_device_ -= pages;
    return true;
  }
  /// Pages a request held go back to the allocator.
  void give_back(std::uint64_t pages) noexcept { free_device_ += pages; }
  /// The device pages match() would give, touching nothing (the lpm order; SGLang sorts on
  /// the device prefix).
  [[nodiscard]] std::uint32_t peek_device(std::span<const block_key> keys) const noexcept {
    std::uint32_t i = 0;
    for (std::uint32_t at = root; i < keys.size();) {
      const std::uint32_t x = child_at(at, keys[i]);
      if (x == none || !nodes_[x].device) break;
      const std::uint32_t j = run_in(x, keys, i);
      i += j;
      if (j < nodes_[x].len) break;
      at = x;
    }
    return i;
  }
  /// Device pages held by the tree (the rest are free or a request's own).
  [[nodiscard]] std::uint64_t tree_device_pages() const noexcept { return tree_device_; }
  /// An admission's hits and declined load into counters() (run_request counts its own);
  /// `admitted` false: only the pages it loaded (an admission that failed after its load).
  void record(std::uint64_t device_hit, std::uint64_t loaded, bool declined, bool admitted = true) noexcept {
    totals_.host_hit_blocks += loaded;
    if (!admitted) return;
    ++totals_.requests;
    totals_.device_hit_blocks += device_hit;
    totals_.declined_loads += declined ? 1 : 0;
  }
  /// _match_prefix_helper over both tiers (run_request's match): touches the path, may split.
  match_result match_prefix(std::span<const block_key> keys) noexcept { return match(keys); }
  /// Inserts a request's full pages (keys from its first page). Nodes ending past `inserted`
  /// pages (what the request inserted before: SGLang's cache_inserted_len) count a hit and may
  /// be backed up. Returns the pages the tree took from the request (a new leaf, host-only nodes
  /// re-adopted); the request frees its copies of the others past its match.
  std::uint64_t insert_pages(std::span<const block_key> keys, std::uint64_t inserted) noexcept {
    return insert(keys, inserted);
  }
  /// init_load_back of `pages` host pages ending at node `best`: all or nothing (see the header
  /// comment); the loaded nodes' host copies stay pinned until loaded(best, pages).
  bool load_back_pages(std::uint32_t best, std::uint32_t pages, std::uint32_t B) noexcept {
    return load_back(best, pages, B);
  }
  /// The load acknowledged (loading_check): the pin on the loaded host copies goes.
  void loaded(std::uint32_t best, std::uint32_t pages) noexcept { register_loaded(best, pages); }
  /// inc_lock_ref / dec_lock_ref on x and its ancestors.
  void lock_path(std::uint32_t x) noexcept { lock(x); }
  void unlock_path(std::uint32_t x) noexcept { unlock(x); }
  /// Whether node x has a host copy (SGLang's `backuped`); the root counts as backed up.
  [[nodiscard]] bool backed_up(std::uint32_t x) const noexcept { return x == root || nodes_[x].host; }

  // L3 storage (sim/des's HiCache with `storage=file`): what the host gains is written below.

  /// Effects: from now on every page backed up to the host (write-through backups, write_back's
  /// eviction copies) is logged until drain_backups(): SGLang writes exactly those to L3.
  /// Complexity: O(slots) once.  Throws: std::bad_alloc.
  void log_backups() {
    backup_log_.reserve(pages_.size());
    logging_ = true;
  }
  /// Effects: calls f(key) for every page backed up since the last call, in order, and forgets
  /// them.  Throws: nothing (f must not throw).
  template <class F>
  void drain_backups(F&& f) noexcept {
    for (const block_key k : backup_log_) f(k);
    backup_log_.clear();
  }
  /// A prefetch's pages land in the host (_handle_prefetch_result -> insert_host): `keys` are the
  /// request's pages from its first, the fetched ones last. The walk from the root passes the
  /// pages the tree holds (splitting where it leaves a node); past the anchor (the first
  /// `anchor_pages` pages), a walked node without a host copy gets the fetched pages as its copy
  /// under write_through and selective ("refill"; under write_back they are overlap). The rest
  /// become one host-only leaf, with a fresh time and no hits, under the last walked node,
  /// unless that node is neither the root nor backed up (write_through and selective drop them
  /// then). Room: when short of the refill and the rest, the host evicts the whole fetched span's
  /// worth first (the last walked node pinned while it evicts), then the rest takes what is free
  /// if that is at least min_pages. When the tree no longer holds the anchor's pages as they
  /// were (gone, or inside a longer node), nothing is added.
  /// Returns the pages added.  Complexity: O(pages + evicted x log nodes).  Throws: nothing.
  std::uint32_t insert_host(std::span<const block_key> keys, std::uint32_t anchor_pages,
                            std::uint32_t min_pages) noexcept {
    const std::uint64_t t = ++clock_;
    std::size_t i = 0;
    std::uint32_t at = root;
    chain_.clear();  // walked nodes past the anchor without a host copy: refilled
    while (i < keys.size()) {
      const std::uint32_t x0 = child_at(at, keys[i]);
      if (x0 == none) break;
      const std::uint32_t j = run_in(x0, keys, i);
      if (i < anchor_pages && i + j > anchor_pages) return 0;  // the anchor's node is gone
      const bool partial = j < nodes_[x0].len;
      const std::uint32_t x = partial ? split(x0, j, nodes_[x0].time) : x0;
      if (i >= anchor_pages && !nodes_[x].host && !write_back()) chain_.push_back(x);
      i += j;
      at = x;
      if (partial) break;
    }
    if (i < anchor_pages) return 0;  // the anchor left the tree
    std::uint64_t refill = 0;
    for (const std::uint32_t x : chain_) refill += nodes_[x].len;
    const std::uint64_t rest = keys.size() - i;
    if (refill + rest == 0) return 0;
    // SGLang allocates the whole fetched span (overlap included) and, when short, evicts that
    // much; here the room is taken when the pages land, the last walked node pinned meanwhile.
    const std::uint64_t fetched = keys.size() - anchor_pages;
    if (free_host_ < refill + rest) {
      pin(at, true);
      (void)evict_host(fetched);
      pin(at, false);
    }
    std::uint32_t added = 0;
    for (const std::uint32_t x : chain_) {  // root first; a node left without a copy stops it
      node& n = nodes_[x];
      if (free_host_ < n.len) return added;
      n.host = true;
      free_host_ -= n.len;
      added += n.len;
      refresh(x);
    }
    if (rest == 0 || (!write_back() && !backed_up(at))) return added;
    std::uint64_t want = rest;
    if (free_host_ < want) {  // a partial allocation, if it reaches the threshold
      want = free_host_;
      if (want < min_pages) return added;
    }
    if (want == 0) return added;
    const std::uint32_t leaf = add_leaf(at, keys.subspan(i, want), t, false);
    if (leaf == none) return added;
    free_host_ -= nodes_[leaf].len;
    return added + nodes_[leaf].len;
  }

 private:

  static std::size_t slots_for(const sglang_hicache_config& c) {
    const std::uint64_t all = std::uint64_t{c.device_pages} + c.host_pages;
    return c.max_tree_pages == 0 ? all : std::min<std::uint64_t>(all, c.max_tree_pages);
  }
  static sglang_hicache_config checked(const sglang_hicache_config& c) {
    if (c.device_pages == 0 || c.host_pages == 0 ||
        std::uint64_t{c.device_pages} + c.host_pages >= (1u << 31)) {
      throw std::invalid_argument("sglang hicache: the device and host pools need >= 1 page each, "
                                  "fewer than 2^31 together");
    }
    return c;
  }
  bool write_back() const noexcept { return cfg_.policy == hicache_write_policy::write_back; }
  std::uint32_t threshold() const noexcept {
    return cfg_.policy == hicache_write_policy::write_through ? 1 : 2;
  }

  // ---- the tree
  std::uint32_t child_at(std::uint32_t at, block_key k) const noexcept {
    const std::uint32_t p = table_.find(k);
    if (p == none) return none;
    const std::uint32_t x = pages_[p].node;
    return nodes_[x].first == p && nodes_[x].parent == at ? x : none;
  }
  std::uint32_t run_in(std::uint32_t x, std::span<const block_key> keys, std::size_t i) const noexcept {
    std::uint32_t j = 0;
    for (std::uint32_t p = nodes_[x].first; j < nodes_[x].len && i + j < keys.size();
         p = pages_[p].next, ++j) {
      if (pages_[p].key != keys[i + j]) break;
    }
    return j;
  }

  match_result match(std::span<const block_key> keys) noexcept {
    const std::uint64_t t = ++clock_;
    match_result r;
    std::size_t i = 0;
    std::uint32_t at = root;
    while (i < keys.size()) {
      const std::uint32_t x = child_at(at, keys[i]);
      if (x == none) break;
      const std::uint32_t j = run_in(x, keys, i);
      i += j;
      const bool partial = j < nodes_[x].len;
      at = partial ? split(x, j, t) : x;
      (nodes_[at].device ? r.device : r.host) += j;
      if (nodes_[at].device) r.last_device = at;
      if (partial) break;
    }
    r.best = at;
    for (std::uint32_t x = at; x != root; x = nodes_[x].parent) set_time(x, t);
    return r;
  }

  // _split_node: a new head takes x's first s pages and becomes x's parent; both carry x's
  // state and count; the tail keeps its heap places and gets the time t.
  std::uint32_t split(std::uint32_t x, std::uint32_t s, std::uint64_t t) noexcept {
    const std::uint32_t h = node_stack_.back();
    node_stack_.pop_back();
    node& head = nodes_[h];
    node& tail = nodes_[x];
    head = node{};
    head.first = tail.first;
    head.len = s;
    head.parent = tail.parent;
    head.children = 1;
    head.device_children = tail.device ? 1 : 0;
    head.locks = tail.locks;
    head.hits = tail.hits;
    head.device = tail.device;
    head.host = tail.host;
    head.loading = tail.loading;
    head.time = t;
    replace_child(x, h);
    head.first_child = x;
    tail.next_sibling = tail.prev_sibling = none;
    std::uint32_t p = tail.first;
    for (std::uint32_t j = 0; j + 1 < s; ++j, p = pages_[p].next) pages_[p].node = h;
    pages_[p].node = h;
    tail.first = pages_[p].next;
    pages_[p].next = none;
    tail.len -= s;
    tail.parent = h;
    set_time(x, t);
    if (write_back() && head.device && head.host) dup_push(h);
    return h;
  }

  // Walks keys like match, adopting host-only nodes with the request's pages and counting hits;
  // hangs the rest below as a new leaf. Returns the request's pages the tree took.
  std::uint64_t insert(std::span<const block_key> keys, std::uint64_t inserted = 0) noexcept {
    const std::uint64_t t = ++clock_;
    std::uint64_t taken = 0;
    std::size_t i = 0;
    std::uint32_t at = root;
    while (i < keys.size()) {
      const std::uint32_t x0 = child_at(at, keys[i]);
      if (x0 == none) break;
      set_time(x0, t);
      const std::uint32_t j = run_in(x0, keys, i);
      const std::uint32_t x = j < nodes_[x0].len ? split(x0, j, t) : x0;
      if (!nodes_[x].device) {
        adopt(x);
        taken += nodes_[x].len;
      }
      if (i + j > inserted) count_hit(x);
      i += j;
      at = x;
    }
    if (i < keys.size()) {
      const std::uint32_t leaf = add_leaf(at, keys.subspan(i), t);
      if (leaf != none) {
        taken += nodes_[leaf].len;
        if (i + nodes_[leaf].len > inserted) count_hit(leaf);
      }
    }
    return taken;
  }

  void count_hit(std::uint32_t x) noexcept {
    if (write_back()) return;
    node& n = nodes_[x];
    ++n.hits;
    if (!n.host && n.hits >= threshold()) backup_chain(x);
  }

  // x and its consecutive unbacked ancestors go to the host, root first; a shortfall of host
  // room evicts exactly that much first and, when still short, ends the chain.
  void backup_chain(std::uint32_t x) noexcept {
    chain_.clear();
    for (std::uint32_t y = x; y != root && !nodes_[y].host; y = nodes_[y].parent) chain_.push_back(y);
    for (std::size_t k = chain_.size(); k-- > 0;) {
      if (!back_up(chain_[k])) {
        ++totals_.failed_backups;
        return;
      }
    }
  }
  bool back_up(std::uint32_t x) noexcept {
    node& n = nodes_[x];
    if (free_host_ < n.len) (void)evict_host(n.len - free_host_);
    if (free_host_ < n.len) return false;
    free_host_ -= n.len;
    totals_.host_stored_blocks += n.len;
    n.host = true;
    refresh(x);
    log_backup(x);
    return true;
  }
  // The pages of a node just copied to the host, for the caller's L3 writer (log_backups()).
  void log_backup(std::uint32_t x) noexcept {
    if (!logging_) return;
    std::uint32_t p = nodes_[x].first;
    for (std::uint32_t j = 0; j < nodes_[x].len && backup_log_.size() < backup_log_.capacity(); ++j) {
      backup_log_.push_back(pages_[p].key);
      p = pages_[p].next;
    }
  }

  // A host-only node takes device pages again (from the request or a load): on both tiers.
  void adopt(std::uint32_t x) noexcept {
    node& n = nodes_[x];
    n.device = true;
    count_device(n, true);
    if (n.parent != root) {
      ++nodes_[n.parent].device_children;
      refresh(n.parent);
    }
    refresh(x);
    if (write_back()) dup_push(x);
  }

  std::uint32_t add_leaf(std::uint32_t parent, std::span<const block_key> keys,
                         std::uint64_t t, bool on_device = true) noexcept {
    // Stop before a key the tree holds elsewhere, or earlier in this leaf (a malformed trace).
    std::size_t fresh = 0;
    while (fresh < keys.size() && table_.find(keys[fresh]) == none &&
           std::find(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(fresh), keys[fresh]) ==
               keys.begin() + static_cast<std::ptrdiff_t>(fresh)) {
      ++fresh;
    }
    keys = keys.first(fresh);
    if (keys.empty() || page_stack_.size() < keys.size()) return none;
    const std::uint32_t x = node_stack_.back();
    node_stack_.pop_back();
    node& leaf = nodes_[x];
    leaf = node{};
    leaf.len = static_cast<std::uint32_t>(keys.size());
    leaf.parent = parent;
    leaf.device = on_device;
    leaf.host = !on_device;
    leaf.time = t;
    std::uint32_t prev = none;
    for (const block_key k : keys) {
      const std::uint32_t p = page_stack_.back();
      page_stack_.pop_back();
      pages_[p] = {k, x, none};
      table_.insert(k, p);
      (prev == none ? leaf.first : pages_[prev].next) = p;
      prev = p;
    }
    link_child(parent, x);
    if (on_device) count_device(leaf, true);
    if (parent != root) {
      ++nodes_[parent].children;
      if (on_device) ++nodes_[parent].device_children;
      refresh(parent);
    }
    refresh(x);
    return x;
  }

  // Deletes a leaf (no children), freeing its pages on the tiers it is on.
  void remove_leaf(std::uint32_t x) noexcept {
    node& n = nodes_[x];
    if (n.device) {
      free_device_ += n.len;
      count_device(n, false);
    }
    if (n.host) {
      free_host_ += n.len;
      totals_.host_freed_blocks += n.len;
    }
    for (std::uint32_t p = n.first; p != none;) {
      const std::uint32_t next = pages_[p].next;
      table_.erase(pages_[p].key);
      page_stack_.push_back(p);
      p = next;
    }
    if (n.dpos != none) heap_erase(dheap_, x, &node::dpos);
    if (n.hpos != none) heap_erase(hheap_, x, &node::hpos);
    if (n.in_dups) dup_erase(x);
    unlink_child(x);
    const std::uint32_t parent = n.parent;
    const bool device = n.device;
    n = node{};
    node_stack_.push_back(x);
    if (parent != root) {
      --nodes_[parent].children;
      if (device) --nodes_[parent].device_children;
      refresh(parent);
    }
  }

  // ---- load back
  bool load_back(std::uint32_t best, std::uint32_t pages, std::uint32_t B) noexcept {
    if (std::uint64_t{pages} * B < std::max<std::uint32_t>(1, cfg_.load_back_threshold_tokens)) {
      return false;
    }
    lock(best);
    if (free_device_ < pages) evict_device(pages - free_device_);
    const bool ok = free_device_ >= pages;
    if (ok) {
      free_device_ -= pages;
      // Root first, so each node's parent is on the device when it arrives.
      chain_.clear();
      for (std::uint32_t y = best; y != root && !nodes_[y].device; y = nodes_[y].parent) chain_.push_back(y);
      for (std::size_t k = chain_.size(); k-- > 0;) adopt_loaded(chain_[k]);
    }
    unlock(best);
    return ok;
  }
  void adopt_loaded(std::uint32_t x) noexcept {
    node& n = nodes_[x];
    n.device = true;
    count_device(n, true);
    n.loading = true;
    if (n.parent != root) {
      ++nodes_[n.parent].device_children;
      refresh(n.parent);
    }
    refresh(x);
  }
  // At the load's ack (after the request) the loaded nodes are unpinned and, under write_back,
  // become duplicates, deepest first (finish_load_back walks from the anchor up).
  void register_loaded(std::uint32_t best, std::uint32_t loaded) noexcept {
    std::uint32_t pages = 0;
    for (std::uint32_t y = best; y != root && pages < loaded; y = nodes_[y].parent) {
      pages += nodes_[y].len;
      nodes_[y].loading = false;
      if (write_back() && nodes_[y].device && nodes_[y].host) dup_push(y);
    }
  }

  // ---- device
  void reserve(std::uint64_t pages, std::uint64_t spare) noexcept {
    if (free_device_ < pages + spare) evict_device(pages + spare - free_device_);
    free_device_ -= std::min<std::uint64_t>(pages, free_device_);
  }

  void evict_device(std::uint64_t pages) noexcept {
    std::uint64_t freed = 0;
    while (freed < pages && !dheap_.empty()) {
      const std::uint32_t x = dheap_.top();
      const std::uint32_t len = nodes_[x].len;
      freed += len;
      totals_.device_evicted_blocks += len;
      if (!nodes_[x].host && write_back()) {
        if (free_host_ < len) (void)evict_host(len - free_host_);
        if (free_host_ >= len) {
          free_host_ -= len;
          totals_.host_stored_blocks += len;
          nodes_[x].host = true;
          log_backup(x);
          dup_push(x);  // the blocking ack registers it on both tiers; the demotion leaves it stale
        } else {
          ++totals_.failed_backups;
          drop_subtree(x);
          continue;
        }
      }
      if (nodes_[x].host) {
        demote(x);
      } else {
        remove_leaf(x);
      }
    }
  }
  void demote(std::uint32_t x) noexcept {
    node& n = nodes_[x];
    n.device = false;
    count_device(n, false);
    free_device_ += n.len;
    if (n.parent != root) {
      --nodes_[n.parent].device_children;
      refresh(n.parent);
    }
    refresh(x);
  }
  // write_back, no host room: x (a D-leaf, so every descendant is host-only) and its subtree go,
  // children before parents.
  void drop_subtree(std::uint32_t x) noexcept {
    subtree_.clear();
    subtree_.push_back(x);
    for (std::size_t k = 0; k < subtree_.size(); ++k) {
      for (std::uint32_t c = nodes_[subtree_[k]].first_child; c != none; c = nodes_[c].next_sibling) {
        subtree_.push_back(c);
      }
    }
    for (std::size_t k = subtree_.size(); k-- > 0;) remove_leaf(subtree_[k]);
  }

  // ---- child lists (the root's children are not listed: nothing walks them)
  void link_child(std::uint32_t parent, std::uint32_t x) noexcept {
    if (parent == root) return;
    node& p = nodes_[parent];
    nodes_[x].next_sibling = p.first_child;
    nodes_[x].prev_sibling = none;
    if (p.first_child != none) nodes_[p.first_child].prev_sibling = x;
    p.first_child = x;
  }
  void unlink_child(std::uint32_t x) noexcept {
    node& n = nodes_[x];
    if (n.parent == root) return;
    (n.prev_sibling == none ? nodes_[n.parent].first_child : nodes_[n.prev_sibling].next_sibling) =
        n.next_sibling;
    if (n.next_sibling != none) nodes_[n.next_sibling].prev_sibling = n.prev_sibling;
    n.next_sibling = n.prev_sibling = none;
  }
  // h takes x's place among its parent's children.
  void replace_child(std::uint32_t x, std::uint32_t h) noexcept {
    node& n = nodes_[x];
    if (n.parent == root) return;
    nodes_[h].prev_sibling = n.prev_sibling;
    nodes_[h].next_sibling = n.next_sibling;
    (n.prev_sibling == none ? nodes_[n.parent].first_child : nodes_[n.prev_sibling].next_sibling) = h;
    if (n.next_sibling != none) nodes_[n.next_sibling].prev_sibling = h;
  }

  // ---- host
  std::uint64_t evict_host(std::uint64_t pages) noexcept {
    std::uint64_t freed = 0;
    if (write_back()) freed = reclaim_duplicates(pages);
    while (freed < pages && !hheap_.empty()) {
      const std::uint32_t x = hheap_.top();
      freed += nodes_[x].len;
      totals_.host_evicted_blocks += nodes_[x].len;
      remove_leaf(x);
    }
    return freed;
  }
  // _reclaim_full_host_duplicates: the host copies of nodes also on the device, in the order
  // they became duplicates; the first pass spares device leaves (soon demoted cheaply). Only a
  // host lock or a transfer in flight protects a duplicate, and neither exists here: a request's
  // own (device) lock does not, and loaded nodes join the list after their request.
  std::uint64_t reclaim_duplicates(std::uint64_t pages) noexcept {
    std::uint64_t freed = 0;
    for (const bool spare_leaves : {true, false}) {
      for (std::uint32_t x = dup_head_; x != none && freed < pages;) {
        const std::uint32_t next = nodes_[x].dup_next;
        node& n = nodes_[x];
        if (!(n.device && n.host)) {
          dup_erase(x);  // stale
        } else if (!n.loading && !n.pinned && !(spare_leaves && n.dpos != none)) {  // a device lock does not protect it
          n.host = false;
          free_host_ += n.len;
          freed += n.len;
          totals_.host_evicted_blocks += n.len;
          totals_.host_freed_blocks += n.len;
          dup_erase(x);
          refresh(x);
        }
        x = next;
      }
      if (freed >= pages) break;
    }
    return freed;
  }

  // ---- locks, heaps, duplicates
  void lock(std::uint32_t x) noexcept {
    for (; x != root; x = nodes_[x].parent) {
      if (nodes_[x].locks++ != 0) continue;
      refresh(x);
      if (nodes_[x].device) locked_device_ += nodes_[x].len;
    }
  }
  void unlock(std::uint32_t x) noexcept {
    for (; x != root; x = nodes_[x].parent) {
      if (--nodes_[x].locks != 0) continue;
      refresh(x);
      if (nodes_[x].device) locked_device_ -= nodes_[x].len;
    }
  }
  // A node joins or leaves the device: the tree's device pages (and locked ones) follow.
  void count_device(const node& n, bool joins) noexcept {
    const std::uint64_t locked = n.locks > 0 ? n.len : 0;
    if (joins) {
      tree_device_ += n.len;
      locked_device_ += locked;
    } else {
      tree_device_ -= n.len;
      locked_device_ -= locked;
    }
  }
  bool is_device_leaf(std::uint32_t x) const noexcept {
    const node& n = nodes_[x];
    return n.device && n.locks == 0 && n.device_children == 0;
  }
  bool is_host_leaf(std::uint32_t x) const noexcept {
    const node& n = nodes_[x];
    return !n.device && n.host && n.children == 0 && n.locks == 0 && !n.pinned;
  }
  // A host pin (inc_host_lock_ref): its host copy is neither evicted nor reclaimed meanwhile.
  void pin(std::uint32_t x, bool on) noexcept {
    if (x == root) return;
    nodes_[x].pinned = on;
    refresh(x);
  }
  // Puts x into or out of each heap as its state says.
  void refresh(std::uint32_t x) noexcept {
    const bool d = is_device_leaf(x), h = is_host_leaf(x);
    if (d && nodes_[x].dpos == none) heap_push(dheap_, x, &node::dpos);
    if (!d && nodes_[x].dpos != none) heap_erase(dheap_, x, &node::dpos);
    if (h && nodes_[x].hpos == none) heap_push(hheap_, x, &node::hpos);
    if (!h && nodes_[x].hpos != none) heap_erase(hheap_, x, &node::hpos);
  }
  void set_time(std::uint32_t x, std::uint64_t t) noexcept {
    nodes_[x].time = t;
    if (nodes_[x].dpos != none) heap_fix(dheap_, x, &node::dpos);
    if (nodes_[x].hpos != none) heap_fix(hheap_, x, &node::hpos);
  }

  // The D-leaf and H-leaf heaps (detail/indexed_heap.hpp): older first; a node's place in each.
  using pos_of = std::uint32_t node::*;
  struct older {
    const node* nodes;
    bool operator()(std::uint32_t a, std::uint32_t b) const noexcept { return nodes[a].time < nodes[b].time; }
  };
  struct pos_in {
    node* nodes;
    pos_of field;
    std::uint32_t& operator()(std::uint32_t x) const noexcept { return nodes[x].*field; }
  };
  void heap_push(detail::indexed_heap& h, std::uint32_t x, pos_of pos) noexcept {
    h.push(x, older{nodes_.data()}, pos_in{nodes_.data(), pos});
  }
  void heap_erase(detail::indexed_heap& h, std::uint32_t x, pos_of pos) noexcept {
    h.erase(x, older{nodes_.data()}, pos_in{nodes_.data(), pos});
  }
  void heap_fix(detail::indexed_heap& h, std::uint32_t x, pos_of pos) noexcept {
    h.fix(x, older{nodes_.data()}, pos_in{nodes_.data(), pos});
  }
  // setdefault: a node already listed (even as a stale entry) keeps its place.
  void dup_push(std::uint32_t x) noexcept {
    node& n = nodes_[x];
    if (n.in_dups) return;
    n.in_dups = true;
    n.dup_prev = dup_tail_;
    n.dup_next = none;
    (dup_tail_ == none ? dup_head_ : nodes_[dup_tail_].dup_next) = x;
    dup_tail_ = x;
  }
  void dup_erase(std::uint32_t x) noexcept {
    node& n = nodes_[x];
    (n.dup_prev == none ? dup_head_ : nodes_[n.dup_prev].dup_next) = n.dup_next;
    (n.dup_next == none ? dup_tail_ : nodes_[n.dup_next].dup_prev) = n.dup_prev;
    n.dup_prev = n.dup_next = none;
    n.in_dups = false;
  }

  sglang_hicache_config cfg_;
  std::vector<page> pages_;
  std::vector<node> nodes_;
  detail::key_table<key_of> table_;
  detail::indexed_heap dheap_, hheap_;
  std::vector<std::uint32_t> chain_, subtree_, page_stack_, node_stack_;
  std::uint32_t dup_head_ = none, dup_tail_ = none;
  std::uint64_t free_device_, free_host_, clock_ = 0;
  std::uint64_t tree_device_ = 0, locked_device_ = 0;  // device pages in the tree; locked ones
  std::vector<block_key> backup_log_;  // log_backups(): pages backed up since the last drain
  bool logging_ = false;
  sglang_hicache_counters totals_;
};

/// sglang_hicache as a prefix-replay index (`replay --engine sglang --offload host:...`): a
/// request's hit is its device hit plus the pages it loaded back.
class sglang_hicache_index {
 public:
  static constexpr bool offline = false;
  /// Throws: as sglang_hicache's constructor.
  explicit sglang_hicache_index(const sglang_hicache_config& c) : h_(c) {}
  void begin_request(std::uint64_t input_tokens, std::uint32_t block_tokens) noexcept {
    L_ = input_tokens;
    B_ = block_tokens;
  }
  std::uint32_t process(std::span<const block_key> blocks, std::span<const std::uint64_t>,
                        const access_hint&) noexcept {
    const auto r = h_.run_request(blocks, L_, B_);
    return r.device_hit_blocks + r.loaded_blocks;
  }
  [[nodiscard]] const sglang_hicache& hicache() const noexcept { return h_; }
  [[nodiscard]] std::uint64_t evictions() const noexcept {
    return h_.counters().device_evicted_blocks;
  }
  [[nodiscard]] const sglang_hicache_counters& counters() const noexcept { return h_.counters(); }

 private:
  sglang_hicache h_;
  std::uint64_t L_ = 0;
  std::uint32_t B_ = 1;
};

}  // namespace kvtk::tier
