// kvtk/prefix/sglang_hash.hpp — SGLang's page hashes, byte for byte
// (sglang/srt/mem_cache/utils.py, cpp_utils/hash_binding.cpp; checked against SGLang 0.5.23 by
// tests/test_block_hasher.cpp on tests/data/engine_hash_vectors.json).
//
// The free functions are SGLang's own steps (the chain seeds, one page's hash), so a caller can
// reproduce or test one of them; sglang_hasher is the configured whole that block_hasher
// dispatches to.
//
//  * Page i of `page_size` tokens: hash(i) = SHA-256(prior || payload_i), prior = hash(i-1) (raw
//    32 bytes), absent for page 0 of an unseeded chain. payload_i = the page's tokens as
//    little-endian uint32; when a token of the page exceeds 2^32-1, instead the byte 0xff followed
//    by the tokens as little-endian uint64 (decided per page). EAGLE bigram keys hash the pairs
//    (t_j, t_j+1) of each logical position j: page_size pairs, page_size + 1 raw tokens a page.
//  * The radix tree inserts page-aligned keys only (page_size > 1), so only full pages get hashes
//    (partial_block::skip, the default); SGLang's function itself also hashes a partial last page
//    (partial_block::cache).
//  * Chain seed (sglang_chain::storage, the radix nodes' hash_value and the HiCache storage keys):
//    none when the request has neither extra_key nor cache_salt; else
//    SHA-256("sglang-cache-namespace-v1" || part(extra_key) || part(cache_salt)) where
//    part(absent) = 0x00 and part(s) = 0x01 || uint64le(bytes(s)) || utf8(s); the seed's 32 bytes
//    are the prior of page 0. sglang_chain::event (compute_node_event_hash_values): the storage
//    chain for un-namespaced requests; else seeded by SHA-256("sglang-cache-salt-v1\0" || salt)
//    when there is a cache_salt, unseeded otherwise (extra_key ignored). Not covered: the KV-event
//    publisher further maps a namespaced request's 64-bit keys through namespaced_block_hash
//    (LoRA / dynamo namespaces); un-namespaced requests publish the keys given here.
//  * 64-bit key (sglang_block_key): the first 8 bytes big-endian — hash_str_to_int64 of SGLang's
//    hex string, as unsigned.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/sha256.hpp"
#include "kvtk/prefix/block_keys.hpp"
#include "kvtk/prefix/engine_hash_types.hpp"

namespace kvtk::prefix {

/// Which SGLang hash chain (see the header comment).
enum class sglang_chain : std::uint8_t {
  storage,  ///< radix nodes' hash_value, HiCache storage keys (get_storage_hash_str)
  event,    ///< KV-event hashes before per-event namespacing (compute_node_event_hash_values)
};

/// The configuration SGLang's page hashes depend on.
struct sglang_hash_options {
  /// Tokens per page (--page-size). > 0.
  std::uint32_t page_size = 1;
  /// skip: full pages only (what the radix tree hashes); cache: a partial last page too.
  partial_block partial = partial_block::skip;
  /// EAGLE bigram keys: position j stands for the pair (t_j, t_j+1); n tokens give n-1 positions.
  bool bigram = false;
  sglang_chain chain = sglang_chain::storage;
};

/// Returns: SGLang's storage_namespace_seed(extra_key, cache_salt) as raw bytes, or nullopt when
/// both are absent.  Complexity: O(sizes).
inline std::optional<detail::sha256_digest> sglang_storage_seed(
    const std::optional<std::string>& extra_key, std::string_view cache_salt) {
  if (!extra_key && cache_salt.empty()) return std::nullopt;
  detail::sha256 h;
  h.update(std::string_view("sglang-cache-namespace-v1"));
  // A length-prefixed part, so ("ab", "c") and ("a", "bc") seed different chains.
  auto part = [&](const std::string_view* s) {
    if (!s) {
      h.update_byte(0);
      return;
    }
    h.update_byte(1);
    for (int i = 0; i < 8; ++i)
      h.update_byte(static_cast<std::uint8_t>(static_cast<std::uint64_t>(s->size()) >> (8 * i)));
    h.update(*s);
  };
  const std::string_view ek = extra_key ? std::string_view(*extra_key) : std::string_view();
  part(extra_key ? &ek : nullptr);
  part(cache_salt.empty() ? nullptr : &cache_salt);
  return h.final();
}

/// Returns: the seed of a request's chain (nullopt = unseeded) for the chosen SGLang chain.
/// Complexity: O(sizes).
inline std::optional<detail::sha256_digest> sglang_chain_seed(sglang_chain c,
                                                              const request_extras& x) {
  if (c == sglang_chain::storage || (!x.extra_key && x.cache_salt.empty())) {
    return sglang_storage_seed(x.extra_key, x.cache_salt);
  }
  if (x.cache_salt.empty()) return std::nullopt;
  detail::sha256 h;
  h.update(std::string_view("sglang-cache-salt-v1", 20));
  h.update_byte(0);
  h.update(x.cache_salt);
  return h.final();
}

/// Returns: SHA-256(prior || payload) of one SGLang page (`prior` null = none), where payload is
/// the page's words as little-endian uint32, or 0xff then little-endian uint64 when a word
/// exceeds 2^32-1.  Requires: words >= 0.  Complexity: O(words).
/// Throws: std::invalid_argument for a negative word.
inline block_digest sglang_hash_page(const detail::sha256_digest* prior,
                                     std::span<const std::int64_t> words) {
  bool wide = false;
  for (auto w : words) {
    if (w < 0) throw std::invalid_argument("sglang page hash: token ids must be >= 0");
    wide |= w > static_cast<std::int64_t>(UINT32_MAX);
  }
  detail::sha256 h;
  if (prior) h.update(*prior);
  if (wide) h.update_byte(0xff);
  std::array<std::uint8_t, 8> buf{};
  const std::size_t width = wide ? 8 : 4;
  for (auto w : words) {
    for (std::size_t i = 0; i < width; ++i) {
      buf[i] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(w) >> (8 * i));
    }
    h.update(std::span<const std::uint8_t>(buf.data(), width));
  }
  return block_digest::of(h.final());
}

namespace detail_hasher {

/// The words of SGLang page [start, start + n): the tokens themselves, or for bigram keys the
/// pairs (t_j, t_j+1), written into `scratch` (they cover raw tokens start..start+n, the span
/// SGLang tests for wide ids).
inline std::span<const std::int64_t> sglang_page_words(std::span<const std::int64_t> t, bool bigram,
                                                       std::size_t start, std::size_t n,
                                                       std::vector<std::int64_t>& scratch) {
  if (!bigram) return t.subspan(start, n);
  scratch.clear();
  for (std::size_t j = start; j < start + n; ++j) {
    scratch.push_back(t[j]);
    scratch.push_back(t[j + 1]);
  }
  return scratch;
}

}  // namespace detail_hasher

/// Returns: the page hashes of a token sequence as SGLang's get_hash_str(key, prior, page_size)
/// computes them (one per full page; with partial_block::cache also one for a partial last
/// page), chained from `prior` when given, else from the seed of o.chain for `x`.
/// Requires: o.page_size > 0; token ids >= 0; prior, when given, 32 bytes.
/// Complexity: O(tokens).  Throws: std::invalid_argument, std::bad_alloc.
template <detail_hasher::token_range Tokens>
std::vector<block_digest> sglang_page_hashes(const Tokens& tokens, const sglang_hash_options& o,
                                             const request_extras& x = {},
                                             const block_digest* prior = nullptr) {
  if (o.page_size == 0) throw std::invalid_argument("sglang_page_hashes: page_size must be > 0");
  const std::vector<std::int64_t> t = detail_hasher::to_tokens(tokens);
  const std::size_t units = o.bigram ? (t.empty() ? 0 : t.size() - 1) : t.size();
  const std::size_t pages =
      static_cast<std::size_t>(cacheable_blocks(units, o.page_size, o.partial));
  std::optional<detail::sha256_digest> parent;
  if (prior) {
    if (prior->size != 32)
      throw std::invalid_argument("sglang_page_hashes: prior must be 32 bytes");
    parent.emplace();
    std::copy_n(prior->data.begin(), 32, parent->begin());
  } else {
    parent = sglang_chain_seed(o.chain, x);
  }
  std::vector<block_digest> out;
  out.reserve(pages);
  std::vector<std::int64_t> scratch;
  for (std::size_t p = 0; p < pages; ++p) {
    const std::size_t start = p * o.page_size;
    const std::size_t n = std::min<std::size_t>(o.page_size, units - start);
    out.push_back(
        sglang_hash_page(parent ? &*parent : nullptr,
                         detail_hasher::sglang_page_words(t, o.bigram, start, n, scratch)));
    if (!parent) parent.emplace();
    std::copy_n(out.back().data.begin(), 32, parent->begin());
  }
  return out;
}

/// Returns: the 64-bit key of an SGLang page hash: its first 8 bytes read big-endian (SGLang's
/// hash_str_to_int64, as unsigned).  Requires: d.size >= 8.  Complexity: O(1).
inline block_key sglang_block_key(const block_digest& d) noexcept {
  block_key k = 0;
  for (std::size_t i = 0; i < 8; ++i) k = (k << 8) | d.data[i];
  return k;
}

/// The page keys of one SGLang configuration. Unlike vLLM's, SGLang's chain root depends on the
/// request (its extra_key and cache_salt), so nothing is precomputed.
/// Thread safety: const member functions may be called from any number of threads at once.
class sglang_hasher {
 public:
  /// Requires: o.page_size > 0.  Complexity: O(1).  Throws: std::invalid_argument (page_size 0).
  explicit sglang_hasher(sglang_hash_options o) : opts_(o) {
    if (o.page_size == 0) throw std::invalid_argument("block_hasher: page_size must be > 0");
  }

  [[nodiscard]] const sglang_hash_options& options() const noexcept { return opts_; }
  [[nodiscard]] std::uint32_t block_tokens() const noexcept { return opts_.page_size; }
  /// SGLang hashes no lookahead tokens.
  [[nodiscard]] static constexpr std::uint32_t lookahead_tokens() noexcept { return 0; }
  [[nodiscard]] partial_block partial() const noexcept { return opts_.partial; }

  /// Returns: sglang_page_hashes(tokens, options(), x).  Complexity: O(tokens).
  /// Throws: as sglang_page_hashes.
  template <detail_hasher::token_range Tokens>
  [[nodiscard]] std::vector<block_digest> digests(const Tokens& tokens,
                                                  const request_extras& x = {}) const {
    return sglang_page_hashes(tokens, opts_, x);
  }
  /// Returns: sglang_block_key(d).
  [[nodiscard]] static block_key key_of(const block_digest& d) noexcept {
    return sglang_block_key(d);
  }

 private:
  sglang_hash_options opts_;
};

}  // namespace kvtk::prefix
