// Real movement, host backend: layouts, block patterns and verification, copy mechanisms, the
// file tier, and the timing-model fit.
#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <numeric>
#include <unistd.h>

#include "des/profiles.hpp"
#include "kvtk/move/kv_layout.hpp"
#include "kvtk/tier/tier.hpp"
#include "move/calibration.hpp"
#include "move/host_move.hpp"
#include "move/io_pool.hpp"

using namespace kvtk::sim::move;
using kvtk::move::arrangement;
using kvtk::move::kv_layout;

TEST_CASE("layout presets give the model presets' KV bytes per token", "[move]") {
  for (const auto& [name, m] : kvtk::sim::des::model_presets()) {
    const auto l = kvtk::move::layout_preset(name, 16);
    REQUIRE(l.has_value());
    CHECK(l->bytes_per_token() == m.kv_bytes_per_token);
    CHECK(l->bytes_per_block() == 16 * m.kv_bytes_per_token);
  }
  kv_layout l = *kvtk::move::layout_preset("llama-3-70b", 16);
  l.order = arrangement::layer_first;
  CHECK(l.pieces() == 160);
  CHECK(l.piece_bytes() == 16 * 8 * 128 * 2);
  CHECK(l.offset(3, 2, 100) == (2 * 100 + 3) * l.piece_bytes());
  CHECK_FALSE(kvtk::move::layout_preset("gpt-5", 16).has_value());
}

TEST_CASE("copies move every byte - coalescing merges runs - corruption is caught", "[move]") {
  for (const auto order : {arrangement::block_first, arrangement::layer_first}) {
    kv_layout l;
    l.layers = 4;
    l.parts = 2;
    l.tokens = 8;
    l.head_dim = 64;
    l.order = order;
    host_pool src(l, 64), dst(l, 64);
    for (std::uint64_t b = 0; b < 64; ++b) fill_block(src, b, 1000 + b);
    std::vector<std::uint64_t> from(32), to(32);
    std::iota(from.begin(), from.end(), 10);  // blocks 10..41 -> 20..51, one run
    std::iota(to.begin(), to.end(), 20);
    const std::uint64_t rows = order == arrangement::block_first ? 1 : l.pieces();
    CHECK(copy_blocks(src, from, dst, to, mechanism::coalesced) == rows);
    for (std::size_t i = 0; i < 32; ++i) CHECK(verify_block(dst, to[i], 1000 + from[i]));
    host_pool again(l, 64);
    CHECK(copy_blocks(src, from, again, to, mechanism::per_piece) == 32 * rows);
    for (std::size_t i = 0; i < 32; ++i) CHECK(verify_block(again, to[i], 1000 + from[i]));
    CHECK_FALSE(verify_block(dst, 20, 999));  // a different key's pattern
    *again.piece(25, l.pieces() - 1) ^= std::byte{1};
    CHECK_FALSE(verify_block(again, 25, 1000 + 15));
  }
}

TEST_CASE("the file tier round-trips blocks", "[move]") {
  kv_layout l;
  l.layers = 1;
  l.parts = 1;
  l.tokens = 16;
  l.head_dim = 256;  // 8 KiB blocks (O_DIRECT-sized)
  host_pool src(l, 8), dst(l, 8);
  for (std::uint64_t b = 0; b < 8; ++b) fill_block(src, b, b * 31);
  const auto path = (std::filesystem::temp_directory_path() /
                     ("kvtk_test_file_pool_" + std::to_string(::getpid())))
                        .string();
  {
    file_pool f(path, l.bytes_per_block(), 8, true);
    f.write(0, 8, src.piece(0, 0));
    f.read(0, 8, dst.piece(0, 0));
  }
  std::filesystem::remove(path);
  for (std::uint64_t b = 0; b < 8; ++b) CHECK(verify_block(dst, b, b * 31));
  CHECK_THROWS_WITH(file_pool("/nonexistent/dir/f", 4096, 1, false), Catch::Contains("cannot open"));
}

TEST_CASE("the timing fit recovers alpha, beta and bandwidth", "[move]") {
  const timing_model truth{5e-6, 2e-6, 20e9};
  std::vector<timing_sample> s;
  for (double bytes_per_block : {16384.0, 65536.0, 1048576.0}) {
    for (double n : {1.0, 16.0, 256.0}) {
      s.push_back({n, n * bytes_per_block, truth.predict(n, n * bytes_per_block)});
    }
  }
  const timing_model got = fit_timing(s);
  CHECK(got.alpha_s == Approx(truth.alpha_s).epsilon(1e-6));
  CHECK(got.beta_s == Approx(truth.beta_s).epsilon(1e-6));
  CHECK(got.bytes_per_s == Approx(truth.bytes_per_s).epsilon(1e-6));
  CHECK_THROWS(fit_timing(std::vector<timing_sample>{{1, 100, 1.0}}));
  // Rank-deficient sets leave rounding, not exact zeros, in the pivots: still no fit. One
  // measured sample (a 4-block bench run), and n and bytes in proportion (one block size).
  CHECK_THROWS(fit_timing(std::vector<timing_sample>{{4, 262144, 3.7123e-5}}));
  std::vector<timing_sample> one_size;
  for (double n : {1.0, 16.0, 256.0, 1024.0}) one_size.push_back({n, n * 65536, truth.predict(n, n * 65536)});
  CHECK_THROWS(fit_timing(one_size));
}

namespace {
std::string write_temp(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() /
                 ("kvtk_test_" + std::to_string(::getpid()) + "_" + name);
  std::FILE* f = std::fopen(p.c_str(), "w");
  std::fputs(text.c_str(), f);
  std::fclose(f);
  return p.string();
}
}  // namespace

TEST_CASE("calibration files: paths, clamping, the fastest mechanism, errors", "[move]") {
  const std::string path = write_temp("cal.json", R"({"calibration": {
    "h2d slow": {"alpha_s": 1e-3, "beta_s": 0, "bytes_per_s": 1e9},
    "h2d fast": {"alpha_s": 1e-6, "beta_s": -1e-9, "bytes_per_s": 2e10},
    "dram->file coalesced": {"alpha_s": 2e-5, "beta_s": 1e-6, "bytes_per_s": 3e9},
    "file->dram coalesced": {"alpha_s": 3e-5, "beta_s": 2e-6, "bytes_per_s": 1e9},
    "bidir fast": {"alpha_s": 1e-6, "beta_s": 0, "bytes_per_s": 4e10},
    "d2h none": null}})");
  const calibration cal = calibration::load(path);
  CHECK(cal.fits.size() == 5);  // null skipped
  const auto up = cal.find("dram", "hbm", 65536, "");
  REQUIRE(up.has_value());
  CHECK(up->mechanism == "fast");
  CHECK(up->clamped);
  CHECK(up->model.beta_s == 0);
  CHECK(cal.find("dram", "hbm", 65536, "slow")->model.alpha_s == 1e-3);
  CHECK_FALSE(cal.find("hbm", "dram", 65536, "").has_value());

  kvtk::tier::hierarchy_config cfg;
  cfg.block_bytes = 1 << 20;
  cfg.tiers = {{.name = "hbm", .capacity_blocks = 10},
               {.name = "dram", .capacity_blocks = 20},
               {.name = "nvme", .capacity_blocks = 40}};
  const auto rep = apply_calibration(cfg, cal, "");
  REQUIRE(rep.size() == 2);
  CHECK(rep[0]["calibrated"] == true);
  CHECK(cfg.tiers[1].read_bytes_per_s == 2e10);
  CHECK(cfg.tiers[1].latency_s == 1e-6);
  CHECK(cfg.tiers[1].write_bytes_per_s == 0);  // no d2h fit: the write side keeps its figure
  CHECK(cfg.tiers[2].read_bytes_per_s == 1e9);
  CHECK(cfg.tiers[2].latency_s == 3e-5);
  CHECK(cfg.tiers[2].read_per_block_s == 2e-6);
  CHECK(cfg.tiers[2].write_per_block_s == 1e-6);
  CHECK(cfg.tiers[2].write_latency_s == 2e-5);
  CHECK(cfg.tiers[2].write_bytes_per_s == 3e9);
  CHECK_THROWS_WITH(apply_calibration(cfg, cal, "warp"), Catch::Contains("no fit for mechanism 'warp'"));

  // The per-block term enters the replay's load time: 3 blocks from tier 1 cost
  // latency + 3 * per_block + 3 * bytes / B.
  kvtk::tier::hierarchy_config two;
  two.block_bytes = 1000;
  two.tiers = {{.name = "hbm", .capacity_blocks = 1},
               {.name = "dram", .capacity_blocks = 8, .read_bytes_per_s = 1e6, .latency_s = 1e-3,
                .read_per_block_s = 1e-4}};
  kvtk::tier::tier_index<> idx(two);
  const std::vector<kvtk::block_key> keys{1, 2, 3};
  idx.begin_request(3, 1);
  idx.process(keys, {}, {});
  idx.begin_request(3, 1);
  CHECK(idx.process(keys, {}, {}) == 3);
  // Blocks 1 and 2 were demoted to dram, block 3 stayed in hbm... or was demoted: count from
  // the hierarchy which tier served what, then check the formula.
  const auto& lt = idx.load_time();
  const double from_dram = lt.total_s > 0 ? (lt.total_s - 1e-3) / (1e-4 + 1000 / 1e6) : 0;
  CHECK(from_dram == Approx(2.0));

  for (const char* bad : {R"({"calibration": {"h2d x": {"alpha_s": 1, "bytes_per_s": 1}}})",
                          R"({"calibration": {"h2d x": {"alpha_s": 1, "beta_s": 0, "bytes_per_s": -1}}})",
                          R"({"rows": []})", "not json"}) {
    const std::string p = write_temp("bad.json", bad);
    CHECK_THROWS_AS(calibration::load(p), std::runtime_error);
    std::filesystem::remove(p);
  }
  CHECK_THROWS_WITH(calibration::load("/nonexistent/kvtk.json"), Catch::Contains("cannot open"));
  std::filesystem::remove(path);
}

TEST_CASE("io_pool runs every task once, on several threads, and rethrows a task's error", "[move]") {
  for (unsigned workers : {0u, 1u, 3u}) {
    io_pool pool(workers);
    for (std::size_t tasks : {std::size_t{1}, std::size_t{7}, std::size_t{1000}}) {
      for (int round = 0; round < 3; ++round) {  // the pool is reused between runs
        std::vector<std::atomic<int>> hits(tasks);
        pool.run(tasks, [&](std::size_t i) { hits[i].fetch_add(1); });
        for (auto& h : hits) REQUIRE(h.load() == 1);
      }
    }
    std::atomic<int> ran{0};
    CHECK_THROWS_WITH(pool.run(50,
                               [&](std::size_t i) {
                                 ran.fetch_add(1);
                                 if (i == 17) throw std::runtime_error("task 17 failed");
                               }),
                      "task 17 failed");
    CHECK(ran.load() == 50);  // the other tasks still ran
    pool.run(0, [](std::size_t) { FAIL("no task to run"); });
  }
}
