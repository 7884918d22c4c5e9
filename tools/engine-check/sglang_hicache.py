"""Checks `kvtk replay --engine sglang --offload host:...` (include/kvtk/tier/sglang_hicache.hpp)
against SGLang 0.5.23's own HiCache on CPU: its UnifiedRadixCache (the tree the server builds;
`--enable-hierarchical-cache` adds init_hicache) with the HiCacheController and a real host pool
(MHATokenToKVPoolHost), as registry.py builds them, with the bundled Rust tree core (the
default) or the Python one (--tree-core python).

What is not SGLang's code: no model runs, so (1) pinning host memory (cudaHostRegister) is
skipped and (2) the host pool's two data-copy methods (backup_from_device_all_layer,
load_to_device_per_layer) copy nothing; the CPU "streams" and events finish at once, so every
backup and load is acknowledged at the next scheduler step. Every decision that sets the counts
(which nodes match, what is loaded back, backed up, evicted on the device and on the host) is
SGLang's.

Per configuration the trace's requests go one at a time, prompt only (max_new_tokens 1); one of
at least (device tokens - 6) tokens is refused before anything, as SGLang's scheduler refuses it
on arrival (max_req_input_len); each other goes through the scheduler's calls: Req.init_next_round_input (the match, capped at L - 1 tokens);
when the match has a host hit, init_load_back (PrefillAdder.add_one_req) and
ready_to_load_host_cache; lock(last_node); alloc_req_slots + alloc_paged_token_slots_extend
(the device eviction on shortfall); release_kv_cache(checkpoint=True) (the insert: hit counts,
write-through backups, host eviction on demand); then check_hicache_events() (the acks, at the
start of the next step). Token ids: block j of a prompt is P copies of a dense id of its hash
id, the last block cut to the prompt length (as engine_accounting.py).

Counted: per request the device hit (prefix_len before the load) and the loaded tokens; in total
the host tokens backed up (host pool allocations), the host tokens evicted (evict_host), the
device tokens evicted (evict_for_alloc; a backed-up node is demoted, the rest deleted).
kvtk runs the same configurations through `kvtk replay --engine sglang --capacity C --offload
host:H,write_policy=W --json` and the totals must be equal.

Usage: build/engine-venv/bin/python tools/engine-check/sglang_hicache.py KVTK TRACE
         [--block-tokens P] [--requests N] [--configs C:H:POLICY;...] [--tree-core rust|python]
         [--json OUT]
   (C device pages, H host pages as kvtk counts them: int(C*P*ratio)//P + 1 for a ratio)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from array import array
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from vllm_common import tiny_llama  # noqa: E402  (a config-only model directory)


def load_trace(path, limit, P):
    dense, reqs, rows = {}, [], []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            d = json.loads(line)
            if "input_length" not in d:
                continue
            L, ids = int(d["input_length"]), d["hash_ids"]
            assert len(ids) == -(-L // P), (path, L, len(ids))
            reqs.append((L, [dense.setdefault(h, len(dense) + 1) for h in ids]))
            rows.append(d)
            if limit and len(reqs) >= limit:
                break
    return reqs, rows


def token_array(L, block_tokens, P):
    a = array("q")
    for t in block_tokens[:-1]:
        a.extend(array("q", [t]) * P)
    a.extend(array("q", [block_tokens[-1]]) * (L - P * (len(block_tokens) - 1)))
    return a


def run_sglang(reqs, P, C, H, policy, core, work):
    import torch
    from sglang.srt import runtime_context
    from sglang.srt.server_args import ServerArgs
    # The host pool's size: int(C*P*ratio)//P + 1 pages (pool_host/base.py); this ratio gives H.
    ratio = (H - 1) / C
    while (int(C * P * ratio) // P + 1) < H:
        ratio = float.__add__(ratio, 1e-12)
    args = ServerArgs(model_path=tiny_llama(work), skip_tokenizer_init=True, device="cpu",
                      page_size=P, enable_hierarchical_cache=True, hicache_ratio=ratio,
                      hicache_io_backend="kernel", hicache_write_policy=policy,
                      hicache_mem_layout="page_first")
    runtime_context.publish(args, role="scheduler")
    import sglang.srt.mem_cache.pool_host.common as phc
    phc._cuda_host_register = lambda *a, **k: None
    from sglang.srt.mem_cache.pool_host.mha import MHATokenToKVPoolHost
    MHATokenToKVPoolHost.backup_from_device_all_layer = lambda self, *a, **k: None
    MHATokenToKVPoolHost.load_to_device_per_layer = lambda self, *a, **k: None
    host_io = {"alloc": 0, "free": 0}  # observation only: host tokens taken and given back
    if not hasattr(MHATokenToKVPoolHost, "_kvtk_orig_alloc"):
        MHATokenToKVPoolHost._kvtk_orig_alloc = MHATokenToKVPoolHost.alloc
        MHATokenToKVPoolHost._kvtk_orig_free = MHATokenToKVPoolHost.free
    def counting_alloc(self, n):
        r = MHATokenToKVPoolHost._kvtk_orig_alloc(self, n)
        if r is not None:
            run_sglang.host_io["alloc"] += len(r)
        return r
    def counting_free(self, indices):
        run_sglang.host_io["free"] += len(indices)
        return MHATokenToKVPoolHost._kvtk_orig_free(self, indices)
    run_sglang.host_io = host_io
    MHATokenToKVPoolHost.alloc = counting_alloc
    MHATokenToKVPoolHost.free = counting_free
    from sglang.srt.managers.schedule_batch import FINISH_LENGTH, Req
    from sglang.srt.mem_cache.allocation import alloc_paged_token_slots_extend, alloc_req_slots
    from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator
    from sglang.srt.mem_cache.base_prefix_cache import InitLoadBackParams
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams
    from sglang.srt.mem_cache.common import release_kv_cache
    from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, ReqToTokenPool
    from sglang.srt.mem_cache.unified_cache.components.base import ComponentType
    from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache
    from sglang.srt.sampling.sampling_params import SamplingParams

    kv = MHATokenToKVPool(size=C * P, page_size=P, dtype=torch.float16, head_num=1, head_dim=8,
                          layer_num=1, device="cpu", enable_memory_saver=False)
    alloc = PagedTokenToKVPoolAllocator(C * P, P, torch.float16, "cpu", kvcache=kv,
                                        need_sort=False)
    max_len = max(L for L, _ in reqs) + 1
    r2t = ReqToTokenPool(size=2, max_context_len=max_len, device="cpu", enable_memory_saver=False)
    params = CacheInitParams(disable=False, req_to_token_pool=r2t,
                             token_to_kv_pool_allocator=alloc, page_size=P, eviction_policy="lru",
                             tree_components=(ComponentType.FULL,), tree_core_backend=core)
    cache = UnifiedRadixCache(params)
    cache.init_hicache(args, params)
    host = cache.cache_controller.mem_pool_host
    assert host.available_size() == H * P, (host.available_size(), H * P)
    assert alloc.available_size() == C * P

    tot = {"device_evicted_tokens": 0, "host_evicted_tokens": 0}
    orig_evict = cache.evict_for_alloc

    def counting_evict(*a, **k):
        before = alloc.available_size()
        r = orig_evict(*a, **k)
        tot["device_evicted_tokens"] += alloc.available_size() - before
        return r

    cache.evict_for_alloc = counting_evict
    orig_host = cache.evict_host

    def counting_host(*a, **k):
        before = host.available_size()
        r = orig_host(*a, **k)
        tot["host_evicted_tokens"] += host.available_size() - before
        return r

    cache.evict_host = counting_host

    per_request, hit_dev, loaded_tot, skipped = [], 0, 0, 0
    for i, (L, toks) in enumerate(reqs):
        if L >= C * P - 6:
            # At least max_req_input_len = min(context - 1, KV tokens - 1) - 5 tokens: SGLang's
            # scheduler refuses it on arrival (validate_input_length, tp_worker.py), before any
            # match.
            skipped += 1
            per_request.append((0, 0))
            continue
        req = Req(str(i), "", token_array(L, toks, P), SamplingParams(max_new_tokens=1))
        req.init_next_round_input(cache)
        dev = req.prefix_len
        loaded = 0
        if req.host_hit_length > 0:
            loaded, last = cache.init_load_back(
                InitLoadBackParams(best_match_node=req.best_match_node,
                                   host_hit_length=req.host_hit_length, req=req))
            cache.ready_to_load_host_cache()
            req.last_node = last
            req.prefix_len += loaded
            if cache.load_back_is_cache_owned():
                req.kv.cache_protected_len = req.prefix_len
        pre = req.prefix_len
        req.extend_end = L
        req.lock = cache.lock(req.last_node)
        new_pages = -(-L // P) - pre // P
        # One request at a time: everything but its own path can be evicted, so it always fits.
        assert new_pages * P <= alloc.available_size() + cache.evictable_size(), i
        alloc_req_slots(r2t, [req], cache)
        prefix = cache.prefix_device_indices(req)
        last_loc = prefix[-1:] if pre else torch.full((1,), -1, dtype=torch.int64)
        pre_t, len_t = torch.tensor([pre]), torch.tensor([L])
        out = alloc_paged_token_slots_extend(cache, pre_t, pre_t, len_t, len_t, last_loc, L - pre)
        row = req.kv.req_pool_idx
        r2t.write((row, slice(0, pre)), prefix)
        r2t.write((row, slice(pre, L)), out)
        req.kv.kv_allocated_len = req.kv.kv_committed_len = L
        req.finished_reason = FINISH_LENGTH(length=1)
        release_kv_cache(req, cache, checkpoint=True)
        cache.check_hicache_events()
        per_request.append((dev, loaded))
        hit_dev += dev
        loaded_tot += loaded
    assert H * P - host.available_size() == host_io["alloc"] - host_io["free"]
    result = {"requests": len(reqs), "unscheduled": skipped,
              "device_hit_blocks": hit_dev // P, "host_hit_blocks": loaded_tot // P,
              "host_resident_blocks": (H * P - host.available_size()) // P,
              "host_stored_blocks": host_io["alloc"] // P,
              "host_freed_blocks": host_io["free"] // P,
              "device_evicted_blocks": tot["device_evicted_tokens"] // P,
              "host_evicted_blocks": tot["host_evicted_tokens"] // P}
    return result, per_request


def run_kvtk(kvtk, rows, P, C, H, policy, work):
    path = Path(work) / "trace.jsonl"
    if not path.exists():
        with open(path, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    spec = f"host:{H},write_policy={policy}"
    out = subprocess.run([kvtk, "replay", "--trace", str(path), "--block-tokens", str(P),
                          "--engine", "sglang", "--capacity", str(C), "--offload", spec,
                          "--no-opt", "--json", "-"], check=True, capture_output=True,
                         text=True).stdout
    res = [x for x in json.loads(out)["results"] if "offload" in x]
    assert len(res) == 1, res
    return res[0]["offload"]["counters"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kvtk")
    ap.add_argument("trace")
    ap.add_argument("--block-tokens", type=int, default=512)
    ap.add_argument("--requests", type=int, default=0)
    ap.add_argument("--configs", default="300:601:write_through;300:601:write_through_selective;"
                    "300:601:write_back")
    ap.add_argument("--tree-core", default="rust", choices=["rust", "python"])
    ap.add_argument("--json")
    a = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    P = a.block_tokens
    reqs, rows = load_trace(a.trace, a.requests, P)
    work = tempfile.mkdtemp(prefix="kvtk-sglang-hicache-")
    results, bad = [], 0
    for cfg in a.configs.split(";"):
        c, h, policy = cfg.split(":")
        C, H = int(c), int(h)
        s, _ = run_sglang(reqs, P, C, H, policy, a.tree_core, work)
        k = run_kvtk(a.kvtk, rows, P, C, H, policy, work) if a.kvtk != "-" else {}
        keys = [x for x in s if x != "requests"]
        same = all(s[x] == k.get(x) for x in keys)
        bad += 0 if same else 1
        results.append({"device_pages": C, "host_pages": H, "write_policy": policy,
                        "page_tokens": P, "requests": len(reqs), "tree_core": a.tree_core,
                        "sglang": s, "kvtk": {x: k.get(x) for x in keys}, "equal": same})
        print(("equal " if same else "DIFFER") + f" C={C} H={H} {policy}: "
              + ", ".join(f"{x} {s[x]}" + ("" if s[x] == k.get(x) else f" (kvtk {k.get(x)})")
                          for x in keys), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps({"sglang_version": "0.5.23", "results": results},
                                           indent=2) + "\n")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
