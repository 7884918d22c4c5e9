// kvtk/prefix/engine_index.hpp — the engine accounting modes of a prefix replay (`--engine`):
// indexes that count hits and occupy blocks the way a serving engine's own cache code does,
// for replay() (replay.hpp) to drive like any other index.
//
//   engine   index                      follows
//   ideal    flat / radix / hashchain   kvtk's definitions (replay.hpp): every cacheable block
//                                       may hit; what the optimum and the MRCs use
//   vllm     vllm_engine_index          vLLM 0.33.0 KVCacheManager + BlockPool (vllm_block_pool.hpp)
//   sglang   sglang_engine_index        SGLang 0.5.23 RadixCache, LRU, page = block
//                                       (sglang_radix_cache.hpp)
//
// Both engines cache only full blocks and never let the last prompt token hit, so an engine
// replay counts block refs as the request's full blocks (partial_block::skip) and its hits are at
// most floor((L - 1) / B) blocks. Requests are run one at a time to completion (match, allocate,
// cache, free), prompt only: no output tokens are generated or cached.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kvtk/concepts.hpp"
#include "kvtk/names.hpp"
#include "kvtk/prefix/sglang_radix_cache.hpp"
#include "kvtk/prefix/vllm_block_pool.hpp"

namespace kvtk::prefix {

/// Whose definitions count hits: kvtk's own (ideal: the index x policy grid) or an engine's cache
/// code. `replay --engine`, `mrc --engine` and `simulate`'s `engine` key all parse engine_names.
enum class engine_accounting : std::uint8_t { ideal, vllm, sglang };
inline constexpr name_table<engine_accounting, 3> engine_names{"engine", {"ideal", "vllm", "sglang"}};

/// `--engine vllm`: vLLM's block pool (vllm_block_pool) as a replay index.
/// Thread safety: as block_cache: one index per thread (as replay --threads uses them).
class vllm_engine_index {
 public:
  static constexpr bool offline = false;
  static constexpr const char* engine_version = vllm_block_pool::engine_version;

  explicit vllm_engine_index(std::uint32_t capacity_blocks) : pool_(capacity_blocks) {}

  /// Called by replay_requests before process(): the request's prompt length and block size.
  void begin_request(std::uint64_t input_tokens, std::uint32_t block_tokens) noexcept {
    L_ = input_tokens;
    bt_ = block_tokens;
  }
  /// Requires: begin_request() for this request; `blocks` its full blocks' keys.
  std::uint32_t process(std::span<const block_key> blocks, std::span<const std::uint64_t>,
                        const access_hint&) {
    const std::uint64_t n = (L_ + bt_ - 1) / bt_;
    if (held_.size() < n) held_.resize(n);  // grows to the longest request
    const auto r = pool_.run_request(blocks, L_, bt_, held_);
    if (!r.scheduled) ++unscheduled_;
    return r.hit_blocks;
  }
  [[nodiscard]] std::uint64_t evictions() const noexcept { return pool_.evictions(); }
  /// Requests that needed more blocks than the pool has (never admitted by vLLM).
  [[nodiscard]] std::uint64_t unscheduled() const noexcept { return unscheduled_; }
  [[nodiscard]] const vllm_block_pool& pool() const noexcept { return pool_; }

 private:
  vllm_block_pool pool_;
  std::vector<std::uint32_t> held_;
  std::uint64_t L_ = 0, unscheduled_ = 0;
  std::uint32_t bt_ = 1;
};

/// `--engine sglang`: SGLang's radix cache (sglang_radix_cache) as a replay index.
/// Thread safety: as block_cache: one index per thread (as replay --threads uses them).
class sglang_engine_index {
 public:
  static constexpr bool offline = false;
  static constexpr const char* engine_version = sglang_radix_cache::engine_version;

  explicit sglang_engine_index(std::uint32_t capacity_blocks) : cache_(capacity_blocks) {}

  void begin_request(std::uint64_t input_tokens, std::uint32_t block_tokens) noexcept {
    L_ = input_tokens;
    bt_ = block_tokens;
  }
  std::uint32_t process(std::span<const block_key> blocks, std::span<const std::uint64_t>,
                        const access_hint&) noexcept {
    const auto r = cache_.run_request(blocks, L_, bt_);
    if (!r.scheduled) ++unscheduled_;
    return r.hit_blocks;
  }
  /// Pages evicted (whole leaves; sglang_radix_cache::evicted_nodes counts the leaves).
  [[nodiscard]] std::uint64_t evictions() const noexcept { return cache_.evictions(); }
  [[nodiscard]] std::uint64_t unscheduled() const noexcept { return unscheduled_; }
  [[nodiscard]] const sglang_radix_cache& cache() const noexcept { return cache_; }

 private:
  sglang_radix_cache cache_;
  std::uint64_t L_ = 0, unscheduled_ = 0;
  std::uint32_t bt_ = 1;
};

}  // namespace kvtk::prefix
