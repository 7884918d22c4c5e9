// kvtk/tier/hicache_storage.hpp — SGLang 0.5.23's L3 `file` storage backend as HiCache sees it
// (HiCacheFile with its LRU file evictor; docs/engines/sglang-0.5.23-hicache.md section 11.2):
// one file per page, named by the page's key, which identifies the whole prefix up to it.
//
// Rules (HCS = srt/mem_cache/hicache_storage.py, LFE = .../storage/file/lru_file_evictor.py):
//  * Unbounded unless a size is given (max_size): every write is kept (LFE:90-92).
//  * With a size, an LRU of pages in bytes: a new page of b bytes that would take the total past
//    max_size first evicts least recently used pages until the total is at most
//    int(max_size x eviction_ratio) - b, and is refused when the total plus b still exceeds
//    max_size (LFE:148-205).
//  * Writing a page already stored touches it and writes nothing (HCS:893-897); so does a read
//    hit (get). The existence query behind a prefetch's hit (batch_exists) touches nothing and
//    stops at the first missing key (HCS:462-473).
//
// Design: page slots (key, LRU links) in an array sized once (the distinct pages a run can
// name, or max_size's pages when smaller), one key table, an intrusive LRU list. Nothing
// allocates after construction.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/key_table.hpp"

namespace kvtk::tier {

struct hicache_storage_config {
  std::uint64_t max_bytes = 0;     ///< max_size (bytes; 0 = unbounded, SGLang's default)
  double eviction_ratio = 0.9;     ///< eviction_ratio (SGLang's default 0.9; in (0, 1])
  std::uint64_t page_bytes = 1;    ///< bytes of one page file (KV bytes per token x page tokens)
  std::uint32_t max_pages = 0;     ///< slots to allocate: the distinct pages the run can name
};

/// SGLang's prefetch policies (--hicache-storage-prefetch-policy).
enum class hicache_prefetch_policy : std::uint8_t { best_effort, wait_complete, timeout };

/// --hicache-storage-prefetch-policy's name of p.
inline const char* name_of(hicache_prefetch_policy p) noexcept {
  switch (p) {
    case hicache_prefetch_policy::best_effort: return "best_effort";
    case hicache_prefetch_policy::wait_complete: return "wait_complete";
    case hicache_prefetch_policy::timeout: return "timeout";
  }
  return "?";
}

/// The L3 tier and its prefetch as `offload` "host:...,storage=file,..." configures them: SGLang's
/// knobs with its defaults, and the file system's speed, which SGLang does not model (kvtk's
/// assumption: one local NVMe drive through the page cache).
struct hicache_l3_config {
  bool enabled = false;                  ///< storage=file (--hicache-storage-backend file)
  std::uint64_t max_bytes = 0;           ///< storage_size= (max_size; 0 = unbounded, SGLang's default)
  hicache_prefetch_policy policy = hicache_prefetch_policy::timeout;  ///< SGLang's default
  std::uint64_t prefetch_threshold_tokens = 256;  ///< prefetch_threshold (tokens)
  double timeout_base_s = 1.0;           ///< prefetch_timeout_base (s)
  double timeout_per_ki_token_s = 0.25;  ///< prefetch_timeout_per_ki_token (s per 1,024 tokens)
  double bytes_per_s = 2e9;              ///< storage_gb_per_s: reads and writes (kvtk's assumption)
  double latency_s = 100e-6;             ///< storage_latency_us: per query and per 128-page batch
};

struct hicache_storage_counters {
  std::uint64_t written_pages = 0;   ///< pages written (new files)
  std::uint64_t rewritten_pages = 0; ///< writes of pages already stored (touched, not written)
  std::uint64_t refused_pages = 0;   ///< writes refused for want of room
  std::uint64_t evicted_pages = 0;   ///< pages the evictor removed
  std::uint64_t read_pages = 0;      ///< pages read back (prefetches)
};

/// Thread safety: one per thread (SGLang keeps one backend per rank).
class hicache_storage {
  static constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
  struct slot {
    block_key key = 0;
    std::uint32_t prev = none, next = none;
  };
  struct key_of {
    const slot* slots;
    std::uint64_t operator()(std::uint32_t i) const noexcept { return slots[i].key; }
  };

 public:
  /// Requires: page_bytes >= 1, eviction_ratio in (0, 1], max_pages >= 1 and < 2^31.
  /// Throws: std::invalid_argument naming the field; std::bad_alloc.
  explicit hicache_storage(const hicache_storage_config& c)
      : cfg_(checked(c)), slots_(slot_count(c)),
        table_(static_cast<std::uint32_t>(slots_.size()), key_of{slots_.data()}, 2) {
    free_.reserve(slots_.size());
    for (std::size_t i = slots_.size(); i-- > 0;) free_.push_back(static_cast<std::uint32_t>(i));
  }
  hicache_storage(const hicache_storage&) = delete;
  hicache_storage& operator=(const hicache_storage&) = delete;

  /// Effects: writes page k (HiCacheFile.set): a stored page is touched; a new one is kept at
  /// the most recently used end after the evictor made room, or refused (false) when it cannot.
  /// Complexity: O(1) amortized (evictions O(1) each).  Throws: nothing.
  bool write(block_key k) noexcept {
    const std::uint32_t s = table_.find(k);
    if (s != none) {
      ++totals_.rewritten_pages;
      touch(s);
      return true;
    }
    const std::uint64_t b = cfg_.page_bytes;
    if (cfg_.max_bytes > 0 && bytes() + b > cfg_.max_bytes) {
      const auto keep = static_cast<std::int64_t>(static_cast<double>(cfg_.max_bytes) * cfg_.eviction_ratio) -
                        static_cast<std::int64_t>(b);
      while (head_ != none && static_cast<std::int64_t>(bytes()) > keep) evict_oldest();
      if (bytes() + b > cfg_.max_bytes) {
        ++totals_.refused_pages;
        return false;
      }
    }
    if (free_.empty()) {  // more distinct pages than the run was sized for: refuse, never grow
      ++totals_.refused_pages;
      return false;
    }
    const std::uint32_t n = free_.back();
    free_.pop_back();
    slots_[n] = {k, none, none};
    table_.insert(k, n);
    push_back(n);
    ++totals_.written_pages;
    return true;
  }
  /// The number of leading keys stored (batch_exists), touching nothing.  Complexity: O(result).
  [[nodiscard]] std::uint32_t leading(std::span<const block_key> keys) const noexcept {
    std::uint32_t i = 0;
    while (i < keys.size() && table_.find(keys[i]) != none) ++i;
    return i;
  }
  /// Reads page k back (get): true, touching it, when stored.
  bool read(block_key k) noexcept {
    const std::uint32_t s = table_.find(k);
    if (s == none) return false;
    ++totals_.read_pages;
    touch(s);
    return true;
  }
  [[nodiscard]] bool contains(block_key k) const noexcept { return table_.find(k) != none; }
  [[nodiscard]] std::uint64_t pages() const noexcept { return table_.size(); }
  [[nodiscard]] std::uint64_t bytes() const noexcept { return table_.size() * cfg_.page_bytes; }
  [[nodiscard]] const hicache_storage_counters& counters() const noexcept { return totals_; }
  [[nodiscard]] const hicache_storage_config& config() const noexcept { return cfg_; }
  /// The stored keys from least to most recently used (tests).
  [[nodiscard]] std::vector<block_key> lru_order() const {
    std::vector<block_key> out;
    for (std::uint32_t s = head_; s != none; s = slots_[s].next) out.push_back(slots_[s].key);
    return out;
  }

 private:
  static hicache_storage_config checked(const hicache_storage_config& c) {
    if (c.page_bytes == 0) throw std::invalid_argument("hicache storage: page_bytes must be >= 1");
    if (!(c.eviction_ratio > 0 && c.eviction_ratio <= 1)) {
      throw std::invalid_argument("hicache storage: eviction_ratio must be in (0, 1]");
    }
    if (c.max_pages == 0 || c.max_pages >= (1u << 31)) {
      throw std::invalid_argument("hicache storage: max_pages must be in [1, 2^31)");
    }
    return c;
  }
  static std::size_t slot_count(const hicache_storage_config& c) {
    std::uint64_t n = c.max_pages;
    if (c.max_bytes > 0) n = std::min<std::uint64_t>(n, c.max_bytes / c.page_bytes + 1);
    return static_cast<std::size_t>(std::max<std::uint64_t>(n, 1));
  }
  void push_back(std::uint32_t s) noexcept {
    slots_[s].prev = tail_;
    slots_[s].next = none;
    (tail_ == none ? head_ : slots_[tail_].next) = s;
    tail_ = s;
  }
  void unlink(std::uint32_t s) noexcept {
    (slots_[s].prev == none ? head_ : slots_[slots_[s].prev].next) = slots_[s].next;
    (slots_[s].next == none ? tail_ : slots_[slots_[s].next].prev) = slots_[s].prev;
  }
  void touch(std::uint32_t s) noexcept {
    unlink(s);
    push_back(s);
  }
  void evict_oldest() noexcept {
    const std::uint32_t s = head_;
    unlink(s);
    table_.erase(slots_[s].key);
    free_.push_back(s);
    ++totals_.evicted_pages;
  }

  hicache_storage_config cfg_;
  std::vector<slot> slots_;
  detail::key_table<key_of> table_;
  std::vector<std::uint32_t> free_;
  std::uint32_t head_ = none, tail_ = none;
  hicache_storage_counters totals_;
};

}  // namespace kvtk::tier
