// The library API of the commands (sim/api/): options round-trip through JSON, bad options are
// named, run() gives what a direct replay through the headers gives, progress is reported.
#include <catch2/catch.hpp>
#include <kvtk/kvtk.hpp>

#include "api/compare.hpp"
#include "api/cost.hpp"
#include "api/move.hpp"
#include "api/mrc.hpp"
#include "api/replay.hpp"
#include "api/simulate.hpp"
#include "api/sparse.hpp"
#include "api/trace_convert.hpp"
#include "api/trace_gen.hpp"
#include "api/trace_stats.hpp"
#include "util/output_file.hpp"

#include <filesystem>
#include <unistd.h>
#include "cli/common.hpp"
#include "formats/requests.hpp"
#include "formats/trace_error.hpp"

namespace {

using kvtk::sim::replay_options;
const std::string conversation = KVTK_TRACES_DIR "/mooncake_fast25_conversation_trace.jsonl";

}  // namespace

TEST_CASE("replay options round-trip through JSON", "[api]") {
  replay_options o;
  o.trace = "t.jsonl";
  o.index = {"radix", "flat"};
  o.policy = {"all"};
  o.capacity = {"1000", "3Mtok"};
  o.threads = 4;
  o.opt = false;
  o.tiers = {"hbm:10:lru,dram:20:arc"};
  o.inclusion = "inclusive";
  const nlohmann::json j = kvtk::sim::to_json(o);
  const replay_options back = kvtk::sim::replay_options_from_json(j);
  CHECK(kvtk::sim::to_json(back) == j);
  CHECK(back.capacity == o.capacity);
  CHECK(back.threads == 4);
  CHECK_FALSE(back.opt);
  // A subset keeps the other defaults.
  const replay_options partial = kvtk::sim::replay_options_from_json({{"trace", "x"}});
  CHECK(partial.policy == std::vector<std::string>{"lru"});
  CHECK(partial.partial_block == "skip");
}

TEST_CASE("replay options from JSON name the bad key", "[api]") {
  using kvtk::sim::usage_error;
  auto message = [](const nlohmann::json& j) {
    try {
      (void)kvtk::sim::replay_options_from_json(j);
    } catch (const usage_error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK_THAT(message({{"polcy", {"lru"}}}), Catch::Contains("unknown key 'polcy'"));
  CHECK_THAT(message({{"threads", -1}}), Catch::Contains("'threads'"));
  CHECK_THAT(message({{"threads", 1.5}}), Catch::Contains("'threads'"));
  CHECK_THAT(message({{"threads", 5000000000LL}}), Catch::Contains("'threads'"));
  CHECK_THAT(message({{"policy", "lru"}}), Catch::Contains("a list of strings"));
  CHECK_THAT(message({{"opt", 1}}), Catch::Contains("'opt'"));
  CHECK_THAT(message(nlohmann::json::array()), Catch::Contains("expected a JSON object"));
}

TEST_CASE("validate reports bad options before any work", "[api]") {
  replay_options o;
  o.trace = conversation;
  o.policy = {"nope"};
  CHECK_THROWS_WITH(kvtk::sim::validate(o), Catch::Contains("unknown policy 'nope'"));
  o.policy = {"lru"};
  o.threads = 0;
  CHECK_THROWS_WITH(kvtk::sim::validate(o), Catch::Contains("--threads"));
  o.threads = 1;
  o.capacity = {"64GiB"};
  CHECK_THROWS_WITH(kvtk::sim::validate(o), Catch::Contains("64GiB"));
  o.capacity = {"1000"};
  o.trace = "/nonexistent/trace.jsonl";
  CHECK_THROWS_AS(kvtk::sim::validate(o), kvtk::sim::trace_error);
  o.trace = conversation;
  kvtk::sim::validate(o);
  CHECK(o.format == "mooncake");  // resolved in place
  CHECK(o.block_tokens == 512);
}

TEST_CASE("the ideal pass beside the jobs (2+ threads) gives the one-thread trace summary",
          "[api][replay]") {
  const std::string flat = KVTK_TEST_DATA_DIR "/small.oracleGeneral.bin";
  for (const std::string& path : {conversation, flat}) {
    replay_options o;
    o.trace = path;
    o.index = {"flat"};
    o.policy = {"lru", "arc"};
    o.capacity = {"10", "1000"};
    o.opt = false;
    o.threads = 1;
    const auto one = kvtk::sim::run(o);
    REQUIRE_FALSE(one.trace["ideal_block_hit_ratio"].is_null());
    for (unsigned threads : {2u, 3u}) {
      INFO(path << " threads " << threads);
      o.threads = threads;
      const auto r = kvtk::sim::run(o);
      CHECK(r.trace == one.trace);
      REQUIRE(r.results.size() == one.results.size());
      for (std::size_t i = 0; i < r.results.size(); ++i) {
        CHECK(r.results[i]["block_hits"] == one.results[i]["block_hits"]);
      }
    }
  }
}

TEST_CASE("run() equals a direct replay through the headers, and reports progress", "[api]") {
  replay_options o;
  o.trace = conversation;
  o.index = {"radix", "flat"};
  o.policy = {"lru", "arc"};  // arc: flat only, so three jobs per capacity
  o.capacity = {"1000", "10000"};
  o.threads = 2;
  std::uint64_t last = 0, calls = 0, total_seen = 0;
  bool monotone = true;
  const auto r = kvtk::sim::run(o, [&](std::uint64_t done, std::uint64_t total) {
    monotone = monotone && done >= last && done <= total;
    last = done;
    total_seen = total;
    ++calls;
  });
  REQUIRE(r.results.size() == 6);
  CHECK(monotone);
  CHECK(calls > 0);
  CHECK(last == total_seen);
  CHECK(r.timings.is_null());

  const auto lt = kvtk::sim::loaded_trace::load(conversation, kvtk::sim::trace_format::mooncake, 0,
                                                {}, nullptr);
  using namespace kvtk::prefix;
  for (const auto& row : r.results) {
    const auto cap = row["capacity_blocks"].get<std::uint32_t>();
    prefix_counts c;
    if (row["index"] == "radix") {
      radix_index<leaf_lru> idx(cap);
      c = replay(lt.view(), idx, partial_block::skip);
    } else if (row["policy"] == "lru") {
      flat_index<kvtk::lru> idx(cap);
      c = replay(lt.view(), idx, partial_block::skip);
    } else {
      flat_index<kvtk::arc> idx(cap);
      c = replay(lt.view(), idx, partial_block::skip);
    }
    INFO(row.dump());
    CHECK(row["block_hits"].get<std::uint64_t>() == c.block_hits);
    CHECK(row["token_hits"].get<std::uint64_t>() == c.token_hits);
    CHECK(row["block_refs"].get<std::uint64_t>() == c.block_refs);
    CHECK(row.contains("opt_fraction"));
  }
  // The writers: one CSV line per result plus the header, and the table names every job.
  const std::string csv = kvtk::sim::to_csv(r);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 7);
  const std::string text = kvtk::sim::to_text(r);
  CHECK_THAT(text, Catch::Contains("ideal (infinite cache)"));
  CHECK(kvtk::sim::to_json(r)["results"] == r.results);
}

TEST_CASE("mrc: options round-trip, and run() equals the exact curve", "[api]") {
  kvtk::sim::mrc_options o;
  o.trace = conversation;
  o.capacity = {"100", "1000", "3Mtok"};
  o.opt = true;
  const auto j = kvtk::sim::to_json(o);
  CHECK(kvtk::sim::to_json(kvtk::sim::mrc_options_from_json(j)) == j);
  CHECK_THROWS_WITH(kvtk::sim::mrc_options_from_json({{"sample", "half"}}), Catch::Contains("'sample'"));
  kvtk::sim::mrc_options bad = o;
  bad.sample = 0;
  CHECK_THROWS_WITH(kvtk::sim::validate(bad), Catch::Contains("--sample"));

  std::uint64_t last = 0, total_seen = 0;
  const auto r = kvtk::sim::run(o, [&](std::uint64_t done, std::uint64_t total) {
    last = done;
    total_seen = total;
  });
  CHECK(last == total_seen);
  REQUIRE(r.curve.size() == 3);
  const auto lt = kvtk::sim::loaded_trace::load(conversation, kvtk::sim::trace_format::mooncake, 0,
                                                {}, nullptr);
  const auto exact = kvtk::prefix::exact_prefix_lru_mrc(lt.view(), kvtk::prefix::partial_block::skip);
  for (const auto& p : r.curve) {
    const auto c = p["capacity_blocks"].get<std::uint64_t>();
    CHECK(p["token_hit_ratio"].get<double>() == exact.token_hit_ratio(c));
    CHECK(p["opt_block_hit_ratio"].get<double>() >= p["block_hit_ratio"].get<double>());
  }
  CHECK(r.curve[2]["capacity_blocks"] == 5859);  // 3M tokens of 512-token blocks
  CHECK(r.sample.is_null());
  // Too small a sample is an error, not a curve of noise.
  o.sample = 0.001;
  o.opt = false;
  CHECK_THROWS_WITH(kvtk::sim::run(o), Catch::Contains("too few for a curve"));
}

TEST_CASE("simulate: config keys, file and overrides layer in order", "[api]") {
  kvtk::sim::simulate_options o;
  o.trace = conversation;
  o.config_file = KVTK_SIM_CONFIGS_DIR "/colocated.json";
  o.config = {{"local_cache", 2000}, {"router", "round-robin"}};
  o.set = {"router=cache-aware"};
  const auto j = kvtk::sim::to_json(o);
  CHECK(kvtk::sim::to_json(kvtk::sim::simulate_options_from_json(j)) == j);
  CHECK_THROWS_WITH(kvtk::sim::simulate_options_from_json({{"config", "x.json"}}),
                    Catch::Contains("'config'"));

  const auto r = kvtk::sim::run(o);
  CHECK(r.config["model"] == "qwen2.5-7b");     // from the file
  CHECK(r.config["local_cache"] == 2000);       // the keys over the file
  CHECK(r.config["router"] == "cache-aware");   // the override last
  CHECK(r.requests.size() == 12031);
  // The same as the simulator called directly with that config.
  nlohmann::json cfg_json = r.config;
  const auto cfg = kvtk::sim::cluster_config_from_json(cfg_json, 512, {});
  const auto lt = kvtk::sim::loaded_trace::load(conversation, kvtk::sim::trace_format::mooncake, 0,
                                                {}, nullptr);
  const auto direct = kvtk::sim::des::simulate(lt.view(), cfg);
  CHECK(direct.summary["block_hits"] == r.result["block_hits"]);
  CHECK(direct.summary["ttft_s"] == r.result["ttft_s"]);
  const std::string csv = kvtk::sim::to_csv(r);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 12032);

  o.set = {"prefill_instances=0"};
  CHECK_THROWS_AS(kvtk::sim::run(o), kvtk::sim::usage_error);
}

TEST_CASE("cost: counts or a result given as JSON, options round-trip", "[api]") {
  kvtk::sim::cost_options o;
  o.hit_ratio = 0.5;
  o.input_tokens = 1e6;
  const auto j = kvtk::sim::to_json(o);
  CHECK(j["hit_tokens"].is_null());
  CHECK(kvtk::sim::to_json(kvtk::sim::cost_options_from_json(j)) == j);
  const auto r = kvtk::sim::run(o);
  CHECK(r.estimate["tokens"]["hit"] == 500000.0);
  CHECK(r.estimate["tokens"]["miss"] == 500000.0);
  CHECK(r.estimate["saving_usd"].get<double>() > 0);

  // A replay result passed as JSON (what the Python package does) prices each job.
  kvtk::sim::replay_options ro;
  ro.trace = conversation;
  ro.capacity = {"1000", "10000"};
  ro.opt = false;
  kvtk::sim::cost_options from;
  from.from_result = kvtk::sim::to_json(kvtk::sim::run(ro));
  const auto priced = kvtk::sim::run(from);
  REQUIRE(priced.estimate["estimates"].size() == 2);
  CHECK(priced.estimate["estimates"][1]["saving_usd"].get<double>() >
        priced.estimate["estimates"][0]["saving_usd"].get<double>());

  kvtk::sim::cost_options both = from;
  both.hit_tokens = 1;
  CHECK_THROWS_WITH(kvtk::sim::validate(both), Catch::Contains("give either"));
  kvtk::sim::cost_options fractional;
  fractional.hit_tokens = 0.56;
  fractional.input_tokens = 10;
  CHECK_THROWS_WITH(kvtk::sim::run(fractional), Catch::Contains("not a whole number"));
}

TEST_CASE("sparse: a grid of jobs, per-step rows, options round-trip", "[api]") {
  kvtk::sim::sparse_options o;
  o.steps = 120;
  o.requests = 2;
  o.scorer = {"selection-lru", "h2o"};
  o.manager = {"offload", "lossy"};
  o.sinks = 2;
  o.step_rows = true;
  const auto j = kvtk::sim::to_json(o);
  CHECK(j["recent"].is_null());
  CHECK(kvtk::sim::to_json(kvtk::sim::sparse_options_from_json(j)) == j);
  const auto r = kvtk::sim::run(o);
  REQUIRE(r.summary["results"].size() == 4);  // 2 managers x 2 scorers
  CHECK(r.summary["sinks"] == 2);
  // One row per job, request and step, plus the header.
  CHECK(std::count(r.step_csv.begin(), r.step_csv.end(), '\n') == 4 * 2 * 120 + 1);
  for (const auto& row : r.summary["results"]) {
    CHECK(row["steps"] == 240);
    if (row["manager"] == "offload") CHECK(row["recalls"].get<std::uint64_t>() > 0);
  }
  o.scorer = {"nope"};
  CHECK_THROWS_WITH(kvtk::sim::validate(o), Catch::Contains("unknown 'nope'"));
  o.scorer = {"h2o"};
  o.drift = {"2"};
  CHECK_THROWS_WITH(kvtk::sim::validate(o), Catch::Contains("--drift"));
}

TEST_CASE("trace stats: the ideal ratios equal replay's", "[api]") {
  kvtk::sim::trace_stats_options o;
  o.trace = conversation;
  const auto j = kvtk::sim::to_json(o);
  CHECK(kvtk::sim::to_json(kvtk::sim::trace_stats_options_from_json(j)) == j);
  const auto s = kvtk::sim::run(o);
  kvtk::sim::replay_options ro;
  ro.trace = conversation;
  ro.capacity = {"10"};
  ro.opt = false;
  const auto r = kvtk::sim::run(ro);
  CHECK(s.stats["requests"] == 12031);
  CHECK(s.stats["ideal_token_hit_ratio"] == r.trace["ideal_token_hit_ratio"]);
  CHECK(s.stats["unique_blocks"] == r.trace["unique_blocks"]);
  CHECK(s.stats["block_refs"] == r.trace["block_refs"]);
  CHECK_FALSE(s.clock);
  o.partial_block = "sometimes";
  CHECK_THROWS_AS(kvtk::sim::validate(o), kvtk::sim::usage_error);
}

TEST_CASE("compare: every policy x capacity, hits + misses = requests", "[api]") {
  kvtk::sim::compare_options o;
  o.trace = conversation;
  o.capacity = {"100", "1000"};
  const auto j = kvtk::sim::to_json(o);
  CHECK(kvtk::sim::to_json(kvtk::sim::compare_options_from_json(j)) == j);
  const auto r = kvtk::sim::run(o);
  CHECK(r.results.size() == 2 * kvtk::policy_names.size());
  for (const auto& row : r.results) {
    CHECK(row["hits"].get<std::uint64_t>() + row["misses"].get<std::uint64_t>() ==
          row["requests"].get<std::uint64_t>());
  }
  o.capacity = {"0"};
  CHECK_THROWS_WITH(kvtk::sim::validate(o), Catch::Contains("positive integer"));
}

TEST_CASE("move: replay verifies every arrival - bench fits only what its samples determine", "[api]") {
  kvtk::sim::move_replay_options o;
  o.trace = conversation;
  o.tiers = "hbm:2500:lru,dram:7500:lru";
  o.block_bytes = "512";
  const auto j = kvtk::sim::to_json(o);
  CHECK(kvtk::sim::to_json(kvtk::sim::move_replay_options_from_json(j)) == j);
  const auto r = kvtk::sim::run(o);
  CHECK(r.verified);
  kvtk::sim::replay_options same;  // the tier model's replay of the same hierarchy
  same.trace = conversation;
  same.tiers = {o.tiers};
  const auto modelled = kvtk::sim::run(same);
  CHECK(r.report["block_hits"] == modelled.results[0]["block_hits"]);
  CHECK(r.report["block_hits"] == 61996);
  CHECK(r.report["integrity_failures"] == 0);
  o.block_bytes = "12";
  CHECK_THROWS_WITH(kvtk::sim::validate(o), Catch::Contains("--block-bytes"));

  kvtk::sim::move_bench_options b;
  b.to = {"dram"};
  b.block_bytes = {"4KiB", "64KiB"};
  b.blocks = {"1", "16"};
  b.mechanism = {"per-piece"};
  b.reps = 1;
  const auto m = kvtk::sim::run(b);
  CHECK(m.verified);
  CHECK(m.report["rows"].size() == 4);
  CHECK(m.report["calibration"]["dram->dram per-piece"].is_object());
  b.block_bytes = {"4KiB"};
  b.blocks = {"4"};
  CHECK(kvtk::sim::run(b).report["calibration"]["dram->dram per-piece"].is_null());
}

TEST_CASE("trace convert and gen through the library keep users' files", "[api]") {
  const std::string dir = std::filesystem::temp_directory_path() / ("kvtk_api_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  kvtk::sim::trace_gen_options g;
  g.gen.requests = 200;
  g.output = dir + "/gen.jsonl";
  CHECK(kvtk::sim::run(g).requests == 200);
  CHECK_THROWS_AS(kvtk::sim::run(g), kvtk::sim::output_refused);  // exists, no force
  g.force = true;
  CHECK(kvtk::sim::run(g).requests == 200);

  kvtk::sim::trace_convert_options c;
  c.trace = g.output;
  c.output = g.output;  // the input itself: refused even with force
  c.to = "kvtk";
  c.force = true;
  CHECK_THROWS_AS(kvtk::sim::run(c), kvtk::sim::output_refused);
  c.output = dir + "/gen.kvtb";
  c.to = "";
  std::uint64_t last_done = 0, calls = 0;
  const auto r = kvtk::sim::run(c, [&](std::uint64_t done, std::uint64_t total) {
    CHECK(total == 0);  // unknown up front: done counts requests
    last_done = done;
    ++calls;
  });
  CHECK(r.requests == 200);
  CHECK(calls == 200);
  CHECK(last_done == 200);
  CHECK(r.to == "kvtb");
  std::filesystem::remove_all(dir);
}
