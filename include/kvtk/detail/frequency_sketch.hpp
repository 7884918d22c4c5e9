// kvtk/detail/frequency_sketch.hpp — TinyLFU's approximate frequency counter
// (Einziger, Friedman & Manes, "TinyLFU", ACM ToS 2017).
//
// Design
// ------
// * Count-min sketch of 4 * bit_ceil(expected_entries) saturating 4-bit counters (held one per
//   byte), laid out in 64-byte blocks. A key maps to one block (top bits of h = mix64(key)) and to
//   4 counters inside it (four 6-bit fields of h's low bits): every increment or estimate touches
//   exactly one cache line (the "blocked" layout Caffeine also uses), which is what makes
//   admission cheap on replay workloads.
// * Doorkeeper: a Bloom filter (2 probes, 4 bits per expected entry). The first occurrence of a
//   key in a sample period only sets its doorkeeper bits; later occurrences increment the sketch.
//   estimate = min over rows + (1 if the doorkeeper holds the key).
// * Aging ("reset"): after sample_size increments every counter is halved, the doorkeeper is
//   cleared and the increment count is halved; old popularity fades.
// All memory is allocated by the constructor.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "kvtk/detail/mix.hpp"

namespace kvtk::detail {


class frequency_sketch {
 public:
  static constexpr int rows = 4;
  static constexpr std::uint8_t max_count = 15;

  /// Requires: expected_entries > 0, sample_size > 0.  Throws: std::invalid_argument, bad_alloc.
  frequency_sketch(std::uint32_t expected_entries, std::uint64_t sample_size, bool doorkeeper)
      : sample_size_(sample_size), use_doorkeeper_(doorkeeper) {
    if (expected_entries == 0 || sample_size == 0) {
      throw std::invalid_argument("frequency_sketch: sizes must be positive");
    }
    const std::uint64_t blocks =
        std::max<std::uint64_t>(std::bit_ceil(std::uint64_t{expected_entries}) * rows / 64, 2);
    shift_ = 64 - static_cast<unsigned>(std::countr_zero(blocks));
    counters_.assign(blocks * 64, 0);
    const std::uint64_t bits = std::bit_ceil(std::uint64_t{expected_entries} * 4);
    door_.assign(std::max<std::uint64_t>(bits / 64, 1), 0);
    door_mask_ = door_.size() * 64 - 1;
  }

  /// Effects: records one occurrence of key; may trigger aging.  Complexity: O(1) (aging is
  /// O(width) once per sample_size increments).
  void increment(std::uint64_t key) noexcept {
    const std::uint64_t h = mix64(key);
    if (use_doorkeeper_ && !door_test_and_set(h)) {
      // first sighting in this period: the doorkeeper absorbs it
    } else {
      std::uint8_t* block = &counters_[(h >> shift_) * 64];
      for (int i = 0; i < rows; ++i) {
        std::uint8_t& c = block[(h >> (6 * i)) & 63];
        if (c < max_count) ++c;
      }
    }
    if (++additions_ >= sample_size_) age();
  }

  /// Effects: the estimated count of key (never below the true count since the last aging, up to
  /// saturation).  Complexity: O(1).
  [[nodiscard]] std::uint32_t estimate(std::uint64_t key) const noexcept {
    const std::uint64_t h = mix64(key);
    const std::uint8_t* block = &counters_[(h >> shift_) * 64];
    std::uint32_t m = max_count;
    for (int i = 0; i < rows; ++i) m = std::min<std::uint32_t>(m, block[(h >> (6 * i)) & 63]);
    if (use_doorkeeper_ && door_test(h)) ++m;
    return m;
  }

  [[nodiscard]] std::uint64_t additions() const noexcept { return additions_; }
  [[nodiscard]] std::uint64_t sample_size() const noexcept { return sample_size_; }
  [[nodiscard]] std::uint64_t resets() const noexcept { return resets_; }

 private:
  // Doorkeeper probes: bits 24.. and 44.. of h (disjoint from the counter fields).
  [[nodiscard]] bool door_test(std::uint64_t h) const noexcept {
    const std::uint64_t a = (h >> 24) & door_mask_, b = (h >> 44) & door_mask_;
    return ((door_[a >> 6] >> (a & 63)) & 1) && ((door_[b >> 6] >> (b & 63)) & 1);
  }
  // Returns whether the key was already present, and sets its bits.
  bool door_test_and_set(std::uint64_t h) noexcept {
    const bool present = door_test(h);
    const std::uint64_t a = (h >> 24) & door_mask_, b = (h >> 44) & door_mask_;
    door_[a >> 6] |= std::uint64_t{1} << (a & 63);
    door_[b >> 6] |= std::uint64_t{1} << (b & 63);
    return present;
  }
  void age() noexcept {
    for (std::uint8_t& c : counters_) c = static_cast<std::uint8_t>(c >> 1);
    std::fill(door_.begin(), door_.end(), 0);
    additions_ /= 2;
    ++resets_;
  }

  std::vector<std::uint8_t> counters_;
  std::vector<std::uint64_t> door_;
  std::uint64_t door_mask_ = 0, sample_size_, additions_ = 0, resets_ = 0;
  unsigned shift_ = 0;
  bool use_doorkeeper_;
};

}  // namespace kvtk::detail
