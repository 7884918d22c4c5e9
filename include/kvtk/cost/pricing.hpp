// kvtk/cost/pricing.hpp — what a provider charges: input tokens split into cache hits and
// misses, output tokens, each priced per million, with optional off-peak discounts.
//
// Definitions (pinned; tests use them):
//   bill(with cache)    = (hit · p_hit + miss · p_miss + output · p_out) / 10^6
//   bill(without cache) = ((hit + miss) · p_miss + output · p_out) / 10^6
//   saving              = bill(without) − bill(with)
//   blended input price = (hit · p_hit + miss · p_miss) / (hit + miss)   (USD per 1M input tokens)
// With an off-peak window, `offpeak_share` of all tokens (0..1; from arrival times or given) is
// billed at (1 − discount) of the price.
/// Thread safety: values and pure functions (the presets are constexpr).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace kvtk::cost {

/// A price table (USD per 1M tokens).
struct price_table {
  std::string_view name;
  double hit = 0, miss = 0, output = 0;
  std::string_view valid_from, valid_to;  ///< ISO dates of the published prices ("" = open)
  /// Off-peak window in UTC minutes from midnight [start, end) (may wrap midnight) and its
  /// discount (0.5 = half price); discount 0 = no window.
  int offpeak_start_min = 0, offpeak_end_min = 0;
  double offpeak_discount = 0;
  std::string_view source;
};

/// Presets (DeepSeek API price pages; dates are when each table applied).
inline constexpr std::array<price_table, 4> price_presets = {{
    {"deepseek-v3", 0.07, 0.27, 1.10, "2025-02-08", "2025-09-05", 16 * 60 + 30, 30, 0.50,
     "DeepSeek API pricing (deepseek-chat, V3)"},
    {"deepseek-r1", 0.14, 0.55, 2.19, "2025-02-08", "2025-09-05", 16 * 60 + 30, 30, 0.75,
     "DeepSeek API pricing (deepseek-reasoner, R1)"},
    {"deepseek-v3.1", 0.07, 0.56, 1.68, "2025-09-05", "2025-09-29", 0, 0, 0,
     "DeepSeek API pricing (V3.1, off-peak discounts ended)"},
    {"deepseek-v3.2", 0.028, 0.28, 0.42, "2025-09-29", "", 0, 0, 0,
     "DeepSeek API pricing (V3.2-Exp)"},
}};

/// The preset named `name`, or nullopt.
inline std::optional<price_table> find_price_table(std::string_view name) noexcept {
  for (const auto& p : price_presets) {
    if (p.name == name) return p;
  }
  return std::nullopt;
}

struct token_counts {
  double hit = 0, miss = 0, output = 0;  ///< tokens (doubles: day-scale counts exceed 2^53 never)
};

struct api_bill {
  double with_cache_usd = 0, without_cache_usd = 0, saving_usd = 0;
  double blended_input_usd_per_m = 0;  ///< 0 when there is no input
  double saving_fraction = 0;          ///< saving / bill without cache
};

/// Requires: counts finite and >= 0, prices >= 0, 0 <= offpeak_share <= 1.
/// Throws: std::invalid_argument naming the bad value.  Complexity: O(1).
inline api_bill bill(const price_table& p, const token_counts& t, double offpeak_share = 0) {
  for (double v : {t.hit, t.miss, t.output}) {
    if (!(v >= 0) || !std::isfinite(v)) throw std::invalid_argument("token counts must be >= 0");
  }
  for (double v : {p.hit, p.miss, p.output, p.offpeak_discount}) {
    if (!(v >= 0) || !std::isfinite(v)) throw std::invalid_argument("prices must be >= 0");
  }
  if (!(offpeak_share >= 0 && offpeak_share <= 1)) {
    throw std::invalid_argument("off-peak share must be in [0, 1]");
  }
  const double factor = 1.0 - offpeak_share * p.offpeak_discount;
  api_bill b;
  b.with_cache_usd = (t.hit * p.hit + t.miss * p.miss + t.output * p.output) / 1e6 * factor;
  b.without_cache_usd = ((t.hit + t.miss) * p.miss + t.output * p.output) / 1e6 * factor;
  b.saving_usd = b.without_cache_usd - b.with_cache_usd;
  const double in = t.hit + t.miss;
  b.blended_input_usd_per_m = in > 0 ? (t.hit * p.hit + t.miss * p.miss) / in * factor : 0.0;
  b.saving_fraction = b.without_cache_usd > 0 ? b.saving_usd / b.without_cache_usd : 0.0;
  return b;
}

/// Whether UTC minute-of-day `m` falls in the table's off-peak window.
inline bool in_offpeak(const price_table& p, int m) noexcept {
  if (p.offpeak_discount == 0) return false;
  const int s = p.offpeak_start_min, e = p.offpeak_end_min;
  return s <= e ? (m >= s && m < e) : (m >= s || m < e);
}

}  // namespace kvtk::cost
