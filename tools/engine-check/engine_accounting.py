"""Replays kvtk's request traces through the real prefix-cache code of vLLM 0.33.0 and
SGLang 0.5.23 (CPU, no model) and records the exact per-request hit counts, as reference data
for kvtk's "engine accounting modes".

Request model (both engines): requests run strictly one at a time in file order; each is
prompt-only (no output token is generated, cached or counted). A trace request with
input_length L and hash_ids h_0..h_{n-1} (n = ceil(L/512)) becomes L token ids: block j is 512
copies of token(h_j), the last block only L - 512*(n-1) copies. token(h) is the dense index of h
in the trace (order of first appearance, from 1), so distinct ids never share a token and the
chained hashes / radix paths of the engines see exactly the trace's prefix structure.
Capacity C blocks = C*512 tokens of KV.

vLLM (vllm/v1/core): one KVCacheManager with one full-attention group (FullAttentionSpec,
block_size 512, hash_block_size 512 -> UnitaryKVCacheCoordinator + FullAttentionManager),
prefix caching on, KVCacheConfig.num_blocks = C + 1 because BlockPool.__init__ pops block 0
off the free queue as the null block (never allocatable), leaving exactly C usable blocks.
Block hashes come from kv_cache_utils.get_request_block_hasher with the default
prefix_caching_hash_algo "sha256" (utils/hashing.sha256: SHA-256 of the pickled
(parent_hash, tokens, extra_keys) tuple; NONE_HASH from init_none_hash), exactly as
v1/engine/core.py EngineCore sets it up. Per request, as sched/scheduler.py schedule() does for a
WAITING request (no connector, no spec decode, whole prompt in one step):
  1. get_computed_blocks(request) -> (blocks, num_new_local_computed_tokens, _), hit capped at
     request.num_tokens - 1 and block aligned (FullAttentionManager.find_longest_cache_hit);
  2. allocate_slots(request, L - hit, num_new_computed_tokens=hit, new_computed_blocks=blocks,
     full_sequence_must_fit=True (SchedulerConfig.scheduler_reserve_full_isl default),
     has_scheduled_reqs=False (nothing else runs, so no watermark)): touches the hit blocks,
     pops ceil(L/512) - hit_blocks new blocks off the free queue (evicting their hashes), and
     caches the floor(L/512) full blocks (BlockPool.cache_full_blocks);
  3. the request finishes: free(request) (blocks freed in reverse order, BlockPool.free_blocks).
  A None from allocate_slots (does not fit even after evicting every free cached block) is
  counted as an unallocatable request with 0 hits; never happens on the bundled traces.

SGLang (sglang/srt): RadixCache (eviction policy "lru", page_size 512) over a real
PagedTokenToKVPoolAllocator(size=C*512, page_size=512) and ReqToTokenPool, with the
process-wide config published from a ServerArgs (runtime_context.publish; a tiny local llama
config.json stands in for the model, nothing is loaded). Per request, as the scheduler does:
  1. Req(...).init_next_round_input(tree_cache): match_kv_cache with key limit
     Req._compute_max_prefix_len = L - 1; RadixCache.match_prefix page-aligns the key
     (floor((L-1)/512)*512) and may split a node; req.prefix_len is the hit;
  2. req.lock = tree_cache.lock(req.last_node) (PrefillAdder._commit_prefill_admission);
  3. allocation as mem_cache/allocation.alloc_for_extend does it for page_size > 1:
     alloc_req_slots, then alloc_paged_token_slots_extend (which first evicts through
     evict_from_tree_cache -> allocator.evict_to_free_tokens -> RadixCache.evict(shortfall) with
     the conservative demand extend_len + page_size), then the row write of write_cache_indices'
     CPU fallback (prefix indices + new indices into req_to_token);
  4. the request finishes: mem_cache/common.release_kv_cache(req, tree_cache, checkpoint=True)
     (RadixCache.checkpoint -> _insert_cache inserts the page-aligned prompt, frees the
     duplicate pages, re-matches; then the partial last page is freed and the lock released).
  A request whose new pages exceed free + evictable pages (SGLang's PrefillAdder would never
  admit it) is skipped with 0 hits; never happens on the bundled traces.
  RadixCache stamps TreeNode.last_access_time with time.monotonic(); to make runs reproducible
  the driver replaces the `time` module seen by sglang.srt.mem_cache.radix_cache with one whose
  monotonic() returns a counter that increases by 1 on every call (every other attribute is the
  real time module). A strictly increasing clock orders events exactly as the real one does
  whenever the real one does not tie.

Only observation is added to the engines: counters wrapped around BlockPool.
_maybe_evict_cached_block (vLLM) and RadixCache.evict (SGLang) for evicted-block counts.

Usage: engine_accounting.py [--traces T ...] [--capacities 1000,10000] [--engines vllm,sglang]
                            [--out DIR]
"""
import argparse
import json
import os
import sys
import tempfile
import time
from array import array
from pathlib import Path

BLOCK = 512
REPO = Path(__file__).resolve().parents[2]
DEFAULT_TRACES = [
    REPO / "traces" / "mooncake_fast25_conversation_trace.jsonl",
    REPO / "traces" / "mooncake_fast25_synthetic_trace.jsonl",
    REPO / "traces" / "kvtk_gen_mixed_1k.jsonl",
]


def load_trace(path):
    """[(L, [token per block])], tokens = dense ids of the trace's hash ids."""
    dense, reqs = {}, []
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            if "input_length" not in d:  # the kvtk header line
                continue
            L, ids = int(d["input_length"]), d["hash_ids"]
            assert len(ids) == -(-L // BLOCK), (path, L, len(ids))
            reqs.append((L, [dense.setdefault(h, len(dense) + 1) for h in ids]))
    return reqs


def token_array(L, block_tokens):
    a = array("q")
    for t in block_tokens[:-1]:
        a.extend(array("q", [t]) * BLOCK)
    a.extend(array("q", [block_tokens[-1]]) * (L - BLOCK * (len(block_tokens) - 1)))
    return a


# ----------------------------------------------------------------------------------- vLLM
def run_vllm(reqs, capacity):
    import torch
    import vllm
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.request import Request, RequestStatus

    hash_fn = get_hash_fn_by_name("sha256")  # CacheConfig.prefix_caching_hash_algo default
    init_none_hash(hash_fn)
    hasher = get_request_block_hasher(BLOCK, hash_fn)
    spec = FullAttentionSpec(block_size=BLOCK, num_kv_heads=1, head_size=1, dtype=torch.float16)
    cfg = KVCacheConfig(num_blocks=capacity + 1,  # + the null block BlockPool takes first
                        kv_cache_tensors=[],
                        kv_cache_groups=[KVCacheGroupSpec(["layer.0"], spec)])
    max_len = max(L for L, _ in reqs) + 1
    mgr = KVCacheManager(cfg, max_model_len=max_len, scheduler_block_size=BLOCK,
                         hash_block_size=BLOCK, enable_caching=True)
    pool = mgr.block_pool
    assert pool.get_num_free_blocks() == capacity

    evicted = [0]
    orig_evict = pool._maybe_evict_cached_block

    def counting_evict(block):
        hit = orig_evict(block)
        evicted[0] += hit
        return hit

    pool._maybe_evict_cached_block = counting_evict

    hits, unalloc = [], 0
    for i, (L, toks) in enumerate(reqs):
        req = Request(str(i), token_array(L, toks).tolist(), SamplingParams(max_tokens=1), None,
                      block_hasher=hasher)
        blocks, hit, _ = mgr.get_computed_blocks(req)
        new = mgr.allocate_slots(req, L - hit, num_new_computed_tokens=hit,
                                 new_computed_blocks=blocks, full_sequence_must_fit=True,
                                 has_scheduled_reqs=False)
        if new is None:
            unalloc += 1
            hits.append(0)
            continue
        req.status = RequestStatus.RUNNING
        req.num_computed_tokens = L
        hits.append(hit)
        req.status = RequestStatus.FINISHED_LENGTH_CAPPED
        mgr.free(req)

    hashed_blocks = sum(1 for b in pool.blocks if b.block_hash is not None)
    final = {
        "cached_hash_keys": len(pool.cached_block_hash_to_block),
        "cached_blocks": hashed_blocks,  # blocks holding a hash (duplicates counted)
        "duplicate_cached_blocks": hashed_blocks - len(pool.cached_block_hash_to_block),
        "free_blocks": pool.get_num_free_blocks(),
        "used_blocks": capacity - pool.get_num_free_blocks(),  # referenced: 0 once all freed
    }
    return vllm.__version__, hits, unalloc, evicted[0], final


# --------------------------------------------------------------------------------- SGLang
class _CounterTime:
    """The time module with monotonic() replaced by a counter (+1 per call)."""

    def __init__(self):
        self.t = 0

    def monotonic(self):
        self.t += 1
        return float(self.t)

    def __getattr__(self, name):
        return getattr(time, name)


def _publish_sglang_config(workdir):
    from sglang.srt import runtime_context
    from sglang.srt.server_args import ServerArgs

    model = Path(workdir) / "tiny-llama"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
        "intermediate_size": 128, "num_attention_heads": 2, "num_key_value_heads": 2,
        "num_hidden_layers": 1, "vocab_size": 1000, "max_position_embeddings": 1 << 20,
        "rms_norm_eps": 1e-5, "torch_dtype": "float32"}))
    args = ServerArgs(model_path=str(model), skip_tokenizer_init=True, device="cpu",
                      page_size=BLOCK)
    runtime_context.publish(args, role="scheduler")


def run_sglang(reqs, capacity):
    import sglang
    import torch
    from sglang.srt.managers.schedule_batch import FINISH_LENGTH, Req
    from sglang.srt.mem_cache import radix_cache as radix_module
    from sglang.srt.mem_cache.allocation import alloc_paged_token_slots_extend, alloc_req_slots
    from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams
    from sglang.srt.mem_cache.common import release_kv_cache
    from sglang.srt.mem_cache.memory_pool import ReqToTokenPool
    from sglang.srt.mem_cache.radix_cache import RadixCache
    from sglang.srt.sampling.sampling_params import SamplingParams

    radix_module.time = _CounterTime()  # deterministic last_access_time (see header)
    allocator = PagedTokenToKVPoolAllocator(capacity * BLOCK, BLOCK, torch.int64, "cpu",
                                            kvcache=None, need_sort=False)
    max_len = max(L for L, _ in reqs) + 1
    req_to_token = ReqToTokenPool(size=2, max_context_len=max_len, device="cpu",
                                  enable_memory_saver=False)
    tree = RadixCache(CacheInitParams(disable=False, req_to_token_pool=req_to_token,
                                      token_to_kv_pool_allocator=allocator, page_size=BLOCK,
                                      eviction_policy="lru"))
    assert allocator.available_size() == capacity * BLOCK

    evicted = [0]
    orig_evict = tree.evict

    def counting_evict(params):
        res = orig_evict(params)
        evicted[0] += res.num_tokens_evicted
        return res

    tree.evict = counting_evict

    hits, unalloc = [], 0
    for i, (L, toks) in enumerate(reqs):
        req = Req(str(i), "", token_array(L, toks), SamplingParams(max_new_tokens=1))
        req.init_next_round_input(tree)
        pre = req.prefix_len
        req.extend_end = L
        req.lock = tree.lock(req.last_node)
        new_pages = -(-L // BLOCK) - pre // BLOCK
        if new_pages * BLOCK > allocator.available_size() + tree.evictable_size():
            tree.unlock(req.lock)
            req.lock = None
            unalloc += 1
            hits.append(0)
            continue
        alloc_req_slots(req_to_token, [req], tree)
        prefix = tree.prefix_device_indices(req)
        last_loc = prefix[-1:] if pre else torch.full((1,), -1, dtype=torch.int64)
        pre_t, len_t = torch.tensor([pre]), torch.tensor([L])
        out = alloc_paged_token_slots_extend(tree, pre_t, pre_t, len_t, len_t, last_loc, L - pre)
        row = req.kv.req_pool_idx
        req_to_token.write((row, slice(0, pre)), prefix)
        req_to_token.write((row, slice(pre, L)), out)
        req.kv.kv_allocated_len = req.kv.kv_committed_len = L
        hits.append(pre)
        req.finished_reason = FINISH_LENGTH(length=1)
        release_kv_cache(req, tree, checkpoint=True)

    assert evicted[0] % BLOCK == 0
    final = {
        "tree_tokens": tree.total_size(),
        "tree_pages": tree.total_size() // BLOCK,
        "evictable_tokens": tree.evictable_size(),
        "protected_tokens": tree.protected_size(),
        "free_pages": allocator.available_size() // BLOCK,
        "used_pages": capacity - allocator.available_size() // BLOCK,  # = tree pages when idle
    }
    return sglang.__version__, hits, unalloc, evicted[0] // BLOCK, final


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", nargs="+", default=[str(t) for t in DEFAULT_TRACES])
    ap.add_argument("--capacities", default="1000,10000,30000,100000")
    ap.add_argument("--engines", default="vllm,sglang")
    ap.add_argument("--out", default=str(REPO / "build" / "engine-check" / "accounting"))
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    summary_path = out / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {"runs": []}
    summary["method"] = {
        "driver": "tools/engine-check/engine_accounting.py (its header says how each engine runs)",
        "block_tokens": BLOCK,
        "requests": "one at a time in file order, prompt only (match, allocate, cache, free)",
        "tokens": "block j of a request = 512 (last: L - 512*(n-1)) copies of the dense index "
                  "of hash_ids[j] in the trace",
        "vllm": "KVCacheManager, 1 FullAttentionSpec group, num_blocks = capacity + 1 (null "
                "block), prefix_caching_hash_algo sha256",
        "sglang": "RadixCache lru + PagedTokenToKVPoolAllocator(capacity*512, page 512); "
                  "radix_cache.time.monotonic replaced by a +1-per-call counter",
        "hit_tokens": "vLLM num_new_local_computed_tokens / SGLang req.prefix_len",
        "evicted_blocks": "vLLM: cached blocks whose hash was dropped when popped off the free "
                          "queue; SGLang: tokens freed by RadixCache.evict / 512",
    }
    engines = a.engines.split(",")
    import torch
    # Two-core machine: torch's intra-op threads only contend here (SGLang's CPU allocation
    # path alloc_extend_naive runs ~30x slower with 2 threads than with 1).
    torch.set_num_threads(1)
    if "sglang" in engines:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        _publish_sglang_config(tempfile.mkdtemp(prefix="engine-accounting-"))
    runners = {"vllm": run_vllm, "sglang": run_sglang}
    for trace in a.traces:
        reqs = load_trace(trace)
        stem = Path(trace).stem
        for engine in engines:
            for cap in [int(c) for c in a.capacities.split(",")]:
                t0 = time.perf_counter()
                version, hits, unalloc, evicted_blocks, final = runners[engine](reqs, cap)
                secs = time.perf_counter() - t0
                assert all(h % BLOCK == 0 for h in hits), "hits are not block aligned"
                (out / f"{stem}.{engine}.{cap}.txt").write_text("".join(f"{h}\n" for h in hits))
                row = {"trace": stem, "engine": engine, "engine_version": version,
                       "capacity_blocks": cap, "requests": len(reqs),
                       "hit_tokens": sum(hits), "hit_blocks": sum(hits) // BLOCK,
                       "hits_block_aligned": True, "unallocatable_requests": unalloc,
                       "evicted_blocks": evicted_blocks, "final": final,
                       "seconds": round(secs, 1)}
                print(json.dumps(row), flush=True)
                summary["runs"] = [r for r in summary["runs"]
                                   if (r["trace"], r["engine"], r["capacity_blocks"])
                                   != (stem, engine, cap)] + [row]
                summary["runs"].sort(key=lambda r: (r["trace"], r["engine"],
                                                    r["capacity_blocks"]))
                summary_path.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
