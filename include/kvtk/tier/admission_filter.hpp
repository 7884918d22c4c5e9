// kvtk/tier/admission_filter.hpp — the admission filters a lower tier applies to writes into it.
//
// Every block reference the hierarchy sees is recorded (record()) in every lower tier's filter;
// admit() then decides on a write:
//  * always:    true.
//  * frequency: the block has >= threshold recorded references. Counts live in a direct-mapped
//               tracker of 65,536 {key, count} entries (vLLM's FilterReusedOffloadingManager keeps
//               64k entries too); a key that collides with another replaces it and starts over.
//  * tinylfu:   the TinyLFU count-min sketch (4 rows, 4-bit counters, doorkeeper, halving every
//               10 x 65,536 increments) estimates >= threshold. W-TinyLFU's victim comparison
//               needs a victim peek that not every core policy has; give a tier the `wtinylfu`
//               policy for that.
//  * decaying:  score = score · 2^(-(now - last) / half_life) + 1 per reference, in the same
//               tracker; admit when the decayed score >= threshold (Dynamo-style recency-weighted
//               frequency). `now` counts requests.
// No operation allocates after construction.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/frequency_sketch.hpp"
#include "kvtk/tier/tier_spec.hpp"

namespace kvtk::tier {

/// Thread safety: as block_cache: admit() (const) only reads; record() mutates.
class admission_filter {
 public:
  static constexpr std::uint32_t tracker_entries = 1u << 16;

  /// Throws: std::bad_alloc.
  explicit admission_filter(const admission& a)
      : a_(a),
        // Only tinylfu reads the sketch: the others get a token one (a few bytes, not the
        // ~256 KiB of a full one), so a hierarchy per simulated instance stays small.
        sketch_(a.kind == admission::tinylfu ? tracker_entries : 1,
                std::uint64_t{10} * tracker_entries, true),
        tracker_(a.kind == admission::frequency || a.kind == admission::decaying ? tracker_entries
                                                                                 : 0) {}

  /// Records one reference to `key` at request `now`.  Complexity: O(1).  Throws: nothing.
  void record(block_key key, std::uint64_t now) noexcept {
    switch (a_.kind) {
      case admission::always:
        return;
      case admission::tinylfu:
        sketch_.increment(key);
        return;
      case admission::frequency:
      case admission::decaying: {
        entry& e = slot(key);
        if (e.key != key || !e.used) e = {key, 0.0, now, true};
        e.score = decayed(e, now) + 1.0;
        e.last = now;
        return;
      }
    }
  }

  /// Whether a write of `key` at request `now` is admitted.  Complexity: O(1).  Throws: nothing.
  [[nodiscard]] bool admit(block_key key, std::uint64_t now) const noexcept {
    switch (a_.kind) {
      case admission::always:
        return true;
      case admission::tinylfu:
        return static_cast<double>(sketch_.estimate(key)) >= a_.threshold;
      case admission::frequency:
      case admission::decaying: {
        const entry& e = const_cast<admission_filter*>(this)->slot(key);
        return e.used && e.key == key && decayed(e, now) >= a_.threshold;
      }
    }
    return true;
  }

  [[nodiscard]] const admission& spec() const noexcept { return a_; }

 private:
  struct entry {
    block_key key = 0;
    double score = 0;
    std::uint64_t last = 0;
    bool used = false;
  };
  entry& slot(block_key key) noexcept {
    return tracker_[kvtk::detail::mix64(key) & (tracker_entries - 1)];
  }
  [[nodiscard]] double decayed(const entry& e, std::uint64_t now) const noexcept {
    if (a_.kind != admission::decaying || now <= e.last) return e.score;
    return e.score * std::exp2(-static_cast<double>(now - e.last) / a_.half_life_requests);
  }

  admission a_;
  kvtk::detail::frequency_sketch sketch_;
  std::vector<entry> tracker_;
};

}  // namespace kvtk::tier
