// SGLang's L3 `file` backend as kvtk models it (kvtk/tier/hicache_storage.hpp): hand cases from
// SGLang's own evictor (the [ran] case of docs/engines/sglang-0.5.23-hicache.md section 11.2)
// and a brute-force model of its byte-counted LRU on random writes and reads.
#include <catch2/catch.hpp>
#include <kvtk/tier/hicache_storage.hpp>
#include <algorithm>
#include <list>
#include <random>
#include <vector>

using namespace kvtk;

namespace {

tier::hicache_storage make(std::uint64_t max_bytes, std::uint64_t page_bytes, double ratio = 0.9) {
  tier::hicache_storage_config c;
  c.max_bytes = max_bytes;
  c.page_bytes = page_bytes;
  c.eviction_ratio = ratio;
  c.max_pages = 1000;
  return tier::hicache_storage(c);
}

// LruFileEvictor in bytes, as written in SGLang (LFE:148-205): a list from least to most recent.
struct naive_storage {
  std::uint64_t max_bytes, page_bytes;
  double ratio;
  std::list<block_key> lru;
  std::uint64_t refused = 0, evicted = 0;
  bool write(block_key k) {
    if (auto it = std::find(lru.begin(), lru.end(), k); it != lru.end()) {
      lru.erase(it);
      lru.push_back(k);
      return true;
    }
    auto total = [&] { return static_cast<std::int64_t>(lru.size() * page_bytes); };
    const auto b = static_cast<std::int64_t>(page_bytes);
    if (max_bytes > 0 && total() + b > static_cast<std::int64_t>(max_bytes)) {
      const auto keep = static_cast<std::int64_t>(static_cast<double>(max_bytes) * ratio) - b;
      while (!lru.empty() && total() > keep) {
        lru.pop_front();
        ++evicted;
      }
      if (total() + b > static_cast<std::int64_t>(max_bytes)) {
        ++refused;
        return false;
      }
    }
    lru.push_back(k);
    return true;
  }
  bool read(block_key k) {
    auto it = std::find(lru.begin(), lru.end(), k);
    if (it == lru.end()) return false;
    lru.erase(it);
    lru.push_back(k);
    return true;
  }
};

}  // namespace

TEST_CASE("hicache storage: SGLang's evictor strands a prefix's tail", "[hicache_storage]") {
  // Cap 4,000 B, 1,000-B pages: A0..A3 written and read back; writing B0 evicts A0 and A1 (down
  // to 0.9 x 4,000 - 1,000 = 2,600 B), leaving A2 and A3, which no prefix query reaches.
  auto s = make(4000, 1000);
  const std::vector<block_key> a{10, 11, 12, 13};
  for (const block_key k : a) CHECK(s.write(k));
  for (const block_key k : a) CHECK(s.read(k));
  CHECK(s.leading(a) == 4);
  CHECK(s.write(20));
  CHECK(s.lru_order() == std::vector<block_key>{12, 13, 20});
  CHECK(s.counters().evicted_pages == 2);
  CHECK(s.leading(a) == 0);
  CHECK(s.contains(12));
  // A rewrite touches and writes nothing; the existence query touches nothing.
  CHECK(s.write(12));
  CHECK(s.counters().rewritten_pages == 1);
  CHECK(s.lru_order() == std::vector<block_key>{13, 20, 12});
  (void)s.leading(std::vector<block_key>{13});
  CHECK(s.lru_order().front() == 13);
}

TEST_CASE("hicache storage: a page larger than the room is refused", "[hicache_storage]") {
  auto s = make(1500, 1000, 0.5);  // keep down to 750 - 1000 < 0: everything goes, then 1000 fits
  CHECK(s.write(1));
  CHECK(s.write(2));  // 2000 > 1500: evict down to -250 (all), then 1000 <= 1500
  CHECK(s.lru_order() == std::vector<block_key>{2});
  auto tiny = make(500, 1000);
  CHECK_FALSE(tiny.write(1));
  CHECK(tiny.counters().refused_pages == 1);
  CHECK(tiny.pages() == 0);
  auto unbounded = make(0, 1000);
  for (block_key k = 1; k <= 600; ++k) CHECK(unbounded.write(k));
  CHECK(unbounded.pages() == 600);
}

TEST_CASE("hicache storage: equals a brute-force model of SGLang's evictor on random work",
          "[hicache_storage]") {
  for (const std::uint64_t seed : {1, 2, 3, 4}) {
    for (const std::uint64_t cap : {0, 3000, 7500, 20000}) {
      INFO("seed " << seed << ", cap " << cap);
      std::mt19937_64 rng(seed);
      auto s = make(cap, 1000, seed % 2 ? 0.9 : 0.6);
      naive_storage n{cap, 1000, seed % 2 ? 0.9 : 0.6, {}, 0, 0};
      for (int step = 0; step < 3000; ++step) {
        const block_key k = 1 + rng() % 40;
        if (rng() % 3 == 0) {
          CHECK(s.read(k) == n.read(k));
        } else {
          CHECK(s.write(k) == n.write(k));
        }
      }
      CHECK(s.lru_order() == std::vector<block_key>(n.lru.begin(), n.lru.end()));
      CHECK(s.counters().evicted_pages == n.evicted);
      CHECK(s.counters().refused_pages == n.refused);
    }
  }
}

TEST_CASE("hicache storage: refused configurations", "[hicache_storage]") {
  tier::hicache_storage_config c;
  c.max_pages = 0;
  CHECK_THROWS_WITH(tier::hicache_storage(c), Catch::Contains("max_pages"));
  c.max_pages = 10;
  c.eviction_ratio = 1.5;
  CHECK_THROWS_WITH(tier::hicache_storage(c), Catch::Contains("eviction_ratio"));
  c.eviction_ratio = 0.9;
  c.page_bytes = 0;
  CHECK_THROWS_WITH(tier::hicache_storage(c), Catch::Contains("page_bytes"));
}
