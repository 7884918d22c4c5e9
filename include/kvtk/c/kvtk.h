/* kvtk/c/kvtk.h — the C ABI of kvtk: a block cache of any online eviction policy, chosen by name
 * at run time (kvtk::any_block_cache underneath), for engines written in C, Rust, Go, Zig, ...
 *
 * Plain C (C99 or later); a C++ compiler sees the same declarations inside extern "C". The
 * implementation is in the compiled library kvtk::policies (libkvtk_policies); see docs/c_api.md.
 *
 * Conventions (they hold for every function below unless its comment says otherwise)
 * ---------------------------------------------------------------------------------------
 * Status.     Functions that can fail return a kvtk_status: KVTK_OK (0) or an error code. A
 *             function that fails changes nothing (no cache state, no counters, no out-parameter
 *             except that kvtk_cache_create sets *out to NULL).
 * Last error. Every call that returns an error status (or, for the query functions that return a
 *             value, every call given a NULL handle) records a message on the calling thread;
 *             kvtk_last_error() returns it. Successful calls leave it unchanged (as errno).
 * NULL.       A NULL handle gives KVTK_ERR_NULL_HANDLE (query functions: 0, or KVTK_NPOS for
 *             kvtk_cache_find, or NULL for kvtk_cache_policy). A NULL required pointer argument
 *             gives KVTK_ERR_INVALID_ARGUMENT. Out-parameters documented as optional may be NULL.
 * Ownership.  A kvtk_cache is created by kvtk_cache_create and owned by the caller until it
 *             passes it to kvtk_cache_destroy, exactly once. Arrays passed in are only read or
 *             written during the call; the library keeps no pointer to them. Strings the library
 *             returns are owned by the library and must not be freed.
 * Threads.    A handle is not thread-safe: calls on one handle must not overlap (use a lock, or
 *             one handle per thread). Distinct handles share nothing and may be used on
 *             different threads at the same time. A handle may move between threads.
 *             kvtk_version, kvtk_abi_version, kvtk_status_string, kvtk_policy_count,
 *             kvtk_policy_name, kvtk_access_hint_default and kvtk_last_error are always
 *             thread-safe.
 * Errors never unwind. No C++ exception leaves this library; every function returns.
 * Allocation. Only kvtk_cache_create allocates (the whole cache, up front) and
 *             kvtk_cache_access_batch for batches of more than 4096 keys (scratch space).
 *
 * The eviction callback
 * ---------------------
 * kvtk_evict_fn(user, key, slot) is called once per evicted entry: by a capacity eviction inside
 * access/insert/access_batch, and by kvtk_cache_evict; never by kvtk_cache_erase or
 * kvtk_cache_destroy. It is called after the entry has left the cache and before its slot is
 * reused, in eviction order, on the thread that made the call. The callback
 *   - must not call any kvtk_cache_* function on the same cache: such calls are refused with
 *     KVTK_ERR_REENTRANT (kvtk_cache_destroy is ignored), query functions return 0 / KVTK_NPOS;
 *     other caches may be used;
 *   - must return normally: no longjmp out of it, no C++ exception, no Rust panic (catch it in
 *     the callback; an exception escaping into the library terminates the process).
 *
 * ABI stability
 * -------------
 * The handle is opaque (only pointers to it cross the ABI). Every integer is fixed-width, except
 * size_t for counts and lengths. Enumerations are not C enum types (whose size the compiler
 * picks): kvtk_status is an int32_t and kvtk_access_result a uint8_t, with the explicit values
 * below, which will not change; new codes may be added. Structs (kvtk_stats, kvtk_access_hint)
 * have fixed layouts: a change to one would come as a new struct and new functions, with
 * KVTK_ABI_VERSION raised. Functions are only ever added. Check kvtk_abi_version() against
 * KVTK_ABI_VERSION when the library is loaded dynamically.
 */
#ifndef KVTK_C_KVTK_H
#define KVTK_C_KVTK_H

#include <stddef.h>
#include <stdint.h>

/* Symbol visibility: default visibility with GCC and Clang; on Windows, define KVTK_C_SHARED
 * when using kvtk as a DLL (and KVTK_C_BUILDING when building it). */
#if defined(_WIN32) && defined(KVTK_C_SHARED)
#if defined(KVTK_C_BUILDING)
#define KVTK_C_API __declspec(dllexport)
#else
#define KVTK_C_API __declspec(dllimport)
#endif
#elif defined(__GNUC__) && __GNUC__ >= 4
#define KVTK_C_API __attribute__((visibility("default")))
#else
#define KVTK_C_API
#endif

/* The functions do not throw; C++ callers see that. */
#if defined(__cplusplus)
#define KVTK_C_NOEXCEPT noexcept
#else
#define KVTK_C_NOEXCEPT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- versions ------------------------------------------------------------------------------ */

/** The kvtk release these declarations come from (the project version in CMakeLists.txt). */
#define KVTK_VERSION_MAJOR 0
#define KVTK_VERSION_MINOR 1
#define KVTK_VERSION_PATCH 0
#define KVTK_VERSION_STRING "0.1.0"
/** Raised on any incompatible change of this header's ABI (none so far). */
#define KVTK_ABI_VERSION 1

/** The library's version, "MAJOR.MINOR.PATCH": a static string (never freed, never NULL). */
KVTK_C_API const char* kvtk_version(void) KVTK_C_NOEXCEPT;
/** The library's KVTK_ABI_VERSION (compare with the header's when loading it dynamically). */
KVTK_C_API uint32_t kvtk_abi_version(void) KVTK_C_NOEXCEPT;

/* ---- status codes -------------------------------------------------------------------------- */

typedef int32_t kvtk_status;
enum {
  KVTK_OK = 0,
  KVTK_ERR_NULL_HANDLE = 1,       /**< the kvtk_cache* argument is NULL */
  KVTK_ERR_INVALID_ARGUMENT = 2,  /**< a NULL required pointer, capacity 0, max_entries >= 2^31,
                                       capacity >= 2^31 with max_entries 0, a bad policy config */
  KVTK_ERR_UNKNOWN_POLICY = 3,    /**< no policy has that name (the message lists the names) */
  KVTK_ERR_OFFLINE_POLICY = 4,    /**< an offline policy (belady): it needs every key's next use,
                                       which only a trace replay has */
  KVTK_ERR_OUT_OF_MEMORY = 5,     /**< an allocation failed */
  KVTK_ERR_NOT_FOUND = 6,         /**< pin, unpin, erase: the key is not resident */
  KVTK_ERR_PINNED = 7,            /**< erase: the key is pinned */
  KVTK_ERR_NOT_PINNED = 8,        /**< unpin: the key is resident but not pinned */
  KVTK_ERR_PIN_LIMIT = 9,         /**< pin: the key's pin count is at its maximum (2^31 - 1) */
  KVTK_ERR_NOT_ENOUGH_UNPINNED = 10, /**< evict(n): fewer than n unpinned entries */
  KVTK_ERR_REENTRANT = 11,        /**< called from the same cache's eviction callback */
  KVTK_ERR_INTERNAL = 12          /**< an unexpected failure inside the library (a bug) */
};

/** A short static name for a status ("KVTK_OK", "KVTK_ERR_NOT_FOUND", ...; "unknown status" for
 *  other values). Never NULL, never freed. */
KVTK_C_API const char* kvtk_status_string(kvtk_status status) KVTK_C_NOEXCEPT;

/** The message of the most recent call on this thread that failed (see "Last error" above):
 *  "kvtk_cache_create: unknown policy 'lur' (known: lru fifo ...)". "" when no call on this
 *  thread has failed. Never NULL. The string belongs to the library and stays valid, unchanged,
 *  until the next failing kvtk call on the same thread or the thread's exit; copy it to keep it.
 *  Messages are for people; match on the status code, not the text. */
KVTK_C_API const char* kvtk_last_error(void) KVTK_C_NOEXCEPT;

/* ---- policies ------------------------------------------------------------------------------ */

/** The number of policies kvtk_cache_create accepts (the online ones of the registry). */
KVTK_C_API size_t kvtk_policy_count(void) KVTK_C_NOEXCEPT;
/** The name of policy i < kvtk_policy_count() in registry order ("lru", "fifo", "clock", ...),
 *  a static string; NULL when i is out of range. The offline "belady" is not listed. */
KVTK_C_API const char* kvtk_policy_name(size_t i) KVTK_C_NOEXCEPT;

/* ---- the cache ----------------------------------------------------------------------------- */

/** An opaque cache handle (kvtk::any_block_cache with its callback). */
typedef struct kvtk_cache kvtk_cache;

/** The slot value of "no slot" (a rejected access, a missing key). */
#define KVTK_NPOS UINT32_MAX

/** Eviction callback: `key` has just been evicted from slot `slot`. See "The eviction callback". */
typedef void (*kvtk_evict_fn)(void* user, uint64_t key, uint32_t slot);

typedef uint8_t kvtk_access_result;
enum {
  KVTK_HIT = 0,      /**< the key was resident */
  KVTK_INSERTED = 1, /**< the key was missing and is now resident */
  KVTK_REJECTED = 2  /**< the key was missing and could not be admitted: size 0, size > capacity,
                          or the pinned entries leave no room; nothing changed */
};

/** Per-access information some policies use (others ignore it). */
typedef struct kvtk_access_hint {
  uint32_t priority;    /**< priority-lru: 0 is evicted first (default 35, as TensorRT-LLM) */
  uint32_t depth;       /**< the block's index in its request, 0 first (cost-aware) (default 0) */
  uint32_t full_blocks; /**< how many of the request's blocks are full; a block at depth >=
                             full_blocks is its partial last block (default UINT32_MAX: all) */
} kvtk_access_hint;

/** The default hint: priority 35, depth 0, full_blocks UINT32_MAX (what the functions without
 *  a hint argument use). */
KVTK_C_API kvtk_access_hint kvtk_access_hint_default(void) KVTK_C_NOEXCEPT;

/** Counters kept by every cache since its creation. */
typedef struct kvtk_stats {
  uint64_t hits;       /**< accesses of a resident key */
  uint64_t misses;     /**< accesses of a missing key (admitted or rejected) */
  uint64_t insertions; /**< entries admitted (by access, batch or insert) */
  uint64_t evictions;  /**< entries evicted (capacity evictions and kvtk_cache_evict) */
  uint64_t rejections; /**< admissions refused (KVTK_REJECTED) */
} kvtk_stats;

/** Creates a cache of the policy named `policy` (see kvtk_policy_name) with default policy
 *  parameters. `capacity` is in size units: blocks when every entry has size 1, or bytes when
 *  entries carry byte sizes (then set max_entries). `max_entries` bounds the number of resident
 *  entries (the node pool, allocated now); 0 means `capacity` (which must then be < 2^31).
 *  `on_evict` may be NULL (no callback); `user` is passed to it unchanged and is not owned.
 *  On success *out is the new handle, owned by the caller (free it with kvtk_cache_destroy); on
 *  failure *out is NULL (when out is not NULL).
 *  Errors: KVTK_ERR_INVALID_ARGUMENT (policy or out NULL, a bad capacity or max_entries),
 *  KVTK_ERR_UNKNOWN_POLICY, KVTK_ERR_OFFLINE_POLICY, KVTK_ERR_OUT_OF_MEMORY.
 *  `policy` is a NUL-terminated string, only read during the call. */
KVTK_C_API kvtk_status kvtk_cache_create(const char* policy, uint64_t capacity,
                                         uint32_t max_entries, kvtk_evict_fn on_evict, void* user,
                                         kvtk_cache** out) KVTK_C_NOEXCEPT;

/** Frees the cache: every entry is dropped without calling the eviction callback. NULL is a
 *  no-op. The handle is invalid afterwards. Called from the cache's own eviction callback, it
 *  does nothing (and records KVTK_ERR_REENTRANT as the last error). */
KVTK_C_API void kvtk_cache_destroy(kvtk_cache* cache) KVTK_C_NOEXCEPT;

/** Replaces the eviction callback and its user pointer (on_evict NULL: no callback). */
KVTK_C_API kvtk_status kvtk_cache_set_evict_callback(kvtk_cache* cache, kvtk_evict_fn on_evict,
                                                     void* user) KVTK_C_NOEXCEPT;

/** Accesses `key` with `size` units (1 for block counts): a resident key is a hit and updates
 *  the policy; a missing key is a miss and is admitted, evicting unpinned entries in the policy's
 *  order (with callbacks) until it fits, or rejected when it cannot fit. *out_result (optional)
 *  receives KVTK_HIT, KVTK_INSERTED or KVTK_REJECTED and *out_slot (optional) the entry's slot
 *  (< max_entries, stable while the entry is resident) or KVTK_NPOS when rejected. A rejection is
 *  an outcome, not an error: the status is KVTK_OK. A hit keeps the entry's original size.
 *  Complexity: O(1) expected plus the policy's cost. */
KVTK_C_API kvtk_status kvtk_cache_access(kvtk_cache* cache, uint64_t key, uint32_t size,
                                         kvtk_access_result* out_result,
                                         uint32_t* out_slot) KVTK_C_NOEXCEPT;
/** As kvtk_cache_access with a hint (NULL: kvtk_access_hint_default()). */
KVTK_C_API kvtk_status kvtk_cache_access_hinted(kvtk_cache* cache, uint64_t key, uint32_t size,
                                                const kvtk_access_hint* hint,
                                                kvtk_access_result* out_result,
                                                uint32_t* out_slot) KVTK_C_NOEXCEPT;

/** Accesses keys[0..n) in order, each with size 1, as n calls of kvtk_cache_access_hinted with
 *  the default hint but depth i for keys[i] (a batch is one request's blocks in order), and
 *  writes results[i] (a kvtk_access_result). One dispatch for the whole batch. keys and results
 *  may be NULL when n is 0; results must not overlap keys. Errors: KVTK_ERR_INVALID_ARGUMENT
 *  (keys or results NULL with n > 0), KVTK_ERR_OUT_OF_MEMORY (n > 4096 and no scratch space:
 *  then nothing was accessed). */
KVTK_C_API kvtk_status kvtk_cache_access_batch(kvtk_cache* cache, const uint64_t* keys, size_t n,
                                               uint8_t* results) KVTK_C_NOEXCEPT;

/** Admits a missing key without counting a miss (a prefetch or a write-back). A resident key is
 *  left untouched (no policy update, no hit counted) and reported as KVTK_HIT. Out-parameters as
 *  kvtk_cache_access. */
KVTK_C_API kvtk_status kvtk_cache_insert(kvtk_cache* cache, uint64_t key, uint32_t size,
                                         kvtk_access_result* out_result,
                                         uint32_t* out_slot) KVTK_C_NOEXCEPT;
/** As kvtk_cache_insert with a hint (NULL: kvtk_access_hint_default()). */
KVTK_C_API kvtk_status kvtk_cache_insert_hinted(kvtk_cache* cache, uint64_t key, uint32_t size,
                                                const kvtk_access_hint* hint,
                                                kvtk_access_result* out_result,
                                                uint32_t* out_slot) KVTK_C_NOEXCEPT;

/** 1 when `key` is resident, else 0 (also for a NULL handle). No policy update, no counters. */
KVTK_C_API int32_t kvtk_cache_contains(const kvtk_cache* cache, uint64_t key) KVTK_C_NOEXCEPT;
/** The slot of a resident key, or KVTK_NPOS. No policy update, no counters. */
KVTK_C_API uint32_t kvtk_cache_find(const kvtk_cache* cache, uint64_t key) KVTK_C_NOEXCEPT;

/** Increments the pin count of a resident key; a pinned entry is never evicted (an access that
 *  needs its room is rejected instead). Errors: KVTK_ERR_NOT_FOUND, KVTK_ERR_PIN_LIMIT. */
KVTK_C_API kvtk_status kvtk_cache_pin(kvtk_cache* cache, uint64_t key) KVTK_C_NOEXCEPT;
/** Decrements the pin count. Errors: KVTK_ERR_NOT_FOUND, KVTK_ERR_NOT_PINNED. */
KVTK_C_API kvtk_status kvtk_cache_unpin(kvtk_cache* cache, uint64_t key) KVTK_C_NOEXCEPT;
/** Removes a resident, unpinned key without calling the eviction callback (the caller asked for
 *  it). Errors: KVTK_ERR_NOT_FOUND, KVTK_ERR_PINNED. */
KVTK_C_API kvtk_status kvtk_cache_erase(kvtk_cache* cache, uint64_t key) KVTK_C_NOEXCEPT;
/** Evicts n unpinned entries in the policy's victim order, calling the eviction callback for each
 *  (as capacity evictions do), or, when fewer than n entries are unpinned, evicts nothing and
 *  returns KVTK_ERR_NOT_ENOUGH_UNPINNED (all or nothing). n = 0 succeeds and does nothing. */
KVTK_C_API kvtk_status kvtk_cache_evict(kvtk_cache* cache, size_t n) KVTK_C_NOEXCEPT;

/** Resident entries. */
KVTK_C_API size_t kvtk_cache_size(const kvtk_cache* cache) KVTK_C_NOEXCEPT;
/** Capacity in size units, as created. */
KVTK_C_API uint64_t kvtk_cache_capacity(const kvtk_cache* cache) KVTK_C_NOEXCEPT;
/** Size units in use (the sum of the resident entries' sizes). */
KVTK_C_API uint64_t kvtk_cache_used(const kvtk_cache* cache) KVTK_C_NOEXCEPT;
/** Resident entries with a pin count > 0. */
KVTK_C_API size_t kvtk_cache_pinned(const kvtk_cache* cache) KVTK_C_NOEXCEPT;
/** The policy's registry name, a static string (the same pointer kvtk_policy_name gives). */
KVTK_C_API const char* kvtk_cache_policy(const kvtk_cache* cache) KVTK_C_NOEXCEPT;
/** Copies the counters into *out. Errors: KVTK_ERR_INVALID_ARGUMENT (out NULL). */
KVTK_C_API kvtk_status kvtk_cache_stats(const kvtk_cache* cache, kvtk_stats* out) KVTK_C_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KVTK_C_KVTK_H */
