// Iteration timing of `kvtk simulate` (sim/des/timing.hpp, docs/simulate.md "Timing"): the
// formula with its two efficiencies and overhead (the old single-efficiency model bit for bit),
// measured timing tables (every iteration takes the table's time; interpolation inside,
// extrapolation outside; every kind of bad table), the config keys and the summary.
#include <unistd.h>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <random>
#include <kvtk/kvtk.hpp>

#include "api/simulate.hpp"
#include "cli/common.hpp"
#include "des/simulator.hpp"
#include "des/timing.hpp"

namespace {

using namespace kvtk;
using Catch::Contains;
using sim::des::cluster_config;
using sim::des::timing_table;

// Requests of `tokens[i]` tokens (whole 512-token blocks; keys from `first_key[i]`), all arriving
// at `arrival[i]`, each with `outputs` output tokens.
prefix::prefix_trace requests(const std::vector<std::uint64_t>& tokens,
                              const std::vector<std::uint64_t>& first_key,
                              const std::vector<double>& arrival, std::uint64_t outputs) {
  prefix::prefix_trace t;
  t.block_tokens = 512;
  for (std::size_t r = 0; r < tokens.size(); ++r) {
    std::vector<block_key> keys;
    for (std::uint64_t b = 0; b < tokens[r] / 512; ++b) keys.push_back(first_key[r] + b);
    t.add(keys, static_cast<std::uint32_t>(tokens[r]));
    t.arrival_s.push_back(arrival[r]);
    t.output_length.push_back(outputs);
  }
  return t;
}

// A 2 x 2 x 2 prefill grid and a 2 x 2 decode grid (ms).
constexpr const char* table_csv =
    "# illustrative\n"
    "kind,batch,tokens_per_request,context_tokens,ms\n"
    "prefill,1,1024,0,100\n"
    "prefill,1,1024,4096,140\n"
    "prefill,1,2048,0,180\n"
    "prefill,1,2048,4096,260\n"
    "prefill,2,1024,0,170\n"
    "prefill,2,1024,4096,250\n"
    "prefill,2,2048,0,330\r\n"
    "prefill,2,2048,4096,490\n"
    "\n"
    "decode,1,1,1024,10\n"
    "decode,1,1,8192,14\n"
    "decode,2,1,1024,12\n"
    "decode,2,1,8192,20\n";

std::shared_ptr<const timing_table> table(const char* text = table_csv) {
  return std::make_shared<const timing_table>(timing_table::parse(text, "t.csv"));
}

// A model and GPU with round numbers: 1 TFLOP/s, 100 GB/s, 1e9 parameters, 1000 KV bytes/token.
cluster_config round_numbers() {
  cluster_config c;
  c.model = {"m", 1, 1, 1e9, 1000};
  c.gpu = {"g", 1, 1e11, 80e9, 0, 0.5, 0.25};
  return c;
}

}  // namespace

TEST_CASE("timing: one efficiency and no overhead give the old model bit for bit",
          "[simulate][timing]") {
  // The old expressions (before compute and memory efficiency were split), verbatim.
  cluster_config c;  // deepseek-v3 on an h800
  c.gpu.compute_efficiency = c.gpu.memory_efficiency = 0.5;
  c.time_scale = 1.5;
  const std::uint64_t L = 4096;
  const auto t = requests({L}, {0}, {0.0}, 3);
  const auto res = sim::des::simulate(t, c);
  const double prefill = sim::des::prefill_flops(c.model, 0, L) /
                         (c.gpu.tflops * 1e12 * 0.5 * c.gpus_per_instance) * c.time_scale;
  auto step = [&](std::uint64_t context) {
    return (2.0 * c.model.active_params +
            static_cast<double>(context) * c.model.kv_bytes_per_token) /
           (c.gpu.hbm_bytes_per_s * 0.5 * c.gpus_per_instance) * c.time_scale;
  };
  const auto& o = res.requests[0];
  CHECK(o.first_token == prefill);
  CHECK(o.done == prefill + step(L + 1) + step(L + 2));
  CHECK(res.summary["timing"] == nlohmann::json{{"source", "formula"},
                                                {"compute_efficiency", 0.5},
                                                {"memory_efficiency", 0.5},
                                                {"iteration_overhead_s", 0.0},
                                                {"request_overhead_s", 0.0}});
}

TEST_CASE("timing: efficiencies, overhead and table keys of the config", "[simulate][timing]") {
  auto from = [](nlohmann::json j, const std::vector<std::string>& sets = {}) {
    return sim::cluster_config_from_json(j, 512, sets);
  };
  auto c = from(nlohmann::json::object());
  CHECK(c.gpu.compute_efficiency == 0.67);
  CHECK(c.gpu.memory_efficiency == 0.8);
  CHECK(c.iteration_overhead_s == 0);
  CHECK_FALSE(c.timing);
  c = from({{"efficiency", 0.5}});  // old configs: one knob sets both
  CHECK((c.gpu.compute_efficiency == 0.5 && c.gpu.memory_efficiency == 0.5));
  c = from({{"gpu",
             {{"tflops", 100},
              {"hbm_gb_per_s", 1000},
              {"hbm_gb", 80},
              {"host_link_gb_per_s", 25},
              {"efficiency", 0.4}}}});
  CHECK((c.gpu.compute_efficiency == 0.4 && c.gpu.memory_efficiency == 0.4));
  c = from({{"efficiency", 0.5}, {"compute_efficiency", 0.7}}, {"memory_efficiency=0.9"});
  CHECK((c.gpu.compute_efficiency == 0.7 && c.gpu.memory_efficiency == 0.9));  // separate keys win
  c = from({{"gpu", "a800"}}, {"iteration_overhead_s=0.002", "efficiency=0.6"});
  CHECK((c.gpu.compute_efficiency == 0.6 && c.gpu.memory_efficiency == 0.6));
  CHECK(c.iteration_overhead_s == 0.002);
  CHECK_THROWS_WITH(from({{"compute_efficiency", 0}}),
                    Contains("'compute_efficiency' must be a number in (0, 1]"));
  CHECK_THROWS_WITH(from({{"efficiency", 1.5}}),
                    Contains("'efficiency' must be a number in (0, 1]"));
  CHECK_THROWS_WITH(from(nlohmann::json::object(), {"memory_efficiency=fast"}),
                    Contains("'memory_efficiency' must be"));
  CHECK_THROWS_WITH(from({{"iteration_overhead_s", -1}}),
                    Contains("'iteration_overhead_s' must be finite and >= 0"));
  CHECK_THROWS_WITH(from({{"iteration_overhead_s", 11}}),
                    Contains("'iteration_overhead_s' must be in [0, 10]"));
  CHECK_THROWS_WITH(from({{"timing_table", 3}}), Contains("'timing_table' must be a file name"));
  CHECK_THROWS_AS(from({{"timing_table", "/nonexistent/t.csv"}}), sim::usage_error);
  CHECK_THROWS_WITH(from({{"timing_table", "/nonexistent/t.csv"}}),
                    Contains("timing table /nonexistent/t.csv:0: cannot open"));
  CHECK_FALSE(from({{"timing_table", nullptr}}).timing);
}

TEST_CASE("timing: the formula with an iteration overhead, by hand", "[simulate][timing]") {
  // One request of 1000 tokens, 3 outputs. Prefill FLOPs = 2e9 * 1000 + 4 * (0 + ... + 999) =
  // 2e12 + 1,998,000 at 1e12 * 0.5 FLOP/s = 4.000003996 s, + 0.01 s overhead. Decode steps read
  // 2e9 weight bytes + 1000 bytes per context token (1001, then 1002) at 1e11 * 0.25 B/s:
  // 0.08004004 s and 0.08004008 s, + 0.01 s each.
  cluster_config c = round_numbers();
  c.iteration_overhead_s = 0.01;
  prefix::prefix_trace t;
  t.block_tokens = 500;
  t.add(std::vector<block_key>{1, 2}, 1000);
  t.arrival_s.push_back(0);
  t.output_length.push_back(3);
  auto res = sim::des::simulate(t, c);
  CHECK(res.requests[0].first_token == Approx(4.010003996).epsilon(1e-12));
  CHECK(res.requests[0].done == Approx(4.010003996 + 0.09004004 + 0.09004008).epsilon(1e-12));
  CHECK(res.requests[0].mean_tbt == Approx((0.09004004 + 0.09004008) / 2).epsilon(1e-12));
  CHECK(res.summary["timing"]["iteration_overhead_s"] == 0.01);
  c.time_scale = 2;  // scales the overhead too
  res = sim::des::simulate(t, c);
  CHECK(res.requests[0].done == Approx(2 * (4.010003996 + 0.09004004 + 0.09004008)).epsilon(1e-12));
  // Chunks of 500 tokens: two iterations, two overheads. [0, 500): 1e12 + 4 * 124,750 FLOPs;
  // [500, 1000): 1e12 + 4 * 374,750.
  c.time_scale = 1;
  c.chunk_tokens = 500;
  res = sim::des::simulate(t, c);
  CHECK(res.requests[0].first_token ==
        Approx(2.000000998 + 0.01 + 2.000002998 + 0.01).epsilon(1e-12));
  const sim::des::iteration_timing it(c.model, c.gpu, 1, 1, 0.01, nullptr);
  CHECK(it.chunked_prefill_s(0, 1000, 500) == Approx(4.020003996).epsilon(1e-12));
  // A mixed iteration: one overhead, both terms.
  const sim::des::prefill_part part{1000, 0};
  CHECK(it.seconds({&part, 1}, {1, 1001, 1001 * 1000.0}) ==
        Approx(0.01 + 4.000003996 + 0.08004004).epsilon(1e-12));
  CHECK(it.seconds({}, {}) == 0);  // nothing to run: no iteration, no overhead
}

TEST_CASE("timing table: lookups inside, on and outside the grid", "[simulate][timing]") {
  const auto tt = table();
  CHECK(tt->prefill_rows() == 8);
  CHECK(tt->decode_rows() == 4);
  // On grid points: the row itself.
  CHECK(tt->prefill_s(1, 1024, 0) == 100 / 1000.0);
  CHECK(tt->prefill_s(2, 2048, 4096) == 490 / 1000.0);
  CHECK(tt->decode_s(2, 8192) == 20 / 1000.0);
  // Inside: linear in each dimension.
  CHECK(tt->prefill_s(1, 1536, 0) == Approx(0.140));
  CHECK(tt->prefill_s(1, 1024, 1024) == Approx(0.110));
  CHECK(tt->prefill_s(1.5, 1536, 2048) ==
        Approx((100 + 140 + 180 + 260 + 170 + 250 + 330 + 490) / 8.0 / 1000));
  CHECK(tt->decode_s(1.5, 4608) == Approx((10 + 14 + 12 + 20) / 4.0 / 1000));
  // Outside: linear from the two nearest grid values of each dimension.
  CHECK(tt->prefill_s(1, 3072, 0) == Approx(0.260));     // 180 + (180 - 100)
  CHECK(tt->prefill_s(1, 1024, 8192) == Approx(0.180));  // 100 + 2 * 40
  CHECK(tt->prefill_s(3, 1024, 0) == Approx(0.240));     // 170 + 70
  CHECK(tt->decode_s(4, 1024) == Approx(0.016));         // 12 + 2 * 2
  CHECK(tt->decode_s(1, 15360) == Approx(0.018));        // 14 + 4
  // Clamped at 0 below; a dimension with one value is constant.
  const auto falling = table(
      "kind,batch,tokens_per_request,context_tokens,ms\n"
      "prefill,1,100,0,10\nprefill,1,200,0,50\n");
  CHECK(falling->prefill_s(1, 1, 0) == 0);                   // 10 - 0.99 * 40 < 0
  CHECK(falling->prefill_s(8, 150, 5000) == Approx(0.030));  // batch and context: one value each
  CHECK_FALSE(falling->has_decode());
}

TEST_CASE("timing table: scattered points, interpolated by hand", "[simulate][timing]") {
  // Batch 1 has tokens 512 and 1024 at two contexts and 2048 at context 0 only; batch 4 has
  // 512 and 1024 at context 0 (as a profile under a token budget: no long prompts at batch 4).
  const auto tt = table(
      "kind,batch,tokens_per_request,context_tokens,ms\n"
      "prefill,1,512,0,10\nprefill,1,512,4096,30\nprefill,1,1024,0,20\nprefill,1,1024,4096,50\n"
      "prefill,1,2048,0,40\nprefill,4,512,0,32\nprefill,4,1024,0,60\n");
  CHECK(tt->prefill_rows() == 7);
  CHECK(tt->describe()["prefill_grid"]["complete"] == false);
  sim::des::table_far far;
  // Within batch 1: context first (slot 512 at 2048: 20; slot 1024: 35), then tokens.
  CHECK(tt->prefill_s(1, 768, 2048, &far) == Approx(0.0275));
  CHECK(tt->prefill_s(1, 1536, 0, &far) == Approx(0.030));
  // Batch 4 extrapolates from its own two points: 60 + (60 - 32).
  CHECK(tt->prefill_s(4, 1536, 0, &far) == Approx(0.088));
  // Across batches: a third of the way from batch 1 (10) to batch 4 (32).
  CHECK(tt->prefill_s(2, 512, 0, &far) == Approx((10 + 22.0 / 3) / 1000));
  CHECK(far.dim == -1);  // all within reach
  // The 2048-token slot was measured at context 0 only: constant in context there (40), halfway
  // with slot 1024's 35; such a slice is within reach up to twice the kind's largest context.
  CHECK(tt->prefill_s(1, 1536, 2048, &far) == Approx(0.0375));
  CHECK(far.dim == -1);
  (void)tt->prefill_s(1, 1536, 8192, &far);
  CHECK(far.dim == -1);  // slot 1024: 2x its 4096; slot 2048: 2x the kind's 4096
  (void)tt->prefill_s(1, 1536, 8193, &far);
  CHECK(far.dim == 2);
  CHECK(far.largest == 4096);
  // Only context has that allowance: a batch measured at one short prompt stays its own reach.
  const auto short8 = table(
      "kind,batch,tokens_per_request,context_tokens,ms\n"
      "prefill,1,512,0,10\nprefill,1,4096,0,80\nprefill,8,16,0,3\n");
  far = {};
  (void)short8->prefill_s(8, 2000, 0, &far);
  CHECK(far.dim == 1);
  CHECK(far.largest == 16);
  // Beyond twice batch 4's longest prompt, and beyond twice the largest batch.
  far = {};
  (void)tt->prefill_s(4, 2049, 0, &far);
  CHECK(far.dim == 1);
  CHECK(far.largest == 1024);
  far = {};
  (void)tt->prefill_s(4, 2048, 0, &far);
  CHECK(far.dim == -1);  // exactly twice is within reach
  far = {};
  (void)tt->prefill_s(9, 512, 0, &far);
  CHECK(far.dim == 0);
  CHECK(far.largest == 4);
}

TEST_CASE("timing table: a full grid is the multilinear interpolation", "[simulate][timing]") {
  // The reference: multilinear over the grid's cell around x (the two nearest values outside),
  // as the sum over the cell's 8 corners of the corner's value times its weight.
  std::mt19937_64 rng(5);
  const std::vector<double> axis[3] = {{1, 4, 16}, {128, 512, 1024, 4096}, {0, 2048, 16384}};
  std::string csv = "kind,batch,tokens_per_request,context_tokens,ms\n";
  std::vector<double> s;
  for (double b : axis[0]) {
    for (double k : axis[1]) {
      for (double c : axis[2]) {
        const double ms = static_cast<double>(rng() % 100000) / 100;
        csv += "prefill," + std::to_string(static_cast<int>(b)) + "," +
               std::to_string(static_cast<int>(k)) + "," + std::to_string(static_cast<int>(c)) +
               "," + std::to_string(ms) + "\n";
        s.push_back(std::stod(std::to_string(ms)) / 1000.0);
      }
    }
  }
  const auto tt = table(csv.c_str());
  CHECK(tt->describe()["prefill_grid"]["complete"] == true);
  auto reference = [&](const double x[3]) {
    std::size_t lo[3];
    double w[3];
    for (int d = 0; d < 3; ++d) {
      const auto& a = axis[d];
      std::size_t i = 0;
      while (i + 2 < a.size() && x[d] >= a[i + 1]) ++i;
      lo[d] = i;
      w[d] = (x[d] - a[i]) / (a[i + 1] - a[i]);
    }
    double v = 0;
    for (int corner = 0; corner < 8; ++corner) {
      double weight = 1;
      std::size_t at[3];
      for (int d = 0; d < 3; ++d) {
        const bool up = (corner >> d) & 1;
        at[d] = lo[d] + (up ? 1 : 0);
        weight *= up ? w[d] : 1 - w[d];
      }
      v += weight * s[(at[0] * axis[1].size() + at[1]) * axis[2].size() + at[2]];
    }
    return std::max(v, 0.0);
  };
  // On every grid point: the row itself, exactly.
  std::size_t k = 0;
  for (double b : axis[0]) {
    for (double t : axis[1]) {
      for (double c : axis[2]) CHECK(tt->prefill_s(b, t, c) == s[k++]);
    }
  }
  // Anywhere within reach (inside and outside the grid): the multilinear value, to rounding.
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < 2000; ++i) {
    const double x[3] = {1 + u(rng) * 31, 1 + u(rng) * 8191, u(rng) * 32768};
    sim::des::table_far far;
    const double got = tt->prefill_s(x[0], x[1], x[2], &far);
    CHECK(far.dim == -1);
    CHECK(got == Approx(reference(x)).epsilon(1e-12).margin(1e-15));
  }
}

TEST_CASE("timing table: a query far outside the points is an error naming the distance",
          "[simulate][timing]") {
  cluster_config c;
  c.timing = table();
  c.local_cache_blocks = 100;
  c.max_output_tokens = 1;
  // 4096 tokens: twice the longest measured prompt, within reach; 8192 is 4x.
  CHECK_NOTHROW(sim::des::simulate(requests({4096}, {0}, {0.0}, 1), c));
  CHECK_THROWS_WITH(
      sim::des::simulate(requests({8192}, {0}, {0.0}, 1), c),
      Contains("timing table t.csv: a prefill iteration of batch 1, 8192 tokens per request at "
               "context 0 is far outside the measured points: tokens_per_request 8192 is 4x the "
               "largest measured in the prefill rows of batch 1 (2048; a query may reach 2x)"));
  // Decode contexts beyond reach too (decode rows reach context 8192).
  c.max_output_tokens = -1;
  const sim::des::iteration_timing it(c.model, c.gpu, 1, 1, 0, c.timing);
  CHECK_THROWS_WITH(it.decode_s({2, 2 * 20000.0, 0}),
                    Contains("a decode iteration of batch 2 at context 20000 is far outside the "
                             "measured points: context_tokens 20000 is 2.44141x the largest "
                             "measured in the decode rows of batch 2, tokens_per_request 1"));
}

TEST_CASE("timing: a per-request overhead, by hand", "[simulate][timing]") {
  // request_overhead_s is paid per request an iteration runs (a prefill part, a decode request),
  // on top of the iteration's overhead, with the formula and with a table.
  const cluster_config c = round_numbers();
  const sim::des::iteration_timing plain(c.model, c.gpu, 1, 1, 0.01, nullptr),
      per_request(c.model, c.gpu, 1, 1, 0.01, nullptr, 0.002);
  const sim::des::prefill_part parts[2] = {{1000, 0}, {500, 100}};
  const sim::des::decode_batch d{3, 3000, 3e6};
  CHECK(per_request.seconds(parts, d) == Approx(plain.seconds(parts, d) + 5 * 0.002).epsilon(1e-12));
  CHECK(per_request.decode_s(d) == Approx(plain.decode_s(d) + 3 * 0.002).epsilon(1e-12));
  CHECK(per_request.chunked_prefill_s(0, 1000, 500) ==
        Approx(plain.chunked_prefill_s(0, 1000, 500) + 2 * 0.002).epsilon(1e-12));
  CHECK(per_request.seconds({}, {}) == 0);
  // With a table: the rows plus both overheads, times time_scale.
  const sim::des::iteration_timing measured(c.model, c.gpu, 1, 2, 0.01, table(), 0.002);
  CHECK(measured.prefill_s(0, 1024) == Approx(2 * (0.100 + 0.01 + 0.002)).epsilon(1e-12));
  CHECK(measured.decode_s({2, 2 * 1024.0, 0}) == Approx(2 * (0.012 + 0.01 + 2 * 0.002)).epsilon(1e-12));
  CHECK(measured.describe()["request_overhead_s"] == 0.002);
  CHECK(measured.describe()["iteration_overhead_s"] == 0.01);
}

TEST_CASE("timing table: every iteration of a simulation takes the table's time",
          "[simulate][timing]") {
  cluster_config c;
  c.timing = table();
  c.local_cache_blocks = 100;
  // One request of 1024 tokens: TTFT = the prefill row (batch 1, 1024 tokens, context 0).
  auto res = sim::des::simulate(requests({1024}, {0}, {0.0}, 1), c);
  CHECK(res.requests[0].first_token == 100 / 1000.0);
  // 1536 tokens, interpolated between the 1024- and 2048-token rows.
  res = sim::des::simulate(requests({1536}, {0}, {0.0}, 1), c);
  CHECK(res.requests[0].first_token == Approx(0.140).epsilon(1e-12));
  // A request whose first two blocks are cached: 1024 new tokens at context 1024 (a quarter of
  // the way from context 0 to 4096).
  res = sim::des::simulate(requests({1024, 2048}, {0, 0}, {0.0, 10.0}, 1), c);
  CHECK(res.requests[1].hit_tokens == 1024);
  CHECK(res.requests[1].first_token - 10.0 == Approx(0.110).epsilon(1e-9));
  // The seconds its hit saved, from the table: 180 ms cold, 110 ms for the uncached half.
  CHECK(res.summary["prefill_instance_s_saved"].get<double>() == Approx(0.070).epsilon(1e-9));
  // Two 1024-token requests decoding together: prefills of 100 ms each, then steps of the
  // batch of 2 at mean contexts 1025 and 1026 (decode rows 12 ms at 1024, 20 ms at 8192).
  res = sim::des::simulate(requests({1024, 1024}, {0, 100}, {0.0, 0.0}, 3), c);
  const double s1 = 0.012 + 0.008 * 1.0 / 7168, s2 = 0.012 + 0.008 * 2.0 / 7168;
  CHECK(res.requests[1].first_token == Approx(0.2).epsilon(1e-12));
  for (const auto& o : res.requests) {
    CHECK(o.done == Approx(0.2 + s1 + s2).epsilon(1e-12));
    CHECK(o.output_tokens == 3);
  }
  CHECK(res.requests[1].mean_tbt == Approx((s1 + s2) / 2).epsilon(1e-9));
  // Chunks of 512 tokens, extrapolated below the 1024-token rows: 100 - 40 = 60 ms at context 0;
  // at context 512, 7/8 of 60 ms (context 0) + 1/8 of 140 - 60 = 80 ms (context 4096).
  c.chunk_tokens = 512;
  res = sim::des::simulate(requests({1024}, {0}, {0.0}, 1), c);
  CHECK(res.requests[0].first_token == Approx(0.060 + 0.0625).epsilon(1e-9));
  // The summary names the table.
  CHECK(res.summary["timing"]["source"] == "table");
  CHECK(res.summary["timing"]["file"] == "t.csv");
  CHECK(res.summary["timing"]["prefill_rows"] == 8);
  CHECK(res.summary["timing"]["decode_grid"]["context_tokens"] == nlohmann::json{1024, 8192});
}

TEST_CASE("timing table: admission and routing predict with the table", "[simulate][timing]") {
  cluster_config c;
  c.timing = table();
  c.reject_over_slo = true;
  c.ttft_slo_s = 0.05;  // the 1024-token prefill takes 100 ms
  const auto t = requests({1024}, {0}, {0.0}, 1);
  CHECK(sim::des::simulate(t, c).summary["rejected"] == 1);
  c.ttft_slo_s = 0.11;
  CHECK(sim::des::simulate(t, c).summary["rejected"] == 0);
  c.chunk_tokens = 512;  // two chunks, predicted as such: 60 + 62.5 ms
  CHECK(sim::des::simulate(t, c).summary["rejected"] == 1);
}

TEST_CASE("timing table: bad tables name the file, the line and the reason", "[simulate][timing]") {
  const std::string head = "kind,batch,tokens_per_request,context_tokens,ms\n";
  auto parse = [](const std::string& text) { return timing_table::parse(text, "t.csv"); };
  using E = sim::des::timing_table_error;
  CHECK_THROWS_AS(parse("kind,batch,tokens,context_tokens,ms\n"), E);
  CHECK_THROWS_WITH(
      parse("kind,batch,tokens,context_tokens,ms\n"),
      Contains(
          "t.csv:1: the header must be exactly 'kind,batch,tokens_per_request,context_tokens,ms'"));
  CHECK_THROWS_WITH(parse(""), Contains("t.csv:1: empty table"));
  CHECK_THROWS_WITH(parse(head), Contains("no rows after the header"));
  CHECK_THROWS_WITH(parse(head + "prefill,1,abc,0,5\n"),
                    Contains("t.csv:2: 'tokens_per_request' is not a number: 'abc'"));
  CHECK_THROWS_WITH(parse(head + "prefill,1,128,0,\n"), Contains("t.csv:2: 'ms' is not a number"));
  CHECK_THROWS_WITH(parse(head + "prefill,1,128,0,nan\n"), Contains("'ms' is not a number"));
  CHECK_THROWS_WITH(parse(head + "prefill,1,128,0,-5\n"),
                    Contains("t.csv:2: 'ms' is negative: -5"));
  CHECK_THROWS_WITH(parse(head + "prefill,1,128,-1,5\n"), Contains("'context_tokens' is negative"));
  CHECK_THROWS_WITH(parse(head + "prefill,1.5,128,0,5\n"),
                    Contains("'batch' must be a whole number: 1.5"));
  CHECK_THROWS_WITH(parse(head + "prefill,0,128,0,5\n"), Contains("'batch' must be in [1, "));
  CHECK_THROWS_WITH(parse(head + "prefill,1,128,0,1e13\n"), Contains("'ms' must be in [0, 1e+12]"));
  CHECK_THROWS_WITH(parse(head + "decode,1,2,0,5\n"),
                    Contains("t.csv:2: a decode row's 'tokens_per_request' must be 1, not 2"));
  CHECK_THROWS_WITH(parse(head + "verify,1,1,0,5\n"),
                    Contains("t.csv:2: unknown kind 'verify' (prefill decode)"));
  CHECK_THROWS_WITH(parse(head + "prefill,1,128,0\n"), Contains("t.csv:2: expected 5 fields"));
  CHECK_THROWS_WITH(parse(head + "prefill,1,128,0,5,6\n"), Contains("got 6"));
  CHECK_THROWS_WITH(parse(head + "prefill,1,128,0,5\n# again\nprefill,1,128,0,6\n"),
                    Contains("t.csv:4: duplicate prefill row (batch 1, tokens_per_request 128, "
                             "context_tokens 0) of line 2"));
  // Scattered points are a table, not an error (profiles are not grids).
  CHECK(parse(head + "prefill,1,128,0,5\nprefill,2,256,0,9\n").describe()["prefill_grid"]["complete"] ==
        false);
  CHECK(parse(head + "prefill,1,128,0,5\nprefill,1,256,0,9\n").describe()["prefill_grid"]["complete"] ==
        true);
  CHECK_THROWS_WITH(timing_table::load("/nonexistent/t.csv"),
                    Contains("/nonexistent/t.csv:0: cannot open"));
  CHECK_THROWS_WITH(timing_table::load(KVTK_TRACES_DIR), Contains("is a directory"));
  // A table without the rows the trace needs: an error before anything runs.
  cluster_config c;
  c.timing = table((head + "prefill,1,128,0,5\n").c_str());
  const auto decoding = requests({1024}, {0}, {0.0}, 2);
  CHECK_THROWS_WITH(
      sim::des::simulate(decoding, c),
      Contains("timing table t.csv has no decode rows, and request 0 (0-based) decodes 1 tokens"));
  c.max_output_tokens = 1;
  // One row: every dimension has one value, so the time is that row's.
  CHECK(sim::des::simulate(decoding, c).requests[0].first_token == 0.005);
  c.timing = table((head + "decode,1,1,0,5\n").c_str());
  CHECK_THROWS_WITH(sim::des::simulate(decoding, c), Contains("has no prefill rows"));
}

TEST_CASE("timing table: a config's relative table is next to the config - --timing-table wins",
          "[simulate][timing][api]") {
  const auto dir = std::filesystem::temp_directory_path() / ("kvtk_test_timing_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "cfg");
  std::ofstream(dir / "cfg" / "table.csv") << table_csv;
  std::ofstream(dir / "cfg" / "sim.json")
      << R"({"timing_table": "table.csv", "max_output_tokens": 1})";
  std::ofstream(dir / "bad.csv")
      << "kind,batch,tokens_per_request,context_tokens,ms\nprefill,1,1,0,x\n";
  // Prompts within the table's reach (its longest is 2,048 tokens).
  std::ofstream(dir / "trace.jsonl")
      << "{\"kvtk_trace\": 1, \"block_tokens\": 512}\n"
         "{\"arrival_s\": 0, \"input_length\": 1000, \"output_length\": 1, \"hash_ids\": [1, 2]}\n"
         "{\"arrival_s\": 1, \"input_length\": 1500, \"output_length\": 1, \"hash_ids\": [1, 3, 4]}\n";
  sim::simulate_options o;
  o.trace = (dir / "trace.jsonl").string();
  o.config_file = (dir / "cfg" / "sim.json").string();
  auto r = sim::run(o);
  CHECK(r.result["timing"]["file"] == (dir / "cfg" / "table.csv").string());
  CHECK(r.config["timing_table"] == (dir / "cfg" / "table.csv").string());
  o.timing_table = (dir / "bad.csv").string();  // the option over the config's
  CHECK_THROWS_WITH(sim::run(o), Contains("bad.csv:2: 'ms' is not a number: 'x'"));
  o.timing_table.clear();
  o.set = {"timing_table=null"};  // --set turns it off
  r = sim::run(o);
  CHECK(r.result["timing"]["source"] == "formula");
  std::filesystem::remove_all(dir);
}
