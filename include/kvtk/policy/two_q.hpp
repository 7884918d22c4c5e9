// kvtk/policy/two_q.hpp — 2Q, full version (Johnson & Shasha, VLDB'94).
//
// Three queues: A1in (FIFO of first-time entries, target Kin = kin_percent of capacity), Am (LRU of
// entries referenced again after leaving A1in) and A1out (ghost FIFO of keys evicted from A1in,
// at most kout_percent of capacity in weight and max_entries in count).
//   hit in Am     -> move to Am's MRU end;   hit in A1in -> nothing (correlated reference)
//   miss, in A1out -> the key leaves A1out (before room is made) and is admitted to Am
//   other miss     -> admitted to A1in
//   victim: A1in's oldest if A1in holds more than Kin (its key goes to A1out), else Am's LRU
//           (forgotten); falls back to the other queue when one has no unpinned node.
// Sizes are weights (node sizes in capacity units); with unit sizes this is the paper's algorithm.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/ghost_list.hpp"
#include "kvtk/detail/intrusive.hpp"
#include "kvtk/detail/segmented_list.hpp"

namespace kvtk {

/// Thread safety: the family is stateless; a container belongs to one block_cache and follows it.
struct two_q {
  static constexpr std::string_view name = "2q";
  struct config {
    /// Target share of capacity for A1in, percent (1..99). Default 25 (the paper's Kin).
    std::uint32_t kin_percent = 25;
    /// A1out ghost weight as percent of capacity (1..1000). Default 50 (the paper's Kout).
    std::uint32_t kout_percent = 50;
  };
  struct hook : detail::list_hook<two_q> {
    std::uint8_t segment = 0;  // a1in or am
  };

  template <class Node>
  class container {
   public:
    using config_type = config;
    /// Throws: std::invalid_argument on out-of-range percentages; std::bad_alloc.
    container(const policy_params& p, const config& cfg) : a1out_(p.max_entries) {
      if (cfg.kin_percent < 1 || cfg.kin_percent > 99) {
        throw std::invalid_argument("2q: kin_percent must be in [1, 99]");
      }
      if (cfg.kout_percent < 1 || cfg.kout_percent > 1000) {
        throw std::invalid_argument("2q: kout_percent must be in [1, 1000]");
      }
      kin_ = p.capacity * cfg.kin_percent / 100;
      kout_ = p.capacity * cfg.kout_percent / 100;
      if (kout_ == 0) kout_ = 1;
    }

    void on_insert(Node& n, const access_hint&) noexcept {
      lists_.push_back(n, pending_am_ ? am : a1in);
      pending_am_ = false;
    }
    void on_hit(Node& n, const access_hint&) noexcept {
      if (n.segment == am) lists_.move_to_back(n, am);
    }
    /// A key found in A1out is removed from it and will be admitted to Am.
    void on_miss(block_key k, const access_hint&) noexcept {
      pending_am_ = a1out_.take(k) != detail::ghost_list::none;
    }
    /// Complexity: O(1) + O(pinned nodes passed over).
    template <class Pred>
    Node* evict(Pred&& pred) noexcept {
      const unsigned first = lists_.weight(a1in) > kin_ || lists_[am].empty() ? a1in : am;
      Node* v = detail::first_evictable(lists_[first], pred);
      if (v == nullptr) v = detail::first_evictable(lists_[first == am ? a1in : am], pred);
      if (v == nullptr) return nullptr;
      lists_.erase(*v);
      if (v->segment == a1in) {
        a1out_.push(0, v->key, v->size);
        while (a1out_.weight(0) > kout_) a1out_.pop(0);
      }
      return v;
    }
    void on_erase(Node& n) noexcept { lists_.erase(n); }
    [[nodiscard]] std::size_t size() const noexcept { return lists_.size(); }

    template <class F>
    void for_each(F&& f) const {
      lists_.for_each(f);
    }
    [[nodiscard]] const char* audit() const noexcept {
      if (!lists_.consistent()) return "2q: A1in/Am membership or weights out of sync";
      if (a1out_.weight(0) > kout_) return "2q: A1out over Kout";
      return "";
    }
    [[nodiscard]] const detail::ghost_list& a1out() const noexcept { return a1out_; }

   private:
    static constexpr unsigned a1in = 0, am = 1;  // segments
    detail::segmented_list<Node, two_q, 2> lists_;
    detail::ghost_list a1out_;
    std::uint64_t kin_ = 0, kout_ = 0;
    bool pending_am_ = false;
  };
};

static_assert(eviction_policy<two_q>);

}  // namespace kvtk
