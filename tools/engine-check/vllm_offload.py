"""Drives vLLM's own CPU offloading manager (vllm/v1/kv_offload/cpu/manager.py) with a kvtk
policy loaded the way vLLM loads an out-of-tree policy (name + cache_policy_module_path), on a
replay of a trace, and checks its hits against kvtk's native run of the same operations.

Per request, in trace order, as the offloading connector does for a prompt whose blocks are all
offloadable (one KV cache group; every block of the request is a chunk):
  1. lookup() each key until the first miss: the leading HIT run is the request's hit count;
  2. prepare_load() + complete_load() the hits (they are pinned, then released);
  3. prepare_store() every key: the manager evicts what it needs through the policy (the
     request's own keys protected), allocates and inserts the missing ones; complete_store();
  4. on_request_finished(): the policy touches the keys the request reused.
The native run does the same on a kvtk.BlockCache directly (contains / evict(n, protected) /
insert / access of the reused keys tail first). Equal hits at every capacity mean the adapter runs
the kvtk policy inside vLLM unchanged. vLLM's built-in policies run alongside for reference.

Usage: python vllm_offload.py TRACE [--capacity 1000,10000] [--policy lru,s3fifo] [--json OUT]
"""
import argparse
import json
import sys
import time

import numpy as np

import kvtk
import vllm
from vllm.v1.kv_offload.base import LookupResult, ReqContext, make_offload_key
from vllm.v1.kv_offload.cpu.manager import CPUOffloadingManager

from kvtk.integrations import vllm as adapter


def request_keys(t):
    keys, offsets = t.block_keys, t.block_offsets
    for r in range(len(t)):
        yield [make_offload_key(int(k).to_bytes(8, "little"), 0)
               for k in keys[offsets[r]:offsets[r + 1]].tolist()]


def through_vllm(t, capacity, policy_name, module_path):
    mgr = CPUOffloadingManager(num_chunks=capacity, cache_policy=policy_name,
                               cache_policy_module_path=module_path)
    hits = refused = 0
    for r, keys in enumerate(request_keys(t)):
        ctx = ReqContext(req_id=str(r))
        mgr.on_new_request(ctx)
        h = 0
        while h < len(keys) and mgr.lookup(keys[h], ctx) == LookupResult.HIT:
            h += 1
        hits += h
        if h:
            mgr.prepare_load(keys[:h], ctx)
            mgr.complete_load(keys[:h], ctx)
        out = mgr.prepare_store(keys, ctx)
        if out is None:
            refused += 1
        elif out.keys_to_store:
            mgr.complete_store(out.keys_to_store, ctx)
        mgr.on_request_finished(ctx)
    return hits, refused


def native(t, capacity, policy):
    cache = kvtk.BlockCache(policy, capacity)
    hits = refused = 0
    for keys in request_keys(t):
        ids = [adapter.offload_key_to_u64(k) for k in keys]
        h = 0
        while h < len(ids) and ids[h] in cache:
            h += 1
        hits += h
        # What the request reuses: its loaded hits and every other key already resident when it
        # stores (the manager's reused_keys), not what it only inserts.
        reused = {i for i in ids if i in cache}
        seen, new = set(), []
        for i in ids:
            if i not in cache and i not in seen:
                new.append(i)
                seen.add(i)
        need = len(new) - (capacity - len(cache))
        ok = True
        if new and need > 0:
            try:
                cache.evict(need, np.array([i for i in ids if i in cache], dtype=np.uint64))
            except RuntimeError:
                ok = False
                refused += 1
        if ok:
            for i in new:
                cache.insert(i)
        touched = [i for i in reversed(ids) if i in reused and i in cache]
        if touched:
            cache.access(np.array(touched, dtype=np.uint64))
    return hits, refused


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--capacity", default="1000,10000")
    ap.add_argument("--policy", default="lru,s3fifo,arc")
    ap.add_argument("--json")
    a = ap.parse_args()
    t = kvtk.load_trace(a.trace)
    rows, ok = [], True
    for cap in [int(c) for c in a.capacity.split(",")]:
        for pol in a.policy.split(","):
            cls = adapter.make_policy_class(pol)
            setattr(adapter, cls.__name__, cls)  # vLLM imports it by name from the module
            t0 = time.perf_counter()
            v_hits, v_ref = through_vllm(t, cap, cls.__name__, "kvtk.integrations.vllm")
            t1 = time.perf_counter()
            n_hits, n_ref = native(t, cap, pol)
            t2 = time.perf_counter()
            same = (v_hits, v_ref) == (n_hits, n_ref)
            ok &= same
            rows.append({"capacity_chunks": cap, "kvtk_policy": pol, "hits_through_vllm": v_hits,
                         "hits_native": n_hits, "stores_refused_vllm": v_ref,
                         "stores_refused_native": n_ref, "equal": same,
                         "seconds_vllm": round(t1 - t0, 2), "seconds_native": round(t2 - t1, 2)})
            print(json.dumps(rows[-1]), flush=True)
        for builtin in ("lru", "arc"):
            b_hits, _ = through_vllm(t, cap, builtin, None)
            rows.append({"capacity_chunks": cap, "vllm_builtin_policy": builtin,
                         "hits_through_vllm": b_hits})
            print(json.dumps(rows[-1]), flush=True)
    report = {"vllm": vllm.__version__, "kvtk": kvtk.__version__, "trace": a.trace,
              "block_refs": t.block_refs, "rows": rows, "all_equal": ok}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=2)
    print("all equal" if ok else "MISMATCH", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
