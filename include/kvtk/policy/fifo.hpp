// kvtk/policy/fifo.hpp — first in, first out.
//
// One intrusive list in insertion order; hits change nothing. Victim: the oldest unpinned node.
#pragma once

#include <string_view>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/intrusive.hpp"

namespace kvtk {

/// Thread safety: the family is stateless; a container belongs to one block_cache and follows it.
struct fifo {
  static constexpr std::string_view name = "fifo";
  /// FIFO has no parameters.
  struct config {};
  struct hook : detail::list_hook<fifo> {};

  template <class Node>
  class container {
   public:
    using config_type = config;
    container(const policy_params&, const config&) noexcept {}

    /// Complexity: O(1).
    void on_insert(Node& n, const access_hint&) noexcept { list_.push_back(n); }
    /// A hit does not reorder FIFO.  Complexity: O(1).
    void on_hit(Node&, const access_hint&) noexcept {}
    void on_miss(block_key, const access_hint&) noexcept {}
    /// Complexity: O(1) + O(pinned nodes passed over).
    template <class Pred>
    Node* evict(Pred&& pred) noexcept {
      Node* v = detail::first_evictable(list_, pred);
      if (v) list_.erase(list_.iterator_to(*v));
      return v;
    }
    void on_erase(Node& n) noexcept { list_.erase(list_.iterator_to(n)); }
    [[nodiscard]] std::size_t size() const noexcept { return list_.size(); }
    template <class F>
    void for_each(F&& f) const {
      for (const Node& n : list_) f(n);
    }

   private:
    detail::intrusive_list<Node, fifo> list_;
  };
};

static_assert(eviction_policy<fifo>);

}  // namespace kvtk
