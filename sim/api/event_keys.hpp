// sim/api/event_keys.hpp — kvtk keys for the blocks of a KV-event recording.
//
// Two ways (`--keys`):
//  * derived (the default): each stored block's hash is recomputed from what the event carries
//    (its token ids and its parent's hash, itself derived from the parent's event) with the hash
//    options the user gives (vLLM) or SGLang's page hash, exactly as `kvtk trace import --format
//    token-ids` computes a request's keys. The engine's own hashes are used only to find parents, so the keys do not
//    depend on the engine's NONE_HASH (random per process unless PYTHONHASHSEED was set): a
//    recording and a token-id import of the same requests get the same keys.
//  * engine: the engine's own hash, its last 8 bytes big-endian (vLLM's 64-bit form; SGLang's int64
//    is the first 8 bytes of its page hash, the same bytes kvtk's SGLang key reads). vLLM's equal
//    the import's keys only when the engine ran with PYTHONHASHSEED = --hash-seed; SGLang's hash
//    has no seed, so for un-namespaced pages both ways give the same keys.
// A block whose parent never appeared (the recording started late, or the parent's batch was
// lost) cannot be derived: it is "unresolved", and so are the blocks chained after it. LoRA blocks
// (the event names the adapter but vLLM's extra key is its name and path) and blocks with extra
// keys (multimodal, cache_salt; SGLang: a cache_salt, whose pages SGLang namespaces) are
// unresolved too under `derived`.
// Memory: one entry per distinct stored hash (about 80 bytes), kept for the whole recording.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "formats/kv_events.hpp"
#include "kvtk/prefix/sglang_hash.hpp"
#include "kvtk/prefix/vllm_hash.hpp"

namespace kvtk::sim {

class event_keys {
 public:
  /// `derive`: derived keys (vLLM's hash with `o`), else the engine's own.
  event_keys(const kvtk::prefix::vllm_hash_options& o, bool derive)
      : opts_(o), derive_(derive), none_(kvtk::prefix::vllm_none_hash(o.algo, o.none_hash_seed)) {}
  /// SGLang's page hashes (pages of `page_size` tokens), derived or the engine's own.
  event_keys(std::uint32_t page_size, bool derive) : derive_(derive), sglang_(true) {
    opts_.block_size = page_size;
  }

  /// Why a block is unresolved.
  enum class unresolved : std::uint8_t { no, parent_unknown, lora, extra_keys, block_size, no_tokens };

  /// Effects: the keys of a stored event's blocks appended to `keys` (nullopt: unresolved, with
  /// the first reason in `why`). Complexity: O(tokens).  Throws: std::bad_alloc.
  void stored(const kv_event& e, std::vector<std::optional<kvtk::block_key>>& keys, unresolved& why) {
    why = unresolved::no;
    if (!derive_) {
      for (const auto& h : e.hashes) keys.push_back(engine_key(h));
      return;
    }
    const kvtk::prefix::block_digest* parent = sglang_ ? nullptr : &none_;
    bool ok = true;
    if (e.parent) {
      const auto it = digests_.find(*e.parent);
      if (it == digests_.end()) {
        ok = false;
        why = unresolved::parent_unknown;
      } else {
        parent = &it->second;
      }
    }
    if (ok && e.block_size == 0) ok = false, why = unresolved::no_tokens;
    if (ok && e.lora_name) ok = false, why = unresolved::lora;
    if (ok && (e.has_extra_keys || (e.cache_salt && !e.cache_salt->empty()))) ok = false, why = unresolved::extra_keys;
    if (ok && e.block_size != opts_.block_size) ok = false, why = unresolved::block_size;
    tokens_.resize(e.block_size);
    for (std::size_t b = 0; b < e.hashes.size(); ++b) {
      if (!ok) {
        keys.push_back(std::nullopt);
        continue;
      }
      for (std::size_t t = 0; t < e.block_size; ++t) {
        tokens_[t] = static_cast<std::int64_t>(e.token_ids[b * e.block_size + t]);
      }
      const auto d = sglang_ ? sglang_page(parent) : kvtk::prefix::vllm_hash_block(opts_.algo, *parent, tokens_);
      parent = &(digests_[e.hashes[b]] = d);
      keys.push_back(key(d));
    }
  }

  /// The key of a block the engine named by `hash` (a removed block): derived when its stored
  /// event was seen, else nullopt; the engine's own key under `engine`.
  [[nodiscard]] std::optional<kvtk::block_key> key_of(const std::string& hash) const {
    if (!derive_) return engine_key(hash);
    const auto it = digests_.find(hash);
    if (it == digests_.end()) return std::nullopt;
    return key(it->second);
  }

  /// The engine's 64-bit form of a hash: its last 8 bytes, big-endian.
  [[nodiscard]] static kvtk::block_key engine_key(const std::string& h) noexcept {
    kvtk::block_key k = 0;
    for (std::size_t i = h.size() > 8 ? h.size() - 8 : 0; i < h.size(); ++i) {
      k = (k << 8) | static_cast<unsigned char>(h[i]);
    }
    return k;
  }

  [[nodiscard]] const char* reason(unresolved u) const noexcept {
    if (sglang_ && u == unresolved::lora) return "a LoRA page (SGLang namespaces it by the adapter's internal id)";
    if (sglang_ && u == unresolved::extra_keys) return "a page with a cache_salt (SGLang namespaces it)";
    switch (u) {
      case unresolved::parent_unknown:
        return "its parent block was never stored in the recording (recorded late, or a lost batch)";
      case unresolved::lora:
        return "a LoRA block (the event names the adapter, vLLM's key also hashes its path)";
      case unresolved::extra_keys:
        return "a block with extra keys (multimodal or cache_salt), which the event does not carry whole";
      case unresolved::block_size:
        return "the event's block size is not --block-tokens";
      case unresolved::no_tokens:
        return "the event carries no token ids (Dynamo's RouterEvents): use the engine's keys";
      case unresolved::no:
        break;
    }
    return "";
  }

 private:
  [[nodiscard]] kvtk::block_key key(const kvtk::prefix::block_digest& d) const noexcept {
    return sglang_ ? kvtk::prefix::sglang_block_key(d) : kvtk::prefix::vllm_block_key(d);
  }
  // One SGLang page chained after `parent` (nullptr: the root, no seed for un-namespaced pages).
  [[nodiscard]] kvtk::prefix::block_digest sglang_page(const kvtk::prefix::block_digest* parent) const {
    kvtk::detail::sha256_digest prior{};
    if (parent) std::copy_n(parent->data.begin(), prior.size(), prior.begin());
    return kvtk::prefix::sglang_hash_page(parent ? &prior : nullptr, tokens_);
  }

  kvtk::prefix::vllm_hash_options opts_;
  bool derive_;
  bool sglang_ = false;
  kvtk::prefix::block_digest none_;
  std::unordered_map<std::string, kvtk::prefix::block_digest> digests_;
  std::vector<std::int64_t> tokens_;
};

/// The keys of `engine`'s recording ("vllm": its hash options; "sglang": pages of block_tokens).
/// Requires: the options validated (hash_algo one of vLLM's).
inline event_keys make_event_keys(const std::string& engine, std::uint32_t block_tokens,
                                  const std::string& hash_algo, const std::string& hash_seed, bool derive) {
  if (engine == "sglang") return event_keys(block_tokens, derive);
  kvtk::prefix::vllm_hash_options h;
  h.algo = kvtk::prefix::parse_vllm_hash_algo(hash_algo);
  h.block_size = block_tokens;
  if (!hash_seed.empty()) h.none_hash_seed = hash_seed;
  return event_keys(h, derive);
}

}  // namespace kvtk::sim
