// kvtk/detail/indexed_heap.hpp against a brute-force reference: random pushes, erases and
// re-ranks, the minimum and every position checked after each operation.
#include <catch2/catch.hpp>
#include <kvtk/detail/indexed_heap.hpp>
#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace {

struct record {
  std::uint64_t rank = 0;
  std::uint32_t pos = kvtk::detail::indexed_heap::none;
};

}  // namespace

TEST_CASE("indexed heap: random operations against a scan for the minimum", "[indexed_heap]") {
  std::mt19937_64 rng(7);
  std::vector<record> r(200);
  kvtk::detail::indexed_heap h;
  h.reserve(r.size());
  auto less = [&](std::uint32_t a, std::uint32_t b) { return r[a].rank < r[b].rank; };
  auto pos = [&](std::uint32_t x) -> std::uint32_t& { return r[x].pos; };
  auto cpos = [&](std::uint32_t x) { return r[x].pos; };
  std::vector<bool> in(r.size(), false);
  for (int step = 0; step < 20000; ++step) {
    const auto x = static_cast<std::uint32_t>(rng() % r.size());
    const int op = static_cast<int>(rng() % 3);
    if (!in[x]) {
      r[x].rank = rng() % 50;  // ties are frequent
      h.push(x, less, pos);
      in[x] = true;
    } else if (op == 0) {
      h.erase(x, less, pos);
      in[x] = false;
      CHECK(r[x].pos == kvtk::detail::indexed_heap::none);
    } else {
      r[x].rank = rng() % 50;
      h.fix(x, less, pos);
    }
    REQUIRE(std::string(h.check(less, cpos)).empty());
    std::size_t n = 0;
    std::uint64_t least = ~0ull;
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (!in[i]) continue;
      ++n;
      least = std::min(least, r[i].rank);
    }
    REQUIRE(h.size() == n);
    if (n > 0) REQUIRE(r[h.top()].rank == least);
  }
  // The check catches a broken position and a broken order.
  if (h.size() >= 2) {
    const std::uint32_t a = h.ids()[0], b = h.ids()[1];
    std::swap(r[a].pos, r[b].pos);
    CHECK(std::string(h.check(less, cpos)) == "heap positions");
    std::swap(r[a].pos, r[b].pos);
    r[b].rank = 0;
    r[a].rank = 1;
    CHECK(std::string(h.check(less, cpos)) == "heap order");
  }
}
