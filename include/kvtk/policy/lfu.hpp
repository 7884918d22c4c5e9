// kvtk/policy/lfu.hpp — least frequently used, O(1) (Shah, Mitra & Matani, 2010).
//
// Design
// ------
// Nodes are grouped in frequency buckets; buckets form an intrusive list in increasing frequency,
// and each bucket holds its nodes in LRU order (front = least recent). A node's frequency is the
// number of accesses since its insertion (insertion counts as 1); it is forgotten on eviction.
// Hit: the node moves to the back of the bucket for frequency f+1, created right after its current
// bucket if absent; an emptied bucket is released. Victim: the front of the lowest bucket, i.e.
// least frequent, ties broken by least recent access. Buckets come from a pool sized max_entries +
// 1 (at most one bucket per resident node, plus one transient), so no operation allocates.
//
// Invariants: buckets strictly increasing in freq; no empty bucket is linked; every node's
// `bucket` points at the bucket whose list holds it.
#pragma once

#include <cstdint>
#include <iterator>
#include <string_view>
#include <vector>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/intrusive.hpp"

namespace kvtk {

/// Thread safety: the family is stateless; a container belongs to one block_cache and follows it.
struct lfu {
  static constexpr std::string_view name = "lfu";
  /// LFU has no parameters.
  struct config {};
  struct bucket_base;
  struct hook : detail::list_hook<lfu> {
    bucket_base* bucket = nullptr;
  };
  struct bucket_tag {};
  struct bucket_base : detail::list_hook<bucket_tag> {
    std::uint64_t freq = 0;
  };

  template <class Node>
  class container {
    struct bucket : bucket_base {
      detail::intrusive_list<Node, lfu> nodes;
    };

   public:
    using config_type = config;
    /// Throws: std::bad_alloc.
    container(const policy_params& p, const config&) : pool_(std::size_t{p.max_entries} + 1) {
      free_.reserve(pool_.size());
      for (std::size_t i = pool_.size(); i-- > 0;) free_.push_back(&pool_[i]);
    }
    container(const container&) = delete;
    container& operator=(const container&) = delete;
    // A move keeps every pointer valid: they point into vectors whose buffers move along.
    // (block_cache's move assignment destroys and move-constructs, so none is needed here.)
    container(container&&) noexcept = default;
    container& operator=(container&&) = delete;

    /// Effects: node gets frequency 1.  Complexity: O(1).
    void on_insert(Node& n, const access_hint&) noexcept {
      bucket* b = buckets_.empty() ? nullptr : static_cast<bucket*>(&buckets_.front());
      if (b == nullptr || b->freq != 1) {
        b = take_bucket(1);
        buckets_.push_front(*b);
      }
      attach(n, *b);
    }
    /// Effects: frequency + 1.  Complexity: O(1).
    void on_hit(Node& n, const access_hint&) noexcept {
      bucket* cur = static_cast<bucket*>(n.bucket);
      auto next_it = std::next(buckets_.iterator_to(*cur));
      bucket* next = next_it == buckets_.end() ? nullptr : static_cast<bucket*>(&*next_it);
      if (next == nullptr || next->freq != cur->freq + 1) {
        next = take_bucket(cur->freq + 1);
        buckets_.insert(next_it, *next);
      }
      detach(n);
      attach(n, *next);
    }
    void on_miss(block_key, const access_hint&) noexcept {}
    /// Complexity: O(1) + O(pinned nodes passed over).
    template <class Pred>
    Node* evict(Pred&& pred) noexcept {
      for (bucket_base& bb : buckets_) {
        auto& b = static_cast<bucket&>(bb);
        if (Node* v = detail::first_evictable(b.nodes, pred)) {
          detach(*v);
          return v;
        }
      }
      return nullptr;
    }
    void on_erase(Node& n) noexcept { detach(n); }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }

    /// Frequency of a resident node (tests).
    [[nodiscard]] static std::uint64_t frequency(const Node& n) noexcept { return n.bucket->freq; }

    /// Visits nodes from the eviction end: increasing frequency, LRU first within one.
    template <class F>
    void for_each(F&& f) const {
      for (const bucket_base& bb : buckets_) {
        for (const Node& n : static_cast<const bucket&>(bb).nodes) f(n);
      }
    }
    /// Buckets strictly increasing and non-empty (audits). Returns an empty string when sound.
    [[nodiscard]] const char* audit() const noexcept {
      std::uint64_t last = 0;
      for (const bucket_base& bb : buckets_) {
        const auto& b = static_cast<const bucket&>(bb);
        if (b.nodes.empty()) return "lfu: empty bucket linked";
        if (b.freq <= last) return "lfu: bucket frequencies not increasing";
        for (const Node& n : b.nodes) {
          if (n.bucket != &b) return "lfu: node points at the wrong bucket";
        }
        last = b.freq;
      }
      return "";
    }

   private:
    bucket* take_bucket(std::uint64_t freq) noexcept {
      bucket* b = free_.back();
      free_.pop_back();
      b->freq = freq;
      return b;
    }
    void attach(Node& n, bucket& b) noexcept {
      b.nodes.push_back(n);
      n.bucket = &b;
      ++size_;
    }
    void detach(Node& n) noexcept {
      auto& b = static_cast<bucket&>(*n.bucket);
      b.nodes.erase(b.nodes.iterator_to(n));
      --size_;
      if (b.nodes.empty()) {
        buckets_.erase(buckets_.iterator_to(b));
        free_.push_back(&b);
      }
    }

    std::vector<bucket> pool_;
    std::vector<bucket*> free_;
    detail::intrusive_list<bucket_base, bucket_tag> buckets_;
    std::size_t size_ = 0;
  };
};

static_assert(eviction_policy<lfu>);

}  // namespace kvtk
