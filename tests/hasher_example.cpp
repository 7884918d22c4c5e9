// The README's engine-keys example (section "Engine-compatible keys"), built and run as a test:
// its printed hashes are vLLM 0.33.0's and SGLang 0.5.23's own for the same input.
#include <iostream>
#include <kvtk/prefix/block_hasher.hpp>
#include <kvtk/prefix/mrc.hpp>
#include <vector>

int main() {
  using namespace kvtk::prefix;
  // Token ids from your tokenizer: two prompts share their first 8 tokens.
  std::vector<std::vector<int>> prompts = {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10},
                                           {1, 2, 3, 4, 5, 6, 7, 8, 20, 21, 22, 23}};
  // vLLM v1 defaults (sha256, PYTHONHASHSEED unset), --block-size 4: full blocks only.
  block_hasher vllm(vllm_hash_options{.algo = vllm_hash_algo::sha256, .block_size = 4});
  std::vector<block_digest> h = vllm.digests(prompts[0]);  // 2 blocks; tokens 9, 10 get none
  std::cout << "vLLM   block 0 " << h[0].hex() << " key " << std::hex << vllm.key_of(h[0])
            << std::dec << '\n';
  // SGLang page hashes (radix hash_value, HiCache keys), --page-size 4, with a cache salt.
  block_hasher sglang(sglang_hash_options{.page_size = 4});
  std::cout << "SGLang block 0 " << sglang.digests(prompts[0], {.cache_salt = "t1"})[0].hex()
            << '\n';
  // A prefix_trace (64-bit block keys, token counts) for replay() and the MRCs.
  prefix_trace t = make_prefix_trace(prompts, vllm);
  prefix_mrc m = exact_prefix_lru_mrc(t);
  std::cout << "hits at 100 blocks: " << m.block_hits(100) << " of " << m.block_refs << '\n';
}
