// sim/api/pricing.hpp — the price tables `kvtk cost`, `replay --pricing` and `simulate --pricing`
// read, and the `cost` object they attach.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvtk/cost/pricing.hpp"

namespace kvtk::sim {

/// A price table from a preset name or a JSON file {"name", "hit", "miss", "output",
/// "valid_from", "valid_to", "offpeak_start_utc", "offpeak_end_utc", "offpeak_discount"}.
/// `storage` keeps the file's strings alive. Throws usage_error naming the problem.
kvtk::cost::price_table load_price_table(const std::string& name_or_file,
                                         std::vector<std::string>& storage);

/// The API-view cost object for token counts (with the assumptions spelled out).
nlohmann::json api_cost_json(const kvtk::cost::price_table& p, const kvtk::cost::token_counts& t,
                             double offpeak_share);

}  // namespace kvtk::sim
