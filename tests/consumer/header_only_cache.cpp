// The header-only any_block_cache in a program that also links kvtk::policies (main_mixed.cpp):
// the factory is one template entity in both, so the two forms mix (any_block_cache_decl.hpp).
#include <kvtk/cache/any_block_cache.hpp>

bool header_only_cache_works() {
  int freed = 0;
  kvtk::any_block_cache cache("s3fifo", {.capacity = 2},
                              [&](kvtk::block_key, std::uint32_t) { ++freed; });
  for (kvtk::block_key k = 1; k <= 4; ++k) cache.access(k);
  return freed == 2 && cache.size() == 2;
}
