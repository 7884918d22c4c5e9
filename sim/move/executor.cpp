#include "move/executor.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "kvtk/move/block_pattern.hpp"

namespace kvtk::sim::move {
namespace {

using clock_type = std::chrono::steady_clock;

double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

std::byte* at(executor_state& st, std::size_t tier, std::uint32_t slot) {
  return st.pools[tier]->piece(slot, 0);
}

void check(executor_state& st, const std::byte* p, kvtk::block_key key) {
  if (kvtk::move::check_pattern(p, key, 0, st.block_bytes)) {
    ++st.verified;
  } else {
    ++st.failures;
  }
}

}  // namespace

void executor_observer::staged(std::size_t tier, std::uint32_t slot, kvtk::block_key key) noexcept {
  executor_state& s = *st;
  const std::size_t i = s.staged.size();
  if ((i + 1) * s.block_bytes > s.staging.size()) return;  // sized for the longest request
  const auto t0 = clock_type::now();
  std::memcpy(s.staging.data() + i * s.block_bytes, at(s, tier, slot), s.block_bytes);
  s.links[tier].seconds_up += since(t0);
  for (std::size_t l = tier; l >= 1; --l) ++s.links[l].blocks_up;
  s.staged.emplace_back(key, i);
}

void executor_observer::placed(std::size_t tier, std::uint32_t slot, kvtk::block_key key,
                               bool from_staging) noexcept {
  executor_state& s = *st;
  std::byte* dst = at(s, tier, slot);
  if (from_staging) {
    const auto it = std::find_if(s.staged.begin(), s.staged.end(),
                                 [&](const auto& e) { return e.first == key; });
    if (it == s.staged.end()) {
      ++s.failures;  // a promotion whose bytes were never read
      return;
    }
    std::memcpy(dst, s.staging.data() + it->second * s.block_bytes, s.block_bytes);
    check(s, dst, key);
  } else {
    kvtk::move::fill_pattern(dst, key, 0, s.block_bytes);  // computed by the prefill
    ++s.fresh;
  }
}

void executor_observer::copied(std::size_t from, std::uint32_t from_slot, std::size_t to,
                               std::uint32_t to_slot, kvtk::block_key key) noexcept {
  executor_state& s = *st;
  const auto t0 = clock_type::now();
  std::memcpy(at(s, to, to_slot), at(s, from, from_slot), s.block_bytes);
  s.links[to].seconds_down += since(t0);
  ++s.links[to].blocks_down;
  check(s, at(s, to, to_slot), key);
}

nlohmann::json execute(const kvtk::prefix::prefix_trace_view& t,
                       const kvtk::tier::hierarchy_config& cfg, std::uint64_t block_bytes,
                       kvtk::prefix::partial_block partial) {
  executor_state st;
  st.block_bytes = block_bytes;
  kvtk::move::kv_layout l;
  l.layers = l.parts = l.heads = l.tokens = l.dtype_bytes = 1;
  l.head_dim = static_cast<std::uint32_t>(block_bytes);
  for (const auto& tier : cfg.tiers) st.pools.push_back(std::make_unique<host_pool>(l, tier.capacity_blocks));
  st.links.resize(cfg.tiers.size());
  std::size_t longest = 0;
  for (std::size_t r = 0; r < t.requests(); ++r) longest = std::max(longest, t.cacheable(r, partial).size());
  st.staging.resize(std::max<std::size_t>(longest, 1) * block_bytes);
  using hierarchy = kvtk::tier::tier_hierarchy<kvtk::all_policies, executor_observer>;
  hierarchy h(cfg, executor_observer{&st});
  std::vector<std::uint8_t> served(std::max<std::size_t>(longest, 1));
  kvtk::prefix::prefix_counts c;
  const auto t0 = clock_type::now();
  for (std::size_t r = 0; r < t.requests(); ++r) {
    const auto b = t.cacheable(r, partial);
    const std::uint64_t L = t.input_length[r], bt = t.block_tokens_of(r);
    st.staged.clear();
    kvtk::access_hint hint;
    if (!t.priority.empty()) hint.priority = t.priority[r];
    const std::uint32_t hit = h.process(b, served, hint, [&](std::size_t i) {
      return std::min<std::uint64_t>((i + 1) * bt, L) - std::min<std::uint64_t>(i * bt, L);
    });
    ++c.requests;
    c.block_refs += b.size();
    c.block_hits += hit;
    c.token_refs += L;
    c.token_hits += std::min<std::uint64_t>(hit * bt, L);
  }
  const double wall = since(t0);
  nlohmann::json links = nlohmann::json::array();
  for (std::size_t u = 1; u < cfg.tiers.size(); ++u) {
    const auto& m = st.links[u];
    const auto& spec = cfg.tiers[u];
    const double up_bytes = static_cast<double>(m.blocks_up) * static_cast<double>(block_bytes);
    const double down_bytes = static_cast<double>(m.blocks_down) * static_cast<double>(block_bytes);
    links.push_back(
        {{"link", cfg.tiers[u - 1].name + "<->" + spec.name},
         {"blocks_up", m.blocks_up},
         {"blocks_down", m.blocks_down},
         {"measured_seconds_up", m.seconds_up},
         {"measured_seconds_down", m.seconds_down},
         {"measured_bytes_per_s_up", m.seconds_up > 0 ? up_bytes / m.seconds_up : 0.0},
         {"measured_bytes_per_s_down", m.seconds_down > 0 ? down_bytes / m.seconds_down : 0.0},
         {"predicted_seconds_up", spec.read_bytes_per_s > 0 ? up_bytes / spec.read_bytes_per_s : 0.0},
         {"predicted_seconds_down",
          spec.write_bytes_per_s > 0 ? down_bytes / spec.write_bytes_per_s : 0.0}});
  }
  return {{"requests", c.requests},
          {"block_refs", c.block_refs},
          {"block_hits", c.block_hits},
          {"token_hits", c.token_hits},
          {"block_hit_ratio", c.block_hit_ratio()},
          {"block_bytes", block_bytes},
          {"blocks_computed", st.fresh},
          {"arrivals_verified", st.verified},
          {"integrity_failures", st.failures},
          {"verified", st.failures == 0},
          {"audit", h.audit()},
          {"links", links},
          {"wall_seconds", wall}};
}

}  // namespace kvtk::sim::move
