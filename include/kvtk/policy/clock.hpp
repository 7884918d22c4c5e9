// kvtk/policy/clock.hpp — CLOCK (second chance), with an optional multi-bit counter.
//
// Modelled as FIFO-with-reinsertion, which is equivalent to a circular buffer with a hand: the list
// front is the hand position. A new node enters at the back with counter 0. A hit raises the
// counter (saturating at config.max_count; 1 = classic one-bit CLOCK). Eviction looks at the front:
// a node with counter > 0 is decremented and moved to the back; the first node with counter 0 is
// the victim. A pinned node at the front is moved to the back unchanged (passed over like a
// referenced one). Terminates because the caller guarantees an unpinned node exists: each full
// rotation lowers the counter of every unpinned node.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/intrusive.hpp"

namespace kvtk {

/// Thread safety: the family is stateless; a container belongs to one block_cache and follows it.
struct clock {
  static constexpr std::string_view name = "clock";
  struct config {
    /// Saturation value of the per-node reference counter (1 = one reference bit). Range 1..255.
    /// Default 1.
    std::uint32_t max_count = 1;
  };
  struct hook : detail::list_hook<clock> {
    std::uint8_t count = 0;
  };

  template <class Node>
  class container {
   public:
    using config_type = config;
    /// Throws: std::invalid_argument if max_count is 0 or > 255.
    container(const policy_params&, const config& cfg) : max_(cfg.max_count) {
      if (cfg.max_count == 0 || cfg.max_count > 255) {
        throw std::invalid_argument("clock: max_count must be in [1, 255]");
      }
    }

    void on_insert(Node& n, const access_hint&) noexcept {
      n.count = 0;
      list_.push_back(n);
    }
    /// Complexity: O(1), no list movement.
    void on_hit(Node& n, const access_hint&) noexcept {
      if (n.count < max_) ++n.count;
    }
    void on_miss(block_key, const access_hint&) noexcept {}
    /// Complexity: amortized O(1); worst case O(max_count * size).
    template <class Pred>
    Node* evict(Pred&& pred) noexcept {
      while (!list_.empty()) {
        Node& n = list_.front();
        list_.pop_front();
        if (!pred(n)) {
          list_.push_back(n);
        } else if (n.count > 0) {
          --n.count;
          list_.push_back(n);
        } else {
          return &n;
        }
      }
      return nullptr;
    }
    void on_erase(Node& n) noexcept { list_.erase(list_.iterator_to(n)); }
    [[nodiscard]] std::size_t size() const noexcept { return list_.size(); }
    template <class F>
    void for_each(F&& f) const {
      for (const Node& n : list_) f(n);
    }

   private:
    detail::intrusive_list<Node, clock> list_;
    std::uint32_t max_;
  };
};

static_assert(eviction_policy<clock>);

}  // namespace kvtk
