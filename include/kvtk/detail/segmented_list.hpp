// kvtk/detail/segmented_list.hpp — N intrusive lists with per-list weights, for policies that
// split the cache into segments (2Q's A1in/Am, ARC's T1/T2, S3-FIFO's S/M, W-TinyLFU's window/
// probation/protected).
//
// A node records its segment in `node.segment` (a field of the policy's hook) and is linked in
// exactly that list; weight(s) is the sum of node.size over list s. Front = eviction end.
#pragma once

#include <cstdint>

#include "kvtk/detail/intrusive.hpp"

namespace kvtk::detail {

template <class Node, class Tag, unsigned N>
class segmented_list {
 public:
  using list_type = intrusive_list<Node, Tag>;

  /// Effects: links n at the back of segment s.  Complexity: O(1).
  void push_back(Node& n, unsigned s) noexcept {
    n.segment = static_cast<std::uint8_t>(s);
    lists_[s].push_back(n);
    weight_[s] += n.size;
  }
  /// Requires: n linked.  Effects: unlinks n from its segment.  Complexity: O(1).
  void erase(Node& n) noexcept {
    list_type& l = lists_[n.segment];
    l.erase(l.iterator_to(n));
    weight_[n.segment] -= n.size;
  }
  /// Effects: moves n to the back of segment s (its own or another).  Complexity: O(1).
  void move_to_back(Node& n, unsigned s) noexcept {
    erase(n);
    push_back(n, s);
  }
  /// Requires: segment s non-empty.  Effects: its front node becomes its back node.
  void rotate(unsigned s) noexcept {
    Node& n = lists_[s].front();
    lists_[s].pop_front();
    lists_[s].push_back(n);
  }

  [[nodiscard]] list_type& operator[](unsigned s) noexcept { return lists_[s]; }
  [[nodiscard]] const list_type& operator[](unsigned s) const noexcept { return lists_[s]; }
  [[nodiscard]] std::uint64_t weight(unsigned s) const noexcept { return weight_[s]; }
  [[nodiscard]] std::size_t size() const noexcept {
    std::size_t n = 0;
    for (const list_type& l : lists_) n += l.size();
    return n;
  }

  /// Visits every node, segment by segment, front to back.
  template <class F>
  void for_each(F&& f) const {
    for (const list_type& l : lists_) {
      for (const Node& n : l) f(n);
    }
  }
  /// True when every node sits in the list its segment names and the weights add up.
  [[nodiscard]] bool consistent() const noexcept {
    for (unsigned s = 0; s < N; ++s) {
      std::uint64_t w = 0;
      for (const Node& n : lists_[s]) {
        if (n.segment != s) return false;
        w += n.size;
      }
      if (w != weight_[s]) return false;
    }
    return true;
  }

 private:
  list_type lists_[N];
  std::uint64_t weight_[N] = {};
};

}  // namespace kvtk::detail
