// sim/policies/any_block_cache.cpp — the kvtk::policies library's any_block_cache: the factory and
// one table of operations per policy, so that code including only
// kvtk/cache/any_block_cache_decl.hpp compiles without instantiating the policies itself.
#include "kvtk/cache/any_block_cache_impl.hpp"

namespace kvtk::detail {
template any_cache_parts make_any_block_cache<void>(std::string_view, std::uint64_t,
                                                    std::uint32_t, eviction_function);

// Every policy's block_cache behind any_block_cache, instantiated here once.
template <class... Ps>
constexpr bool all_tables(type_list<Ps...>) {
  return ((any_cache_table<Ps>::ops.destroy != nullptr) && ...);
}
static_assert(all_tables(all_policies{}));
}  // namespace kvtk::detail
