// kvtk/policy/priority_lru.hpp — priority-then-LRU (TensorRT-LLM's KV cache retention priorities).
//
// Every node has a priority in [0, levels); all nodes of a lower priority are evicted before any
// node of a higher one, and LRU order decides within a level. A node takes the priority of the
// access that inserted or last touched it (hint.priority, clamped to levels - 1), so a later
// request can raise or lower the retention of a shared block. One LRU list per level plus a
// two-level bitmap of non-empty levels makes the victim lookup O(1) (a count-trailing-zeros).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/intrusive.hpp"

namespace kvtk {

/// Thread safety: the family is stateless; a container belongs to one block_cache and follows it.
struct priority_lru {
  static constexpr std::string_view name = "priority-lru";
  /// Without priorities (all 35, the default) it is LRU.
  static constexpr unsigned hints_read = hint_fields::priority;
  static constexpr std::uint32_t max_levels = 4096;
  struct config {
    /// Number of priority levels (1..4096). Default 101 (TensorRT-LLM's 0..100).
    std::uint32_t levels = 101;
  };
  struct hook : detail::list_hook<priority_lru> {
    std::uint16_t level = 0;
  };

  template <class Node>
  class container {
    using list_type = detail::intrusive_list<Node, priority_lru>;

   public:
    using config_type = config;
    /// Throws: std::invalid_argument if levels is 0 or > 4096; std::bad_alloc.
    container(const policy_params&, const config& cfg) : levels_(cfg.levels) {
      if (cfg.levels == 0 || cfg.levels > max_levels) {
        throw std::invalid_argument("priority-lru: levels must be in [1, 4096]");
      }
      lists_ = std::vector<list_type>(cfg.levels);
      words_.assign((cfg.levels + 63) / 64, 0);
    }

    void on_insert(Node& n, const access_hint& h) noexcept { link(n, h.priority); }
    /// Effects: node moves to the MRU end of the level hint.priority.  Complexity: O(1).
    void on_hit(Node& n, const access_hint& h) noexcept {
      unlink(n);
      link(n, h.priority);
    }
    void on_miss(block_key, const access_hint&) noexcept {}
    /// Complexity: O(1) + O(pinned nodes passed over) + O(levels / 64^2) words scanned.
    template <class Pred>
    Node* evict(Pred&& pred) noexcept {
      for (std::uint32_t w = next_word(0); w < words_.size(); w = next_word(w + 1)) {
        std::uint64_t bits = words_[w];
        while (bits != 0) {
          const std::uint32_t lv = w * 64 + static_cast<std::uint32_t>(std::countr_zero(bits));
          bits &= bits - 1;
          if (Node* v = detail::first_evictable(lists_[lv], pred)) {
            unlink(*v);
            return v;
          }
        }
      }
      return nullptr;
    }
    void on_erase(Node& n) noexcept { unlink(n); }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }

    template <class F>
    void for_each(F&& f) const {
      for (const list_type& l : lists_) {
        for (const Node& n : l) f(n);
      }
    }
    [[nodiscard]] const char* audit() const noexcept {
      for (std::uint32_t lv = 0; lv < levels_; ++lv) {
        const bool bit = (words_[lv / 64] >> (lv % 64)) & 1;
        if (bit == lists_[lv].empty()) return "priority-lru: level bitmap out of sync";
        for (const Node& n : lists_[lv]) {
          if (n.level != lv) return "priority-lru: node on the wrong level";
        }
      }
      return "";
    }

   private:
    // First word index >= from that is non-empty (summary bitmap over words).
    [[nodiscard]] std::uint32_t next_word(std::uint32_t from) const noexcept {
      while (from < words_.size()) {
        const std::uint32_t s = from / 64;
        const std::uint64_t m = summary_[s] & (~std::uint64_t{0} << (from % 64));
        if (m != 0) return s * 64 + static_cast<std::uint32_t>(std::countr_zero(m));
        from = (s + 1) * 64;
      }
      return static_cast<std::uint32_t>(words_.size());
    }
    void link(Node& n, std::uint32_t priority) noexcept {
      const std::uint32_t lv = std::min(priority, levels_ - 1);
      n.level = static_cast<std::uint16_t>(lv);
      lists_[lv].push_back(n);
      words_[lv / 64] |= std::uint64_t{1} << (lv % 64);
      summary_[lv / 4096] |= std::uint64_t{1} << ((lv / 64) % 64);
      ++size_;
    }
    void unlink(Node& n) noexcept {
      const std::uint32_t lv = n.level;
      lists_[lv].erase(lists_[lv].iterator_to(n));
      --size_;
      if (lists_[lv].empty()) {
        words_[lv / 64] &= ~(std::uint64_t{1} << (lv % 64));
        if (words_[lv / 64] == 0) summary_[lv / 4096] &= ~(std::uint64_t{1} << ((lv / 64) % 64));
      }
    }

    std::uint32_t levels_;
    std::vector<list_type> lists_;
    std::vector<std::uint64_t> words_;
    std::array<std::uint64_t, 1> summary_{};  // 64 words * 64 levels = 4096 levels
    std::size_t size_ = 0;
  };
};

static_assert(eviction_policy<priority_lru>);

}  // namespace kvtk
