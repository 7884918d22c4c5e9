// An engine-style user of the installed package: an LRU block cache that frees GPU blocks.
#include <cstdio>
#include <kvtk/kvtk.hpp>

int main() {
  int freed = 0;
  auto on_evict = [&](kvtk::block_key, std::uint32_t) { ++freed; };
  kvtk::block_cache<kvtk::lru, decltype(on_evict)> cache({.capacity = 2}, on_evict);
  cache.access(1);
  cache.access(2);
  cache.access(1);
  cache.access(3);  // evicts 2
  const bool ok = freed == 1 && cache.contains(1) && !cache.contains(2) && cache.contains(3);
  std::printf("consumer: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
