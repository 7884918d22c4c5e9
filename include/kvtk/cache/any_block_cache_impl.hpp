// kvtk/cache/any_block_cache_impl.hpp — the definitions behind any_block_cache_decl.hpp: one
// table of operations per policy of all_policies, and the by-name factory. Included by
// any_block_cache.hpp (header-only use) and explicitly instantiated once in the kvtk::policies
// library (sim/policies/any_block_cache.cpp).
#pragma once

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include "kvtk/cache/any_block_cache_decl.hpp"
#include "kvtk/cache/block_cache.hpp"
#include "kvtk/offline.hpp"
#include "kvtk/registry.hpp"

namespace kvtk::detail {

template <class P>
struct any_cache_table {
  using cache = block_cache<P, optional_eviction>;
  static cache& c(void* p) noexcept { return *static_cast<cache*>(p); }
  static const cache& c(const void* p) noexcept { return *static_cast<const cache*>(p); }

  static constexpr any_cache_ops ops{
      P::name,
      [](void* p) noexcept { delete static_cast<cache*>(p); },
      [](void* p, block_key k, std::uint32_t size, const access_hint& h) noexcept {
        return c(p).access(k, size, h);
      },
      [](void* p, std::span<const block_key> keys, std::span<access_result> out,
         access_hint h) noexcept {
        // The batch knows its keys ahead: start each key's table lookup a few keys early, so
        // the misses overlap instead of following one another.
        constexpr std::size_t ahead = 8;
        cache& x = c(p);
        const std::size_t n = keys.size();
        for (std::size_t i = 0; i < std::min(n, ahead); ++i) x.prefetch(keys[i]);
        for (std::size_t i = 0; i < n; ++i) {
          if (i + ahead < n) x.prefetch(keys[i + ahead]);
          h.depth = static_cast<std::uint32_t>(i);
          out[i] = x.access(keys[i], h).result;
        }
      },
      [](void* p, block_key k, std::uint32_t size, const access_hint& h) noexcept {
        return c(p).insert(k, size, h);
      },
      [](const void* p, block_key k) noexcept { return c(p).contains(k); },
      [](const void* p, block_key k) noexcept { return c(p).find(k); },
      [](void* p, block_key k) noexcept { return c(p).pin(k); },
      [](void* p, block_key k) noexcept { return c(p).unpin(k); },
      [](void* p, block_key k) noexcept { return c(p).erase(k); },
      [](void* p, std::size_t n) noexcept { return c(p).evict(n); },
      [](const void* p) noexcept { return c(p).size(); },
      [](const void* p) noexcept { return c(p).capacity(); },
      [](const void* p) noexcept { return c(p).used(); },
      [](const void* p) noexcept { return c(p).pinned_entries(); },
      [](const void* p) noexcept { return c(p).stats(); },
      [](void* p) noexcept -> eviction_function& { return c(p).eviction_callback().f; },
  };
};

template <class>
any_cache_parts make_any_block_cache(std::string_view policy, std::uint64_t capacity,
                                     std::uint32_t max_entries, eviction_function on_evict) {
  return visit_policy(policy, [&]<class P>() -> any_cache_parts {
    if constexpr (is_offline_policy<P>) {
      throw std::invalid_argument("any_block_cache: policy '" + std::string(policy) +
                                  "' is offline (it needs every key's next use; replay only)");
    } else {
      typename block_cache<P, optional_eviction>::config cfg;
      cfg.capacity = capacity;
      cfg.max_entries = max_entries;
      auto c = std::make_unique<block_cache<P, optional_eviction>>(
          cfg, optional_eviction{std::move(on_evict)});
      return {&any_cache_table<P>::ops, c.release()};
    }
  });
}

}  // namespace kvtk::detail
