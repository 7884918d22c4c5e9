/* tests/c_api_test.c — the C ABI (include/kvtk/c/kvtk.h) from plain C: every function, its error
 * paths (NULL handle, NULL arguments, unknown and offline policies, bad capacities, reentrant
 * calls from the eviction callback), exact LRU outcomes and evictions on a known sequence, pins,
 * rejections, sizes, hints, and the batched access against single accesses for every policy.
 * Exits 0 when every check passes, 1 otherwise (each failure printed with its line). */
#include <kvtk/c/kvtk.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#define KVTK_TEST_THREADS 1
#endif

static int failures = 0;
static int checks = 0;

#define CHECK(cond)                                                             \
  do {                                                                          \
    ++checks;                                                                   \
    if (!(cond)) {                                                              \
      ++failures;                                                               \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                           \
  } while (0)

#define CHECK_STATUS(call, expected)                                                     \
  do {                                                                                   \
    const kvtk_status status_ = (call);                                                  \
    ++checks;                                                                            \
    if (status_ != (expected)) {                                                         \
      ++failures;                                                                        \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s (last error: %s)\n", __FILE__, \
              __LINE__, #call, kvtk_status_string(status_), kvtk_status_string(expected), \
              kvtk_last_error());                                                        \
    }                                                                                    \
  } while (0)

#define CHECK_ERROR_MENTIONS(text) CHECK(strstr(kvtk_last_error(), (text)) != NULL)

/* ---- an eviction log ------------------------------------------------------------------------ */

#define LOG_MAX 100000
typedef struct eviction_log {
  size_t n;
  uint64_t keys[LOG_MAX];
  uint32_t slots[LOG_MAX];
} eviction_log;

static void log_eviction(void* user, uint64_t key, uint32_t slot) {
  eviction_log* log = (eviction_log*)user;
  if (log->n < LOG_MAX) {
    log->keys[log->n] = key;
    log->slots[log->n] = slot;
  }
  ++log->n;
}

static eviction_log log_a, log_b;

/* access and return the result; slot through *slot */
static kvtk_access_result acc(kvtk_cache* c, uint64_t key, uint32_t size, uint32_t* slot) {
  kvtk_access_result r = 255;
  uint32_t s = 12345;
  CHECK_STATUS(kvtk_cache_access(c, key, size, &r, &s), KVTK_OK);
  if (slot != NULL) *slot = s;
  return r;
}

static void expect_stats(const kvtk_cache* c, uint64_t hits, uint64_t misses, uint64_t insertions,
                         uint64_t evictions, uint64_t rejections, int line) {
  kvtk_stats s;
  memset(&s, 0xff, sizeof s);
  CHECK_STATUS(kvtk_cache_stats(c, &s), KVTK_OK);
  if (s.hits != hits || s.misses != misses || s.insertions != insertions ||
      s.evictions != evictions || s.rejections != rejections) {
    ++failures;
    fprintf(stderr,
            "%s:%d: stats hits/misses/insertions/evictions/rejections = %llu/%llu/%llu/%llu/%llu, "
            "expected %llu/%llu/%llu/%llu/%llu\n",
            __FILE__, line, (unsigned long long)s.hits, (unsigned long long)s.misses,
            (unsigned long long)s.insertions, (unsigned long long)s.evictions,
            (unsigned long long)s.rejections, (unsigned long long)hits,
            (unsigned long long)misses, (unsigned long long)insertions,
            (unsigned long long)evictions, (unsigned long long)rejections);
  }
  ++checks;
}
#define EXPECT_STATS(c, h, m, i, e, r) expect_stats((c), (h), (m), (i), (e), (r), __LINE__)

/* ---- versions, statuses, policy names ------------------------------------------------------- */

static void test_versions_and_names(void) {
  size_t i, j;
  CHECK(strcmp(kvtk_version(), KVTK_VERSION_STRING) == 0);
  CHECK(kvtk_abi_version() == KVTK_ABI_VERSION);
  {
    char expected[32];
    snprintf(expected, sizeof expected, "%d.%d.%d", KVTK_VERSION_MAJOR, KVTK_VERSION_MINOR,
             KVTK_VERSION_PATCH);
    CHECK(strcmp(kvtk_version(), expected) == 0);
  }

  CHECK(strcmp(kvtk_status_string(KVTK_OK), "KVTK_OK") == 0);
  CHECK(strcmp(kvtk_status_string(KVTK_ERR_NOT_FOUND), "KVTK_ERR_NOT_FOUND") == 0);
  for (i = 1; i <= (size_t)KVTK_ERR_INTERNAL; ++i) {
    CHECK(strncmp(kvtk_status_string((kvtk_status)i), "KVTK_ERR_", 9) == 0);
  }
  CHECK(strcmp(kvtk_status_string(999), "unknown status") == 0);
  CHECK(strcmp(kvtk_status_string(-1), "unknown status") == 0);

  CHECK(kvtk_policy_count() >= 10);
  CHECK(strcmp(kvtk_policy_name(0), "lru") == 0);
  CHECK(kvtk_policy_name(kvtk_policy_count()) == NULL);
  CHECK(kvtk_policy_name((size_t)-1) == NULL);
  for (i = 0; i < kvtk_policy_count(); ++i) {
    const char* name = kvtk_policy_name(i);
    kvtk_cache* c = NULL;
    CHECK(name != NULL);
    if (name == NULL) continue;
    CHECK(strcmp(name, "belady") != 0);
    for (j = 0; j < i; ++j) CHECK(strcmp(name, kvtk_policy_name(j)) != 0);
    /* every listed policy can be created, and the cache reports the same static name */
    CHECK_STATUS(kvtk_cache_create(name, 16, 0, NULL, NULL, &c), KVTK_OK);
    CHECK(c != NULL);
    CHECK(kvtk_cache_policy(c) == name);
    CHECK(acc(c, 1, 1, NULL) == KVTK_INSERTED);
    CHECK(acc(c, 1, 1, NULL) == KVTK_HIT);
    kvtk_cache_destroy(c);
  }
  {
    const char* expected[] = {"lru", "fifo", "clock", "sieve", "lfu", "2q", "arc",
                              "s3fifo", "wtinylfu", "priority-lru", "cost-aware"};
    for (j = 0; j < sizeof expected / sizeof expected[0]; ++j) {
      int found = 0;
      for (i = 0; i < kvtk_policy_count(); ++i) found |= strcmp(kvtk_policy_name(i), expected[j]) == 0;
      CHECK(found);
    }
  }
  {
    kvtk_access_hint h = kvtk_access_hint_default();
    CHECK(h.priority == 35);
    CHECK(h.depth == 0);
    CHECK(h.full_blocks == UINT32_MAX);
  }
}

/* ---- creation errors ------------------------------------------------------------------------ */

static void test_create_errors(void) {
  kvtk_cache* c = (kvtk_cache*)&c; /* not NULL: a failed create must set it to NULL */

  CHECK_STATUS(kvtk_cache_create("lur", 8, 0, NULL, NULL, &c), KVTK_ERR_UNKNOWN_POLICY);
  CHECK(c == NULL);
  CHECK_ERROR_MENTIONS("kvtk_cache_create");
  CHECK_ERROR_MENTIONS("'lur'");
  CHECK_ERROR_MENTIONS("lru"); /* the valid names are listed */
  CHECK_ERROR_MENTIONS("s3fifo");

  c = (kvtk_cache*)&c;
  CHECK_STATUS(kvtk_cache_create("", 8, 0, NULL, NULL, &c), KVTK_ERR_UNKNOWN_POLICY);
  CHECK(c == NULL);
  CHECK_STATUS(kvtk_cache_create("LRU", 8, 0, NULL, NULL, &c), KVTK_ERR_UNKNOWN_POLICY);
  CHECK_ERROR_MENTIONS("'LRU'");

  c = (kvtk_cache*)&c;
  CHECK_STATUS(kvtk_cache_create("belady", 8, 0, NULL, NULL, &c), KVTK_ERR_OFFLINE_POLICY);
  CHECK(c == NULL);
  CHECK_ERROR_MENTIONS("belady");
  CHECK_ERROR_MENTIONS("offline");

  c = (kvtk_cache*)&c;
  CHECK_STATUS(kvtk_cache_create("lru", 0, 0, NULL, NULL, &c), KVTK_ERR_INVALID_ARGUMENT);
  CHECK(c == NULL);
  CHECK_ERROR_MENTIONS("capacity");
  CHECK_STATUS(kvtk_cache_create("arc", 0, 16, NULL, NULL, &c), KVTK_ERR_INVALID_ARGUMENT);
  CHECK_ERROR_MENTIONS("capacity");
  /* capacity >= 2^31 needs max_entries; max_entries must be < 2^31 */
  CHECK_STATUS(kvtk_cache_create("lru", (uint64_t)1 << 31, 0, NULL, NULL, &c),
               KVTK_ERR_INVALID_ARGUMENT);
  CHECK_ERROR_MENTIONS("max_entries");
  CHECK_STATUS(kvtk_cache_create("lru", 8, (uint32_t)1 << 31, NULL, NULL, &c),
               KVTK_ERR_INVALID_ARGUMENT);
  CHECK_ERROR_MENTIONS("max_entries");
  CHECK(c == NULL);

  CHECK_STATUS(kvtk_cache_create(NULL, 8, 0, NULL, NULL, &c), KVTK_ERR_INVALID_ARGUMENT);
  CHECK_ERROR_MENTIONS("policy");
  CHECK_STATUS(kvtk_cache_create("lru", 8, 0, NULL, NULL, NULL), KVTK_ERR_INVALID_ARGUMENT);
  CHECK_ERROR_MENTIONS("out");

  /* A byte capacity far above 2^31 is fine with a bounded node pool. */
  CHECK_STATUS(kvtk_cache_create("lru", (uint64_t)1 << 40, 64, NULL, NULL, &c), KVTK_OK);
  CHECK(kvtk_cache_capacity(c) == (uint64_t)1 << 40);
  kvtk_cache_destroy(c);
}

/* ---- every function with a NULL handle ------------------------------------------------------ */

static void test_null_handle(void) {
  kvtk_access_result r = 77;
  uint32_t slot = 77;
  uint64_t keys[2] = {1, 2};
  uint8_t results[2] = {9, 9};
  kvtk_stats s;
  kvtk_access_hint h = kvtk_access_hint_default();
  memset(&s, 0, sizeof s);

#define CHECK_NULL_HANDLE(call)                          \
  do {                                                   \
    CHECK_STATUS(call, KVTK_ERR_NULL_HANDLE);            \
    CHECK_ERROR_MENTIONS("NULL");                        \
  } while (0)
  CHECK_NULL_HANDLE(kvtk_cache_set_evict_callback(NULL, log_eviction, &log_a));
  CHECK_NULL_HANDLE(kvtk_cache_access(NULL, 1, 1, &r, &slot));
  CHECK_ERROR_MENTIONS("kvtk_cache_access");
  CHECK_NULL_HANDLE(kvtk_cache_access_hinted(NULL, 1, 1, &h, &r, &slot));
  CHECK_NULL_HANDLE(kvtk_cache_access_batch(NULL, keys, 2, results));
  CHECK_ERROR_MENTIONS("kvtk_cache_access_batch");
  CHECK_NULL_HANDLE(kvtk_cache_insert(NULL, 1, 1, &r, &slot));
  CHECK_NULL_HANDLE(kvtk_cache_insert_hinted(NULL, 1, 1, &h, &r, &slot));
  CHECK_NULL_HANDLE(kvtk_cache_pin(NULL, 1));
  CHECK_NULL_HANDLE(kvtk_cache_unpin(NULL, 1));
  CHECK_NULL_HANDLE(kvtk_cache_erase(NULL, 1));
  CHECK_NULL_HANDLE(kvtk_cache_evict(NULL, 1));
  CHECK_NULL_HANDLE(kvtk_cache_stats(NULL, &s));
#undef CHECK_NULL_HANDLE
  /* nothing was written */
  CHECK(r == 77 && slot == 77 && results[0] == 9 && results[1] == 9);

  CHECK(kvtk_cache_contains(NULL, 1) == 0);
  CHECK_ERROR_MENTIONS("kvtk_cache_contains");
  CHECK(kvtk_cache_find(NULL, 1) == KVTK_NPOS);
  CHECK(kvtk_cache_size(NULL) == 0);
  CHECK(kvtk_cache_capacity(NULL) == 0);
  CHECK(kvtk_cache_used(NULL) == 0);
  CHECK(kvtk_cache_pinned(NULL) == 0);
  CHECK(kvtk_cache_policy(NULL) == NULL);
  CHECK_ERROR_MENTIONS("kvtk_cache_policy");
  kvtk_cache_destroy(NULL); /* a no-op */
}

/* ---- LRU: exact outcomes, slots, evictions in order ----------------------------------------- */

static void test_lru_sequence(void) {
  kvtk_cache* c = NULL;
  uint32_t slot = 0;
  kvtk_access_result r = 0;
  memset(&log_a, 0, sizeof log_a);
  CHECK_STATUS(kvtk_cache_create("lru", 3, 0, log_eviction, &log_a, &c), KVTK_OK);
  CHECK(strcmp(kvtk_cache_policy(c), "lru") == 0);
  CHECK(kvtk_cache_capacity(c) == 3);
  CHECK(kvtk_cache_size(c) == 0);

  /* a fresh cache fills slots 0, 1, 2 */
  CHECK(acc(c, 1, 1, &slot) == KVTK_INSERTED && slot == 0);
  CHECK(acc(c, 2, 1, &slot) == KVTK_INSERTED && slot == 1);
  CHECK(acc(c, 3, 1, &slot) == KVTK_INSERTED && slot == 2);
  CHECK(acc(c, 1, 1, &slot) == KVTK_HIT && slot == 0); /* order now 2 3 1 */
  CHECK(log_a.n == 0);
  CHECK(acc(c, 4, 1, &slot) == KVTK_INSERTED && slot == 1); /* evicts 2, reuses its slot */
  CHECK(acc(c, 5, 1, &slot) == KVTK_INSERTED && slot == 2); /* evicts 3 */
  CHECK(acc(c, 2, 1, &slot) == KVTK_INSERTED && slot == 0); /* evicts 1; order 4 5 2 */
  CHECK(acc(c, 4, 1, &slot) == KVTK_HIT && slot == 1);      /* order 5 2 4 */
  CHECK(log_a.n == 3);
  CHECK(log_a.keys[0] == 2 && log_a.slots[0] == 1);
  CHECK(log_a.keys[1] == 3 && log_a.slots[1] == 2);
  CHECK(log_a.keys[2] == 1 && log_a.slots[2] == 0);
  EXPECT_STATS(c, 2, 6, 6, 3, 0);
  CHECK(kvtk_cache_size(c) == 3);
  CHECK(kvtk_cache_used(c) == 3);
  CHECK(kvtk_cache_contains(c, 5) == 1 && kvtk_cache_contains(c, 1) == 0);
  CHECK(kvtk_cache_find(c, 2) == 0 && kvtk_cache_find(c, 4) == 1 && kvtk_cache_find(c, 5) == 2);
  CHECK(kvtk_cache_find(c, 3) == KVTK_NPOS);
  EXPECT_STATS(c, 2, 6, 6, 3, 0); /* contains and find count nothing */

  /* out-parameters are optional */
  CHECK_STATUS(kvtk_cache_access(c, 5, 1, NULL, NULL), KVTK_OK); /* hit; order 2 4 5 */
  CHECK_STATUS(kvtk_cache_access(c, 5, 1, &r, NULL), KVTK_OK);
  CHECK(r == KVTK_HIT);
  CHECK_STATUS(kvtk_cache_access(c, 5, 1, NULL, &slot), KVTK_OK);
  CHECK(slot == 2);
  EXPECT_STATS(c, 5, 6, 6, 3, 0);

  /* evict(n): victims in LRU order, with callbacks; all or nothing */
  CHECK_STATUS(kvtk_cache_evict(c, 0), KVTK_OK);
  CHECK_STATUS(kvtk_cache_evict(c, 4), KVTK_ERR_NOT_ENOUGH_UNPINNED);
  CHECK_ERROR_MENTIONS("kvtk_cache_evict");
  CHECK(kvtk_cache_size(c) == 3 && log_a.n == 3);
  CHECK_STATUS(kvtk_cache_evict(c, 2), KVTK_OK);
  CHECK(log_a.n == 5 && log_a.keys[3] == 2 && log_a.keys[4] == 4);
  CHECK(kvtk_cache_size(c) == 1 && kvtk_cache_contains(c, 5));
  EXPECT_STATS(c, 5, 6, 6, 5, 0);

  /* erase: no callback, no counters */
  CHECK_STATUS(kvtk_cache_erase(c, 5), KVTK_OK);
  CHECK_STATUS(kvtk_cache_erase(c, 5), KVTK_ERR_NOT_FOUND);
  CHECK_ERROR_MENTIONS("5");
  CHECK(kvtk_cache_size(c) == 0 && log_a.n == 5);
  EXPECT_STATS(c, 5, 6, 6, 5, 0);

  /* insert: admits without a miss; a resident key is reported as a hit without counting one */
  CHECK_STATUS(kvtk_cache_insert(c, 10, 1, &r, &slot), KVTK_OK);
  CHECK(r == KVTK_INSERTED && slot != KVTK_NPOS);
  CHECK_STATUS(kvtk_cache_insert(c, 10, 1, &r, NULL), KVTK_OK);
  CHECK(r == KVTK_HIT);
  CHECK_STATUS(kvtk_cache_insert(c, 11, 1, NULL, NULL), KVTK_OK);
  EXPECT_STATS(c, 5, 6, 8, 5, 0);
  /* insert does not refresh the LRU order: 10 stays the oldest */
  CHECK(acc(c, 12, 1, NULL) == KVTK_INSERTED);
  CHECK(acc(c, 13, 1, NULL) == KVTK_INSERTED);
  CHECK(log_a.n == 6 && log_a.keys[5] == 10);
  kvtk_cache_destroy(c);
  CHECK(log_a.n == 6); /* destroy calls no callback */
}

/* ---- pins ----------------------------------------------------------------------------------- */

static void test_pins(void) {
  kvtk_cache* c = NULL;
  uint32_t slot = 0;
  kvtk_access_result r = 0;
  int i;
  memset(&log_a, 0, sizeof log_a);
  CHECK_STATUS(kvtk_cache_create("lru", 3, 0, log_eviction, &log_a, &c), KVTK_OK);
  acc(c, 1, 1, NULL);
  acc(c, 2, 1, NULL);
  acc(c, 3, 1, NULL); /* order 1 2 3 */

  CHECK_STATUS(kvtk_cache_pin(c, 1), KVTK_OK);
  CHECK(kvtk_cache_pinned(c) == 1);
  CHECK(acc(c, 4, 1, NULL) == KVTK_INSERTED); /* 1 is pinned: 2 goes */
  CHECK(log_a.n == 1 && log_a.keys[0] == 2);
  CHECK_STATUS(kvtk_cache_evict(c, 1), KVTK_OK); /* skips 1 again: 3 goes */
  CHECK(log_a.n == 2 && log_a.keys[1] == 3);
  CHECK_STATUS(kvtk_cache_evict(c, 2), KVTK_ERR_NOT_ENOUGH_UNPINNED); /* only 4 is unpinned */
  CHECK(log_a.n == 2 && kvtk_cache_size(c) == 2);

  /* everything pinned: a new key is rejected and nothing changes */
  CHECK_STATUS(kvtk_cache_pin(c, 4), KVTK_OK);
  CHECK(acc(c, 5, 1, &slot) == KVTK_INSERTED); /* a free slot remains */
  CHECK_STATUS(kvtk_cache_pin(c, 5), KVTK_OK);
  CHECK(kvtk_cache_pinned(c) == 3);
  EXPECT_STATS(c, 0, 5, 5, 2, 0);
  CHECK(acc(c, 6, 1, &slot) == KVTK_REJECTED && slot == KVTK_NPOS);
  CHECK_STATUS(kvtk_cache_insert(c, 7, 1, &r, &slot), KVTK_OK);
  CHECK(r == KVTK_REJECTED && slot == KVTK_NPOS);
  CHECK(kvtk_cache_contains(c, 6) == 0 && kvtk_cache_contains(c, 7) == 0);
  CHECK(kvtk_cache_size(c) == 3 && log_a.n == 2);
  EXPECT_STATS(c, 0, 6, 5, 2, 2);
  CHECK_STATUS(kvtk_cache_evict(c, 1), KVTK_ERR_NOT_ENOUGH_UNPINNED);
  CHECK(acc(c, 1, 1, NULL) == KVTK_HIT); /* a pinned key still hits; order 4 5 1 */

  /* erase and unpin errors */
  CHECK_STATUS(kvtk_cache_erase(c, 4), KVTK_ERR_PINNED);
  CHECK_ERROR_MENTIONS("pinned");
  CHECK(kvtk_cache_contains(c, 4));
  CHECK_STATUS(kvtk_cache_pin(c, 99), KVTK_ERR_NOT_FOUND);
  CHECK_ERROR_MENTIONS("99");
  CHECK_STATUS(kvtk_cache_unpin(c, 99), KVTK_ERR_NOT_FOUND);
  CHECK_STATUS(kvtk_cache_erase(c, 99), KVTK_ERR_NOT_FOUND);

  /* pin counts: two pins need two unpins */
  CHECK_STATUS(kvtk_cache_pin(c, 4), KVTK_OK);
  CHECK_STATUS(kvtk_cache_unpin(c, 4), KVTK_OK);
  CHECK(acc(c, 6, 1, NULL) == KVTK_REJECTED); /* 4 still pinned once */
  CHECK_STATUS(kvtk_cache_unpin(c, 4), KVTK_OK);
  CHECK_STATUS(kvtk_cache_unpin(c, 4), KVTK_ERR_NOT_PINNED);
  CHECK_ERROR_MENTIONS("not pinned");
  CHECK(kvtk_cache_pinned(c) == 2);
  CHECK(acc(c, 6, 1, NULL) == KVTK_INSERTED); /* 4, the only unpinned entry, goes */
  CHECK(log_a.n == 3 && log_a.keys[2] == 4);

  /* unpinned again, an entry is a victim again */
  CHECK_STATUS(kvtk_cache_unpin(c, 1), KVTK_OK);
  CHECK_STATUS(kvtk_cache_unpin(c, 5), KVTK_OK);
  CHECK(kvtk_cache_pinned(c) == 0);
  CHECK_STATUS(kvtk_cache_evict(c, 3), KVTK_OK); /* order 5 1 6 */
  CHECK(log_a.n == 6 && log_a.keys[3] == 5 && log_a.keys[4] == 1 && log_a.keys[5] == 6);

  /* many pins of one key */
  acc(c, 8, 1, NULL);
  for (i = 0; i < 1000; ++i) CHECK_STATUS(kvtk_cache_pin(c, 8), KVTK_OK);
  CHECK(kvtk_cache_pinned(c) == 1);
  for (i = 0; i < 999; ++i) kvtk_cache_unpin(c, 8);
  CHECK_STATUS(kvtk_cache_erase(c, 8), KVTK_ERR_PINNED);
  CHECK_STATUS(kvtk_cache_unpin(c, 8), KVTK_OK);
  CHECK_STATUS(kvtk_cache_erase(c, 8), KVTK_OK);
  kvtk_cache_destroy(c);
}

/* ---- sizes: a unit capacity with a bounded node pool ---------------------------------------- */

static void test_sizes(void) {
  kvtk_cache* c = NULL;
  uint32_t slot = 0;
  memset(&log_a, 0, sizeof log_a);
  CHECK_STATUS(kvtk_cache_create("lru", 100, 4, log_eviction, &log_a, &c), KVTK_OK);
  CHECK(acc(c, 1, 60, NULL) == KVTK_INSERTED);
  CHECK(kvtk_cache_used(c) == 60);
  CHECK(acc(c, 2, 50, NULL) == KVTK_INSERTED); /* 1 goes to make room */
  CHECK(log_a.n == 1 && log_a.keys[0] == 1);
  CHECK(kvtk_cache_used(c) == 50);
  CHECK(acc(c, 3, 101, &slot) == KVTK_REJECTED && slot == KVTK_NPOS); /* larger than capacity */
  CHECK(acc(c, 3, 0, &slot) == KVTK_REJECTED && slot == KVTK_NPOS);   /* size 0 */
  CHECK(log_a.n == 1 && kvtk_cache_used(c) == 50);
  CHECK(acc(c, 2, 7, NULL) == KVTK_HIT); /* a hit keeps the entry's size */
  CHECK(kvtk_cache_used(c) == 50);
  CHECK(acc(c, 4, 10, NULL) == KVTK_INSERTED);
  CHECK(acc(c, 5, 10, NULL) == KVTK_INSERTED);
  CHECK(acc(c, 6, 10, NULL) == KVTK_INSERTED);
  CHECK(kvtk_cache_used(c) == 80 && kvtk_cache_size(c) == 4);
  CHECK(acc(c, 7, 1, NULL) == KVTK_INSERTED); /* units fit, but the 4 slots are full: 2 goes */
  CHECK(log_a.n == 2 && log_a.keys[1] == 2);
  CHECK(kvtk_cache_used(c) == 31 && kvtk_cache_size(c) == 4);
  EXPECT_STATS(c, 1, 8, 6, 2, 2);
  kvtk_cache_destroy(c);
}

/* ---- hints ---------------------------------------------------------------------------------- */

static void test_hints(void) {
  kvtk_cache* c = NULL;
  kvtk_access_hint low = kvtk_access_hint_default(), high = kvtk_access_hint_default();
  kvtk_access_result r = 0;
  uint32_t slot = 0;
  low.priority = 0;
  high.priority = 100;
  memset(&log_a, 0, sizeof log_a);
  CHECK_STATUS(kvtk_cache_create("priority-lru", 2, 0, log_eviction, &log_a, &c), KVTK_OK);
  CHECK_STATUS(kvtk_cache_access_hinted(c, 1, 1, &high, &r, &slot), KVTK_OK);
  CHECK(r == KVTK_INSERTED && slot == 0);
  CHECK_STATUS(kvtk_cache_insert_hinted(c, 2, 1, &low, &r, NULL), KVTK_OK);
  CHECK(r == KVTK_INSERTED);
  CHECK_STATUS(kvtk_cache_access_hinted(c, 1, 1, &high, &r, NULL), KVTK_OK);
  CHECK(r == KVTK_HIT);
  /* LRU would evict 2 anyway; touch 2 last so that only its low priority condemns it */
  CHECK_STATUS(kvtk_cache_access_hinted(c, 2, 1, &low, &r, NULL), KVTK_OK);
  CHECK(r == KVTK_HIT);
  CHECK_STATUS(kvtk_cache_access_hinted(c, 3, 1, &high, &r, NULL), KVTK_OK);
  CHECK(r == KVTK_INSERTED);
  CHECK(log_a.n == 1 && log_a.keys[0] == 2);
  /* a NULL hint is the default one, priority 35: 4 evicts 1 (the older of the two entries of
   * priority 100), then 5 evicts 4 (35 is now the lowest priority) */
  CHECK_STATUS(kvtk_cache_access_hinted(c, 4, 1, NULL, &r, NULL), KVTK_OK);
  CHECK(r == KVTK_INSERTED);
  CHECK_STATUS(kvtk_cache_insert_hinted(c, 5, 1, NULL, &r, NULL), KVTK_OK);
  CHECK(r == KVTK_INSERTED);
  CHECK(log_a.n == 3 && log_a.keys[1] == 1 && log_a.keys[2] == 4);
  kvtk_cache_destroy(c);
}

/* ---- the callback: replaced, removed, reentrant calls refused ------------------------------- */

typedef struct reentry {
  kvtk_cache* self;
  kvtk_cache* other;
  int calls;
  kvtk_status access_status, pin_status, evict_status, set_status;
  size_t size_seen;
  int32_t contains_seen;
  kvtk_access_result other_result;
} reentry;

static void reenter(void* user, uint64_t key, uint32_t slot) {
  reentry* e = (reentry*)user;
  (void)slot;
  ++e->calls;
  e->access_status = kvtk_cache_access(e->self, key + 1000, 1, NULL, NULL);
  e->pin_status = kvtk_cache_pin(e->self, key);
  e->evict_status = kvtk_cache_evict(e->self, 1);
  e->set_status = kvtk_cache_set_evict_callback(e->self, NULL, NULL);
  e->size_seen = kvtk_cache_size(e->self);
  e->contains_seen = kvtk_cache_contains(e->self, key);
  kvtk_cache_destroy(e->self); /* ignored */
  /* another cache may be used */
  CHECK_STATUS(kvtk_cache_access(e->other, key, 1, &e->other_result, NULL), KVTK_OK);
}

static void test_callbacks(void) {
  kvtk_cache* c = NULL;
  reentry e;
  memset(&e, 0, sizeof e);
  memset(&log_a, 0, sizeof log_a);
  memset(&log_b, 0, sizeof log_b);

  /* no callback at creation, then one, then another, then none */
  CHECK_STATUS(kvtk_cache_create("fifo", 1, 0, NULL, NULL, &c), KVTK_OK);
  acc(c, 1, 1, NULL);
  acc(c, 2, 1, NULL); /* evicts 1, no callback */
  CHECK_STATUS(kvtk_cache_set_evict_callback(c, log_eviction, &log_a), KVTK_OK);
  acc(c, 3, 1, NULL); /* evicts 2 */
  CHECK_STATUS(kvtk_cache_set_evict_callback(c, log_eviction, &log_b), KVTK_OK);
  acc(c, 4, 1, NULL); /* evicts 3 */
  CHECK_STATUS(kvtk_cache_set_evict_callback(c, NULL, &log_b), KVTK_OK);
  acc(c, 5, 1, NULL); /* evicts 4, no callback */
  CHECK(log_a.n == 1 && log_a.keys[0] == 2);
  CHECK(log_b.n == 1 && log_b.keys[0] == 3);
  EXPECT_STATS(c, 0, 5, 5, 4, 0);

  /* calls back into the same cache are refused; the cache stays consistent */
  CHECK_STATUS(kvtk_cache_create("lru", 8, 0, NULL, NULL, &e.other), KVTK_OK);
  e.self = c;
  CHECK_STATUS(kvtk_cache_set_evict_callback(c, reenter, &e), KVTK_OK);
  CHECK(acc(c, 6, 1, NULL) == KVTK_INSERTED); /* evicts 5 */
  CHECK(e.calls == 1);
  CHECK(e.access_status == KVTK_ERR_REENTRANT);
  CHECK(e.pin_status == KVTK_ERR_REENTRANT);
  CHECK(e.evict_status == KVTK_ERR_REENTRANT);
  CHECK(e.set_status == KVTK_ERR_REENTRANT);
  CHECK(e.size_seen == 0 && e.contains_seen == 0);
  CHECK(e.other_result == KVTK_INSERTED);
  CHECK(kvtk_cache_contains(e.other, 5) == 1);
  CHECK_ERROR_MENTIONS("kvtk_cache_destroy"); /* the last refused call */
  CHECK_ERROR_MENTIONS("eviction callback");
  /* the cache is alive and usable after the callback returned */
  CHECK(kvtk_cache_size(c) == 1 && kvtk_cache_contains(c, 6) == 1);
  CHECK(kvtk_cache_contains(c, 1005) == 0);
  CHECK_STATUS(kvtk_cache_evict(c, 1), KVTK_OK); /* through the callback again */
  CHECK(e.calls == 2 && kvtk_cache_size(c) == 0);
  EXPECT_STATS(c, 0, 6, 6, 6, 0);
  kvtk_cache_destroy(c);
  kvtk_cache_destroy(e.other);
}

/* ---- batched access equals single accesses, every policy ------------------------------------ */

static uint64_t rng_state = 88172645463325252ull;
static uint64_t next_random(void) { /* xorshift64 */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

#define BATCH_KEYS 10000
static uint64_t batch_keys[BATCH_KEYS];
static uint8_t batch_results[BATCH_KEYS];

static void compare_batch(kvtk_cache* batched, kvtk_cache* single, size_t n, const char* name) {
  size_t i, mismatches = 0;
  kvtk_access_hint h = kvtk_access_hint_default();
  memset(batch_results, 0xee, sizeof batch_results);
  CHECK_STATUS(kvtk_cache_access_batch(batched, batch_keys, n, batch_results), KVTK_OK);
  for (i = 0; i < n; ++i) {
    kvtk_access_result r = 255;
    h.depth = (uint32_t)i; /* the batch's hint: depth = index */
    CHECK_STATUS(kvtk_cache_access_hinted(single, batch_keys[i], 1, &h, &r, NULL), KVTK_OK);
    if (r != batch_results[i]) ++mismatches;
  }
  if (mismatches != 0) fprintf(stderr, "%s: %zu batch results differ\n", name, mismatches);
  CHECK(mismatches == 0);
  CHECK(n == BATCH_KEYS || batch_results[n] == 0xee); /* nothing written past n */
}

static void test_batch(void) {
  size_t p, i;
  for (i = 0; i < BATCH_KEYS; ++i) {
    /* skewed keys: small ones are frequent */
    const uint64_t a = next_random() % 1000, b = next_random() % 1000;
    batch_keys[i] = a * b / 2000;
  }
  for (p = 0; p < kvtk_policy_count(); ++p) {
    const char* name = kvtk_policy_name(p);
    kvtk_cache *batched = NULL, *single = NULL;
    kvtk_stats sb, ss;
    memset(&log_a, 0, sizeof log_a);
    memset(&log_b, 0, sizeof log_b);
    CHECK_STATUS(kvtk_cache_create(name, 64, 0, log_eviction, &log_a, &batched), KVTK_OK);
    CHECK_STATUS(kvtk_cache_create(name, 64, 0, log_eviction, &log_b, &single), KVTK_OK);
    compare_batch(batched, single, BATCH_KEYS, name); /* above 4096: heap scratch */
    compare_batch(batched, single, 300, name);        /* the stack buffer; depth restarts */
    compare_batch(batched, single, 1, name);
    CHECK_STATUS(kvtk_cache_access_batch(batched, NULL, 0, NULL), KVTK_OK);
    CHECK_STATUS(kvtk_cache_stats(batched, &sb), KVTK_OK);
    CHECK_STATUS(kvtk_cache_stats(single, &ss), KVTK_OK);
    CHECK(memcmp(&sb, &ss, sizeof sb) == 0);
    CHECK(sb.hits + sb.misses == BATCH_KEYS + 301);
    CHECK(sb.evictions > 0);
    /* the same evictions in the same order */
    CHECK(log_a.n == log_b.n && log_a.n == sb.evictions);
    CHECK(memcmp(log_a.keys, log_b.keys, sizeof(uint64_t) * (log_a.n < LOG_MAX ? log_a.n : LOG_MAX)) == 0);
    CHECK(memcmp(log_a.slots, log_b.slots, sizeof(uint32_t) * (log_a.n < LOG_MAX ? log_a.n : LOG_MAX)) == 0);
    for (i = 0; i < 200; ++i) CHECK(kvtk_cache_find(batched, i) == kvtk_cache_find(single, i));

    /* argument errors change nothing */
    CHECK_STATUS(kvtk_cache_access_batch(batched, NULL, 3, batch_results), KVTK_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("keys");
    CHECK_STATUS(kvtk_cache_access_batch(batched, batch_keys, 3, NULL), KVTK_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("results");
    CHECK_STATUS(kvtk_cache_stats(batched, NULL), KVTK_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(kvtk_cache_stats(batched, &ss), KVTK_OK);
    CHECK(memcmp(&sb, &ss, sizeof sb) == 0);
    kvtk_cache_destroy(batched);
    kvtk_cache_destroy(single);
  }
}

/* ---- the last error is per thread ----------------------------------------------------------- */

#ifdef KVTK_TEST_THREADS
static void* thread_main(void* arg) {
  int* ok = (int*)arg;
  kvtk_cache* c = NULL;
  /* nothing failed on this thread yet, whatever the main thread did */
  ok[0] = strcmp(kvtk_last_error(), "") == 0;
  ok[1] = kvtk_cache_create("nosuch-thread-policy", 8, 0, NULL, NULL, &c) == KVTK_ERR_UNKNOWN_POLICY &&
          strstr(kvtk_last_error(), "nosuch-thread-policy") != NULL;
  return NULL;
}

static void test_threads(void) {
  pthread_t t;
  int ok[2] = {0, 0};
  kvtk_cache* c = NULL;
  CHECK_STATUS(kvtk_cache_create("main-thread-policy", 8, 0, NULL, NULL, &c), KVTK_ERR_UNKNOWN_POLICY);
  CHECK(pthread_create(&t, NULL, thread_main, ok) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  CHECK(ok[0] && ok[1]);
  /* the other thread's failure did not touch this thread's message */
  CHECK_ERROR_MENTIONS("main-thread-policy");
  CHECK(strstr(kvtk_last_error(), "nosuch") == NULL);
}
#endif

int main(void) {
  /* before any failure the message is empty, never NULL */
  CHECK(kvtk_last_error() != NULL && kvtk_last_error()[0] == '\0');
  test_versions_and_names();
  CHECK(kvtk_last_error()[0] == '\0'); /* successful calls leave it unchanged */
  test_create_errors();
  test_null_handle();
  test_lru_sequence();
  test_pins();
  test_sizes();
  test_hints();
  test_callbacks();
  test_batch();
#ifdef KVTK_TEST_THREADS
  test_threads();
#endif
  printf("kvtk C API: %d checks, %d failed (kvtk %s, ABI %u, %zu policies)\n", checks, failures,
         kvtk_version(), (unsigned)kvtk_abi_version(), kvtk_policy_count());
  return failures == 0 ? 0 : 1;
}
