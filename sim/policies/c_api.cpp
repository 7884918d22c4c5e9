// sim/policies/c_api.cpp — the C ABI (include/kvtk/c/kvtk.h) over kvtk::any_block_cache, part of
// the kvtk::policies library.
//
// Only any_block_cache's public member functions (declared in the light any_block_cache_decl.hpp;
// their definitions are the library's own, sim/policies/any_block_cache.cpp) and the registry's
// policy names are used. Every function is noexcept: the only operations that can throw
// (creating a cache, the batch's scratch space) are caught here and turned into status codes, so
// no exception crosses the ABI. The handle owns the any_block_cache and the C callback; the
// std::function the cache holds calls back through the handle, so replacing the C callback never
// touches the cache.
#include "kvtk/c/kvtk.h"

#include <array>
#include <cinttypes>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <new>
#include <span>
#include <stdexcept>
#include <string_view>
#include <type_traits>

#include "kvtk/cache/any_block_cache_decl.hpp"
#include "kvtk/cache/block_cache.hpp"
#include "kvtk/offline.hpp"
#include "kvtk/registry.hpp"

// The header's values are the C++ ones, so results convert by a cast.
static_assert(std::is_same_v<std::underlying_type_t<kvtk::access_result>, std::uint8_t>);
static_assert(static_cast<int>(kvtk::access_result::hit) == KVTK_HIT);
static_assert(static_cast<int>(kvtk::access_result::inserted) == KVTK_INSERTED);
static_assert(static_cast<int>(kvtk::access_result::rejected) == KVTK_REJECTED);
static_assert(std::is_same_v<kvtk::block_key, std::uint64_t>);
static_assert(kvtk::block_cache<kvtk::lru>::npos == KVTK_NPOS);
static_assert(sizeof(kvtk_stats) == 5 * sizeof(std::uint64_t));
static_assert(sizeof(kvtk_access_hint) == 3 * sizeof(std::uint32_t));
#ifdef KVTK_VERSION  // the build passes the project version: the header must agree with it
static_assert(std::string_view(KVTK_VERSION) == KVTK_VERSION_STRING,
              "KVTK_VERSION_* in include/kvtk/c/kvtk.h differ from the project version");
#endif

struct kvtk_cache {
  kvtk_cache(std::string_view policy, const kvtk::any_block_cache::config& cfg, kvtk_evict_fn f,
             void* u)
      : fn(f), user(u), cache(policy, cfg, [this](kvtk::block_key k, std::uint32_t s) {
          if (fn == nullptr) return;
          in_callback = true;
          fn(user, k, s);
          in_callback = false;
        }) {}

  kvtk_evict_fn fn;
  void* user;
  bool in_callback = false;  // set while fn runs: calls back into this cache are refused
  kvtk::any_block_cache cache;
};

namespace {

// ---- the policies' names as C strings (static, NUL-terminated) ----------------------------

template <class P>
struct c_name {
  static constexpr auto value = [] {
    std::array<char, P::name.size() + 1> a{};
    for (std::size_t i = 0; i < P::name.size(); ++i) a[i] = P::name[i];
    return a;
  }();
};

struct policy_entry {
  std::string_view name;
  const char* c_str;
  bool offline;
};

template <class... Ps>
constexpr auto policy_table(kvtk::type_list<Ps...>) {
  return std::array<policy_entry, sizeof...(Ps)>{
      policy_entry{Ps::name, c_name<Ps>::value.data(), kvtk::is_offline_policy<Ps>}...};
}
constexpr auto policies = policy_table(kvtk::all_policies{});

template <class... Ps>
constexpr auto online_table(kvtk::type_list<Ps...>) {
  constexpr std::size_t n = ((kvtk::is_offline_policy<Ps> ? 0 : 1) + ... + 0);
  std::array<const char*, n> out{};
  std::size_t i = 0;
  for (const policy_entry& p : policies) {
    if (!p.offline) out[i++] = p.c_str;
  }
  return out;
}
constexpr auto online_policies = online_table(kvtk::all_policies{});

const policy_entry* find_policy(std::string_view name) noexcept {
  for (const policy_entry& p : policies) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

// ---- last error: one fixed buffer per thread (setting it never allocates, so never fails) --

thread_local char last_error[1024] = "";

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
kvtk_status fail(kvtk_status status, const char* function, const char* format, ...) noexcept {
  int n = std::snprintf(last_error, sizeof last_error, "%s: ", function);
  if (n < 0 || static_cast<std::size_t>(n) >= sizeof last_error) n = 0;
  std::va_list args;
  va_start(args, format);
  std::vsnprintf(last_error + n, sizeof last_error - static_cast<std::size_t>(n), format, args);
  va_end(args);
  return status;
}

// KVTK_OK for a usable handle, else the error (recorded).
kvtk_status check(const kvtk_cache* c, const char* function) noexcept {
  if (c == nullptr) return fail(KVTK_ERR_NULL_HANDLE, function, "the cache handle is NULL");
  if (c->in_callback) {
    return fail(KVTK_ERR_REENTRANT, function,
                "called from the same cache's eviction callback (not allowed)");
  }
  return KVTK_OK;
}

kvtk::access_hint to_hint(const kvtk_access_hint* h) noexcept {
  kvtk::access_hint out;
  if (h != nullptr) {
    out.priority = h->priority;
    out.depth = h->depth;
    out.full_blocks = h->full_blocks;
  }
  return out;
}

void write_outcome(const kvtk::access_outcome& o, kvtk_access_result* result,
                   std::uint32_t* slot) noexcept {
  if (result != nullptr) *result = static_cast<kvtk_access_result>(o.result);
  if (slot != nullptr) *slot = o.slot;
}

}  // namespace

extern "C" {

const char* kvtk_version(void) noexcept { return KVTK_VERSION_STRING; }
std::uint32_t kvtk_abi_version(void) noexcept { return KVTK_ABI_VERSION; }

const char* kvtk_status_string(kvtk_status status) noexcept {
  switch (status) {
    case KVTK_OK: return "KVTK_OK";
    case KVTK_ERR_NULL_HANDLE: return "KVTK_ERR_NULL_HANDLE";
    case KVTK_ERR_INVALID_ARGUMENT: return "KVTK_ERR_INVALID_ARGUMENT";
    case KVTK_ERR_UNKNOWN_POLICY: return "KVTK_ERR_UNKNOWN_POLICY";
    case KVTK_ERR_OFFLINE_POLICY: return "KVTK_ERR_OFFLINE_POLICY";
    case KVTK_ERR_OUT_OF_MEMORY: return "KVTK_ERR_OUT_OF_MEMORY";
    case KVTK_ERR_NOT_FOUND: return "KVTK_ERR_NOT_FOUND";
    case KVTK_ERR_PINNED: return "KVTK_ERR_PINNED";
    case KVTK_ERR_NOT_PINNED: return "KVTK_ERR_NOT_PINNED";
    case KVTK_ERR_PIN_LIMIT: return "KVTK_ERR_PIN_LIMIT";
    case KVTK_ERR_NOT_ENOUGH_UNPINNED: return "KVTK_ERR_NOT_ENOUGH_UNPINNED";
    case KVTK_ERR_REENTRANT: return "KVTK_ERR_REENTRANT";
    case KVTK_ERR_INTERNAL: return "KVTK_ERR_INTERNAL";
    default: return "unknown status";
  }
}

const char* kvtk_last_error(void) noexcept { return last_error; }

std::size_t kvtk_policy_count(void) noexcept { return online_policies.size(); }
const char* kvtk_policy_name(std::size_t i) noexcept {
  return i < online_policies.size() ? online_policies[i] : nullptr;
}

kvtk_access_hint kvtk_access_hint_default(void) noexcept {
  const kvtk::access_hint h;
  return kvtk_access_hint{h.priority, h.depth, h.full_blocks};
}

kvtk_status kvtk_cache_create(const char* policy, std::uint64_t capacity,
                              std::uint32_t max_entries, kvtk_evict_fn on_evict, void* user,
                              kvtk_cache** out) noexcept {
  static constexpr const char* fn = "kvtk_cache_create";
  if (out == nullptr) return fail(KVTK_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  *out = nullptr;
  if (policy == nullptr) return fail(KVTK_ERR_INVALID_ARGUMENT, fn, "the policy name is NULL");
  try {
    *out = new kvtk_cache(policy, {.capacity = capacity, .max_entries = max_entries}, on_evict,
                          user);
    return KVTK_OK;
  } catch (const kvtk::unknown_policy& e) {
    return fail(KVTK_ERR_UNKNOWN_POLICY, fn, "%s", e.what());
  } catch (const std::invalid_argument& e) {
    const policy_entry* p = find_policy(policy);
    return fail(p != nullptr && p->offline ? KVTK_ERR_OFFLINE_POLICY : KVTK_ERR_INVALID_ARGUMENT,
                fn, "%s", e.what());
  } catch (const std::bad_alloc&) {
    return fail(KVTK_ERR_OUT_OF_MEMORY, fn,
                "out of memory for a cache of capacity %" PRIu64 " and max_entries %" PRIu32,
                capacity, max_entries);
  } catch (const std::exception& e) {
    return fail(KVTK_ERR_INTERNAL, fn, "unexpected error: %s", e.what());
  } catch (...) {
    return fail(KVTK_ERR_INTERNAL, fn, "unexpected error");
  }
}

void kvtk_cache_destroy(kvtk_cache* cache) noexcept {
  if (cache == nullptr) return;
  if (cache->in_callback) {
    fail(KVTK_ERR_REENTRANT, "kvtk_cache_destroy",
         "called from the same cache's eviction callback: ignored, the cache is still alive");
    return;
  }
  delete cache;
}

kvtk_status kvtk_cache_set_evict_callback(kvtk_cache* cache, kvtk_evict_fn on_evict,
                                          void* user) noexcept {
  if (const kvtk_status s = check(cache, __func__); s != KVTK_OK) return s;
  cache->fn = on_evict;
  cache->user = user;
  return KVTK_OK;
}

kvtk_status kvtk_cache_access_hinted(kvtk_cache* cache, std::uint64_t key, std::uint32_t size,
                                     const kvtk_access_hint* hint, kvtk_access_result* out_result,
                                     std::uint32_t* out_slot) noexcept {
  if (const kvtk_status s = check(cache, __func__); s != KVTK_OK) return s;
  write_outcome(cache->cache.access(key, size, to_hint(hint)), out_result, out_slot);
  return KVTK_OK;
}

kvtk_status kvtk_cache_access(kvtk_cache* cache, std::uint64_t key, std::uint32_t size,
                              kvtk_access_result* out_result, std::uint32_t* out_slot) noexcept {
  if (const kvtk_status s = check(cache, __func__); s != KVTK_OK) return s;
  write_outcome(cache->cache.access(key, size), out_result, out_slot);
  return KVTK_OK;
}

kvtk_status kvtk_cache_access_batch(kvtk_cache* cache, const std::uint64_t* keys, std::size_t n,
                                    std::uint8_t* results) noexcept {
  if (const kvtk_status s = check(cache, __func__); s != KVTK_OK) return s;
  if (n == 0) return KVTK_OK;
  if (keys == nullptr || results == nullptr) {
    return fail(KVTK_ERR_INVALID_ARGUMENT, __func__, "%s is NULL with n = %zu",
                keys == nullptr ? "keys" : "results", n);
  }
  // The results go through a buffer of access_result (the C array holds uint8_t objects), on
  // the stack up to 4096 keys; one batched call keeps depth = index over the whole batch.
  constexpr std::size_t on_stack = 4096;
  std::array<kvtk::access_result, on_stack> local;
  std::unique_ptr<kvtk::access_result[]> heap;
  kvtk::access_result* out = local.data();
  if (n > on_stack) {
    heap.reset(new (std::nothrow) kvtk::access_result[n]);
    if (!heap) {
      return fail(KVTK_ERR_OUT_OF_MEMORY, __func__, "no scratch space for a batch of %zu keys",
                  n);
    }
    out = heap.get();
  }
  cache->cache.access(std::span<const kvtk::block_key>(keys, n),
                      std::span<kvtk::access_result>(out, n));
  for (std::size_t i = 0; i < n; ++i) results[i] = static_cast<std::uint8_t>(out[i]);
  return KVTK_OK;
}

kvtk_status kvtk_cache_insert_hinted(kvtk_cache* cache, std::uint64_t key, std::uint32_t size,
                                     const kvtk_access_hint* hint, kvtk_access_result* out_result,
                                     std::uint32_t* out_slot) noexcept {
  if (const kvtk_status s = check(cache, __func__); s != KVTK_OK) return s;
  write_outcome(cache->cache.insert(key, size, to_hint(hint)), out_result, out_slot);
  return KVTK_OK;
}

kvtk_status kvtk_cache_insert(kvtk_cache* cache, std::uint64_t key, std::uint32_t size,
                              kvtk_access_result* out_result, std::uint32_t* out_slot) noexcept {
  if (const kvtk_status s = check(cache, __func__); s != KVTK_OK) return s;
  write_outcome(cache->cache.insert(key, size), out_result, out_slot);
  return KVTK_OK;
}

std::int32_t kvtk_cache_contains(const kvtk_cache* cache, std::uint64_t key) noexcept {
  if (check(cache, __func__) != KVTK_OK) return 0;
  return cache->cache.contains(key) ? 1 : 0;
}

std::uint32_t kvtk_cache_find(const kvtk_cache* cache, std::uint64_t key) noexcept {
  if (check(cache, __func__) != KVTK_OK) return KVTK_NPOS;
  return cache->cache.find(key);
}

kvtk_status kvtk_cache_pin(kvtk_cache* cache, std::uint64_t key) noexcept {
  if (const kvtk_status s = check(cache, __func__); s != KVTK_OK) return s;
  if (cache->cache.pin(key)) return KVTK_OK;
  if (!cache->cache.contains(key)) {
    return fail(KVTK_ERR_NOT_FOUND, __func__, "key %" PRIu64 " is not resident", key);
  }
  return fail(KVTK_ERR_PIN_LIMIT, __func__, "key %" PRIu64 " is pinned the maximum number of times",
              key);
}

kvtk_status kvtk_cache_unpin(kvtk_cache* cache, std::uint64_t key) noexcept {
  if (const kvtk_status s = check(cache, __func__); s != KVTK_OK) return s;
  if (cache->cache.unpin(key)) return KVTK_OK;
  if (!cache->cache.contains(key)) {
    return fail(KVTK_ERR_NOT_FOUND, __func__, "key %" PRIu64 " is not resident", key);
  }
  return fail(KVTK_ERR_NOT_PINNED, __func__, "key %" PRIu64 " is not pinned", key);
}

kvtk_status kvtk_cache_erase(kvtk_cache* cache, std::uint64_t key) noexcept {
  if (const kvtk_status s = check(cache, __func__); s != KVTK_OK) return s;
  switch (cache->cache.erase(key)) {
    case kvtk::erase_result::erased: return KVTK_OK;
    case kvtk::erase_result::pinned:
      return fail(KVTK_ERR_PINNED, __func__, "key %" PRIu64 " is pinned", key);
    case kvtk::erase_result::not_found: break;
  }
  return fail(KVTK_ERR_NOT_FOUND, __func__, "key %" PRIu64 " is not resident", key);
}

kvtk_status kvtk_cache_evict(kvtk_cache* cache, std::size_t n) noexcept {
  if (const kvtk_status s = check(cache, __func__); s != KVTK_OK) return s;
  if (cache->cache.evict(n)) return KVTK_OK;
  return fail(KVTK_ERR_NOT_ENOUGH_UNPINNED, __func__,
              "cannot evict %zu: only %zu of the %zu resident entries are unpinned (nothing "
              "evicted)",
              n, cache->cache.size() - cache->cache.pinned_entries(), cache->cache.size());
}

std::size_t kvtk_cache_size(const kvtk_cache* cache) noexcept {
  return check(cache, __func__) == KVTK_OK ? cache->cache.size() : 0;
}
std::uint64_t kvtk_cache_capacity(const kvtk_cache* cache) noexcept {
  return check(cache, __func__) == KVTK_OK ? cache->cache.capacity() : 0;
}
std::uint64_t kvtk_cache_used(const kvtk_cache* cache) noexcept {
  return check(cache, __func__) == KVTK_OK ? cache->cache.used() : 0;
}
std::size_t kvtk_cache_pinned(const kvtk_cache* cache) noexcept {
  return check(cache, __func__) == KVTK_OK ? cache->cache.pinned_entries() : 0;
}

const char* kvtk_cache_policy(const kvtk_cache* cache) noexcept {
  if (check(cache, __func__) != KVTK_OK) return nullptr;
  const policy_entry* p = find_policy(cache->cache.policy());
  return p != nullptr ? p->c_str : nullptr;
}

kvtk_status kvtk_cache_stats(const kvtk_cache* cache, kvtk_stats* out) noexcept {
  if (const kvtk_status s = check(cache, __func__); s != KVTK_OK) return s;
  if (out == nullptr) return fail(KVTK_ERR_INVALID_ARGUMENT, __func__, "out is NULL");
  const kvtk::cache_stats s = cache->cache.stats();
  *out = kvtk_stats{s.hits, s.misses, s.insertions, s.evictions, s.rejections};
  return KVTK_OK;
}

}  // extern "C"
