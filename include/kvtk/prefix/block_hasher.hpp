// kvtk/prefix/block_hasher.hpp — engine-compatible block keys behind one type: the prefix-cache
// block hashes of vLLM v1 or the page hashes of SGLang, byte for byte, for a token sequence; and
// a builder of prefix_trace from token sequences.
//
// Checked against the engines' own functions (vLLM 0.33.0, SGLang 0.5.23) by
// tests/test_block_hasher.cpp on the vectors of tests/data/engine_hash_vectors.json, which
// tools/engine-check/gen_hash_vectors.py writes by calling those functions.
//
// Each engine's rules live in its own header and hasher type (vllm_hash.hpp: vllm_hasher,
// sglang_hash.hpp: sglang_hasher); block_hasher holds one of them in a variant so a caller picks
// the engine at run time (a command-line flag, a config file) and keeps one type. Every member
// is a single std::visit: adding an engine means adding a hasher type with the same members and
// an alternative here, with no per-method engine switch to extend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ranges>
#include <span>
#include <utility>
#include <variant>
#include <vector>

#include "kvtk/concepts.hpp"
#include "kvtk/prefix/block_keys.hpp"
#include "kvtk/prefix/engine_hash_types.hpp"
#include "kvtk/prefix/replay.hpp"
#include "kvtk/prefix/sglang_hash.hpp"
#include "kvtk/prefix/vllm_hash.hpp"

namespace kvtk::prefix {

/// The block keys of one engine configuration.
/// Thread safety: const member functions may be called from any number of threads at once (the
/// hasher keeps only its options and vLLM's NONE_HASH); distinct hashers are independent.
class block_hasher {
 public:
  /// Effects: vLLM v1 keys; NONE_HASH is computed once here.
  /// Requires: o.block_size > 0.  Complexity: O(o.none_hash_seed.size()).
  /// Throws: std::invalid_argument (block_size 0), std::bad_alloc.
  explicit block_hasher(vllm_hash_options o) : engine_(vllm_hasher(std::move(o))) {}
  /// Effects: SGLang keys.  Requires: o.page_size > 0.  Complexity: O(1).
  /// Throws: std::invalid_argument (page_size 0).
  explicit block_hasher(sglang_hash_options o) : engine_(sglang_hasher(o)) {}

  [[nodiscard]] bool is_vllm() const noexcept {
    return std::holds_alternative<vllm_hasher>(engine_);
  }
  /// Tokens per block (vLLM block_size, SGLang page_size).
  [[nodiscard]] std::uint32_t block_tokens() const noexcept {
    return std::visit([](const auto& e) { return e.block_tokens(); }, engine_);
  }
  /// vLLM: the lookahead; SGLang: 0.
  [[nodiscard]] std::uint32_t lookahead_tokens() const noexcept {
    return std::visit([](const auto& e) { return e.lookahead_tokens(); }, engine_);
  }
  /// Which blocks count as cacheable for replay: skip for vLLM, the option for SGLang.
  [[nodiscard]] partial_block partial() const noexcept {
    return std::visit([](const auto& e) { return e.partial(); }, engine_);
  }
  /// vLLM's NONE_HASH for these options (size 0 for SGLang, which has no chain root of its own).
  [[nodiscard]] const block_digest& none_hash() const noexcept {
    static constexpr block_digest none{};
    const auto* v = std::get_if<vllm_hasher>(&engine_);
    return v ? v->none_hash() : none;
  }

  /// Returns: the engine's full block hashes of a token sequence (vllm_block_hashes or
  /// sglang_page_hashes).  Complexity: O(tokens).  Throws: as those functions.
  template <detail_hasher::token_range Tokens>
  [[nodiscard]] std::vector<block_digest> digests(const Tokens& tokens,
                                                  const request_extras& x = {}) const {
    return std::visit([&](const auto& e) { return e.digests(tokens, x); }, engine_);
  }
  /// Returns: the 64-bit key of one digest (vllm_block_key or sglang_block_key).
  /// Requires: d.size >= 8.  Complexity: O(1).
  [[nodiscard]] block_key key_of(const block_digest& d) const noexcept {
    return std::visit([&](const auto& e) { return e.key_of(d); }, engine_);
  }
  /// Effects: appends the 64-bit keys of the sequence's blocks to `out`; returns how many.
  /// Complexity: O(tokens).  Throws: as digests().
  template <detail_hasher::token_range Tokens>
  std::size_t append_keys(const Tokens& tokens, std::vector<block_key>& out,
                          const request_extras& x = {}) const {
    return std::visit(
        [&](const auto& e) {
          const auto d = e.digests(tokens, x);
          for (const auto& h : d) out.push_back(e.key_of(h));
          return d.size();
        },
        engine_);
  }
  /// Returns: the 64-bit keys of the sequence's blocks.
  /// Complexity: O(tokens).  Throws: as digests().
  template <detail_hasher::token_range Tokens>
  [[nodiscard]] std::vector<block_key> keys(const Tokens& tokens,
                                            const request_extras& x = {}) const {
    std::vector<block_key> out;
    append_keys(tokens, out, x);
    return out;
  }

 private:
  std::variant<vllm_hasher, sglang_hasher> engine_;
};

/// Builds the prefix_trace that replay() and exact_prefix_lru_mrc() read from token sequences:
/// one request per add(), its keys the hasher's 64-bit block keys, its input length the number
/// of tokens, trace.block_tokens = the hasher's block size.
/// Thread safety: one builder needs external synchronisation (add() appends).
class prefix_trace_builder {
 public:
  explicit prefix_trace_builder(block_hasher h) : h_(std::move(h)) {
    trace_.block_tokens = h_.block_tokens();
  }

  /// Effects: appends one request; returns its block keys (valid until the next add/take).
  /// Complexity: O(tokens).  Throws: as block_hasher::digests; std::bad_alloc (the trace is
  /// unchanged then).
  template <detail_hasher::token_range Tokens>
  std::span<const block_key> add(const Tokens& tokens, const request_extras& x = {}) {
    const std::size_t before = trace_.keys.size();
    try {
      h_.append_keys(tokens, trace_.keys, x);
      trace_.offsets.push_back(trace_.keys.size());
      trace_.input_length.push_back(static_cast<std::uint64_t>(std::ranges::size(tokens)));
    } catch (...) {
      trace_.keys.resize(before);
      if (trace_.offsets.size() > trace_.input_length.size() + 1) trace_.offsets.pop_back();
      throw;
    }
    return std::span<const block_key>(trace_.keys).subspan(before);
  }

  [[nodiscard]] const prefix_trace& trace() const noexcept { return trace_; }
  /// The partial-block mode to replay this trace with (skip for vLLM; SGLang's option).
  [[nodiscard]] partial_block partial() const noexcept { return h_.partial(); }
  [[nodiscard]] const block_hasher& hasher() const noexcept { return h_; }
  /// Returns: the trace built so far; the builder starts a new, empty one.
  [[nodiscard]] prefix_trace take() {
    prefix_trace t = std::move(trace_);
    trace_ = prefix_trace{};
    trace_.block_tokens = h_.block_tokens();
    return t;
  }

 private:
  block_hasher h_;
  prefix_trace trace_;
};

/// Returns: the prefix_trace of a sequence of token sequences (one request each, in order).
/// Complexity: O(total tokens).  Throws: as prefix_trace_builder::add.
template <std::ranges::input_range Seqs>
requires detail_hasher::token_range<std::ranges::range_value_t<Seqs>> prefix_trace
make_prefix_trace(const Seqs& seqs, const block_hasher& h) {
  prefix_trace_builder b(h);
  for (const auto& s : seqs) b.add(s);
  return b.take();
}

}  // namespace kvtk::prefix
