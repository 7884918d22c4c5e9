// kvtk/detail/intrusive.hpp — Boost.Intrusive aliases shared by the policies.
//
// Policies link nodes through *base* hooks tagged by the policy, so a node type can derive from
// several policies' hooks without ambiguity. normal_link: no auto-unlink or safe-mode writes on
// the hot path; the conformance audits check list integrity instead.
#pragma once

#include <boost/intrusive/list.hpp>

namespace kvtk::detail {

namespace bi = boost::intrusive;

template <class Tag>
using list_hook = bi::list_base_hook<bi::tag<Tag>, bi::link_mode<bi::normal_link>>;

/// Intrusive doubly-linked list of Node through its list_hook<Tag>; O(1) size.
template <class Node, class Tag>
using intrusive_list = bi::list<Node, bi::base_hook<list_hook<Tag>>, bi::constant_time_size<true>>;

/// Walks `list` from its front (the eviction end in kvtk's convention) and returns the first node
/// satisfying pred, or nullptr. Complexity: O(number of nodes passed over).
template <class List, class Pred>
auto* first_evictable(List& list, Pred& pred) noexcept {
  using node = typename List::value_type;
  for (node& n : list) {
    if (pred(n)) return &n;
  }
  return static_cast<node*>(nullptr);
}

}  // namespace kvtk::detail
