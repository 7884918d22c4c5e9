// Real movement, host backend: layouts, block patterns and verification, copy mechanisms, the
// file tier, and the timing-model fit.
#include <catch2/catch.hpp>
#include <filesystem>
#include <numeric>
#include <unistd.h>

#include "des/profiles.hpp"
#include "kvtk/move/kv_layout.hpp"
#include "move/host_move.hpp"

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

TEST_CASE("copies move every byte; coalescing merges runs; corruption is caught", "[move]") {
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
}
