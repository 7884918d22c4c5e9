// kvtk/policy/belady.hpp — Belady's MIN / OPT (offline; Belady 1966).
//
// The caller supplies, with every access, the position of the key's next access (hint.next_use;
// access_hint::never if it is never used again). The victim is the resident node whose next use is
// furthest in the future, i.e. the optimal demand-paging choice for unit sizes: the missing block
// is always admitted and the victim is chosen among the blocks resident before it. Ties (several
// "never") are broken by the smaller key for determinism. Nodes sit in an intrusive red-black tree
// ordered by (next_use, key): O(log n) per operation, no allocation.
#pragma once

#include <boost/intrusive/set.hpp>
#include <cstdint>
#include <string_view>

#include "kvtk/concepts.hpp"

namespace kvtk {

struct belady {
  static constexpr std::string_view name = "belady";
  /// Offline: every access must carry hint.next_use (see kvtk/offline.hpp).
  static constexpr bool offline = true;
  /// Belady has no parameters; it needs hint.next_use on every access.
  struct config {};
  struct hook : boost::intrusive::set_base_hook<boost::intrusive::tag<belady>,
                                                boost::intrusive::link_mode<boost::intrusive::normal_link>,
                                                boost::intrusive::optimize_size<false>> {
    std::uint64_t next_use = access_hint::never;
  };

  template <class Node>
  class container {
    struct order {
      bool operator()(const Node& a, const Node& b) const noexcept {
        return a.next_use != b.next_use ? a.next_use < b.next_use : a.key > b.key;
      }
    };
    using set_type =
        boost::intrusive::multiset<Node, boost::intrusive::base_hook<hook>,
                                   boost::intrusive::compare<order>,
                                   boost::intrusive::constant_time_size<true>>;

   public:
    using config_type = config;
    container(const policy_params&, const config&) noexcept {}

    /// Complexity: O(log n).
    void on_insert(Node& n, const access_hint& h) noexcept {
      n.next_use = h.next_use;
      set_.insert(n);
    }
    /// Complexity: O(log n).
    void on_hit(Node& n, const access_hint& h) noexcept {
      set_.erase(set_.iterator_to(n));
      n.next_use = h.next_use;
      set_.insert(n);
    }
    void on_miss(block_key, const access_hint&) noexcept {}
    /// Effects: unlinks the unpinned node with the furthest next use.
    /// Complexity: O(log n) + O(pinned nodes passed over).
    template <class Pred>
    Node* evict(Pred&& pred) noexcept {
      for (auto it = set_.rbegin(); it != set_.rend(); ++it) {
        if (pred(*it)) {
          Node* v = &*it;
          set_.erase(set_.iterator_to(*v));
          return v;
        }
      }
      return nullptr;
    }
    void on_erase(Node& n) noexcept { set_.erase(set_.iterator_to(n)); }
    [[nodiscard]] std::size_t size() const noexcept { return set_.size(); }

    template <class F>
    void for_each(F&& f) const {
      for (const Node& n : set_) f(n);
    }

   private:
    set_type set_;
  };
};

static_assert(eviction_policy<belady>);

}  // namespace kvtk
