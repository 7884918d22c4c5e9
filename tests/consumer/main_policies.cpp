// A user of the compiled library kvtk::policies: only the light declaration is included, and the
// policy is chosen at run time, as an engine reading its configuration would.
#include <cstdio>
#include <kvtk/cache/any_block_cache_decl.hpp>
#include <string_view>

int main(int argc, char** argv) {
  const std::string_view policy = argc > 1 ? argv[1] : "lru";
  int freed = 0;
  kvtk::any_block_cache cache(policy, {.capacity = 2},
                              [&](kvtk::block_key, std::uint32_t) { ++freed; });
  cache.access(1);
  cache.access(2);
  cache.access(1);
  cache.access(3);  // LRU evicts 2
  bool ok = freed == 1 && cache.contains(1) && !cache.contains(2) && cache.contains(3);
  try {
    kvtk::any_block_cache bad("no-such-policy", {.capacity = 2});
    ok = false;
  } catch (const std::exception& e) {
    ok = ok && std::string_view(e.what()).find("no-such-policy") != std::string_view::npos;
  }
  std::printf("consumer (kvtk::policies): %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
