// The next-use sidecar (.kvtn, sim/formats/next_use_file.hpp): its column equals
// next_use_positions (one pass and partitioned, both partial-block modes), a matching file is
// reused untouched, a stale, truncated or corrupt one is rebuilt, a foreign file at its path is
// left alone, and replay / mrc / tune give the same numbers with and without it.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "api/mrc.hpp"
#include "api/next_uses.hpp"
#include "api/replay.hpp"
#include "api/tune.hpp"
#include "formats/kvtb.hpp"
#include "formats/next_use_file.hpp"
#include "formats/requests.hpp"

namespace {

namespace fs = std::filesystem;
using kvtk::prefix::partial_block;
using kvtk::sim::loaded_trace;
using kvtk::sim::next_use_column;
using kvtk::sim::request_record;
namespace kvtn = kvtk::sim::kvtn;

// A directory of its own per test case, removed afterwards; TMPDIR points into it meanwhile so
// that the fallback directory ($TMPDIR/kvtk-next) stays inside too.
struct scratch_dir {
  fs::path dir;
  std::string old_tmpdir;
  bool had_tmpdir = false;
  explicit scratch_dir(const std::string& name)
      : dir(fs::temp_directory_path() /
            ("kvtk_next_use_" + std::to_string(::getpid()) + "_" + name)) {
    fs::remove_all(dir);
    fs::create_directories(dir / "tmp");
    if (const char* t = std::getenv("TMPDIR")) {
      had_tmpdir = true;
      old_tmpdir = t;
    }
    ::setenv("TMPDIR", (dir / "tmp").c_str(), 1);
  }
  ~scratch_dir() {
    if (had_tmpdir) {
      ::setenv("TMPDIR", old_tmpdir.c_str(), 1);
    } else {
      ::unsetenv("TMPDIR");
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  [[nodiscard]] std::string operator/(const std::string& name) const {
    return (dir / name).string();
  }
};

// A kvtb trace of `requests` requests: shared prefixes, repeats inside a request, partial last
// blocks (so skip and cache differ), a block size of its own for some requests, and key 0.
void write_trace(const std::string& path, std::size_t requests, std::uint64_t seed,
                 std::uint32_t distinct = 400) {
  std::mt19937_64 rng(seed);
  kvtk::sim::kvtb::writer w(path, 16, true);
  std::vector<kvtk::block_key> keys;
  for (std::size_t r = 0; r < requests; ++r) {
    const std::size_t n = rng() % 7;  // 0..6 blocks
    keys.clear();
    const kvtk::block_key root = rng() % distinct;
    for (std::size_t i = 0; i < n; ++i) {
      keys.push_back(i == 0 ? root : (rng() % 5 == 0 ? keys[i - 1] : root * 7 + i + rng() % 3));
    }
    request_record rec;
    rec.keys = keys;
    rec.block_tokens = r % 11 == 5 ? 8 : 16;
    const std::uint64_t bt = rec.block_tokens;
    rec.input_length = n == 0 ? 0 : (n - 1) * bt + 1 + rng() % bt;  // often a partial tail
    w.add(rec);
  }
  w.finish();
}

// A flat trace (every request one whole block): loaded in the unit layout.
void write_flat_trace(const std::string& path, std::size_t requests, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  kvtk::sim::kvtb::writer w(path, 4, true);
  for (std::size_t r = 0; r < requests; ++r) {
    const kvtk::block_key k = rng() % 300;
    request_record rec;
    rec.keys = std::span<const kvtk::block_key>(&k, 1);
    rec.block_tokens = 4;
    rec.input_length = 4;
    w.add(rec);
  }
  w.finish();
}

loaded_trace load(const std::string& path) {
  return loaded_trace::load(path, kvtk::sim::trace_format::kvtb, 0, {}, nullptr);
}

std::vector<std::uint64_t> expected(const loaded_trace& t, partial_block p) {
  return kvtk::prefix::next_use_positions(t.view(), p);
}

std::vector<std::uint64_t> as_vector(const next_use_column& c) {
  return {c.span().begin(), c.span().end()};
}

struct file_id {
  ino_t ino = 0;
  struct timespec mtime {};
  off_t size = 0;
  bool operator==(const file_id& o) const {
    return ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec;
  }
};
file_id id_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return {st.st_ino, st.st_mtim, st.st_size};
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("kvtn: the sidecar's column equals next_use_positions", "[formats][kvtn]") {
  scratch_dir d("equal");
  const std::string trace = d / "t.kvtb";
  write_trace(trace, 3000, 1);
  const loaded_trace t = load(trace);
  REQUIRE_FALSE(t.view().unit_requests());
  for (const partial_block p : {partial_block::skip, partial_block::cache}) {
    INFO("partial_block " << static_cast<int>(p));
    const auto want = expected(t, p);
    REQUIRE(want.size() > 1000);
    SECTION("one pass, beside the trace") {
      const next_use_column c = kvtn::open(trace, t, p);
      CHECK(c.mapped());
      CHECK_FALSE(c.reused());
      CHECK(c.path() ==
            trace + (p == partial_block::cache ? ".next-cache.kvtn" : ".next-skip.kvtn"));
      CHECK(as_vector(c) == want);
      CHECK(fs::file_size(c.path()) == kvtn::header_bytes + 8 * want.size());
      CHECK(kvtn::inspect(c.path(), kvtn::identity_of(t.kvtb_file()->bytes()), p) ==
            kvtn::file_state::valid);
      // Dropping pages changes nothing but residency.
      c.release(0, c.size());
      CHECK(as_vector(c) == want);
    }
    SECTION("partitioned: a key-map budget far below the trace's distinct keys") {
      kvtn::options o;
      o.dir = d / "cache";
      fs::create_directories(o.dir);
      o.map_budget = 4096;
      CHECK(kvtn::build_partitions(t, p, o.map_budget) > 2);
      const next_use_column c = kvtn::open(trace, t, p, o);
      CHECK(fs::path(c.path()).parent_path() == fs::path(o.dir));
      CHECK(as_vector(c) == want);
      CHECK(kvtn::column_checksum(c.span()) == kvtn::column_checksum(want));
    }
  }
  SECTION("a flat trace (unit layout)") {
    const std::string flat = d / "flat.kvtb";
    write_flat_trace(flat, 5000, 2);
    const loaded_trace f = load(flat);
    REQUIRE(f.view().unit_requests());
    kvtn::options o;
    o.map_budget = 2048;
    CHECK(kvtn::build_partitions(f, partial_block::skip, o.map_budget) > 1);
    CHECK(as_vector(kvtn::open(flat, f, partial_block::skip, o)) ==
          expected(f, partial_block::skip));
  }
  SECTION("an empty column") {
    const std::string empty = d / "empty.kvtb";
    write_trace(empty, 0, 3);
    const loaded_trace e = load(empty);
    const next_use_column c = kvtn::open(empty, e, partial_block::skip);
    CHECK(c.empty());
    CHECK(kvtn::open(empty, e, partial_block::skip).reused());
  }
}

TEST_CASE("kvtn: a matching sidecar is reused, a stale one rebuilt", "[formats][kvtn]") {
  scratch_dir d("reuse");
  const std::string trace = d / "t.kvtb";
  write_trace(trace, 2000, 4);
  const std::string side = trace + ".next-skip.kvtn";
  {
    const loaded_trace t = load(trace);
    const next_use_column first = kvtn::open(trace, t, partial_block::skip);
    REQUIRE(first.path() == side);
    CHECK_FALSE(first.reused());
  }
  const file_id before = id_of(side);
  {
    const loaded_trace t = load(trace);
    const next_use_column again = kvtn::open(trace, t, partial_block::skip);
    CHECK(again.reused());
    CHECK(again.path() == side);
    CHECK(id_of(side) == before);  // not rewritten
    CHECK(as_vector(again) == expected(t, partial_block::skip));
    // The other mode is a file of its own.
    const next_use_column cache = kvtn::open(trace, t, partial_block::cache);
    CHECK(cache.path() == trace + ".next-cache.kvtn");
    CHECK(id_of(side) == before);
  }

  SECTION("a different trace under the same name") {
    write_trace(trace, 2100, 5);
    const loaded_trace t = load(trace);
    CHECK(kvtn::inspect(side, kvtn::identity_of(t.kvtb_file()->bytes()), partial_block::skip) ==
          kvtn::file_state::stale);
    const next_use_column c = kvtn::open(trace, t, partial_block::skip);
    CHECK_FALSE(c.reused());
    CHECK(c.path() == side);
    CHECK(as_vector(c) == expected(t, partial_block::skip));
    CHECK(kvtn::open(trace, t, partial_block::skip).reused());
  }
  SECTION("a truncated sidecar") {
    fs::resize_file(side, fs::file_size(side) / 2);
    const loaded_trace t = load(trace);
    const next_use_column c = kvtn::open(trace, t, partial_block::skip);
    CHECK_FALSE(c.reused());
    CHECK(as_vector(c) == expected(t, partial_block::skip));
    CHECK(fs::file_size(side) == static_cast<std::uintmax_t>(before.size));
  }
  SECTION("a sidecar cut inside its header") {
    fs::resize_file(side, 20);
    const loaded_trace t = load(trace);
    CHECK(as_vector(kvtn::open(trace, t, partial_block::skip)) == expected(t, partial_block::skip));
    CHECK(fs::file_size(side) == static_cast<std::uintmax_t>(before.size));
  }
  SECTION("a flipped byte in the column or the header") {
    for (const std::uint64_t at :
         {std::uint64_t{kvtn::header_bytes + 8 * 100 + 3}, std::uint64_t{17}}) {
      {
        std::fstream f(side, std::ios::in | std::ios::out | std::ios::binary);
        f.seekg(static_cast<std::streamoff>(at));
        char b = 0;
        f.read(&b, 1);
        b = static_cast<char>(b ^ 0x10);
        f.seekp(static_cast<std::streamoff>(at));
        f.write(&b, 1);
      }
      const loaded_trace t = load(trace);
      const next_use_column c = kvtn::open(trace, t, partial_block::skip);
      CHECK_FALSE(c.reused());
      CHECK(as_vector(c) == expected(t, partial_block::skip));
    }
  }
}

TEST_CASE("kvtn: a foreign file at the sidecar's path is never replaced", "[formats][kvtn]") {
  scratch_dir d("foreign");
  const std::string trace = d / "t.kvtb";
  write_trace(trace, 1500, 6);
  const std::string side = trace + ".next-skip.kvtn";
  const loaded_trace t = load(trace);
  const auto id = kvtn::identity_of(t.kvtb_file()->bytes());
  SECTION("a regular file without the magic") {
    { std::ofstream(side) << "my notes, not a sidecar\n"; }
    CHECK(kvtn::inspect(side, id, partial_block::skip) == kvtn::file_state::foreign);
    const next_use_column c = kvtn::open(trace, t, partial_block::skip);
    CHECK(read_file(side) == "my notes, not a sidecar\n");
    CHECK(c.path() != side);
    CHECK(fs::path(c.path()).parent_path() == fs::path(d / "tmp/kvtk-next"));
    CHECK(as_vector(c) == expected(t, partial_block::skip));
    // Next time the copy in the temporary directory is found and reused.
    CHECK(kvtn::open(trace, t, partial_block::skip).reused());
  }
  SECTION("a symbolic link, and a directory") {
    { std::ofstream(d / "target") << "x"; }
    fs::create_symlink(d / "target", side);
    fs::create_directory(trace + ".next-cache.kvtn");
    CHECK(kvtn::inspect(side, id, partial_block::skip) == kvtn::file_state::foreign);
    const next_use_column a = kvtn::open(trace, t, partial_block::skip);
    const next_use_column b = kvtn::open(trace, t, partial_block::cache);
    CHECK(fs::is_symlink(side));
    CHECK(read_file(d / "target") == "x");
    CHECK(fs::is_directory(trace + ".next-cache.kvtn"));
    CHECK(as_vector(a) == expected(t, partial_block::skip));
    CHECK(as_vector(b) == expected(t, partial_block::cache));
  }
  SECTION("no place but an unnamed temporary") {
    { std::ofstream(side) << "mine"; }
    fs::create_directories(d / "tmp/kvtk-next");
    fs::permissions(d / "tmp/kvtk-next", fs::perms::others_write, fs::perm_options::add);
    const next_use_column c = kvtn::open(trace, t, partial_block::skip);  // not a private dir
    CHECK(c.path().empty());
    CHECK(c.mapped());
    CHECK(as_vector(c) == expected(t, partial_block::skip));
    CHECK(read_file(side) == "mine");
    std::size_t left = 0;  // the unnamed file was unlinked
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(d / "tmp")) ++left;
    CHECK(left == 1);  // kvtk-next only
  }
}

TEST_CASE("kvtn: next_uses_for picks memory or the sidecar - results never change",
          "[formats][kvtn][api]") {
  scratch_dir d("api");
  const std::string trace = d / "t.kvtb";
  write_trace(trace, 4000, 7, 600);
  fs::create_directories(d / "cache");
  const loaded_trace t = load(trace);

  CHECK_FALSE(kvtk::sim::next_uses_for(trace, t, partial_block::skip, "off").mapped());
  CHECK_FALSE(kvtk::sim::next_uses_for(trace, t, partial_block::skip, "auto").mapped());  // small
  CHECK_FALSE(fs::exists(trace + ".next-skip.kvtn"));
  const next_use_column c = kvtk::sim::next_uses_for(trace, t, partial_block::skip, d / "cache");
  CHECK(c.mapped());
  CHECK(fs::path(c.path()).parent_path() == fs::path(d / "cache"));
  CHECK_THROWS_WITH(kvtk::sim::check_next_use_cache(d / "nowhere"),
                    Catch::Contains("not an existing directory"));
  CHECK_THROWS(kvtk::sim::check_next_use_cache(""));

  // Results without the timing fields.
  auto strip = [](nlohmann::json rows) {
    for (auto& r : rows) {
      r.erase("seconds");
      r.erase("block_refs_per_second");
    }
    return rows;
  };
  for (const char* pb : {"skip", "cache"}) {
    kvtk::sim::replay_options o;
    o.trace = trace;
    o.index = {"radix", "flat"};
    o.policy = {"lru", "belady"};
    o.capacity = {"20", "200"};
    o.partial_block = pb;
    o.next_use_cache = "off";
    const auto mem = kvtk::sim::run(o);
    o.next_use_cache = d / "cache";
    const auto side = kvtk::sim::run(o);
    INFO(pb);
    CHECK(mem.trace == side.trace);
    CHECK(strip(mem.results) == strip(side.results));
    CHECK(strip(side.results).dump().find("opt_fraction") != std::string::npos);
    CHECK(kvtk::sim::to_json(kvtk::sim::replay_options_from_json(kvtk::sim::to_json(o))) ==
          kvtk::sim::to_json(o));

    kvtk::sim::mrc_options m;
    m.trace = trace;
    m.opt = true;
    m.partial_block = pb;
    m.capacity = {"10", "100", "1000"};
    m.next_use_cache = "off";
    const auto mrc_mem = kvtk::sim::run(m);
    m.next_use_cache = d / "cache";
    CHECK(kvtk::sim::to_json(kvtk::sim::run(m)) == kvtk::sim::to_json(mrc_mem));

    kvtk::sim::tune_options u;
    u.trace = trace;
    u.capacity = {"50"};
    u.policy = {"lru", "fifo"};
    u.partial_block = pb;
    u.next_use_cache = "off";
    const auto tune_mem = kvtk::sim::to_json(kvtk::sim::run(u));
    u.next_use_cache = d / "cache";
    CHECK(kvtk::sim::to_json(kvtk::sim::run(u)) == tune_mem);
  }
}

TEST_CASE("next_use_ideal_counter: ranges add up to one replay_ideal", "[prefix][kvtn]") {
  scratch_dir d("ideal");
  const std::string trace = d / "t.kvtb";
  write_trace(trace, 1000, 8);
  const loaded_trace t = load(trace);
  for (const partial_block p : {partial_block::skip, partial_block::cache}) {
    const auto next = expected(t, p);
    const auto whole = kvtk::prefix::replay_ideal(t.view(), p, next);
    const auto by_set = kvtk::prefix::replay_ideal(t.view(), p);
    kvtk::prefix::next_use_ideal_counter c(next);
    for (std::size_t r = 0; r < t.view().requests(); r += 37) {
      c.add(t.view(), p, r, std::min(t.view().requests(), r + 37));
    }
    const auto sliced = c.finish();
    CHECK(sliced.counts.block_hits == whole.counts.block_hits);
    CHECK(sliced.counts.token_hits == whole.counts.token_hits);
    CHECK(sliced.unique_blocks == whole.unique_blocks);
    CHECK(whole.counts.block_hits == by_set.counts.block_hits);
    CHECK(whole.unique_blocks == by_set.unique_blocks);
    const auto from_file = kvtk::sim::detail::ideal_sliced(t, p, kvtn::open(trace, t, p));
    CHECK(from_file.counts.block_hits == whole.counts.block_hits);
  }
}
