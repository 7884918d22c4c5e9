// kvtk/tier/tier_index.hpp — a tier hierarchy as a prefix-replay index (kvtk::prefix::replay),
// with the per-request load time each lower tier adds.
//
// Load time (bandwidth-bound; queueing and overlap are the discrete-event simulator's job): a
// request that takes m_s blocks of its hit run from lower tier s waits
//     sum over s >= 1 with m_s > 0 of
//         ( latency_s + m_s * read_per_block_s + m_s * block_bytes / read_bytes_per_s ),
// tiers read one after another. Tiers without a bandwidth (0) or an unknown block size add
// latency only.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "kvtk/move/timing_fit.hpp"
#include "kvtk/tier/tier_hierarchy.hpp"

namespace kvtk::tier {

/// Load-time totals over a replay.
struct load_time_counters {
  double total_s = 0;                     ///< summed over requests
  double max_s = 0;                       ///< the slowest request
  std::uint64_t requests_from_lower = 0;  ///< requests that read anything from a lower tier

  /// Adds one request that waited `wait` seconds; `from_lower`: it read a block from below.
  void add(double wait, bool from_lower) noexcept {
    if (wait > 0 || from_lower) {
      total_s += wait;
      max_s = std::max(max_s, wait);
      ++requests_from_lower;
    }
  }
};

/// The load time (above) of a request that reads from[s] blocks of its hit run from tier s.
/// Requires: from.size() >= cfg.tiers.size().  Complexity: O(tiers).  Throws: nothing.
inline double lower_tier_wait(const hierarchy_config& cfg,
                              std::span<const std::uint64_t> from) noexcept {
  double wait = 0;
  for (std::size_t s = 1; s < cfg.tiers.size(); ++s) {
    if (from[s] == 0) continue;
    const tier_spec& t = cfg.tiers[s];
    // The one transfer-time model (kvtk/move/timing_fit.hpp); no bandwidth term without a block
    // size.
    const kvtk::move::timing_model link{t.latency_s, t.read_per_block_s,
                                        cfg.block_bytes > 0 ? t.read_bytes_per_s : 0.0};
    wait += link.predict(static_cast<double>(from[s]),
                         static_cast<double>(from[s]) * static_cast<double>(cfg.block_bytes));
  }
  return wait;
}

/// Thread safety: as block_cache (one index per thread; the trace may be shared).
template <class Policies = all_policies>
class tier_index {
 public:
  static constexpr bool offline = false;
  /// Throws: as tier_hierarchy's constructor.
  explicit tier_index(hierarchy_config cfg) : h_(std::move(cfg)) {}

  /// Called by prefix::replay before process(): the request's input length and block size.
  void begin_request(std::uint64_t input_length, std::uint32_t block_tokens) noexcept {
    input_length_ = input_length;
    block_tokens_ = block_tokens;
  }

  std::uint32_t process(std::span<const block_key> blocks, std::span<const std::uint64_t>,
                        const access_hint& base) {
    if (served_.size() < blocks.size()) served_.resize(blocks.size());  // grows to the longest
    const std::uint64_t L = input_length_, bt = block_tokens_;
    auto tokens_of = [&](std::size_t i) {
      return std::min<std::uint64_t>((i + 1) * bt, L) - std::min<std::uint64_t>(i * bt, L);
    };
    const std::uint32_t hit = h_.process(blocks, served_, base, tokens_of);
    std::array<std::uint64_t, tier_hierarchy<Policies>::max_tiers> from{};
    for (std::uint32_t i = 0; i < hit; ++i) ++from[served_[i]];
    load_.add(lower_tier_wait(h_.config(), from), hit > from[0]);
    return hit;
  }

  [[nodiscard]] std::uint64_t evictions() const noexcept {
    std::uint64_t e = 0;
    for (std::size_t t = 0; t < h_.tiers(); ++t) e += h_.counters(t).drops;
    return e;
  }
  [[nodiscard]] const tier_hierarchy<Policies>& hierarchy() const noexcept { return h_; }
  [[nodiscard]] tier_hierarchy<Policies>& hierarchy() noexcept { return h_; }
  [[nodiscard]] const load_time_counters& load_time() const noexcept { return load_; }

 private:
  tier_hierarchy<Policies> h_;
  std::vector<std::uint8_t> served_;
  load_time_counters load_;
  std::uint64_t input_length_ = 0;
  std::uint32_t block_tokens_ = 1;
};

}  // namespace kvtk::tier
