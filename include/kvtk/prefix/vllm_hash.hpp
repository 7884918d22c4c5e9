// kvtk/prefix/vllm_hash.hpp — vLLM v1's prefix-cache block hashes, byte for byte
// (vllm/v1/core/kv_cache_utils.py, vllm/utils/hashing.py; checked against vLLM 0.33.0 by
// tests/test_block_hasher.cpp on tests/data/engine_hash_vectors.json).
//
// The free functions are vLLM's own building blocks (NONE_HASH, hash_block_tokens, the extra
// keys), so a caller can reproduce or test one step; vllm_hasher is the configured whole that
// block_hasher dispatches to.
//
//  * Only full blocks of `block_size` tokens (vLLM's hash_block_size) get a hash; a partial last
//    block has none. With lookahead L > 0 (EAGLE drafting) block i exists only once the L tokens
//    after it exist, so the request has floor((n - L) / block_size) hashes.
//  * hash(i) = F((parent, tokens_i, extra_i)) where parent = hash(i-1), or NONE_HASH for block 0;
//    tokens_i is the tuple of the block's token ids; extra_i is None or a tuple of extra keys.
//    F is the --prefix-caching-hash-algo: sha256 = SHA-256(pickle protocol 5), sha256_cbor =
//    SHA-256(canonical CBOR), xxhash = XXH3-128(pickle), xxhash_cbor = XXH3-128(CBOR). SHA-256
//    digests are 32 bytes, XXH3-128 digests 16 (big-endian canonical form).
//  * NONE_HASH = F(seed) with seed a Python str: the PYTHONHASHSEED environment variable when set,
//    else "vllm-none-hash" for sha256/sha256_cbor, else (xxhash*) 32 random bytes in hex, drawn
//    per process: xxhash keys are reproducible only with PYTHONHASHSEED set (pass its value as
//    none_hash_seed). kvtk never draws the seed itself: hashes stay pure functions of their inputs.
//  * extra_i, in this order (an empty list is None): ("lora", lora_name, lora_path) for a LoRA
//    request; ("mm", identifier, offset - block_start) for each multimodal item overlapping the
//    block (items sorted by offset; the offset is negative for an item that began in an earlier
//    block); ("cache_salt", salt) on block 0 only, when the salt is non-empty;
//    ("prompt_embeds", sha256 of the block's embeddings) for prompt-embeds requests. With
//    lookahead L the extra keys are computed over [block_start, block_end + L) and extra_i becomes
//    (E, t_end, ..., t_end+L-1): E (the tuple above or None) followed by the L lookahead tokens.
//  * 64-bit key (vllm_block_key): the low 64 bits of the hash read as a big-endian integer, i.e.
//    its last 8 bytes big-endian — the integer vLLM publishes in KV events with
//    VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1 (int.from_bytes(hash, "big") & (2**64 - 1)).
//  * Pickle identity: pickle memoizes by object identity. kvtk reproduces vLLM's objects: the tag
//    strings are shared constants (a second "mm" tag in one block is a memo reference) and every
//    other string is a distinct object. A request whose lora_name and lora_path are one Python
//    object, or whose block holds one identifier object twice, pickles differently (CBOR is not
//    affected).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/cbor.hpp"
#include "kvtk/detail/pickle.hpp"
#include "kvtk/detail/sha256.hpp"
#include "kvtk/detail/xxh3.hpp"
#include "kvtk/prefix/block_keys.hpp"
#include "kvtk/prefix/engine_hash_types.hpp"

namespace kvtk::prefix {

// ------------------------------------------------------------------------------------------------
// Options
// ------------------------------------------------------------------------------------------------

/// vLLM's --prefix-caching-hash-algo.
enum class vllm_hash_algo : std::uint8_t {
  sha256,       ///< SHA-256 over pickle (vLLM's default)
  sha256_cbor,  ///< SHA-256 over canonical CBOR
  xxhash,       ///< XXH3-128 over pickle
  xxhash_cbor,  ///< XXH3-128 over canonical CBOR
};

/// Returns: the algorithm's name as vLLM spells it.  Complexity: O(1).
constexpr std::string_view to_string(vllm_hash_algo a) noexcept {
  switch (a) {
    case vllm_hash_algo::sha256:
      return "sha256";
    case vllm_hash_algo::sha256_cbor:
      return "sha256_cbor";
    case vllm_hash_algo::xxhash:
      return "xxhash";
    case vllm_hash_algo::xxhash_cbor:
      return "xxhash_cbor";
  }
  return "?";
}
/// Returns: the algorithm vLLM names `s`.  Throws: std::invalid_argument for a name vLLM does not
/// accept.
inline vllm_hash_algo parse_vllm_hash_algo(std::string_view s) {
  for (auto a : {vllm_hash_algo::sha256, vllm_hash_algo::sha256_cbor, vllm_hash_algo::xxhash,
                 vllm_hash_algo::xxhash_cbor}) {
    if (s == to_string(a)) return a;
  }
  throw std::invalid_argument("unknown vLLM prefix-caching hash algorithm: " + std::string(s));
}

/// The configuration vLLM's block hashes depend on.
struct vllm_hash_options {
  vllm_hash_algo algo = vllm_hash_algo::sha256;
  /// Tokens per hashed block (vLLM's hash_block_size, normally --block-size). > 0.
  std::uint32_t block_size = 16;
  /// The str NONE_HASH is derived from: PYTHONHASHSEED when the engine has it set, else vLLM's
  /// default "vllm-none-hash" (sha256, sha256_cbor; xxhash* draw a random seed without it).
  std::string none_hash_seed = "vllm-none-hash";
  /// num_hash_lookahead_tokens (EAGLE-style drafting); 0 normally.
  std::uint32_t lookahead_tokens = 0;
};

// ------------------------------------------------------------------------------------------------
// Extra keys and the serialized block
// ------------------------------------------------------------------------------------------------

/// vLLM extra keys of one block (the tuples of generate_block_hash_extra_keys); the LoRA key is
/// vllm_lora_key, ("lora", name, path).
struct vllm_mm_key {  ///< ("mm", identifier, offset relative to the block start)
  std::string identifier{};
  std::int64_t offset = 0;
};
struct vllm_salt_key {  ///< ("cache_salt", salt)
  std::string salt{};
};
struct vllm_embeds_key {  ///< ("prompt_embeds", 32-byte digest)
  detail::sha256_digest digest{};
};
using vllm_extra_key = std::variant<vllm_lora_key, vllm_mm_key, vllm_salt_key, vllm_embeds_key>;

namespace detail_hasher {

/// One extra-key tuple; the tag strings are vLLM's shared constants (see the header comment).
template <class W>
void write_extra_key(W& w, const vllm_extra_key& k) {
  std::visit(
      [&](const auto& x) {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<X, vllm_lora_key>) {
          w.tuple_begin(3);
          w.str("lora", true);
          w.str(x.name);
          w.str(x.path);
          w.tuple_end(3);
        } else if constexpr (std::is_same_v<X, vllm_mm_key>) {
          w.tuple_begin(3);
          w.str("mm", true);
          w.str(x.identifier);
          w.integer(x.offset);
          w.tuple_end(3);
        } else if constexpr (std::is_same_v<X, vllm_salt_key>) {
          w.tuple_begin(2);
          w.str("cache_salt", true);
          w.str(x.salt);
          w.tuple_end(2);
        } else {
          w.tuple_begin(2);
          w.str("prompt_embeds", true);
          w.bytes(x.digest);
          w.tuple_end(2);
        }
      },
      k);
}

/// The serialized (parent, tokens, extra) of hash_block_tokens, in writer W's encoding
/// (detail::pickler or detail::cbor_writer).
template <class W>
std::vector<std::uint8_t> block_payload(const block_digest& parent,
                                        std::span<const std::int64_t> tokens,
                                        std::span<const vllm_extra_key> extra,
                                        std::span<const std::int64_t> lookahead) {
  W w;
  w.tuple_begin(3);
  w.bytes(parent.bytes());
  w.tuple_begin(tokens.size());
  for (auto t : tokens) w.integer(t);
  w.tuple_end(tokens.size());
  auto write_e = [&] {
    if (extra.empty()) {
      w.none();
      return;
    }
    w.tuple_begin(extra.size());
    for (const auto& k : extra) write_extra_key(w, k);
    w.tuple_end(extra.size());
  };
  if (lookahead.empty()) {
    write_e();
  } else {
    w.tuple_begin(1 + lookahead.size());
    write_e();
    for (auto t : lookahead) w.integer(t);
    w.tuple_end(1 + lookahead.size());
  }
  w.tuple_end(3);
  return std::move(w).finish();
}

constexpr bool uses_pickle(vllm_hash_algo a) noexcept {
  return a == vllm_hash_algo::sha256 || a == vllm_hash_algo::xxhash;
}

/// The most tokens plain_block_pickle writes (its buffer: 10 bytes a token at most, one frame).
inline constexpr std::size_t plain_pickle_max_tokens = 2048;
inline constexpr std::size_t plain_pickle_buffer = 64 + 10 * plain_pickle_max_tokens;

/// The pickle of (parent, tuple(tokens), None) written straight into `buf`, byte for byte what
/// block_payload<pickler> writes for a block with no extra keys and no lookahead (the common
/// case, and the import's hot path: no allocation). Returns the size. The whole pickle is one
/// frame: under 64 KiB it never commits early, and a parent under 256 bytes is SHORT_BINBYTES.
/// Requires: tokens.size() <= plain_pickle_max_tokens (a digest is at most 32 bytes).
inline std::size_t plain_block_pickle(const block_digest& parent, std::span<const std::int64_t> tokens,
                                      std::uint8_t* buf) noexcept {
  constexpr std::size_t body = 11;  // PROTO 5 (2 bytes), FRAME + 8-byte length
  std::uint8_t* p = buf + body;
  const auto b = parent.bytes();
  *p++ = 0x43;  // SHORT_BINBYTES
  *p++ = static_cast<std::uint8_t>(b.size());
  for (const auto x : b) *p++ = x;
  *p++ = 0x94;  // MEMOIZE
  const std::size_t n = tokens.size();
  if (n == 0) {
    *p++ = 0x29;  // EMPTY_TUPLE
  } else if (n > 3) {
    *p++ = 0x28;  // MARK
  }
  for (const std::int64_t v : tokens) {
    const auto u = static_cast<std::uint64_t>(v);
    if (v >= 0 && v < 256) {
      *p++ = 0x4b;  // BININT1
      *p++ = static_cast<std::uint8_t>(u);
    } else if (v >= 0 && v < 65536) {
      *p++ = 0x4d;  // BININT2
      *p++ = static_cast<std::uint8_t>(u);
      *p++ = static_cast<std::uint8_t>(u >> 8);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      *p++ = 0x4a;  // BININT
      for (int i = 0; i < 4; ++i) *p++ = static_cast<std::uint8_t>(u >> (8 * i));
    } else {  // LONG1: minimal two's complement, as pickler::long1
      const std::size_t w = detail::long1_bytes(u);
      *p++ = 0x8a;
      *p++ = static_cast<std::uint8_t>(w);
      for (std::size_t i = 0; i < w; ++i) *p++ = static_cast<std::uint8_t>(u >> (8 * i));
    }
  }
  if (n != 0) {
    *p++ = n == 1 ? 0x85 : n == 2 ? 0x86 : n == 3 ? 0x87 : 0x74;  // TUPLE1/2/3, TUPLE
    *p++ = 0x94;
  }
  *p++ = 0x4e;  // NONE
  *p++ = 0x87;  // TUPLE3
  *p++ = 0x94;
  *p++ = 0x2e;  // STOP
  const auto len = static_cast<std::uint64_t>(p - (buf + body));
  buf[0] = 0x80;
  buf[1] = 0x05;
  buf[2] = 0x95;  // FRAME
  for (std::size_t i = 0; i < 8; ++i) buf[3 + i] = static_cast<std::uint8_t>(len >> (8 * i));
  return static_cast<std::size_t>(p - buf);
}

}  // namespace detail_hasher

// ------------------------------------------------------------------------------------------------
// vLLM's hashing steps
// ------------------------------------------------------------------------------------------------

/// Returns: F(payload) for algorithm a: 32-byte SHA-256 or 16-byte XXH3-128 (canonical order).
/// Complexity: O(payload.size()).
inline block_digest vllm_digest_bytes(vllm_hash_algo a, std::span<const std::uint8_t> payload) {
  if (a == vllm_hash_algo::sha256 || a == vllm_hash_algo::sha256_cbor) {
    return block_digest::of(detail::sha256::of(payload));
  }
  return block_digest::of(detail::xxh3_128(payload).canonical());
}

/// Returns: the serialized form vLLM hashes for a Python str (the NONE_HASH seed).
/// Complexity: O(s.size()).  Throws: std::bad_alloc.
inline std::vector<std::uint8_t> vllm_serialize_str(vllm_hash_algo a, std::string_view s) {
  if (detail_hasher::uses_pickle(a)) {
    detail::pickler p;
    p.str(s);
    return std::move(p).finish();
  }
  detail::cbor_writer w;
  w.str(s);
  return std::move(w).finish();
}

/// Returns: vLLM's NONE_HASH, F(seed) (init_none_hash).  Complexity: O(seed.size()).
/// Throws: std::bad_alloc.
inline block_digest vllm_none_hash(vllm_hash_algo a, std::string_view seed) {
  return vllm_digest_bytes(a, vllm_serialize_str(a, seed));
}

/// Returns: the bytes hash_block_tokens serializes: (parent, tuple(tokens), extra), where extra
/// is None for no keys and no lookahead, tuple(keys) for keys, and (tuple(keys) or None,
/// *lookahead) when `lookahead` is non-empty.
/// Complexity: O(tokens + keys).  Throws: std::bad_alloc.
inline std::vector<std::uint8_t> vllm_block_payload(vllm_hash_algo a, const block_digest& parent,
                                                    std::span<const std::int64_t> tokens,
                                                    std::span<const vllm_extra_key> extra = {},
                                                    std::span<const std::int64_t> lookahead = {}) {
  if (detail_hasher::uses_pickle(a)) {
    return detail_hasher::block_payload<detail::pickler>(parent, tokens, extra, lookahead);
  }
  return detail_hasher::block_payload<detail::cbor_writer>(parent, tokens, extra, lookahead);
}

/// Returns: vLLM's hash_block_tokens(F, parent, tokens, extra): one block's hash.
/// `parent` is the previous block's hash, or NONE_HASH for the first block.
/// Complexity: O(tokens + keys).  Throws: std::bad_alloc.
inline block_digest vllm_hash_block(vllm_hash_algo a, const block_digest& parent,
                                    std::span<const std::int64_t> tokens,
                                    std::span<const vllm_extra_key> extra = {},
                                    std::span<const std::int64_t> lookahead = {}) {
  if (detail_hasher::uses_pickle(a) && extra.empty() && lookahead.empty() &&
      tokens.size() <= detail_hasher::plain_pickle_max_tokens) {
    std::array<std::uint8_t, detail_hasher::plain_pickle_buffer> buf;
    const std::size_t n = detail_hasher::plain_block_pickle(parent, tokens, buf.data());
    return vllm_digest_bytes(a, std::span<const std::uint8_t>(buf.data(), n));
  }
  return vllm_digest_bytes(a, vllm_block_payload(a, parent, tokens, extra, lookahead));
}

namespace detail_hasher {

/// Appends the ("mm", ...) keys of the items overlapping [start, end) from mm[mm_index] on and
/// advances mm_index past the items no later block can overlap (generate_block_hash_extra_keys'
/// walk, so a request costs O(items) over all its blocks).
inline void append_mm_keys(std::vector<vllm_extra_key>& keys, const std::vector<vllm_mm_item>& mm,
                           std::uint64_t start, std::uint64_t end, std::size_t& mm_index) {
  if (mm.empty() || mm.back().offset + mm.back().length <= start) return;
  std::size_t i = mm_index;
  while (i < mm.size()) {
    const auto& f = mm[i];
    if (end <= f.offset) break;          // the block has not reached this item
    if (start >= f.offset + f.length) {  // the block is past it
      ++i;
      continue;
    }
    keys.emplace_back(vllm_mm_key{
        f.identifier, static_cast<std::int64_t>(f.offset) - static_cast<std::int64_t>(start)});
    if (end < f.offset + f.length) break;  // the item goes on into the next block
    ++i;
  }
  mm_index = i;
}

}  // namespace detail_hasher

/// Returns: the extra keys of the block covering tokens [start, end), as
/// generate_block_hash_extra_keys builds them, and advances `mm_index` (the first multimodal
/// item that may overlap a later block) as vLLM does.
/// Requires: x.mm sorted by offset; block < x.prompt_embeds.size() when that is non-empty.
/// Complexity: O(keys + items skipped).  Throws: std::invalid_argument if prompt_embeds is short.
inline std::vector<vllm_extra_key> vllm_block_extra_keys(const request_extras& x, std::size_t block,
                                                         std::uint64_t start, std::uint64_t end,
                                                         std::size_t& mm_index) {
  std::vector<vllm_extra_key> keys;
  if (x.lora) keys.emplace_back(*x.lora);
  detail_hasher::append_mm_keys(keys, x.mm, start, end, mm_index);
  if (start == 0 && !x.cache_salt.empty()) keys.emplace_back(vllm_salt_key{x.cache_salt});
  if (!x.prompt_embeds.empty()) {
    if (block >= x.prompt_embeds.size()) {
      throw std::invalid_argument("vllm_block_hashes: one prompt_embeds digest per block needed");
    }
    keys.emplace_back(vllm_embeds_key{x.prompt_embeds[block]});
  }
  return keys;
}

/// Returns: the request's block hashes as vLLM's request block hasher computes them for a
/// sequence of `tokens` (prompt, or prompt and output so far): one per full block of
/// o.block_size tokens, chained from `*none_hash` when given, else from
/// vllm_none_hash(o.algo, o.none_hash_seed), with the extra keys of `x` (see the header comment
/// for their order and for lookahead).
/// Requires: o.block_size > 0.  Complexity: O(tokens + extra keys).
/// Throws: std::invalid_argument (block_size 0, a token id >= 2^63, short prompt_embeds),
/// std::bad_alloc.
template <detail_hasher::token_range Tokens>
std::vector<block_digest> vllm_block_hashes(const Tokens& tokens, const vllm_hash_options& o,
                                            const request_extras& x = {},
                                            const block_digest* none_hash = nullptr) {
  if (o.block_size == 0) throw std::invalid_argument("vllm_block_hashes: block_size must be > 0");
  const std::vector<std::int64_t> t = detail_hasher::to_tokens(tokens);
  const block_digest root = none_hash ? *none_hash : vllm_none_hash(o.algo, o.none_hash_seed);
  const std::uint64_t n = t.size() > o.lookahead_tokens ? t.size() - o.lookahead_tokens : 0;
  const std::uint64_t blocks = n / o.block_size;
  std::vector<block_digest> out;
  out.reserve(blocks);
  std::size_t mm_index = 0;
  const block_digest* parent = &root;
  for (std::uint64_t b = 0; b < blocks; ++b) {
    const std::uint64_t start = b * o.block_size, end = start + o.block_size;
    // With lookahead the keys cover the block and its lookahead tokens, then the item index
    // rewinds to the first item still overlapping the next block
    // (generate_lookahead_block_hash_extra_keys).
    const std::vector<vllm_extra_key> keys =
        vllm_block_extra_keys(x, b, start, end + o.lookahead_tokens, mm_index);
    std::span<const std::int64_t> look;
    if (o.lookahead_tokens != 0) {
      while (mm_index > 0 && x.mm[mm_index - 1].offset + x.mm[mm_index - 1].length > end) {
        --mm_index;
      }
      look = std::span<const std::int64_t>(t).subspan(end, o.lookahead_tokens);
    }
    out.push_back(vllm_hash_block(o.algo, *parent,
                                  std::span<const std::int64_t>(t).subspan(start, o.block_size),
                                  keys, look));
    parent = &out.back();
  }
  return out;
}

/// Returns: the 64-bit key of a vLLM block hash: its last 8 bytes read big-endian (the integer
/// vLLM's KV events carry with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1).
/// Requires: d.size >= 8.  Complexity: O(1).
inline block_key vllm_block_key(const block_digest& d) noexcept {
  block_key k = 0;
  for (std::size_t i = d.size - 8; i < d.size; ++i) k = (k << 8) | d.data[i];
  return k;
}

// ------------------------------------------------------------------------------------------------
// vllm_hasher: one vLLM configuration
// ------------------------------------------------------------------------------------------------

/// The block keys of one vLLM configuration. NONE_HASH is computed once, at construction, as the
/// engine does at start-up, instead of once per request.
/// Thread safety: const member functions may be called from any number of threads at once.
class vllm_hasher {
 public:
  /// Requires: o.block_size > 0.  Complexity: O(o.none_hash_seed.size()).
  /// Throws: std::invalid_argument (block_size 0), std::bad_alloc.
  explicit vllm_hasher(vllm_hash_options o) : opts_(std::move(o)) {
    if (opts_.block_size == 0) throw std::invalid_argument("block_hasher: block_size must be > 0");
    none_hash_ = vllm_none_hash(opts_.algo, opts_.none_hash_seed);
  }

  [[nodiscard]] const vllm_hash_options& options() const noexcept { return opts_; }
  [[nodiscard]] std::uint32_t block_tokens() const noexcept { return opts_.block_size; }
  [[nodiscard]] std::uint32_t lookahead_tokens() const noexcept { return opts_.lookahead_tokens; }
  /// vLLM never hashes a partial block.
  [[nodiscard]] static constexpr partial_block partial() noexcept { return partial_block::skip; }
  [[nodiscard]] const block_digest& none_hash() const noexcept { return none_hash_; }

  /// Returns: vllm_block_hashes(tokens, options(), x).  Complexity: O(tokens + extra keys).
  /// Throws: as vllm_block_hashes.
  template <detail_hasher::token_range Tokens>
  [[nodiscard]] std::vector<block_digest> digests(const Tokens& tokens,
                                                  const request_extras& x = {}) const {
    return vllm_block_hashes(tokens, opts_, x, &none_hash_);
  }
  /// Returns: vllm_block_key(d).
  [[nodiscard]] static block_key key_of(const block_digest& d) noexcept {
    return vllm_block_key(d);
  }

 private:
  vllm_hash_options opts_;
  block_digest none_hash_;
};

}  // namespace kvtk::prefix
