// The cost model: DeepSeek's day-6 disclosure as a golden check, preset arithmetic,
// monotonicity, off-peak windows, break-even on a curve with a known answer.
#include <catch2/catch.hpp>
#include <cmath>
#include <kvtk/cost/pricing.hpp>
#include <kvtk/cost/self_hosted.hpp>
#include <vector>

#include "des/profiles.hpp"

using namespace kvtk::cost;

TEST_CASE("DeepSeek day 6: revenue at R1 prices, cost-profit margin, saving", "[cost]") {
  // 608B input tokens, 342B (56.3 %) from the disk cache, 168B output tokens, per day.
  const auto r1 = *find_price_table("deepseek-r1");
  const api_bill b = bill(r1, {342e9, 266e9, 168e9});
  CHECK(b.with_cache_usd == Approx(562100.0).epsilon(1e-12));
  CHECK(std::abs(b.with_cache_usd - 562027.0) / 562027.0 < 0.0002);  // the stated figure
  const double cost = 226.75 * 8 * 2.0 * 24;  // H800 nodes x GPUs x $/GPU-hour x hours
  CHECK(cost == 87072.0);
  const double margin = (b.with_cache_usd - cost) / cost;
  CHECK(margin == Approx(5.455).epsilon(0.001));  // the disclosure's ~545 %
  CHECK(b.without_cache_usd == Approx(702320.0).epsilon(1e-12));
  CHECK(b.saving_usd == Approx(140220.0).epsilon(1e-12));
  CHECK(b.blended_input_usd_per_m == Approx((342 * 0.14 + 266 * 0.55) / 608).epsilon(1e-12));
}

TEST_CASE("every preset's arithmetic", "[cost]") {
  for (const auto& p : price_presets) {
    INFO(p.name);
    const api_bill b = bill(p, {1e6, 1e6, 1e6});
    CHECK(b.with_cache_usd == Approx(p.hit + p.miss + p.output));
    CHECK(b.without_cache_usd == Approx(2 * p.miss + p.output));
    CHECK(p.hit <= p.miss);
    CHECK_FALSE(p.valid_from.empty());
  }
  CHECK(find_price_table("deepseek-v3")->miss == 0.27);
  CHECK(find_price_table("deepseek-v3.1")->miss == 0.56);
  CHECK(find_price_table("deepseek-v3.2")->hit == 0.028);
  CHECK_FALSE(find_price_table("gpt-5").has_value());
}

TEST_CASE("a higher hit ratio never raises the bill", "[cost]") {
  for (const auto& p : price_presets) {
    double last = 1e300;
    for (int hit = 0; hit <= 100; ++hit) {
      const double b = bill(p, {hit * 1e7, (100 - hit) * 1e7, 5e8}).with_cache_usd;
      REQUIRE(b <= last);
      last = b;
    }
  }
}

TEST_CASE("off-peak windows and bad input", "[cost]") {
  const auto r1 = *find_price_table("deepseek-r1");
  CHECK(bill(r1, {1e6, 1e6, 1e6}, 1.0).with_cache_usd ==
        Approx(0.25 * (0.14 + 0.55 + 2.19)));
  CHECK(in_offpeak(r1, 16 * 60 + 30));
  CHECK(in_offpeak(r1, 0));
  CHECK_FALSE(in_offpeak(r1, 30));
  CHECK_FALSE(in_offpeak(r1, 12 * 60));
  CHECK_THROWS_WITH(bill(r1, {-1, 0, 0}), Catch::Contains("token counts"));
  CHECK_THROWS_WITH(bill(r1, {1, 1, 1}, 1.5), Catch::Contains("off-peak share"));
}

TEST_CASE("break-even capacity on a curve with a known answer", "[cost]") {
  // H(c) = A (1 - exp(-c / k)): the marginal hit tokens per block are A/k exp(-c/k), so the last
  // block that pays is c* = k ln(A v / (k u)) for value v per hit token and cost u per block.
  const double A = 1e9, k = 5000, v = 2e-7, u = 0.01;
  std::vector<curve_point> curve;
  for (double c = 0; c <= 100000; c += 10) curve.push_back({c, A * (1 - std::exp(-c / k))});
  const double want = k * std::log(A * v / (k * u));
  const double got = break_even_capacity(curve, v, u);
  CHECK(std::abs(got - want) <= 10);
  CHECK(break_even_capacity(curve, v, 1e9) == 0);      // nothing pays
  CHECK(break_even_capacity(curve, v, 0) == 100000);   // free capacity: all of it
  CHECK_THROWS(break_even_capacity({}, v, u));
}

TEST_CASE("self-hosted FLOPs match the simulator's model", "[cost]") {
  const auto& m = kvtk::sim::des::model_presets().at("deepseek-v3");
  compute_profile c;
  c.active_params = m.active_params;
  c.layers = m.layers;
  c.hidden = m.hidden;
  c.tflops = 989;
  for (auto [cached, total] : {std::pair{0.0, 4096.0}, {1024.0, 8192.0}, {512.0, 513.0}}) {
    CHECK(prefill_flops(c, cached, total) ==
          Approx(kvtk::sim::des::prefill_flops(m, static_cast<std::uint64_t>(cached),
                                               static_cast<std::uint64_t>(total))));
  }
  // A hit of the first 4k tokens of an 8k prompt saves more than half of the linear FLOPs (the
  // attention over early positions is cheaper than over late ones, so less than half of those).
  const double all = prefill_flops(c, 0, 8192), rest = prefill_flops(c, 4096, 8192);
  CHECK(all - rest < all / 2);
  CHECK(gpu_seconds(c, 989e12 * 0.5) == Approx(1.0));
  CHECK(tier_usd({1e12, 0.1, 0, 0, 0}, 30) == Approx(100.0));
  CHECK(tier_usd({1e12, 0, 2e12, 1000, 500}, 30) == Approx(1.0));  // 2 TB of 1000 TBW x $500
}
