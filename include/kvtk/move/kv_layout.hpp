// kvtk/move/kv_layout.hpp — how a KV block is laid out in memory, so movers know what a block's
// bytes are and how many separate pieces they come in.
//
// A block holds `tokens` tokens of every layer. Per layer and token there are `parts` vectors
// (2 = K and V; 1 = an MLA latent) of `heads` x `head_dim` elements of `dtype_bytes` each.
//  * block_first: one block is one contiguous range of bytes_per_block() (engines with
//    block-wise host layouts: FlexKV's BLOCKFIRST, LMCache chunks) — one copy per block;
//  * layer_first: the engine keeps one tensor per (layer, part) and a block is `layers x parts`
//    pieces of piece_bytes() at a stride of pool_blocks x piece_bytes() (vLLM/SGLang GPU
//    caches) — a mover copies `pieces()` chunks per block unless it gathers them.
// Presets reproduce kvtk's model presets' bytes per token (bf16).
/// Thread safety: values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string_view>

#include "kvtk/cost/profiles.hpp"

namespace kvtk::move {

enum class arrangement : std::uint8_t { block_first, layer_first };

struct kv_layout {
  std::uint32_t layers = 1;
  std::uint32_t parts = 2;  ///< 2 = K and V, 1 = MLA latent
  std::uint32_t tokens = 16;
  std::uint32_t heads = 1;
  std::uint32_t head_dim = 128;
  std::uint32_t dtype_bytes = 2;
  arrangement order = arrangement::block_first;

  [[nodiscard]] constexpr std::uint64_t bytes_per_token() const noexcept {
    return std::uint64_t{layers} * parts * heads * head_dim * dtype_bytes;
  }
  [[nodiscard]] constexpr std::uint64_t bytes_per_block() const noexcept {
    return bytes_per_token() * tokens;
  }
  /// Contiguous pieces one block is made of in this arrangement.
  [[nodiscard]] constexpr std::uint64_t pieces() const noexcept {
    return order == arrangement::block_first ? 1 : std::uint64_t{layers} * parts;
  }
  [[nodiscard]] constexpr std::uint64_t piece_bytes() const noexcept {
    return bytes_per_block() / pieces();
  }
  /// Byte offset of piece p of block b in a pool of `pool_blocks` blocks.
  /// Requires: b < pool_blocks, p < pieces().
  [[nodiscard]] constexpr std::uint64_t offset(std::uint64_t b, std::uint64_t p,
                                               std::uint64_t pool_blocks) const noexcept {
    return order == arrangement::block_first ? b * bytes_per_block()
                                             : (p * pool_blocks + b) * piece_bytes();
  }
  /// Throws std::invalid_argument when a field is 0 or the block exceeds 1 GiB.
  void validate() const {
    if (layers == 0 || parts == 0 || tokens == 0 || heads == 0 || head_dim == 0 ||
        dtype_bytes == 0) {
      throw std::invalid_argument("kv_layout: every field must be > 0");
    }
    if (bytes_per_block() > (std::uint64_t{1} << 30)) {
      throw std::invalid_argument("kv_layout: a block over 1 GiB");
    }
  }
};

/// Layouts of kvtk's model presets (kvtk/cost/profiles.hpp) with `tokens` per block.
inline std::optional<kv_layout> layout_preset(std::string_view model, std::uint32_t tokens) {
  const kvtk::cost::model_spec* m = kvtk::cost::find_model(model);
  if (m == nullptr) return std::nullopt;
  kv_layout l;
  l.tokens = tokens;
  l.layers = m->layers, l.parts = m->kv_parts, l.heads = m->kv_heads, l.head_dim = m->head_dim;
  l.dtype_bytes = m->dtype_bytes;
  return l;
}

}  // namespace kvtk::move
