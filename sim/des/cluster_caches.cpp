// sim/des/cluster_caches.cpp — cache lookups, matching, pinning, in-flight blocks (see des/cluster.hpp).
#include "des/cluster.hpp"

namespace kvtk::sim::des::detail {

std::unique_ptr<kvtk::tier::tier_hierarchy<>> make_tiers(const std::string& policy,
                                                         std::uint64_t hbm, std::uint64_t dram) {
  kvtk::tier::hierarchy_config cfg;
  if (hbm > 0) {
    kvtk::tier::tier_spec t;
    t.name = "hbm";
    t.capacity_blocks = hbm;
    t.policy = policy;
    cfg.tiers.push_back(t);
  }
  if (dram > 0) {
    kvtk::tier::tier_spec t;
    t.name = "dram";
    t.capacity_blocks = dram;
    t.policy = "lru";
    cfg.tiers.push_back(t);
  }
  if (cfg.tiers.empty()) return nullptr;
  cfg.mode = kvtk::tier::inclusion::inclusive;
  cfg.write.kind = kvtk::tier::write_policy::write_through;
  return std::make_unique<kvtk::tier::tier_hierarchy<>>(std::move(cfg));
}

std::unique_ptr<kvtk::tier::tier_hierarchy<>> make_pool(std::uint64_t blocks) {
  kvtk::tier::hierarchy_config cfg;
  kvtk::tier::tier_spec t;
  t.name = "pool";
  t.capacity_blocks = blocks;
  t.policy = "lru";
  cfg.tiers.push_back(t);
  return std::make_unique<kvtk::tier::tier_hierarchy<>>(std::move(cfg));
}

bool cluster::local_has(instance& in, kvtk::block_key k) {
  return in.hbm && in.tiers->holds(0, k);
}

bool cluster::pool_has(kvtk::block_key k) {
  return pool_ && pool_->holds(0, k);
}

bool cluster::dram_has(instance& in, kvtk::block_key k) {
  if (!in.tiers) return false;
  const std::size_t dram = in.hbm ? 1 : 0;
  return dram < in.tiers->tiers() && in.tiers->holds(dram, k);
}

// A block the instance's HBM lacks: counted as a DRAM or pool hit when one of them holds it.
bool cluster::held_below(instance& in, kvtk::block_key k, match_result& m) {
  if (dram_has(in, k)) {
    ++m.dram;
    return true;
  }
  if (pool_has(k)) {
    ++m.pool;
    return true;
  }
  return false;
}

cluster::match_result cluster::match(instance& in, std::span<const kvtk::block_key> b) {
  match_result m;
  for (; m.hit < b.size(); ++m.hit) {
    const kvtk::block_key k = b[m.hit];
    if (!local_has(in, k) && !held_below(in, k, m)) break;
  }
  return m;
}

// match() with HBM, dispatching on its policy once per request (the hot path of a simulation):
// HBM table probes are prefetched a few blocks ahead, and the HBM hits of the run are pinned by
// slot as they are found (their slots are kept for the unpin).
cluster::match_result cluster::match_and_pin_hbm(instance& in, std::span<const kvtk::block_key> b,
                                                 std::vector<std::uint32_t>& pinned) {
  constexpr std::size_t ahead = 8;
  return in.tiers->with_top([&](auto& top) {
    for (std::size_t k = 0; k < std::min(ahead, b.size()); ++k) top.prefetch(b[k]);
    match_result m;
    for (; m.hit < b.size(); ++m.hit) {
      if (m.hit + ahead < b.size()) top.prefetch(b[m.hit + ahead]);
      const kvtk::block_key k = b[m.hit];
      if (const std::uint32_t slot = top.find(k); slot != top.npos) {
        if (top.pin_slot(slot)) pinned.push_back(slot);
      } else if (!held_below(in, k, m)) {
        break;
      }
    }
    return m;
  });
}

std::unordered_map<kvtk::block_key, std::uint32_t>& cluster::in_flight(std::uint32_t i) {
  return pool_ ? pool_in_flight_ : prefill_[i].in_flight;
}

void cluster::match_and_pin(std::uint32_t i, std::uint32_t r) {
  instance& in = prefill_[i];
  const auto b = t_.cacheable(r, p_);
  const std::uint64_t L = t_.input_tokens(r);
  auto& pinned = w_.st(r).pinned;
  const match_result m = in.hbm ? match_and_pin_hbm(in, b, pinned) : match(in, b);
  const std::uint64_t h = m.hit;
  auto& flying = in_flight(i);
  std::uint64_t inflight = 0;
  while (h + inflight < b.size() && flying.count(b[h + inflight])) ++inflight;
  request_outcome& o = w_.out(r);
  o.hit_blocks = h;
  o.pool_blocks = m.pool;
  o.dram_blocks = m.dram;
  o.inflight_miss_blocks = inflight;
  o.hit_tokens = kvtk::prefix::tokens_in_blocks(L, bt_, h);
  for (std::uint64_t k = h; k < b.size(); ++k) ++flying[b[k]];
}

}  // namespace kvtk::sim::des::detail
