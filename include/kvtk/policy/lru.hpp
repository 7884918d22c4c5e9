// kvtk/policy/lru.hpp — least recently used.
//
// One intrusive list, front = least recently used. Hit: move to back. Victim: the least recently
// used node that is not pinned (pinned nodes are passed over in place, keeping their position).
#pragma once

#include <string_view>
#include <utility>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/intrusive.hpp"

namespace kvtk {

/// Thread safety: the family is stateless; a container belongs to one block_cache and follows it.
struct lru {
  static constexpr std::string_view name = "lru";
  /// LRU has no parameters.
  struct config {};
  struct hook : detail::list_hook<lru> {};

  template <class Node>
  class container {
   public:
    using config_type = config;
    /// Complexity: O(1). Throws: nothing.
    container(const policy_params&, const config&) noexcept {}

    /// Effects: node becomes most recently used.  Complexity: O(1).
    void on_insert(Node& n, const access_hint&) noexcept { list_.push_back(n); }
    /// Effects: node becomes most recently used.  Complexity: O(1).
    void on_hit(Node& n, const access_hint&) noexcept {
      list_.erase(list_.iterator_to(n));
      list_.push_back(n);
    }
    void on_miss(block_key, const access_hint&) noexcept {}
    /// Effects: unlinks and returns the LRU node satisfying pred.
    /// Complexity: O(1) + O(pinned nodes passed over).
    template <class Pred>
    Node* evict(Pred&& pred) noexcept {
      Node* v = detail::first_evictable(list_, pred);
      if (v) list_.erase(list_.iterator_to(*v));
      return v;
    }
    void on_erase(Node& n) noexcept { list_.erase(list_.iterator_to(n)); }
    [[nodiscard]] std::size_t size() const noexcept { return list_.size(); }
    /// Effects: the next two victims when none is pinned (null past the end): a hint, so that a
    /// cache can prefetch their table entries and nodes before it evicts them (block_cache).
    /// Complexity: O(1).
    [[nodiscard]] std::pair<const Node*, const Node*> next_victims() const noexcept {
      auto it = list_.begin();
      if (it == list_.end()) return {nullptr, nullptr};
      const Node* first = &*it;
      return {first, ++it == list_.end() ? nullptr : &*it};
    }

    /// Visits resident nodes from LRU to MRU.
    template <class F>
    void for_each(F&& f) const {
      for (const Node& n : list_) f(n);
    }

   private:
    detail::intrusive_list<Node, lru> list_;
  };
};

static_assert(eviction_policy<lru>);

}  // namespace kvtk
