// One program, two forms of any_block_cache: this TU through the light declaration and
// kvtk::policies, header_only_cache.cpp through the header-only form.
#include <cstdio>
#include <kvtk/cache/any_block_cache_decl.hpp>

bool header_only_cache_works();

int main() {
  kvtk::any_block_cache cache("lru", {.capacity = 2});
  cache.access(1);
  cache.access(2);
  cache.access(1);
  cache.access(3);  // LRU evicts 2
  const bool ok = cache.contains(1) && !cache.contains(2) && header_only_cache_works();
  std::printf("consumer (header-only and kvtk::policies mixed): %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
