// kvtk/prefix/block_hasher.hpp — engine-compatible block keys: the prefix-cache block hashes of
// vLLM v1 and the page hashes of SGLang, byte for byte, for a token sequence; and a builder of
// prefix_trace from token sequences.
//
// Checked against the engines' own functions (vLLM 0.33.0, SGLang 0.5.23) by
// tests/test_block_hasher.cpp on the vectors of tests/data/engine_hash_vectors.json, which
// tools/engine-check/gen_hash_vectors.py writes by calling those functions.
//
// vLLM v1 (vllm/v1/core/kv_cache_utils.py, vllm/utils/hashing.py)
// ----------------------------------------------------------------
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
//    none_hash_seed).
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
//
// SGLang (sglang/srt/mem_cache/utils.py, cpp_utils/hash_binding.cpp)
// -------------------------------------------------------------------
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
//
// Tokens: any random-access range of an integral type; each id must lie in [-2^63, 2^63) (vLLM
// hashes any Python int; SGLang requires ids >= 0).
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "kvtk/concepts.hpp"
#include "kvtk/detail/sha256.hpp"
#include "kvtk/detail/xxh3.hpp"
#include "kvtk/prefix/block_keys.hpp"
#include "kvtk/prefix/replay.hpp"

namespace kvtk::prefix {

// ------------------------------------------------------------------------------------------------
// Digests
// ------------------------------------------------------------------------------------------------

/// An engine's block hash as raw bytes: 32 (SHA-256) or 16 (XXH3-128); unused bytes are zero.
struct block_digest {
  std::array<std::uint8_t, 32> data{};
  std::uint8_t size = 0;

  [[nodiscard]] std::span<const std::uint8_t> bytes() const noexcept { return {data.data(), size}; }
  /// Lower-case hex of bytes() (SGLang's hash strings are this form).
  [[nodiscard]] std::string hex() const {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s;
    s.reserve(2 * size);
    for (std::size_t i = 0; i < size; ++i) {
      s.push_back(digits[data[i] >> 4]);
      s.push_back(digits[data[i] & 15]);
    }
    return s;
  }
  /// Requires: hex of 2..64 hex digits, even count.  Throws: std::invalid_argument otherwise.
  [[nodiscard]] static block_digest from_hex(std::string_view hex) {
    if (hex.size() % 2 != 0 || hex.empty() || hex.size() > 64) {
      throw std::invalid_argument("block_digest: hex must have 2..64 digits, an even count");
    }
    auto nibble = [](char c) -> std::uint8_t {
      if (c >= '0' && c <= '9') return static_cast<std::uint8_t>(c - '0');
      if (c >= 'a' && c <= 'f') return static_cast<std::uint8_t>(c - 'a' + 10);
      if (c >= 'A' && c <= 'F') return static_cast<std::uint8_t>(c - 'A' + 10);
      throw std::invalid_argument("block_digest: not a hex digit");
    };
    block_digest d;
    d.size = static_cast<std::uint8_t>(hex.size() / 2);
    for (std::size_t i = 0; i < d.size; ++i) {
      d.data[i] = static_cast<std::uint8_t>((nibble(hex[2 * i]) << 4) | nibble(hex[2 * i + 1]));
    }
    return d;
  }
  [[nodiscard]] static block_digest of(std::span<const std::uint8_t> b) noexcept {
    block_digest d;
    d.size = static_cast<std::uint8_t>(std::min<std::size_t>(b.size(), 32));
    std::copy_n(b.begin(), d.size, d.data.begin());
    return d;
  }
  friend bool operator==(const block_digest&, const block_digest&) = default;
};

// ------------------------------------------------------------------------------------------------
// Request-level inputs
// ------------------------------------------------------------------------------------------------

/// vLLM extra keys of one block (the tuples of generate_block_hash_extra_keys).
struct vllm_lora_key {  ///< ("lora", name, path)
  std::string name{}, path{};
};
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

/// A multimodal item of a vLLM request: its identifier (mm hash) and placeholder token range.
struct vllm_mm_item {
  std::string identifier{};
  std::uint64_t offset = 0;  ///< first placeholder token
  std::uint64_t length = 0;  ///< placeholder tokens
};

/// What besides the tokens names a request's blocks. Fields an engine does not use are ignored.
struct request_extras {
  /// Both engines; empty = none (vLLM tests `if cache_salt`, SGLang stores `cache_salt or None`).
  std::string cache_salt{};
  /// vLLM: the LoRA adapter (lora_name, lora_path).
  std::optional<vllm_lora_key> lora{};
  /// vLLM: multimodal items, sorted by offset (as vLLM keeps mm_features).
  std::vector<vllm_mm_item> mm{};
  /// vLLM: per hashed block, SHA-256 of its prompt embeddings' bytes; empty = not a prompt-embeds
  /// request. Must then have one digest per hashed block.
  std::vector<detail::sha256_digest> prompt_embeds{};
  /// SGLang: RadixKey.extra_key (LoRA id and/or user namespace); nullopt = None ("" differs).
  std::optional<std::string> extra_key{};
};

// ------------------------------------------------------------------------------------------------
// Serializers (the exact byte shapes vLLM hashes)
// ------------------------------------------------------------------------------------------------

namespace detail_hasher {

/// Token ids as the engines see them (Python ints).
template <class R>
concept token_range =
    std::ranges::random_access_range<R> && std::integral<std::ranges::range_value_t<R>>;

template <class T>
std::int64_t token_value(T v) {
  if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(std::int64_t)) {
    if (v > static_cast<T>(INT64_MAX))
      throw std::invalid_argument("block_hasher: token id >= 2^63");
  }
  return static_cast<std::int64_t>(v);
}

template <class R>
std::vector<std::int64_t> to_tokens(const R& r) {
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(std::ranges::size(r)));
  for (auto v : r) out.push_back(token_value(v));
  return out;
}

/// Pickle protocol 5 as CPython's C pickler writes it, for None, int, bytes, str and tuples of
/// them: framing (a frame is closed at the start of an object's save once it holds >= 64 KiB; a
/// frame under 4 bytes has no FRAME header; bytes/str payloads >= 64 KiB bypass framing), MEMOIZE
/// after every bytes, str and non-empty tuple, BINGET for a repeated tag string.
class pickler {
 public:
  pickler() { out_ = {0x80, 0x05}; }

  void none() {
    start_save();
    put(0x4e);  // NONE
  }
  void integer(std::int64_t v) {
    start_save();
    if (v >= 0 && v < 256) {
      put(0x4b);  // BININT1
      put(static_cast<std::uint8_t>(v));
    } else if (v >= 0 && v < 65536) {
      put(0x4d);  // BININT2
      le(static_cast<std::uint64_t>(v), 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      put(0x4a);  // BININT
      le(static_cast<std::uint64_t>(v), 4);
    } else {
      // LONG1: minimal little-endian two's complement (5..8 bytes here).
      std::size_t n = 8;
      const auto u = static_cast<std::uint64_t>(v);
      while (n > 1) {
        const std::uint8_t top = static_cast<std::uint8_t>(u >> (8 * (n - 1)));
        const std::uint8_t next_bit = static_cast<std::uint8_t>((u >> (8 * (n - 1) - 1)) & 1);
        if ((top == 0 && next_bit == 0) || (top == 0xff && next_bit == 1)) {
          --n;
        } else {
          break;
        }
      }
      put(0x8a);
      put(static_cast<std::uint8_t>(n));
      le(u, n);
    }
  }
  void bytes(std::span<const std::uint8_t> b) {
    start_save();
    std::array<std::uint8_t, 9> h{};
    std::size_t hn = 0;
    if (b.size() < 256) {
      h[hn++] = 0x43;  // SHORT_BINBYTES
      h[hn++] = static_cast<std::uint8_t>(b.size());
    } else if (b.size() <= 0xffffffffu) {
      h[hn++] = 0x42;  // BINBYTES
      for (int i = 0; i < 4; ++i) h[hn++] = static_cast<std::uint8_t>(b.size() >> (8 * i));
    } else {
      h[hn++] = 0x8e;  // BINBYTES8
      for (int i = 0; i < 8; ++i) h[hn++] = static_cast<std::uint8_t>(b.size() >> (8 * i));
    }
    payload(std::span(h.data(), hn), b);
    memoize();
  }
  /// A str object. `tag` marks vLLM's shared tag constants: the second save of an equal tag
  /// within one pickle is a memo reference (BINGET), as it is the same Python object.
  void str(std::string_view s, bool tag = false) {
    start_save();
    if (tag) {
      for (const auto& [t, idx] : tags_) {
        if (t == s) {
          if (idx < 256) {
            put(0x68);  // BINGET
            put(static_cast<std::uint8_t>(idx));
          } else {
            put(0x6a);  // LONG_BINGET
            le(idx, 4);
          }
          return;
        }
      }
    }
    std::array<std::uint8_t, 9> h{};
    std::size_t hn = 0;
    if (s.size() < 256) {
      h[hn++] = 0x8c;  // SHORT_BINUNICODE
      h[hn++] = static_cast<std::uint8_t>(s.size());
    } else if (s.size() <= 0xffffffffu) {
      h[hn++] = 0x58;  // BINUNICODE
      for (int i = 0; i < 4; ++i) h[hn++] = static_cast<std::uint8_t>(s.size() >> (8 * i));
    } else {
      h[hn++] = 0x8d;  // BINUNICODE8
      for (int i = 0; i < 8; ++i) h[hn++] = static_cast<std::uint8_t>(s.size() >> (8 * i));
    }
    payload(std::span(h.data(), hn),
            std::span(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()));
    if (tag) tags_.emplace_back(std::string(s), memo_);
    memoize();
  }
  /// A tuple of n elements: call tuple_begin(n), save the n elements, then tuple_end(n).
  void tuple_begin(std::size_t n) {
    start_save();
    if (n == 0) {
      put(0x29);  // EMPTY_TUPLE
    } else if (n > 3) {
      put(0x28);  // MARK
    }
  }
  void tuple_end(std::size_t n) {
    if (n == 0) return;
    put(n == 1 ? 0x85 : n == 2 ? 0x86 : n == 3 ? 0x87 : 0x74);  // TUPLE1/2/3, TUPLE
    memoize();
  }
  /// Returns: the complete pickle (STOP appended, last frame closed).
  std::vector<std::uint8_t> finish() && {
    put(0x2e);  // STOP
    commit_frame();
    return std::move(out_);
  }

 private:
  static constexpr std::size_t frame_target = 64 * 1024, frame_header = 9;

  void ensure_frame() {
    if (framing_ && !frame_open_) {
      frame_start_ = out_.size();
      out_.resize(out_.size() + frame_header, 0);
      frame_open_ = true;
    }
  }
  void put(std::uint8_t b) {
    ensure_frame();
    out_.push_back(b);
  }
  void le(std::uint64_t v, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) put(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void commit_frame() {
    if (!frame_open_) return;
    const std::size_t len = out_.size() - frame_start_ - frame_header;
    if (len >= 4) {
      out_[frame_start_] = 0x95;  // FRAME
      for (std::size_t i = 0; i < 8; ++i) {
        out_[frame_start_ + 1 + i] =
            static_cast<std::uint8_t>(static_cast<std::uint64_t>(len) >> (8 * i));
      }
    } else {
      out_.erase(out_.begin() + static_cast<std::ptrdiff_t>(frame_start_),
                 out_.begin() + static_cast<std::ptrdiff_t>(frame_start_ + frame_header));
    }
    frame_open_ = false;
  }
  void start_save() {  // the opcode boundary CPython checks when it starts saving an object
    if (frame_open_ && out_.size() - frame_start_ - frame_header >= frame_target) commit_frame();
  }
  void payload(std::span<const std::uint8_t> header, std::span<const std::uint8_t> data) {
    const bool bypass = data.size() >= frame_target;
    if (bypass) {
      commit_frame();
      framing_ = false;
    }
    for (auto b : header) put(b);
    ensure_frame();
    out_.insert(out_.end(), data.begin(), data.end());
    framing_ = true;
  }
  void memoize() {
    put(0x94);  // MEMOIZE
    ++memo_;
  }

  std::vector<std::uint8_t> out_;
  std::size_t frame_start_ = 0;
  bool frame_open_ = false, framing_ = true;
  std::uint64_t memo_ = 0;
  std::vector<std::pair<std::string, std::uint64_t>> tags_;
};

/// CBOR as cbor2.dumps(value, canonical=True) writes these shapes: tuples are definite-length
/// arrays, ints use the shortest head, None is 0xf6.
class cbor_writer {
 public:
  void none() { out_.push_back(0xf6); }
  void integer(std::int64_t v) {
    if (v >= 0) {
      head(0, static_cast<std::uint64_t>(v));
    } else {
      head(1, ~static_cast<std::uint64_t>(v));  // -1 - v
    }
  }
  void bytes(std::span<const std::uint8_t> b) {
    head(2, b.size());
    out_.insert(out_.end(), b.begin(), b.end());
  }
  void str(std::string_view s, bool = false) {
    head(3, s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void tuple_begin(std::size_t n) { head(4, n); }
  void tuple_end(std::size_t) {}
  std::vector<std::uint8_t> finish() && { return std::move(out_); }

 private:
  void head(std::uint8_t major, std::uint64_t v) {
    const auto m = static_cast<std::uint8_t>(major << 5);
    if (v < 24) {
      out_.push_back(static_cast<std::uint8_t>(m | v));
      return;
    }
    const std::size_t n = v <= 0xff ? 1 : v <= 0xffff ? 2 : v <= 0xffffffffu ? 4 : 8;
    out_.push_back(static_cast<std::uint8_t>(m | (n == 1 ? 24 : n == 2 ? 25 : n == 4 ? 26 : 27)));
    for (std::size_t i = n; i-- > 0;) out_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  std::vector<std::uint8_t> out_;
};

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

/// The serialized (parent, tokens, extra) of hash_block_tokens.
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

}  // namespace detail_hasher

// ------------------------------------------------------------------------------------------------
// vLLM v1
// ------------------------------------------------------------------------------------------------

/// vLLM's --prefix-caching-hash-algo.
enum class vllm_hash_algo : std::uint8_t {
  sha256,       ///< SHA-256 over pickle (vLLM's default)
  sha256_cbor,  ///< SHA-256 over canonical CBOR
  xxhash,       ///< XXH3-128 over pickle
  xxhash_cbor,  ///< XXH3-128 over canonical CBOR
};

/// The algorithm's name as vLLM spells it.
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
/// Throws: std::invalid_argument for a name vLLM does not accept.
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

/// Returns: F(payload) for algorithm a: 32-byte SHA-256 or 16-byte XXH3-128 (canonical order).
inline block_digest vllm_digest_bytes(vllm_hash_algo a, std::span<const std::uint8_t> payload) {
  if (a == vllm_hash_algo::sha256 || a == vllm_hash_algo::sha256_cbor) {
    return block_digest::of(detail::sha256::of(payload));
  }
  return block_digest::of(detail::xxh3_128(payload).canonical());
}

/// Returns: the serialized form vLLM hashes for a Python str (the NONE_HASH seed).
/// Complexity: O(s.size()).
inline std::vector<std::uint8_t> vllm_serialize_str(vllm_hash_algo a, std::string_view s) {
  if (a == vllm_hash_algo::sha256 || a == vllm_hash_algo::xxhash) {
    detail_hasher::pickler p;
    p.str(s);
    return std::move(p).finish();
  }
  detail_hasher::cbor_writer w;
  w.str(s);
  return std::move(w).finish();
}

/// Returns: vLLM's NONE_HASH, F(seed) (init_none_hash).  Complexity: O(seed.size()).
inline block_digest vllm_none_hash(vllm_hash_algo a, std::string_view seed) {
  return vllm_digest_bytes(a, vllm_serialize_str(a, seed));
}

/// Returns: the bytes hash_block_tokens serializes: (parent, tuple(tokens), extra), where extra
/// is None for no keys and no lookahead, tuple(keys) for keys, and (tuple(keys) or None,
/// *lookahead) when `lookahead` is non-empty.
/// Requires: each token and lookahead id is an int64.  Complexity: O(tokens + keys).
inline std::vector<std::uint8_t> vllm_block_payload(vllm_hash_algo a, const block_digest& parent,
                                                    std::span<const std::int64_t> tokens,
                                                    std::span<const vllm_extra_key> extra = {},
                                                    std::span<const std::int64_t> lookahead = {}) {
  if (a == vllm_hash_algo::sha256 || a == vllm_hash_algo::xxhash) {
    return detail_hasher::block_payload<detail_hasher::pickler>(parent, tokens, extra, lookahead);
  }
  return detail_hasher::block_payload<detail_hasher::cbor_writer>(parent, tokens, extra, lookahead);
}

/// Returns: vLLM's hash_block_tokens(F, parent, tokens, extra): one block's hash.
/// `parent` is the previous block's hash, or NONE_HASH for the first block.
/// Complexity: O(tokens + keys).  Throws: std::bad_alloc.
inline block_digest vllm_hash_block(vllm_hash_algo a, const block_digest& parent,
                                    std::span<const std::int64_t> tokens,
                                    std::span<const vllm_extra_key> extra = {},
                                    std::span<const std::int64_t> lookahead = {}) {
  return vllm_digest_bytes(a, vllm_block_payload(a, parent, tokens, extra, lookahead));
}

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
  if (!x.mm.empty() && x.mm.back().offset + x.mm.back().length > start) {
    std::size_t i = mm_index;
    while (i < x.mm.size()) {
      const auto& f = x.mm[i];
      if (end <= f.offset) break;          // the block has not reached this item
      if (start >= f.offset + f.length) {  // the block is past it
        ++i;
        continue;
      }
      keys.emplace_back(vllm_mm_key{
          f.identifier, static_cast<std::int64_t>(f.offset) - static_cast<std::int64_t>(start)});
      if (end >= f.offset + f.length) {
        ++i;
      } else {
        break;
      }
    }
    mm_index = i;
  }
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
/// o.block_size tokens, chained from vllm_none_hash(o.algo, o.none_hash_seed), with the extra
/// keys of `x` (see the header comment for their order and for lookahead).
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
    std::vector<vllm_extra_key> keys;
    std::span<const std::int64_t> look;
    if (o.lookahead_tokens == 0) {
      keys = vllm_block_extra_keys(x, b, start, end, mm_index);
    } else {
      // Extra keys over the block and its lookahead, then rewind the item index to the first
      // item still overlapping the next block (generate_lookahead_block_hash_extra_keys).
      keys = vllm_block_extra_keys(x, b, start, end + o.lookahead_tokens, mm_index);
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
// SGLang
// ------------------------------------------------------------------------------------------------

/// Which SGLang hash chain (see the header comment).
enum class sglang_chain : std::uint8_t {
  storage,  ///< radix nodes' hash_value, HiCache storage keys (get_storage_hash_str)
  event,    ///< KV-event hashes before per-event namespacing (compute_node_event_hash_values)
};

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
/// exceeds 2^32-1.  Requires: words >= 0.  Throws: std::invalid_argument for a negative word.
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

/// Returns: the page hashes of a token sequence as SGLang's get_hash_str(key, prior, page_size)
/// computes them (one per full page; with partial_block::cache also one for a partial last
/// page), chained from `prior` when given, else from the seed of o.chain for `x`.
/// Requires: o.page_size > 0; token ids >= 0.
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
  std::vector<std::int64_t> words;
  for (std::size_t p = 0; p < pages; ++p) {
    const std::size_t start = p * o.page_size;
    const std::size_t n = std::min<std::size_t>(o.page_size, units - start);
    std::span<const std::int64_t> page;
    if (o.bigram) {
      // The pairs cover raw tokens start..start+n, the span SGLang tests for wide ids.
      words.clear();
      for (std::size_t j = start; j < start + n; ++j) {
        words.push_back(t[j]);
        words.push_back(t[j + 1]);
      }
      page = words;
    } else {
      page = std::span<const std::int64_t>(t).subspan(start, n);
    }
    out.push_back(sglang_hash_page(parent ? &*parent : nullptr, page));
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

// ------------------------------------------------------------------------------------------------
// block_hasher: one engine's keys behind one type
// ------------------------------------------------------------------------------------------------

/// The block keys of one engine configuration.
/// Thread safety: const member functions may be called from any number of threads at once (the
/// hasher keeps only its options); distinct hashers are independent.
class block_hasher {
 public:
  /// vLLM v1 keys. NONE_HASH is computed once here.
  /// Requires: o.block_size > 0.  Throws: std::invalid_argument.
  explicit block_hasher(vllm_hash_options o) : opts_(std::move(o)) {
    const auto& v = std::get<vllm_hash_options>(opts_);
    if (v.block_size == 0) throw std::invalid_argument("block_hasher: block_size must be > 0");
    none_hash_ = vllm_none_hash(v.algo, v.none_hash_seed);
  }
  /// SGLang keys.  Requires: o.page_size > 0.  Throws: std::invalid_argument.
  explicit block_hasher(sglang_hash_options o) : opts_(o) {
    if (o.page_size == 0) throw std::invalid_argument("block_hasher: page_size must be > 0");
  }

  [[nodiscard]] bool is_vllm() const noexcept { return opts_.index() == 0; }
  /// Tokens per block (vLLM block_size, SGLang page_size).
  [[nodiscard]] std::uint32_t block_tokens() const noexcept {
    return is_vllm() ? std::get<0>(opts_).block_size : std::get<1>(opts_).page_size;
  }
  /// vLLM: the lookahead; SGLang: 0.
  [[nodiscard]] std::uint32_t lookahead_tokens() const noexcept {
    return is_vllm() ? std::get<0>(opts_).lookahead_tokens : 0;
  }
  /// Which blocks count as cacheable for replay: skip for vLLM, the option for SGLang.
  [[nodiscard]] partial_block partial() const noexcept {
    return is_vllm() ? partial_block::skip : std::get<1>(opts_).partial;
  }
  /// vLLM's NONE_HASH for these options (size 0 for SGLang).
  [[nodiscard]] const block_digest& none_hash() const noexcept { return none_hash_; }

  /// Returns: the engine's full block hashes of a token sequence (vllm_block_hashes or
  /// sglang_page_hashes).  Complexity: O(tokens).  Throws: as those functions.
  template <detail_hasher::token_range Tokens>
  [[nodiscard]] std::vector<block_digest> digests(const Tokens& tokens,
                                                  const request_extras& x = {}) const {
    if (is_vllm()) return vllm_block_hashes(tokens, std::get<0>(opts_), x, &none_hash_);
    return sglang_page_hashes(tokens, std::get<1>(opts_), x);
  }
  /// Returns: the 64-bit key of one digest (vllm_block_key or sglang_block_key).
  [[nodiscard]] block_key key_of(const block_digest& d) const noexcept {
    return is_vllm() ? vllm_block_key(d) : sglang_block_key(d);
  }
  /// Effects: appends the 64-bit keys of the sequence's blocks to `out`; returns how many.
  /// Complexity: O(tokens).  Throws: as digests().
  template <detail_hasher::token_range Tokens>
  std::size_t append_keys(const Tokens& tokens, std::vector<block_key>& out,
                          const request_extras& x = {}) const {
    const auto d = digests(tokens, x);
    for (const auto& h : d) out.push_back(key_of(h));
    return d.size();
  }
  /// Returns: the 64-bit keys of the sequence's blocks.
  template <detail_hasher::token_range Tokens>
  [[nodiscard]] std::vector<block_key> keys(const Tokens& tokens,
                                            const request_extras& x = {}) const {
    std::vector<block_key> out;
    append_keys(tokens, out, x);
    return out;
  }

 private:
  std::variant<vllm_hash_options, sglang_hash_options> opts_;
  block_digest none_hash_;
};

// ------------------------------------------------------------------------------------------------
// prefix_trace from token sequences
// ------------------------------------------------------------------------------------------------

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
