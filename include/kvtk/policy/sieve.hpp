// kvtk/policy/sieve.hpp — SIEVE (Zhang et al., NSDI'24).
//
// One list, back = newest. New nodes enter at the back with visited = false; a hit sets visited
// (no movement). A hand walks from the front (oldest) toward the back: a visited node is cleared
// and kept in place, the first unvisited node is the victim, and the hand stays at the victim's
// newer neighbour. Past the back the hand wraps to the front. A pinned node is passed over without
// clearing its bit. Terminates because an unpinned node exists: one sweep clears all their bits.
#pragma once

#include <string_view>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/intrusive.hpp"

namespace kvtk {

/// Thread safety: the family is stateless; a container belongs to one block_cache and follows it.
struct sieve {
  static constexpr std::string_view name = "sieve";
  /// SIEVE has no parameters.
  struct config {};
  struct hook : detail::list_hook<sieve> {
    bool visited = false;
  };

  template <class Node>
  class container {
    using list_type = detail::intrusive_list<Node, sieve>;

   public:
    using config_type = config;
    container(const policy_params&, const config&) noexcept {}

    void on_insert(Node& n, const access_hint&) noexcept {
      n.visited = false;
      list_.push_back(n);
    }
    void on_hit(Node& n, const access_hint&) noexcept { n.visited = true; }
    void on_miss(block_key, const access_hint&) noexcept {}
    /// Complexity: amortized O(1); worst case O(size) per call.
    template <class Pred>
    Node* evict(Pred&& pred) noexcept {
      if (list_.empty()) return nullptr;
      auto it = hand_ == nullptr ? list_.begin() : list_.iterator_to(*hand_);
      for (;;) {
        if (it == list_.end()) it = list_.begin();
        Node& n = *it;
        if (pred(n)) {
          if (!n.visited) break;
          n.visited = false;
        }
        ++it;
      }
      Node* victim = &*it;
      auto next = list_.erase(it);
      hand_ = next == list_.end() ? nullptr : &*next;
      return victim;
    }
    void on_erase(Node& n) noexcept {
      auto next = list_.erase(list_.iterator_to(n));
      if (hand_ == &n) hand_ = next == list_.end() ? nullptr : &*next;
    }
    [[nodiscard]] std::size_t size() const noexcept { return list_.size(); }
    template <class F>
    void for_each(F&& f) const {
      for (const Node& n : list_) f(n);
    }

   private:
    list_type list_;
    Node* hand_ = nullptr;  // next node to examine; nullptr = start at the front
  };
};

static_assert(eviction_policy<sieve>);

}  // namespace kvtk
