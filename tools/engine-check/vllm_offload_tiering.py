"""Checks `kvtk replay --engine vllm --offload cpu:...,secondary=fs` (include/kvtk/tier/
vllm_offload.hpp) against vLLM 0.33.0's own code on CPU: its V1 Scheduler with the
OffloadingConnector whose spec is TieringOffloadingSpec (the TieringOffloadingManager: a CPU
primary tier with vLLM's cache policy and a filesystem secondary tier, FileSystemTierManager,
writing real files under a fresh temporary root_dir per configuration), built by
KVConnectorFactory from a kv_transfer_config as `vllm serve --kv-transfer-config` builds it.

As tools/engine-check/vllm_offload_connector.py, the driver plays the model runner (one sampled
token per finished prefill) and the GPU<->CPU offloading worker (every load and store job it is
handed completes in the same step). The CPU<->fs transfers are vLLM's own: the fs tier's I/O
threads write and read the chunk files and its lookup thread checks their existence. Those
threads make timing nondeterministic, so after every scheduler step the driver waits until every
fs job and every asynchronous existence check has finished and lets the manager consume their
results (its own _process_finished_jobs, which the next step's first lookup, prepare_store or
on_schedule_end would run): each step's promotions, fs writes and lookups have finished by the
next step.

Per configuration the trace's requests go one at a time (each added when the previous one has
finished and no transfer is pending), max_tokens 1, max_num_batched_tokens above every prompt.
vLLM's lookup returns None (the scheduler retries the request next step) while a chunk's fs
existence check is pending (RETRY) or a promotion fs -> CPU is in flight (HIT_PENDING); the
request's hit is the LAST non-None get_num_new_matched_tokens answer. A request still waiting
after --max-steps steps is aborted and counted in lookup_stalls.

Counted from vLLM's calls (totals per configuration):
  gpu_hit_blocks, cpu_hit_blocks, loaded_tokens  the GPU hit and the loaded tokens of the
      last non-None answer per request (in GPU blocks / tokens);
  chunks_loaded            keys passed to the manager's prepare_load;
  chunks_stored, chunks_evicted, store_refusals
                           the connector's prepare_store calls (keys_to_store, evicted_keys,
                           None results); promotions are not in these;
  fs_promoted_chunks, fs_promotion_evictions, fs_promotion_refusals
                           primary_tier.prepare_write calls made by _initiate_promotion
                           (keys_to_store, evicted_keys, None results);
  fs_written_chunks        keys copied to the fs tier (its submit_store);
  lookup_retries           None answers (extra steps a request waited for its lookup);
  lookup_stalls            requests aborted after --max-steps steps.
Diagnostics, not compared: fs_loaded_chunks (keys of the fs tier's submit_load), fs_io_failures,
fs_promotion_evicted_own (promotion evictions of a chunk of the promoting request's own prompt,
which the next step's scan then finds missing from the CPU), steps.

kvtk runs the same configurations through `kvtk replay --engine vllm --capacity C --offload
cpu:{N*K}:lru,block_size={K*bt},secondary=fs --no-opt --json -`; the compared counts are those
of the results row with an "offload" key (["offload"]["counters"]). lookup_retries and
lookup_stalls are compared only when kvtk reports them.

Usage: build/engine-venv/bin/python tools/engine-check/vllm_offload_tiering.py KVTK TRACE
         [--block-tokens B] [--requests N] [--configs C:N:K:lru;...] [--max-steps S]
         [--vllm-only] [--json OUT]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import vllm_offload_connector as connector_check  # noqa: E402

load_trace = connector_check.load_trace

COMPARED = ["unscheduled", "gpu_hit_blocks", "cpu_hit_blocks", "loaded_tokens", "chunks_loaded",
            "chunks_stored", "chunks_evicted", "store_refusals", "fs_promoted_chunks",
            "fs_promotion_evictions", "fs_promotion_refusals", "fs_written_chunks"]
OPTIONAL = ["lookup_retries", "lookup_stalls"]  # compared when kvtk reports them
DIAGNOSTIC = ["fs_loaded_chunks", "fs_io_failures", "fs_promotion_evicted_own", "steps"]


class VllmEnv(connector_check.VllmEnv):
    """vllm_offload_connector.py's environment (hasher, tiny model) with a tiering scheduler."""

    def scheduler(self, C, N, K, policy, max_len, root_dir):
        from vllm.v1.kv_offload.tiering.spec import TieringOffloadingSpec
        from vllm.v1.kv_offload.cpu.spec import CPUOffloadingSpec
        assert TieringOffloadingSpec.BLOCK_SIZE_ALIGNMENT == CPUOffloadingSpec.BLOCK_SIZE_ALIGNMENT
        chunk_bytes, _ = self.chunk_bytes(K)
        # No store_threshold: TieringOffloadingSpec refuses one of 2 or more.
        extra = {"spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": N * chunk_bytes,
                 "block_size": K * self.bt, "eviction_policy": policy,
                 "secondary_tiers": [{"type": "fs", "root_dir": root_dir,
                                      "n_read_threads": 2, "n_write_threads": 2}]}
        s, cs = self.scheduler_with(C, extra, max_len)
        mgr = cs.manager
        assert type(mgr).__name__ == "TieringOffloadingManager", type(mgr)
        assert mgr.primary_tier._num_chunks == N, (mgr.primary_tier._num_chunks, N)
        assert cs.config.blocks_per_chunk == K
        assert len(mgr.secondary_tiers) == 1 and mgr.secondary_tiers[0].tier_type == "fs"
        return s, cs, mgr


def settle(mgr, timeout=60.0):
    """Wait until every fs job and every asynchronous fs existence check has finished, then
    let the manager consume the finished jobs (promotions become CPU hits, the chunks pinned
    for fs writes are released)."""
    from vllm.v1.kv_offload.tiering.async_lookup import LookupPhase
    deadline = time.monotonic() + timeout
    tiers = mgr.secondary_tiers
    for tier in tiers:
        pool = tier._pool
        with pool._condition:
            if not pool._condition.wait_for(lambda: pool._inflight_jobs == 0,
                                            timeout=timeout):
                raise RuntimeError("fs tier jobs did not finish")
    while True:
        with mgr.lock:
            busy = False
            for tier in tiers:
                lm = tier._lookup_manager
                lm.drain_results()
                busy |= bool(lm._lookup_batch) or any(
                    st.phase is LookupPhase.IN_FLIGHT for st in lm._lookup_state.values())
            if not busy:
                mgr._process_finished_jobs()
                assert not mgr._jobs, mgr._jobs
                assert not mgr._pending_load_submissions
                return
        if time.monotonic() > deadline:
            raise RuntimeError("fs existence checks did not finish")
        time.sleep(0.0005)


def run_vllm(env, reqs, C, N, K, policy, max_steps, fs_dir):
    from vllm.distributed.kv_transfer.kv_connector.v1.offloading.common import (
        OffloadingWorkerMetadata)
    from vllm.sampling_params import SamplingParams
    from vllm.v1.outputs import KVConnectorOutput, ModelRunnerOutput
    from vllm.v1.request import Request, RequestStatus
    bt = env.bt
    max_len = max(r["input_length"] for r in reqs) + 2 * bt
    root = tempfile.mkdtemp(prefix="kvtk-vllm-fs-tier-", dir=fs_dir)
    s, cs, mgr = env.scheduler(C, N, K, policy, max_len, root)
    primary = mgr.primary_tier
    fs = mgr.secondary_tiers[0]
    tot = {"requests": 0, **{k: 0 for k in COMPARED + OPTIONAL + DIAGNOSTIC}}
    per_request = []

    orig_load, orig_store = mgr.prepare_load, mgr.prepare_store

    def prepare_load(keys, ctx):
        tot["chunks_loaded"] += len(keys)
        return orig_load(keys, ctx)

    def prepare_store(keys, ctx):
        out = orig_store(keys, ctx)
        if out is None:
            tot["store_refusals"] += 1
        else:
            tot["chunks_stored"] += len(out.keys_to_store)
            tot["chunks_evicted"] += len(out.evicted_keys)
        return out
    mgr.prepare_load, mgr.prepare_store = prepare_load, prepare_store

    # primary_tier.prepare_write is an alias of its prepare_store (tiering/manager.py:145) that
    # only _initiate_promotion calls; the flag keeps the count to promotions regardless.
    promoting = [False]
    orig_promote, orig_write = mgr._initiate_promotion, primary.prepare_write

    def initiate_promotion(*a, **kw):
        promoting[0] = True
        try:
            return orig_promote(*a, **kw)
        finally:
            promoting[0] = False

    def prepare_write(keys, ctx):
        out = orig_write(keys, ctx)
        if promoting[0]:
            if out is None:
                tot["fs_promotion_refusals"] += 1
            else:
                tot["fs_promoted_chunks"] += len(out.keys_to_store)
                tot["fs_promotion_evictions"] += len(out.evicted_keys)
                if out.evicted_keys:  # chunks of the promoting request's own prompt
                    st = cs._req_status.get(ctx.req_id)
                    own = set(st.group_states[0].offload_keys) if st else set()
                    tot["fs_promotion_evicted_own"] += sum(k in own for k in out.evicted_keys)
        return out
    mgr._initiate_promotion, primary.prepare_write = initiate_promotion, prepare_write

    orig_fs_store, orig_fs_load, orig_fs_finished = (fs.submit_store, fs.submit_load,
                                                     fs.get_finished_jobs)

    def submit_store(job):
        tot["fs_written_chunks"] += len(job.keys)
        return orig_fs_store(job)

    def submit_load(job):
        tot["fs_loaded_chunks"] += len(job.keys)
        return orig_fs_load(job)

    def get_finished_jobs():
        res = list(orig_fs_finished())
        tot["fs_io_failures"] += sum(1 for r in res if not r.success)
        return res
    fs.submit_store, fs.submit_load, fs.get_finished_jobs = (submit_store, submit_load,
                                                             get_finished_jobs)

    last = {}     # request id -> (num_computed_tokens, matched tokens) of the last non-None answer
    retries = {}  # request id -> None answers
    orig_match = cs.get_num_new_matched_tokens

    def matched(request, num_computed_tokens, *a, **kw):
        n, async_load = orig_match(request, num_computed_tokens, *a, **kw)
        if n is None:
            retries[request.request_id] = retries.get(request.request_id, 0) + 1
        else:
            last[request.request_id] = (num_computed_tokens, n)
        return n, async_load
    cs.get_num_new_matched_tokens = matched

    def step(i):
        out = s.schedule()
        meta = out.kv_connector_metadata
        done, recving = {}, set()
        if meta is not None:
            for jid, job in meta.load_jobs.items():
                done[jid] = 1
                recving.add(job.req_id)
            for jid in meta.store_jobs:
                done[jid] = 1
        ids = list(out.num_scheduled_tokens)
        toks_out = [[] if s.requests[x].is_prefill_chunk else [10**7 + i] for x in ids]
        mro = ModelRunnerOutput(
            req_ids=ids, req_id_to_index={x: k for k, x in enumerate(ids)},
            sampled_token_ids=toks_out,
            kv_connector_output=KVConnectorOutput(
                finished_recving=recving or None,
                kv_connector_worker_meta=OffloadingWorkerMetadata(completed_jobs=done)))
        s.update_from_output(out, mro)
        tot["steps"] += 1
        settle(mgr)

    dense = {}
    try:
        for i, r in enumerate(reqs):
            L = r["input_length"]
            tot["requests"] += 1
            if -(-L // bt) > C:
                tot["unscheduled"] += 1  # vLLM never admits it (kvtk counts it and skips it)
                per_request.append((0, 0, 0))
                continue
            toks = []
            for j, h in enumerate(r["hash_ids"]):
                toks += [dense.setdefault(h, len(dense) + 1)] * min(bt, L - bt * j)
            toks = toks[:L]
            assert len(toks) == L
            rid = str(i)
            q = Request(rid, toks, SamplingParams(max_tokens=1, ignore_eos=True), None,
                        arrival_time=float(i), block_hasher=env.hasher)
            s.add_request(q)
            steps, stalled = 0, False
            while s.has_requests() or cs.has_pending_push_work():
                step(i)
                steps += 1
                if steps == max_steps and s.has_requests():
                    stalled = True
                    s.finish_requests(rid, RequestStatus.FINISHED_ABORTED)
                if steps > max_steps + 50:
                    raise RuntimeError(f"request {i} did not drain: {s.get_request_counts()}")
            nr = retries.get(rid, 0)
            tot["lookup_retries"] += nr
            if stalled:
                tot["lookup_stalls"] += 1
                per_request.append((-1, -1, nr))
                continue
            g, h = last.get(rid, (0, 0))
            assert g % bt == 0 and h % bt == 0, (g, h)
            per_request.append((g // bt, h // bt, nr))
            tot["gpu_hit_blocks"] += g // bt
            tot["cpu_hit_blocks"] += h // bt
            tot["loaded_tokens"] += h
    finally:
        mgr.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    return tot, per_request


def run_kvtk(kvtk, trace_rows, bt, C, N, K, policy, work):
    path = Path(work) / "trace.jsonl"
    if not path.exists():
        with open(path, "w") as f:
            for r in trace_rows:
                f.write(json.dumps(r) + "\n")
    spec = f"cpu:{N * K}:{policy},block_size={K * bt},secondary=fs"
    out = subprocess.run([kvtk, "replay", "--trace", str(path), "--block-tokens", str(bt),
                          "--engine", "vllm", "--capacity", str(C), "--offload", spec, "--no-opt",
                          "--json", "-"], check=True, capture_output=True, text=True).stdout
    res = json.loads(out)["results"]
    rows = [x for x in res if "offload" in x]
    assert len(rows) == 1, res
    return rows[0]["offload"]["counters"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kvtk")
    ap.add_argument("trace")
    ap.add_argument("--block-tokens", type=int, default=512)
    ap.add_argument("--requests", type=int, default=0)
    ap.add_argument("--configs",
                    default="300:400:1:lru;300:2000:1:lru;300:400:2:lru;1000:3000:1:lru")
    ap.add_argument("--max-steps", type=int, default=200,
                    help="steps after which a request still waiting is aborted (a stall)")
    ap.add_argument("--fs-dir", default="/dev/shm" if os.access("/dev/shm", os.W_OK) else None,
                    help="where each configuration's fresh fs-tier root_dir is made (default "
                    "/dev/shm: tmpfs refuses O_DIRECT, so vLLM's fs tier uses buffered I/O, "
                    "much faster than O_DIRECT on a disk; the files and decisions are the same)")
    ap.add_argument("--vllm-only", action="store_true",
                    help="run vLLM only and print its totals as JSON (no kvtk)")
    ap.add_argument("--json")
    a = ap.parse_args()
    reqs = load_trace(a.trace, a.requests)
    work = tempfile.mkdtemp(prefix="kvtk-vllm-tiering-")
    env = VllmEnv(a.block_tokens, work)
    results, bad = [], 0
    for cfg in a.configs.split(";"):
        parts = cfg.split(":")
        C, N, K = int(parts[0]), int(parts[1]), int(parts[2])
        policy = ":".join(parts[3:]) or "lru"
        if policy != "lru":
            sys.exit(f"{cfg}: only lru (kvtk refuses other policies with secondary=fs)")
        t0 = time.monotonic()
        v, per_request = run_vllm(env, reqs, C, N, K, policy, a.max_steps, a.fs_dir)
        row = {"gpu_blocks": C, "cpu_chunks": N, "blocks_per_chunk": K, "policy": policy,
               "gpu_block_tokens": a.block_tokens, "requests": len(reqs), "vllm": v,
               "vllm_seconds": round(time.monotonic() - t0, 1)}
        desc = f"C={C} N={N} k={K} {policy}"
        if a.vllm_only:
            row["per_request"] = per_request
            results.append(row)
            print(json.dumps({"config": desc, "vllm": v}), flush=True)
            continue
        k = run_kvtk(a.kvtk, reqs, a.block_tokens, C, N, K, policy, work)
        keys = COMPARED + [x for x in OPTIONAL if x in k]
        same = all(v[x] == k.get(x) for x in keys)
        bad += 0 if same else 1
        row.update({"kvtk": {x: k.get(x) for x in keys + [x for x in OPTIONAL if x not in k]},
                    "equal": same})
        if not same:
            row["per_request"] = per_request
        results.append(row)
        print(("equal " if same else "DIFFER") + f" {desc}: "
              + ", ".join(f"{x} {v[x]}" + ("" if v[x] == k.get(x) else f" (kvtk {k.get(x)})")
                          for x in keys)
              + "; not compared: " + ", ".join(f"{x} {v[x]}" for x in OPTIONAL + DIAGNOSTIC
                                               if x not in keys), flush=True)
    shutil.rmtree(work, ignore_errors=True)
    if a.json:
        Path(a.json).write_text(json.dumps({"vllm_version": "0.33.0", "results": results},
                                           indent=2) + "\n")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
