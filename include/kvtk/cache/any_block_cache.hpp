// kvtk/cache/any_block_cache.hpp — a block_cache whose policy is chosen by name at run time, for
// engines (and the Python package) that hold one cache as a member instead of templating
// themselves on the policy.
//
// Design: a std::variant over one heap-allocated block_cache<P, eviction_function> per policy P of
// all_policies (the compile-time list), first alternative std::monostate for a moved-from cache.
// Each operation is one variant dispatch, then the template's own code; the batched access()
// dispatches once per batch, so its per-key cost is the template's. Holding the cache by pointer
// makes any_block_cache movable (block_cache itself holds intrusive state and is not).
// The eviction callback is a std::function member of the cache: it may be replaced at any time
// (set_on_evict) and must not throw (the operations are noexcept).
// Semantics of every operation: block_cache.hpp. Offline policies (belady) need next-use hints
// that only a replay has, so they are refused here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "kvtk/cache/block_cache.hpp"
#include "kvtk/detail/engaged_variant.hpp"
#include "kvtk/offline.hpp"
#include "kvtk/registry.hpp"

namespace kvtk {

/// The eviction callback of any_block_cache: (evicted key, its slot). Must not throw.
using eviction_function = std::function<void(block_key, std::uint32_t)>;

class any_block_cache {
  // Dispatch comes first: the operations below deduce their return types from it.
  template <class P>
  using holder = std::unique_ptr<block_cache<P, eviction_function>>;
  template <class List>
  struct variant_of;
  template <class... Ps>
  struct variant_of<type_list<Ps...>> {
    using type = std::variant<std::monostate, holder<Ps>...>;
  };

  template <class F>
  decltype(auto) with(F&& f) noexcept {
    return detail::visit_engaged(cache_, [&](auto& h) -> decltype(auto) { return f(*h); });
  }
  template <class F>
  decltype(auto) with(F&& f) const noexcept {
    return detail::visit_engaged(cache_, [&](const auto& h) -> decltype(auto) {
      return f(std::as_const(*h));
    });
  }

 public:
  struct config {
    std::uint64_t capacity = 0;     ///< size units (blocks when every entry has size 1), > 0
    std::uint32_t max_entries = 0;  ///< node pool size; 0 = capacity (< 2^31)
  };

  /// Effects: a cache of the policy named `policy` with default policy parameters.
  /// Throws: unknown_policy for an unknown name (what() lists the valid ones);
  /// std::invalid_argument for an offline policy or a bad config; std::bad_alloc.
  any_block_cache(std::string_view policy, const config& cfg, eviction_function on_evict = {}) {
    visit_policy(policy, [&]<class P>() {
      if constexpr (is_offline_policy<P>) {
        throw std::invalid_argument("any_block_cache: policy '" + std::string(policy) +
                                    "' is offline (it needs every key's next use; replay only)");
      } else {
        typename block_cache<P, eviction_function>::config c;
        c.capacity = cfg.capacity;
        c.max_entries = cfg.max_entries;
        cache_.template emplace<holder<P>>(
            std::make_unique<block_cache<P, eviction_function>>(c, std::move(on_evict)));
        name_ = P::name;
      }
    });
  }
  any_block_cache(any_block_cache&&) noexcept = default;
  any_block_cache& operator=(any_block_cache&&) noexcept = default;

  /// The registry name of the policy.
  [[nodiscard]] std::string_view policy() const noexcept { return name_; }

  /// As block_cache::access.  Requires: not moved from.  Throws: nothing.
  access_outcome access(block_key key, const access_hint& hint = {},
                        std::uint32_t size = 1) noexcept {
    return with([&](auto& c) { return c.access(key, hint, size); });
  }
  /// Batched access: out[i] = access(keys[i], hint with depth i).result, in order; one dispatch.
  /// Requires: out.size() >= keys.size().  Complexity: keys.size() accesses.  Throws: nothing.
  void access(std::span<const block_key> keys, std::span<access_result> out,
              access_hint hint = {}) noexcept {
    with([&](auto& c) {
      for (std::size_t i = 0; i < keys.size(); ++i) {
        hint.depth = static_cast<std::uint32_t>(i);
        out[i] = c.access(keys[i], hint).result;
      }
    });
  }
  /// As block_cache::insert, contains, find, pin, unpin, erase.  Throws: nothing.
  access_outcome insert(block_key key, const access_hint& hint = {},
                        std::uint32_t size = 1) noexcept {
    return with([&](auto& c) { return c.insert(key, hint, size); });
  }
  [[nodiscard]] bool contains(block_key key) const noexcept {
    return with([&](const auto& c) { return c.contains(key); });
  }
  [[nodiscard]] std::uint32_t find(block_key key) const noexcept {
    return with([&](const auto& c) { return c.find(key); });
  }
  bool pin(block_key key) noexcept { return with([&](auto& c) { return c.pin(key); }); }
  bool unpin(block_key key) noexcept { return with([&](auto& c) { return c.unpin(key); }); }
  erase_result erase(block_key key) noexcept { return with([&](auto& c) { return c.erase(key); }); }
  /// As block_cache::evict: n unpinned entries in victim order, or nothing.  Throws: nothing.
  bool evict(std::size_t n) noexcept { return with([&](auto& c) { return c.evict(n); }); }

  [[nodiscard]] std::size_t size() const noexcept { return with([](const auto& c) { return c.size(); }); }
  [[nodiscard]] std::uint64_t capacity() const noexcept {
    return with([](const auto& c) { return c.capacity(); });
  }
  [[nodiscard]] std::uint64_t used() const noexcept { return with([](const auto& c) { return c.used(); }); }
  [[nodiscard]] std::size_t pinned_entries() const noexcept {
    return with([](const auto& c) { return c.pinned_entries(); });
  }
  [[nodiscard]] cache_stats stats() const noexcept { return with([](const auto& c) { return c.stats(); }); }
  /// Replaces the eviction callback (an empty function: nothing is called).
  void set_on_evict(eviction_function f) noexcept {
    with([&](auto& c) { c.eviction_callback() = std::move(f); });
  }

 private:
  typename variant_of<all_policies>::type cache_;
  std::string_view name_;
};

}  // namespace kvtk
