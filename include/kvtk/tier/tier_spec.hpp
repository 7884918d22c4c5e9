// kvtk/tier/tier_spec.hpp — what a tier hierarchy is made of: tiers (capacity, policy, links,
// prices, endurance), inclusion, write policy and admission filters.
//
// Tier 0 is the top (GPU HBM); tier t+1 is below tier t. A tier's link parameters describe the
// path between it and the tier above (for tier 0: unused). Every field documents its unit and
// default; tier_hierarchy validates a hierarchy_config and throws std::invalid_argument naming
// the tier and the field.
/// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvtk::tier {

/// Whether lower tiers keep copies of blocks held above.
enum class inclusion : std::uint8_t {
  /// A block lives in exactly one tier (TensorRT-LLM offload, LRU-over-LRU): eviction demotes,
  /// a lower-tier hit moves the block up.
  exclusive,
  /// Copies written down stay (FlexKV, SGLang HiCache host tier): a lower copy of a block held
  /// above is protected from eviction, a lower-tier hit copies the block up and keeps it below.
  inclusive,
};

/// When blocks are copied from the top tier down (inclusive hierarchies; an exclusive hierarchy
/// always moves blocks down on eviction, i.e. write-back).
struct write_policy {
  enum kind_t : std::uint8_t {
    /// Copy down on eviction only (a block evicted with no copy below is written to the next
    /// tier, never dropped while that tier admits it and can make room).
    write_back,
    /// Copy down the whole hierarchy as soon as the block enters the top tier.
    write_through,
    /// Copy down once the block has been hit `selective_hits` times in the top tier (SGLang's
    /// write_through_selective, threshold 2); a block evicted before that is dropped.
    write_through_selective,
  };
  kind_t kind = write_back;
  /// write_through_selective: hits in the top tier before the copy. Default 2. Must be >= 1.
  std::uint32_t selective_hits = 2;
};

/// Which blocks a lower tier accepts (checked on every write into it: demotion or copy).
struct admission {
  enum kind_t : std::uint8_t {
    always,     ///< accept every block
    frequency,  ///< >= threshold references seen (vLLM's store_threshold), 64k-entry tracker
    tinylfu,    ///< TinyLFU count-min sketch with doorkeeper and aging: estimate >= threshold
    decaying,   ///< exponentially decaying reference count >= threshold (Dynamo-style)
  };
  kind_t kind = always;
  /// frequency / tinylfu / decaying: references needed. Default 2.
  double threshold = 2;
  /// decaying: half-life of a reference's weight, in requests. Default 1000.
  double half_life_requests = 1000;
};

/// One tier.
struct tier_spec {
  std::string name = "tier";  ///< e.g. hbm, dram, ssd, remote (reports only)
  /// Capacity in blocks. Must be in [1, 2^31).
  std::uint64_t capacity_blocks = 0;
  /// Core eviction policy name (registry name, e.g. "lru", "s3fifo", "cost-aware").
  std::string policy = "lru";
  /// Bytes per second read from this tier into the tier above (0 = not modelled: no time).
  double read_bytes_per_s = 0;
  /// Bytes per second written into this tier from above (0 = not modelled).
  double write_bytes_per_s = 0;
  /// Seconds of fixed latency per transfer batch to the tier above. Default 0.
  double latency_s = 0;
  /// Seconds per block read into the tier above, on top of bytes / read_bytes_per_s (the beta of
  /// a calibration fit t = alpha + n*beta + bytes/B: per-copy submission cost). Default 0.
  double read_per_block_s = 0;
  /// Seconds per block written into this tier from above. Default 0.
  double write_per_block_s = 0;
  /// Seconds of fixed cost per write call into this tier (a calibration fit's alpha for the
  /// path down; used by `kvtk move replay`'s prediction, where each block is one call). Default 0.
  double write_latency_s = 0;
  /// Price of capacity, US dollars per GB-month (10^9 bytes). 0 = not priced.
  double usd_per_gb_month = 0;
  /// Rated endurance in terabytes written (10^12 bytes), for SSDs. 0 = not tracked.
  double endurance_tbw = 0;
  /// Filter on writes into this tier (ignored for tier 0).
  admission admit{};
};

/// A whole hierarchy.
struct hierarchy_config {
  std::vector<tier_spec> tiers;  ///< top first; 1..8 tiers
  inclusion mode = inclusion::exclusive;
  write_policy write{};
  /// Bytes per block (KV bytes per token x block tokens), for byte, time and endurance figures.
  /// 0 = unknown: byte figures stay 0 and times are not modelled.
  std::uint64_t block_bytes = 0;
};

}  // namespace kvtk::tier
