/* The C example of docs/c_api.md, built against the installed kvtk::policies. */
#include <kvtk/c/kvtk.h>
#include <stdio.h>

/* Called for each block the cache drops: free what the engine keeps in that slot. */
static void on_evict(void* user, uint64_t key, uint32_t slot) {
  unsigned* freed = user;
  ++*freed;
  printf("  evicted block %016llx from slot %u\n", (unsigned long long)key, slot);
}

int main(void) {
  unsigned freed = 0;
  kvtk_cache* cache = NULL;
  kvtk_status s = kvtk_cache_create("s3fifo", 4, 0, on_evict, &freed, &cache);
  if (s != KVTK_OK) {
    fprintf(stderr, "kvtk: %s: %s\n", kvtk_status_string(s), kvtk_last_error());
    return 1;
  }
  /* Two requests sharing a prefix: each is its blocks' hashes in order, accessed in one call. */
  const uint64_t a[3] = {0x9e3779b97f4a7c15u, 0xbf58476d1ce4e5b9u, 0x94d049bb133111ebu};
  const uint64_t b[3] = {0x9e3779b97f4a7c15u, 0xbf58476d1ce4e5b9u, 0x2545f4914f6cdd1du};
  uint8_t hit[3];
  kvtk_cache_access_batch(cache, a, 3, hit);
  kvtk_cache_access_batch(cache, b, 3, hit);
  printf("request b: %d %d %d (1 = hit)\n", hit[0] == KVTK_HIT, hit[1] == KVTK_HIT,
         hit[2] == KVTK_HIT);

  /* Pin b's blocks while it decodes: they cannot be evicted. */
  for (int i = 0; i < 3; ++i) kvtk_cache_pin(cache, b[i]);
  s = kvtk_cache_evict(cache, 2); /* only one unpinned block: refused, nothing evicted */
  printf("evict(2): %s\n", kvtk_status_string(s));
  for (int i = 0; i < 3; ++i) kvtk_cache_unpin(cache, b[i]);
  kvtk_cache_evict(cache, 2);

  kvtk_stats st;
  kvtk_cache_stats(cache, &st);
  printf("%s: %llu hits, %llu misses, %u evicted, %zu resident\n", kvtk_cache_policy(cache),
         (unsigned long long)st.hits, (unsigned long long)st.misses, freed,
         kvtk_cache_size(cache));
  const int ok = st.hits == 2 && st.misses == 4 && freed == 2 && kvtk_cache_size(cache) == 2;
  kvtk_cache_destroy(cache);
  printf("consumer (C ABI): %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
