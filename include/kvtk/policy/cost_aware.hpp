// kvtk/policy/cost_aware.hpp — recompute-cost-aware eviction (GreedyDual-Size-Frequency over the
// cost of recomputing a KV block minus the cost of fetching it from the tier below).
//
// Why: a KV block is worth keeping in proportion to how likely it is to be reused and to what a
// miss costs. Recomputing block d of a request (tokens [d·B, (d+1)·B)) costs
//     recompute(d) = B · linear_s + attention_s · Σ_{j = dB}^{(d+1)B-1} j
// (the projections and MLP cost the same per token; attention at position j reads j earlier
// tokens), so deep blocks of long contexts are dearer than head blocks — unlike any recency
// policy. When the tier below can serve the block, a miss only costs the difference:
//     value(d) = max(recompute(d) − fetch_s, 0) / block_bytes.
// Expected value ≈ P(reuse) × value: GreedyDual-Size-Frequency (Cherkasova 1998) estimates
// P(reuse) by the block's access count and ages old blocks out with an inflation value L:
//     H(n) = L + frequency(n) · value(depth(n)),   victim = min H (ties: least recently used),
//     L = max(L, H(victim)) after each eviction.
// The depth comes from access_hint::depth (the block's index in its request), set by the prefix
// indexes and the tier hierarchy. This is the policy vLLM #23641 and LMCache's cost-aware
// eviction proposal ask for.
//
// Design: an indexed binary min-heap of node pointers on (H, stamp), preallocated to max_entries;
// a node's heap position lives in its hook. Pinned nodes met at the top of the heap while
// looking for a victim are set aside in a preallocated buffer and pushed back.
// Complexity: O(log n) per insert, hit and eviction (+ O(p log n) for p pinned nodes passed over).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "kvtk/concepts.hpp"

namespace kvtk {

/// Thread safety: the family is stateless; a container belongs to one block_cache and follows it.
struct cost_aware {
  static constexpr std::string_view name = "cost-aware";
  /// Prices each block by hint.depth; without depths every block looks like the first one.
  static constexpr unsigned hints_read = hint_fields::depth;
  struct config {
    /// Tokens per block. Default 16 (vLLM).
    std::uint32_t block_tokens = 16;
    /// Prefill seconds per token independent of position (projections, MLP). Default 1e-4.
    double linear_s_per_token = 1e-4;
    /// Prefill seconds per token per earlier token (attention). Default 3e-9.
    double attention_s_per_token_pair = 3e-9;
    /// Seconds to fetch one block from the tier below (0 = nothing below: a miss recomputes).
    double fetch_s = 0.0;
    /// Bytes per block (the denominator of the value; equal sizes make it a scale). Default 1.
    double block_bytes = 1.0;
  };
  struct hook {
    double h = 0;               // GDSF priority
    double value = 0;           // value(depth) at insertion
    std::uint64_t stamp = 0;    // last access, for ties
    std::uint32_t freq = 0;     // accesses since insertion
    std::uint32_t heap_pos = 0;
  };

  template <class Node>
  class container {
   public:
    using config_type = config;
    /// Throws: std::invalid_argument for block_tokens 0, negative or non-finite times, or
    /// block_bytes <= 0; std::bad_alloc.
    container(const policy_params& p, const config& cfg) : cfg_(cfg) {
      if (cfg.block_tokens == 0) throw std::invalid_argument("cost-aware: block_tokens must be > 0");
      if (!(cfg.linear_s_per_token >= 0) || !(cfg.attention_s_per_token_pair >= 0) ||
          !(cfg.fetch_s >= 0) || !(cfg.block_bytes > 0) || cfg.linear_s_per_token > 1e9 ||
          cfg.attention_s_per_token_pair > 1e9 || cfg.fetch_s > 1e9 || cfg.block_bytes > 1e18) {
        throw std::invalid_argument("cost-aware: times must be >= 0 and block_bytes > 0");
      }
      heap_.reserve(p.max_entries);
      aside_.reserve(p.max_entries);
    }
    container(const container&) = delete;
    container& operator=(const container&) = delete;
    // A move keeps every pointer valid: they point into vectors whose buffers move along.
    // (block_cache's move assignment destroys and move-constructs, so none is needed here.)
    container(container&&) noexcept = default;
    container& operator=(container&&) = delete;

    /// The value of a block at depth d (seconds saved per byte by a hit).
    [[nodiscard]] double value_at(std::uint32_t depth) const noexcept {
      const double b = cfg_.block_tokens;
      const double first = static_cast<double>(depth) * b;
      const double positions = b * first + b * (b - 1) / 2;  // sum of j over the block
      const double recompute =
          b * cfg_.linear_s_per_token + cfg_.attention_s_per_token_pair * positions;
      const double saved = recompute - cfg_.fetch_s;
      return saved > 0 ? saved / cfg_.block_bytes : 0.0;
    }

    /// Effects: frequency 1, H = L + value(depth).  Complexity: O(log n).
    void on_insert(Node& n, const access_hint& hint) noexcept {
      n.freq = 1;
      n.value = value_at(hint.depth);
      n.h = inflation_ + n.value;
      n.stamp = ++clock_;
      n.heap_pos = static_cast<std::uint32_t>(heap_.size());
      heap_.push_back(&n);
      sift_up(n.heap_pos);
    }
    /// Effects: frequency + 1, H = L + frequency · value.  Complexity: O(log n).
    void on_hit(Node& n, const access_hint&) noexcept {
      ++n.freq;
      n.h = inflation_ + static_cast<double>(n.freq) * n.value;
      n.stamp = ++clock_;
      sift_down(n.heap_pos);
      sift_up(n.heap_pos);  // H can also fall when L went down (see evict)
    }
    void on_miss(block_key, const access_hint&) noexcept {}
    /// Effects: removes and returns the evictable node of least (H, stamp); L becomes its H.
    template <class Pred>
    Node* evict(Pred&& pred) noexcept {
      Node* victim = nullptr;
      while (!heap_.empty()) {
        Node* top = heap_.front();
        remove_at(0);
        if (pred(*top)) {
          victim = top;
          break;
        }
        aside_.push_back(top);
      }
      for (Node* n : aside_) {
        n->heap_pos = static_cast<std::uint32_t>(heap_.size());
        heap_.push_back(n);
        sift_up(n->heap_pos);
      }
      aside_.clear();
      // L never decreases: a victim found past pinned nodes can have a larger H than they do.
      if (victim != nullptr && victim->h > inflation_) inflation_ = victim->h;
      return victim;
    }
    void on_erase(Node& n) noexcept { remove_at(n.heap_pos); }
    [[nodiscard]] std::size_t size() const noexcept { return heap_.size(); }

    /// Visits every node in heap-array order (not eviction order; audits and tests).
    template <class F>
    void for_each(F&& f) const {
      for (const Node* n : heap_) f(*n);
    }
    /// The inflation value L (tests).
    [[nodiscard]] double inflation() const noexcept { return inflation_; }
    /// Heap order and positions (audits). Returns an empty string when sound.
    [[nodiscard]] const char* audit() const noexcept {
      for (std::size_t i = 0; i < heap_.size(); ++i) {
        if (heap_[i]->heap_pos != i) return "cost-aware: stale heap position";
        if (i > 0 && less(*heap_[i], *heap_[(i - 1) / 2])) return "cost-aware: heap order broken";
      }
      return "";
    }

   private:
    static bool less(const Node& a, const Node& b) noexcept {
      return a.h != b.h ? a.h < b.h : a.stamp < b.stamp;
    }
    void place(std::size_t i, Node* n) noexcept {
      heap_[i] = n;
      n->heap_pos = static_cast<std::uint32_t>(i);
    }
    void sift_up(std::size_t i) noexcept {
      Node* n = heap_[i];
      while (i > 0) {
        const std::size_t parent = (i - 1) / 2;
        if (!less(*n, *heap_[parent])) break;
        place(i, heap_[parent]);
        i = parent;
      }
      place(i, n);
    }
    void sift_down(std::size_t i) noexcept {
      Node* n = heap_[i];
      const std::size_t size = heap_.size();
      for (;;) {
        std::size_t c = 2 * i + 1;
        if (c >= size) break;
        if (c + 1 < size && less(*heap_[c + 1], *heap_[c])) ++c;
        if (!less(*heap_[c], *n)) break;
        place(i, heap_[c]);
        i = c;
      }
      place(i, n);
    }
    void remove_at(std::size_t i) noexcept {
      Node* last = heap_.back();
      heap_.pop_back();
      if (i == heap_.size()) return;
      place(i, last);
      sift_down(i);
      sift_up(last->heap_pos);
    }

    config cfg_;
    std::vector<Node*> heap_, aside_;
    double inflation_ = 0;
    std::uint64_t clock_ = 0;
  };
};

static_assert(eviction_policy<cost_aware>);

}  // namespace kvtk
