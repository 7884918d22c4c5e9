// kvtk/concepts.hpp — the contract every eviction policy satisfies.
//
// A policy is a *family* type (CacheLib's MMContainer shape):
//
//   struct lru {
//     static constexpr std::string_view name = "lru";   // registry / CLI name
//     struct config { ... };                             // every field documents unit and default
//     struct hook { ... };                               // per-node state the policy needs
//     template <class Node> class container { ... };     // the policy proper
//   };
//
// A node is `cache_node<Policy>`: `node_base` (key, size, pins) plus `Policy::hook`. The container
// never allocates after construction, never owns nodes, and performs only these operations:
//
//   on_insert(n, hint)  n was just admitted (key and size set, not yet linked anywhere)
//   on_hit(n, hint)     n was resident and is accessed again
//   on_miss(key, hint)  key is about to be inserted; called once, before the evict() calls that
//   make
//                       room for it (ghost lists and frequency sketches look here)
//   evict(pred)         choose a resident node for which pred(node) is true, unlink it, return it;
//                       nullptr only if no resident node satisfies pred
//   on_erase(n)         n leaves the cache for a reason other than eviction (explicit erase)
//   size()              number of resident nodes linked in the container
//
// All of these are noexcept. The caller (block_cache) guarantees: a node is passed to on_hit /
// on_erase only while resident; evict() is called only when at least one resident node satisfies
// pred. Under these preconditions every policy terminates in bounded time.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kvtk {

/// 64-bit block key (a chained prefix hash in the prefix layer; any id in flat traces).
using block_key = std::uint64_t;

/// Fields every cache node carries, whatever the policy.
/// Thread safety: plain values (node_base, access_hint, policy_params, any_node).
struct node_base {
  block_key key = 0;
  /// Size in capacity units (1 when the cache counts blocks; bytes when it counts bytes).
  std::uint32_t size = 1;
  /// Pin (reference) count. A node with pins > 0 is never chosen as a victim.
  std::uint32_t pins = 0;
};

/// Per-access information that some policies use and the rest ignore.
struct access_hint {
  /// Priority for priority-LRU (0 = evicted first). Default 35 as in TensorRT-LLM.
  std::uint32_t priority = 35;
  /// The block's index in its request (0 = first block); cost-aware eviction prices depth.
  std::uint32_t depth = 0;
  /// Belady/OPT: position (in accesses) of the next access to this key; `never` if none.
  std::uint64_t next_use = never;
  /// How many of the request's blocks are full: a block at depth >= full_blocks is its partial
  /// last block (reuse-ranked policies learn that such blocks are rarely reused). Default: all.
  std::uint32_t full_blocks = ~std::uint32_t{0};
  // Session signals (session-aware orders; docs/policies.md "Session-aware orders"): what an
  // engine knows of the request that accesses the block. Defaults: no session information.
  /// The request's arrival time, seconds (0 = unknown: a trace without times).
  double time_s = 0;
  /// Its session (0 = none), its turn in the session (0 = first or unknown).
  std::uint64_t session = 0;
  std::uint32_t turn = 0;
  /// True when the request's reply ends in a tool call, so that its session waits on a tool.
  /// The engine learns this when the reply finishes; the request's blocks are in use (pinned)
  /// until then, so no eviction could have acted on it earlier.
  bool awaits_tool = false;
  static constexpr std::uint64_t never = ~std::uint64_t{0};
};

/// The access_hint fields a policy reads (a bit set). A policy declares them as
/// `static constexpr unsigned hints_read = ...;` (none when absent); without them it still runs,
/// degraded, so replays record which of them they gave (`kvtk replay` results: "hints").
namespace hint_fields {
inline constexpr unsigned depth = 1, next_use = 2, priority = 4, full_blocks = 8, session = 16;
}
/// The hint fields policy P reads: P::hints_read, or 0.
template <class P>
constexpr unsigned hints_read_by() noexcept {
  if constexpr (requires { P::hints_read; }) {
    return P::hints_read;
  } else {
    return 0;
  }
}

/// Sizes fixed at construction; containers preallocate from these.
struct policy_params {
  /// Cache capacity in size units (blocks, or bytes when nodes carry byte sizes). > 0.
  std::uint64_t capacity = 0;
  /// Upper bound on resident nodes (the node pool size). > 0.
  std::uint32_t max_entries = 0;
};

/// The node type a block_cache uses for policy P.
template <class P>
struct cache_node : node_base, P::hook {};

/// Predicate that admits any node as a victim (used when nothing can be pinned).
struct any_node {
  constexpr bool operator()(const node_base&) const noexcept { return true; }
};

template <class C, class Node>
concept policy_container =
    std::constructible_from<C, const policy_params&, const typename C::config_type&> &&
    requires(C c, const C cc, Node& n, const access_hint& h, block_key k) {
  { c.on_insert(n, h) }
  noexcept;
  { c.on_hit(n, h) }
  noexcept;
  { c.on_miss(k, h) }
  noexcept;
  { c.evict(any_node{}) }
  noexcept->std::same_as<Node*>;
  { c.on_erase(n) }
  noexcept;
  { cc.size() }
  noexcept->std::same_as<std::size_t>;
};

/// Satisfied by every eviction policy family in kvtk/policy/.
template <class P>
concept eviction_policy = requires {
  { P::name } -> std::convertible_to<std::string_view>;
  typename P::config;
  typename P::hook;
  typename P::template container<cache_node<P>>;
}
&&std::derived_from<cache_node<P>, typename P::hook>&&
    policy_container<typename P::template container<cache_node<P>>, cache_node<P>>;

}  // namespace kvtk
