// kvtk/tier/tier_index.hpp — a tier hierarchy as a prefix-replay index (kvtk::prefix::replay),
// with the per-request load time each lower tier adds: hierarchy_index<Hierarchy>, one body for
// both tops (tier_index<Policies> for the flat top; radix_tier_index<Leaf, Policies>, in
// radix_tier_hierarchy.hpp, for the radix top).
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
#include <utility>
#include <vector>

#include "kvtk/move/timing_fit.hpp"
#include "kvtk/prefix/block_keys.hpp"
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

/// A tier hierarchy (tier_hierarchy, radix_tier_hierarchy, engine_tier_hierarchy: anything with
/// their process(), config(), tiers(), counters() and max_tiers) as a prefix-replay index, with
/// the load time (above) of every request.
/// Thread safety: as block_cache (one index per thread; the trace may be shared).
template <class Hierarchy>
class hierarchy_index {
 public:
  static constexpr bool offline = false;
  /// Effects: the hierarchy of `cfg`, with any further constructor arguments (an observer).
  /// Throws: as Hierarchy's constructor.
  template <class... Args>
  explicit hierarchy_index(hierarchy_config cfg, Args&&... args)
      : h_(std::move(cfg), std::forward<Args>(args)...) {}

  /// Called by prefix::replay before process(): the request's input length and block size.
  void begin_request(std::uint64_t input_length, std::uint32_t block_tokens) noexcept {
    input_length_ = input_length;
    block_tokens_ = block_tokens;
    // An engine top (engine_tier_hierarchy.hpp) caps and allocates by the prompt's length.
    if constexpr (requires { h_.begin_request(input_length, block_tokens); }) {
      h_.begin_request(input_length, block_tokens);
    }
  }

  /// Requires: begin_request for this request.  Effects: the hierarchy's process() of the
  /// request's blocks (its semantics); adds the request's load time. Returns the hit length.
  /// Complexity: the hierarchy's.  Throws: std::bad_alloc (the scratch grows to the longest
  /// request); what the hierarchy's process() throws.
  std::uint32_t process(std::span<const block_key> blocks, std::span<const std::uint64_t>,
                        const access_hint& base) {
    if (served_.size() < blocks.size()) served_.resize(blocks.size());  // grows to the longest
    const std::uint32_t hit = h_.process(blocks, served_, base, [this](std::size_t i) {
      return kvtk::prefix::tokens_in_block(input_length_, block_tokens_, i);
    });
    std::array<std::uint64_t, Hierarchy::max_tiers> from{};
    for (std::uint32_t i = 0; i < hit; ++i) ++from[served_[i]];
    load_.add(lower_tier_wait(h_.config(), from), hit > from[0]);
    return hit;
  }

  /// Blocks that left the hierarchy (drops of every tier; with an engine top, also the GPU's
  /// duplicate copies it dropped).  Complexity: O(tiers).
  [[nodiscard]] std::uint64_t evictions() const noexcept {
    std::uint64_t e = 0;
    for (std::size_t t = 0; t < h_.tiers(); ++t) e += h_.counters(t).drops;
    return e;
  }
  [[nodiscard]] const Hierarchy& hierarchy() const noexcept { return h_; }
  [[nodiscard]] Hierarchy& hierarchy() noexcept { return h_; }
  [[nodiscard]] const load_time_counters& load_time() const noexcept { return load_; }

 private:
  Hierarchy h_;
  std::vector<std::uint8_t> served_;
  load_time_counters load_;
  std::uint64_t input_length_ = 0;
  std::uint32_t block_tokens_ = 1;
};

/// A flat-top tier hierarchy as a replay index.
template <class Policies = all_policies>
using tier_index = hierarchy_index<tier_hierarchy<Policies>>;

}  // namespace kvtk::tier
