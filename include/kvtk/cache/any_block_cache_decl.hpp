// kvtk/cache/any_block_cache_decl.hpp — the light declaration of kvtk::any_block_cache: a cache
// whose eviction policy is chosen by name at run time, for engines that hold one cache as a class
// member instead of templating themselves on the policy.
//
// Two ways to get the definitions:
// * header-only: include kvtk/cache/any_block_cache.hpp (this header plus every policy; a
//   translation unit that includes it instantiates block_cache for all of them);
// * compiled: include only this header and link kvtk::policies, which holds the instantiations
//   (the reason to use it: compile time, see bench/RESULTS.md "Engine-facing API").
// Both may be used in one program (the factory is a template instantiated identically by both).
//
// Design: the cache is a pointer to a heap-allocated block_cache<P, detail::optional_eviction> and a
// pointer to a constant table of functions for that P (one table per policy, built at compile
// time). Each operation is one indirect call into the template's own code; the batched access()
// makes one call per batch, so its per-key cost is the template's. Moving the cache moves the two
// pointers. A moved-from cache may only be destroyed or assigned to.
//
// Thread safety: as block_cache — distinct caches may be used from different threads at once; one
// cache needs external synchronisation for every call, const ones included when any thread
// mutates it (see docs/thread-safety.md; kvtk::sharded_block_cache shards a cache with locks).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <utility>

#include "kvtk/cache/cache_types.hpp"
#include "kvtk/concepts.hpp"

namespace kvtk {

/// The eviction callback of any_block_cache: (evicted key, its slot). Must not throw and must not
/// call back into the cache.
using eviction_function = std::function<void(block_key, std::uint32_t)>;

namespace detail {
/// The OnEvict of the block_cache inside any_block_cache: calls the function when it is set.
struct optional_eviction {
  eviction_function f;
  void operator()(block_key k, std::uint32_t slot) const noexcept {
    if (f) f(k, slot);
  }
};
/// One policy's operations on a type-erased block_cache<P, detail::optional_eviction>.
struct any_cache_ops {
  std::string_view name;
  void (*destroy)(void*) noexcept;
  access_outcome (*access)(void*, block_key, std::uint32_t, const access_hint&) noexcept;
  void (*access_batch)(void*, std::span<const block_key>, std::span<access_result>,
                       access_hint) noexcept;
  access_outcome (*insert)(void*, block_key, std::uint32_t, const access_hint&) noexcept;
  bool (*contains)(const void*, block_key) noexcept;
  std::uint32_t (*find)(const void*, block_key) noexcept;
  bool (*pin)(void*, block_key) noexcept;
  bool (*unpin)(void*, block_key) noexcept;
  erase_result (*erase)(void*, block_key) noexcept;
  bool (*evict)(void*, std::size_t) noexcept;
  std::size_t (*size)(const void*) noexcept;
  std::uint64_t (*capacity)(const void*) noexcept;
  std::uint64_t (*used)(const void*) noexcept;
  std::size_t (*pinned_entries)(const void*) noexcept;
  cache_stats (*stats)(const void*) noexcept;
  eviction_function& (*callback)(void*) noexcept;
};
struct any_cache_parts {
  const any_cache_ops* ops;
  void* cache;
};
/// Builds the cache of the policy named `policy`.  Defined in any_block_cache_impl.hpp; the
/// kvtk::policies library instantiates it. A template (of a dummy parameter) so that a translation
/// unit that sees the definition (header-only use) and the library's explicit instantiation are
/// the same entity, not an inline and a non-inline definition of one function: the two uses may
/// be mixed in one program.
/// Throws: unknown_policy; std::invalid_argument for an offline policy or a bad config;
/// std::bad_alloc.
template <class = void>
any_cache_parts make_any_block_cache(std::string_view policy, std::uint64_t capacity,
                                     std::uint32_t max_entries, eviction_function on_evict);
}  // namespace detail

class any_block_cache {
 public:
  /// The same shape as block_cache::config (less the policy parameters, which take defaults).
  struct config {
    std::uint64_t capacity = 0;     ///< size units (blocks when every entry has size 1), > 0
    std::uint32_t max_entries = 0;  ///< node pool size; 0 = capacity (< 2^31)
  };

  /// Effects: a cache of the policy named `policy` with default policy parameters; on_evict is
  /// called for every victim (see block_cache.hpp) and may be replaced by set_on_evict().
  /// Throws: unknown_policy for an unknown name (what() lists the valid ones);
  /// std::invalid_argument for an offline policy (belady: it needs next uses, which an online
  /// caller does not have) or a bad config; std::bad_alloc.
  any_block_cache(std::string_view policy, const config& cfg, eviction_function on_evict = {}) {
    const detail::any_cache_parts p =
        detail::make_any_block_cache<>(policy, cfg.capacity, cfg.max_entries, std::move(on_evict));
    ops_ = p.ops;
    cache_ = p.cache;
  }
  any_block_cache(const any_block_cache&) = delete;
  any_block_cache& operator=(const any_block_cache&) = delete;
  /// Complexity: O(1).  Throws: nothing.
  any_block_cache(any_block_cache&& o) noexcept
      : ops_(std::exchange(o.ops_, nullptr)), cache_(std::exchange(o.cache_, nullptr)) {}
  any_block_cache& operator=(any_block_cache&& o) noexcept {
    if (this != &o) {
      reset();
      ops_ = std::exchange(o.ops_, nullptr);
      cache_ = std::exchange(o.cache_, nullptr);
    }
    return *this;
  }
  ~any_block_cache() { reset(); }

  /// The registry name of the policy ("" when moved from).
  [[nodiscard]] std::string_view policy() const noexcept { return ops_ ? ops_->name : ""; }

  // Every operation below: Requires: not moved from.  Throws: nothing.  Semantics and complexity:
  // block_cache's operation of the same name, plus one indirect call.

  /// As block_cache::access(key, size, hint).
  /// (A template so that access(key, {}) stays the hint form: {} deduces no integer type.)
  template <std::integral Size>
  access_outcome access(block_key key, Size size, const access_hint& hint = {}) noexcept {
    return ops_->access(cache_, key, static_cast<std::uint32_t>(size), hint);
  }
  /// The same with size 1 (or the legacy order hint, size).
  access_outcome access(block_key key, const access_hint& hint = {},
                        std::uint32_t size = 1) noexcept {
    return ops_->access(cache_, key, size, hint);
  }
  /// Batched access: out[i] = access(keys[i], hint with depth i).result, in order; one indirect
  /// call per batch.  Requires: out.size() >= keys.size().  Complexity: keys.size() accesses.
  void access(std::span<const block_key> keys, std::span<access_result> out,
              const access_hint& hint = {}) noexcept {
    ops_->access_batch(cache_, keys, out, hint);
  }
  template <std::integral Size>
  access_outcome insert(block_key key, Size size, const access_hint& hint = {}) noexcept {
    return ops_->insert(cache_, key, static_cast<std::uint32_t>(size), hint);
  }
  access_outcome insert(block_key key, const access_hint& hint = {},
                        std::uint32_t size = 1) noexcept {
    return ops_->insert(cache_, key, size, hint);
  }
  [[nodiscard]] bool contains(block_key key) const noexcept { return ops_->contains(cache_, key); }
  [[nodiscard]] std::uint32_t find(block_key key) const noexcept { return ops_->find(cache_, key); }
  bool pin(block_key key) noexcept { return ops_->pin(cache_, key); }
  bool unpin(block_key key) noexcept { return ops_->unpin(cache_, key); }
  erase_result erase(block_key key) noexcept { return ops_->erase(cache_, key); }
  /// As block_cache::evict: n unpinned entries in victim order, or nothing.
  bool evict(std::size_t n) noexcept { return ops_->evict(cache_, n); }

  [[nodiscard]] std::size_t size() const noexcept { return ops_->size(cache_); }
  [[nodiscard]] std::uint64_t capacity() const noexcept { return ops_->capacity(cache_); }
  [[nodiscard]] std::uint64_t used() const noexcept { return ops_->used(cache_); }
  [[nodiscard]] std::size_t pinned_entries() const noexcept { return ops_->pinned_entries(cache_); }
  [[nodiscard]] cache_stats stats() const noexcept { return ops_->stats(cache_); }
  /// Replaces the eviction callback (an empty function: nothing is called).
  void set_on_evict(eviction_function f) noexcept { ops_->callback(cache_) = std::move(f); }

 private:
  void reset() noexcept {
    if (ops_ != nullptr) ops_->destroy(cache_);
    ops_ = nullptr;
    cache_ = nullptr;
  }
  const detail::any_cache_ops* ops_ = nullptr;
  void* cache_ = nullptr;
};

}  // namespace kvtk
