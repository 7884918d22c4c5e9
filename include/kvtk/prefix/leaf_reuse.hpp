// kvtk/prefix/leaf_reuse.hpp — reuse-ranked LRU over the leaves of a prefix_tree.
//
// An online policy that learns, while it runs, which kinds of blocks get reused and how soon, and
// ranks each block by the stamp of its last access shifted by its class's learned reuse odds
// (detail/reuse_model.hpp has the model and why the shift is tau * ln p). What the registered
// policy reads, all of it known when a request arrives:
//   * the key's reference count so far (resident, or remembered after eviction);
//   * whether the block is the request's partial last block (access_hint::full_blocks and depth).
// Without full_blocks (an engine that does not fill it) no block is partial; the policy still
// learns from reference counts alone. Nothing else (no arrival times, no session ids): the same
// trace gives the same result.
// An ablation feature (reuse_features::depth, off) also reads the request's continuation depth:
// 0 for a request that does not continue an earlier one, d + 1 when its hit covers every full
// block of the request (at depth d) that last touched the deepest hit block (a conversation's
// next turn re-sends the previous prompt whole). It needs begin_request, which radix_index calls.
// Semantics, per access of slot s at stamp t (forward path order, as prefix_tree calls them):
//   touch:  the previous event of s is reused (gap t - last stamp of s); refs += 1;
//   insert: if the history remembers the key, its last event is reused and refs restarts from
//           the remembered count bucket + 1, else refs = 1;
//   then    class c = class_of(refs, request depth, partial); the model counts the event;
//           rank = 2^62 + t + offset_c (as of the model's last refresh).
//   evict:  the history remembers (key, class, stamp).
// The smallest rank among evictable leaves goes first (ties: the tree's order).
//
// Memory: 12 bytes per block of capacity here plus the model's 32 (history); with prefix_tree's
// own 64 and its 4-byte path buffer, 112 bytes per block (tests/test_reuse.cpp asserts <= 128).
// No allocation after construction.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/reuse_model.hpp"

namespace kvtk::prefix {

/// What leaf_reuse reads; the defaults are the registered policy. The ablations in
/// docs/policy-quality.md change one at a time (bench/reuse_ablation.cpp). The continuation depth
/// is off: on the bundled and generated traces it changed the result by -0.013..+0.007 of the
/// optimum (no gain for four extra class dimensions to learn), so it did not earn its place.
struct reuse_features {
  bool refs = true;       ///< classes by reference-count bucket (else all refs count as 1)
  bool depth = false;     ///< classes by continuation depth (else depth 0)
  bool partial = true;    ///< a class of its own for partial last blocks
  bool history = true;    ///< remember evicted keys (reuse after eviction counts)
  /// Classes by session category instead of continuation depth (the registered session-reuse):
  /// 3 when the request's reply awaits a tool, else its turn bucket (0: a first turn or no
  /// session, 1: turns 1-3, 2: turns 4 and later). Needs access_hint's session fields.
  bool session = false;
  // The double stays last: clang 14 reads a double member followed by a bool of a class
  // template argument as 0 (tests/test_reuse.cpp caught it in the asan build).
  double horizon = 3.0;   ///< reuse_config::horizon_multiplier
};

/// Thread safety: its state lives inside the prefix_tree and follows the tree's rules.
template <reuse_features F = reuse_features{}>
struct basic_leaf_reuse {
  static constexpr std::string_view name = F.session ? "session-reuse" : "reuse";
  static constexpr unsigned hints_read =
      hint_fields::depth | hint_fields::full_blocks | (F.session ? hint_fields::session : 0u);
  static constexpr reuse_features features = F;

  class state {
   public:
    explicit state(std::uint32_t capacity) : model_(capacity, config()), stamp_(capacity), meta_(capacity) {}

    /// Effects: starts a request whose hit path (resident slots, root side first) is `hit`: sets
    /// the continuation depth used by the request's accesses. Call before touching the path.
    /// Complexity: O(1).
    void begin_request(std::span<const std::uint32_t> hit) noexcept {
      depth_ = 0;
      if (F.depth && !hit.empty()) {
        const meta m = meta_[hit.back()];
        if (m.last_full) depth_ = std::min<std::uint32_t>(m.turn + 1u, 255u);
      }
    }

    template <class Tree>
    std::uint64_t on_insert(std::uint32_t s, std::uint64_t stamp, const access_hint& h,
                            Tree& tree) noexcept {
      std::uint32_t refs = 1;
      unsigned c = 0;
      std::uint64_t gap = 0;
      if (F.history && model_.recall(tree.at(s).key, stamp, c, gap)) {
        model_.on_reuse(c, gap);
        refs = detail::reuse_model::bucket_refs(detail::reuse_model::refs_bucket_of_class(c)) + 1;
      }
      return record(s, refs, stamp, h);
    }
    template <class Tree>
    std::uint64_t on_touch(std::uint32_t s, std::uint64_t, std::uint64_t stamp,
                           const access_hint& h, Tree&) noexcept {
      model_.on_reuse(meta_[s].cls, stamp - stamp_[s]);
      return record(s, std::min<std::uint32_t>(meta_[s].refs + 1u, 255u), stamp, h);
    }
    void on_evict(std::uint32_t s, std::uint64_t, block_key key) noexcept {
      if (F.history) model_.remember(key, meta_[s].cls, stamp_[s]);
    }

    [[nodiscard]] const detail::reuse_model& model() const noexcept { return model_; }
    [[nodiscard]] std::size_t memory_bytes() const noexcept {
      return model_.memory_bytes() + stamp_.size() * (sizeof(std::uint64_t) + sizeof(meta));
    }

   private:
    static detail::reuse_config config() {
      detail::reuse_config c;
      c.horizon_multiplier = F.horizon;
      return c;
    }
    static std::uint32_t session_category(const access_hint& h) noexcept {
      if (h.awaits_tool) return 3;
      return h.turn == 0 ? 0 : h.turn <= 3 ? 1 : 2;
    }
    struct meta {
      std::uint8_t refs = 0, cls = 0, turn = 0, last_full = 0;
    };
    std::uint64_t record(std::uint32_t s, std::uint32_t refs, std::uint64_t stamp,
                         const access_hint& h) noexcept {
      const bool partial = F.partial && h.depth >= h.full_blocks;
      const std::uint32_t t = F.session ? session_category(h) : depth_;
      const unsigned c = detail::reuse_model::class_of(F.refs ? refs : 1, t, partial);
      model_.on_event(c);
      stamp_[s] = stamp;
      meta_[s] = meta{static_cast<std::uint8_t>(refs), static_cast<std::uint8_t>(c),
                      static_cast<std::uint8_t>(depth_),
                      static_cast<std::uint8_t>(h.full_blocks != 0 && h.depth == h.full_blocks - 1)};
      return (std::uint64_t{1} << 62) + stamp + static_cast<std::uint64_t>(model_.offset(c));
    }

    detail::reuse_model model_;
    std::vector<std::uint64_t> stamp_;
    std::vector<meta> meta_;
    std::uint32_t depth_ = 0;
  };
};

/// The registered reuse-ranked leaf order (every feature on).
using leaf_reuse = basic_leaf_reuse<>;

/// The same model with classes by session category in the way of Alibaba's "KVCache in the
/// Wild" (category = the request's kind and turn; here: awaiting a tool, or the turn bucket),
/// ranking blocks by the category's learned reuse odds. Without session fields every request
/// is category 0 and it equals `reuse`.
using leaf_session_reuse = basic_leaf_reuse<reuse_features{.session = true}>;

}  // namespace kvtk::prefix
