// tests/audit.hpp — full structural audit of a block_cache, run after every operation by the
// conformance suite. Returns an empty string when sound, else what is wrong.
#pragma once

#include <kvtk/kvtk.hpp>
#include <string>
#include <unordered_set>

namespace kvtk::test {

template <class C>
concept has_policy_audit = requires(const C& c) {
  { c.audit() } -> std::convertible_to<const char*>;
};

template <class Cache>
std::string audit(const Cache& cache) {
  std::unordered_set<std::uint32_t> seen;
  std::uint64_t units = 0, pinned_units = 0;
  std::size_t pinned = 0;
  std::string err;
  cache.for_each([&](const auto& n) {
    const std::uint32_t slot = cache.find(n.key);
    if (slot == Cache::npos) {
      err = "linked node's key is not in the table";
      return;
    }
    if (&cache.node(slot) != &n) err = "table slot does not point at the linked node";
    if (!seen.insert(slot).second) err = "node linked twice";
    units += n.size;
    if (n.pins > 0) {
      ++pinned;
      pinned_units += n.size;
    }
  });
  if (!err.empty()) return err;
  if (seen.size() + cache.hidden_entries() != cache.size()) {
    return "resident count != linked + hidden node count";
  }
  if (cache.policy().size() + cache.hidden_entries() != cache.size()) {
    return "policy size != resident count";
  }
  if (cache.hidden_entries() == 0 && units != cache.used()) return "sum of node sizes != used()";
  if (cache.used() > cache.capacity()) return "capacity exceeded";
  if (cache.size() > cache.max_entries()) return "max_entries exceeded";
  if (cache.hidden_entries() == 0 &&
      (pinned != cache.pinned_entries() || pinned_units != cache.pinned_units())) {
    return "pin accounting out of sync";
  }
  if constexpr (has_policy_audit<typename Cache::container_type>) {
    std::string p = cache.policy().audit();
    if (!p.empty()) return p;
  }
  return {};
}

}  // namespace kvtk::test
