// kvtk/policy/w_tinylfu.hpp — W-TinyLFU (Einziger, Friedman & Manes, ACM ToS 2017; Caffeine).
//
// A small LRU window (window_percent of capacity, default 1%) in front of a segmented-LRU main
// area (probation + protected, protected = protected_percent of main, default 80%). Every access
// (hit or miss) is counted in a frequency_sketch (count-min with 4-bit counters, doorkeeper, aging
// after sample_multiplier * max_entries accesses).
//   insert:  into the window's MRU end; while the window is over its share its LRU node moves to
//            probation's MRU end (no eviction: the total is unchanged).
//   hit:     window -> window MRU; probation -> protected MRU (protected overflow demotes its LRU
//            to probation MRU); protected -> protected MRU.
//   evict:   if the window is at or over its share, its LRU node is the *candidate* and
//            probation's LRU (else protected's LRU) the *victim*: the candidate is admitted (moves
//            to probation, the victim is evicted) iff estimate(candidate) > estimate(victim),
//            otherwise the candidate is evicted. Otherwise the victim is main's LRU node.
// Ties reject the candidate (Caffeine's rule, without its random admission for hash-flooding
// defence). Pinned nodes are never candidate or victim.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/frequency_sketch.hpp"
#include "kvtk/detail/intrusive.hpp"
#include "kvtk/detail/segmented_list.hpp"

namespace kvtk {

/// Thread safety: the family is stateless; a container belongs to one block_cache and follows it.
struct w_tinylfu {
  static constexpr std::string_view name = "wtinylfu";
  struct config {
    /// Window share of capacity, percent (1..99). Default 1. At least one unit.
    std::uint32_t window_percent = 1;
    /// Protected share of the main area, percent (1..99). Default 80.
    std::uint32_t protected_percent = 80;
    /// Sketch aging period, in multiples of max_entries accesses (>= 1). Default 10.
    std::uint32_t sample_multiplier = 10;
    /// Use the doorkeeper Bloom filter in front of the sketch. Default true.
    bool doorkeeper = true;
  };
  struct hook : detail::list_hook<w_tinylfu> {
    std::uint8_t segment = 0;  // window, probation or protected
  };

  template <class Node>
  class container {
   public:
    using config_type = config;
    /// Throws: std::invalid_argument on out-of-range fields; std::bad_alloc.
    container(const policy_params& p, const config& cfg)
        : sketch_(p.max_entries, std::uint64_t{p.max_entries} * checked_multiplier(cfg),
                  cfg.doorkeeper) {
      if (cfg.window_percent < 1 || cfg.window_percent > 99) {
        throw std::invalid_argument("wtinylfu: window_percent must be in [1, 99]");
      }
      if (cfg.protected_percent < 1 || cfg.protected_percent > 99) {
        throw std::invalid_argument("wtinylfu: protected_percent must be in [1, 99]");
      }
      window_cap_ = p.capacity * cfg.window_percent / 100;
      if (window_cap_ == 0) window_cap_ = 1;
      const std::uint64_t main_cap = p.capacity > window_cap_ ? p.capacity - window_cap_ : 0;
      protected_cap_ = main_cap * cfg.protected_percent / 100;
    }

    void on_insert(Node& n, const access_hint&) noexcept {
      lists_.push_back(n, window);
      while (lists_.weight(window) > window_cap_) {
        lists_.move_to_back(lists_[window].front(), probation);
      }
    }
    void on_hit(Node& n, const access_hint&) noexcept {
      sketch_.increment(n.key);
      if (n.segment != probation) {
        lists_.move_to_back(n, n.segment);
        return;
      }
      lists_.move_to_back(n, protected_);
      while (lists_.weight(protected_) > protected_cap_ && lists_[protected_].size() > 1) {
        lists_.move_to_back(lists_[protected_].front(), probation);
      }
    }
    void on_miss(block_key k, const access_hint&) noexcept { sketch_.increment(k); }
    /// Complexity: O(1) + O(pinned nodes passed over).
    template <class Pred>
    Node* evict(Pred&& pred) noexcept {
      Node* cand = lists_.weight(window) >= window_cap_
                       ? detail::first_evictable(lists_[window], pred)
                       : nullptr;
      Node* victim = detail::first_evictable(lists_[probation], pred);
      if (victim == nullptr) victim = detail::first_evictable(lists_[protected_], pred);
      if (cand != nullptr && victim != nullptr) {
        if (sketch_.estimate(cand->key) > sketch_.estimate(victim->key)) {
          lists_.move_to_back(*cand, probation);
          lists_.erase(*victim);
          return victim;
        }
        lists_.erase(*cand);
        return cand;
      }
      Node* v = victim != nullptr ? victim : cand;
      if (v == nullptr) v = detail::first_evictable(lists_[window], pred);
      if (v != nullptr) lists_.erase(*v);
      return v;
    }
    void on_erase(Node& n) noexcept { lists_.erase(n); }
    [[nodiscard]] std::size_t size() const noexcept { return lists_.size(); }

    [[nodiscard]] const detail::frequency_sketch& sketch() const noexcept { return sketch_; }
    template <class F>
    void for_each(F&& f) const {
      lists_.for_each(f);
    }
    [[nodiscard]] const char* audit() const noexcept {
      if (!lists_.consistent()) return "wtinylfu: segment membership or weights out of sync";
      if (lists_.weight(window) > window_cap_) return "wtinylfu: window over its share";
      return "";
    }

   private:
    static std::uint32_t checked_multiplier(const config& cfg) {
      if (cfg.sample_multiplier == 0) {
        throw std::invalid_argument("wtinylfu: sample_multiplier must be >= 1");
      }
      return cfg.sample_multiplier;
    }
    static constexpr unsigned window = 0, probation = 1, protected_ = 2;  // segments
    detail::segmented_list<Node, w_tinylfu, 3> lists_;                    // front = LRU
    std::uint64_t window_cap_ = 0, protected_cap_ = 0;
    detail::frequency_sketch sketch_;
  };
};

static_assert(eviction_policy<w_tinylfu>);

}  // namespace kvtk
