"""Checks `kvtk replay --engine vllm --offload lmcache-cpu:...` (include/kvtk/tier/lmcache_offload.hpp)
against vLLM 0.33.0's V1 Scheduler with LMCache 0.5.6's own connector (LMCacheConnectorV1 ->
lmcache's LMCacheConnectorV1Impl), on CPU.

Scheduler side: the real connector as vLLM builds it from a kv_transfer_config (lmcache.* extras
set chunk_size, local_cpu, max_local_cpu_size, cache_policy); its lookup client is LMCache's own,
with the ZMQ link to the worker replaced by an in-process call that does what LMCache's lookup
server does (engine.lookup(hashes, offsets, lookup_id, pin=True)). Worker side: LMCache's own
start_load_kv and wait_for_save (retrieve, unpin, store) on an LMCacheEngine with LMCache's
MockGPUConnector and its StorageManager with the LocalCPUBackend and the chosen cache policy.
Not LMCache's code: the copies between GPU and CPU tensors (the mock connector copies nothing
real) and the ZMQ transport. Every decision that sets the counts is vLLM's or LMCache's.

Per configuration the trace's requests go one at a time (each added when the previous one has
finished), max_tokens 1, every prompt in one step. Token ids: block j of a prompt is B copies of
a dense id of its hash id, the last block cut to the prompt length (as vllm_offload_connector.py).
Counted: per request the GPU hit vLLM asks the connector with, LMCache's lookup hit and the tokens
it returns; in total the chunks retrieved, put (new CPU entries) and evicted.

Usage: build/engine-venv/bin/python tools/engine-check/lmcache_connector.py KVTK TRACE
         [--block-tokens B] [--requests N] [--configs C:N:CHUNK:POLICY[:D];...] [--json OUT]
   (C GPU blocks, N LMCache CPU chunks, CHUNK chunk_size in tokens, POLICY lru|mru|fifo|lfu,
    D LMCache local-disk chunks, 0 or absent: no disk backend)
   Needs lmcache 0.5.6 and its small pure-Python dependencies on PYTHONPATH (lmcache_connector.sh).
"""
import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from vllm_common import tiny_llama  # noqa: E402


def load_trace(path, limit):
    rows = []
    with open(path) as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                if "input_length" not in d:
                    continue
                rows.append(d)
                if limit and len(rows) >= limit:
                    break
    return rows


def run_lmcache(rows, B, C, N, CH, policy, work, D=0, progress=None):
    import torch
    from vllm.config import CacheConfig, KVTransferConfig, ModelConfig, SchedulerConfig, VllmConfig
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.outputs import ModelRunnerOutput
    from vllm.v1.request import Request
    from vllm.v1.structured_output import StructuredOutputManager

    # chunk bytes = 2 (K, V) x 1 layer x CH x 2 KV heads x head 32 x 2 bytes, aligned to 4 KiB
    chunk_bytes = -(-(256 * CH) // 4096) * 4096
    extra = {"lmcache.chunk_size": CH, "lmcache.local_cpu": True,
             "lmcache.max_local_cpu_size": N * chunk_bytes / 1024 ** 3,
             "lmcache.cache_policy": policy.upper(), "lmcache.lmcache_instance_id": f"kvtk{C}-{N}-{CH}-{policy}-{D}"}
    if D:
        disk_dir = Path(work) / f"disk-{C}-{N}-{CH}-{policy}-{D}"
        disk_dir.mkdir(parents=True, exist_ok=True)
        extra["lmcache.local_disk"] = f"file://{disk_dir}/"
        extra["lmcache.max_local_disk_size"] = D * chunk_bytes / 1024 ** 3
    max_len = max(int(r["input_length"]) for r in rows) + 16
    scfg = SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=max_len, max_model_len=max_len,
                           enable_chunked_prefill=True, async_scheduling=False,
                           is_encoder_decoder=False)
    mcfg = ModelConfig(model=tiny_llama(work), dtype="float16", seed=0, skip_tokenizer_init=True,
                       max_model_len=max_len)
    ccfg = CacheConfig(block_size=B, enable_prefix_caching=True)
    kt = KVTransferConfig(kv_connector="LMCacheConnectorV1", kv_role="kv_both",
                          kv_connector_extra_config=extra)
    vcfg = VllmConfig(scheduler_config=scfg, model_config=mcfg, cache_config=ccfg,
                      kv_transfer_config=kt)
    spec = FullAttentionSpec(block_size=B, num_kv_heads=2, head_size=32, dtype=torch.float16)
    kcfg = KVCacheConfig(num_blocks=C + 1, kv_cache_tensors=[],
                         kv_cache_groups=[KVCacheGroupSpec(["model.layers.0.self_attn.attn"], spec)])
    ccfg.num_gpu_blocks = C + 1
    s = Scheduler(vllm_config=vcfg, kv_cache_config=kcfg,
                  structured_output_manager=StructuredOutputManager(vcfg), block_size=B,
                  log_stats=False)
    impl = s.connector._lmcache_engine
    hash_fn = get_hash_fn_by_name("sha256")
    init_none_hash(hash_fn)
    hasher = get_request_block_hasher(B, hash_fn)

    import lmcache.integration.vllm.vllm_v1_adapter as ad
    from lmcache.integration.vllm.utils import ENGINE_NAME
    from lmcache.observability import LMCStatsMonitor
    from lmcache.v1.cache_engine import LMCacheEngineBuilder
    from lmcache.v1.gpu_connector.mock_gpu_connector import MockGPUConnector
    cfg = impl.config
    assert cfg.chunk_size == CH and cfg.cache_policy.upper() == policy.upper(), cfg
    if D:
        # One disk I/O thread: LMCache's disk dict takes a key when its write finishes, so with
        # its default 4 threads the LRU order within one store follows write completion (a
        # race); one thread gives submission order, kvtk's rule.
        cfg.extra_config = dict(cfg.extra_config or {}, disk_io_threads=1)
    wmeta = dataclasses.replace(impl._manager.lmcache_engine_metadata, role="worker")
    eng = LMCacheEngineBuilder.get_or_create(ENGINE_NAME, cfg, wmeta,
                                             MockGPUConnector(wmeta.kv_shape),
                                             lambda t, src: t, lambda o, src: o)
    eng.post_init()

    class InProcTransport:  # LMCacheLookupServer.process_request, without ZMQ
        world_size = 1

        def send_and_recv_all(self, msg):
            hashes, offsets, lookup_id, rc = msg
            n = eng.lookup(hashes=hashes, offsets=offsets, lookup_id=lookup_id, pin=True,
                           request_configs=json.loads(rc) if rc else None)
            return [n.to_bytes(4, "big")]

        def close(self):
            pass

    lc = impl._manager._lookup_client
    lc.transport.close()
    lc.transport = InProcTransport()
    cpu = eng.storage_manager.storage_backends["LocalCPUBackend"]
    ad.get_pp_group = lambda: SimpleNamespace(is_last_rank=True)  # no vLLM distributed init

    class Parent:  # LMCacheConnectorV1 on the worker
        _connector_metadata = None

        def _get_connector_metadata(self):
            return self._connector_metadata

    w = object.__new__(ad.LMCacheConnectorV1Impl)
    w.__dict__.update(_parent=Parent(), _manager=SimpleNamespace(lmcache_engine=eng), config=cfg,
                      kv_caches={"model.layers.0.self_attn.attn": torch.zeros(1)}, device="cpu",
                      kv_role="kv_both", use_layerwise=False, enable_blending=False,
                      async_loading=False, _lmcache_chunk_size=CH, _block_size=B,
                      _stats_monitor=LMCStatsMonitor.GetOrCreate(), _invalid_block_ids=set(),
                      layerwise_retrievers=[], _layerwise_save_storers={}, current_layer=0)
    fwd = SimpleNamespace(attn_metadata=object(), no_compile_layers={}, virtual_engine=0)

    tot = dict(gpu_hit_blocks=0, lookup_hit_tokens=0, loaded_tokens=0, chunks_loaded=0,
               chunks_stored=0, chunks_evicted=0)
    if D:
        tot.update(disk_lookup_chunks=0, disk_chunks_loaded=0, chunks_promoted=0,
                   disk_chunks_stored=0, disk_chunks_evicted=0)
    o_ret, o_rm, o_sub = eng.retrieve, cpu.remove, cpu.submit_put_task
    sm = eng.storage_manager
    in_get = [False]  # inside StorageManager.batched_get: a CPU put is a disk read's promotion
    disk = sm.storage_backends.get("LocalDiskBackend")
    assert bool(disk) == bool(D), list(sm.storage_backends)
    if D:
        o_get, o_dcont, o_dget = sm.batched_get, disk.contains, disk.batched_get_blocking
        o_drm, o_dins = disk.remove, disk.insert_key

        def batched_get(*a, **k):
            in_get[0] = True
            try:
                return o_get(*a, **k)
            finally:
                in_get[0] = False

        def dcontains(key, pin=False):
            hit = o_dcont(key, pin)
            if hit and pin:
                tot["disk_lookup_chunks"] += 1
            return hit

        def dget(keys):
            tot["disk_chunks_loaded"] += len(keys)
            return o_dget(keys)

        def dremove(key, force=True):
            if not force:
                tot["disk_chunks_evicted"] += 1
            return o_drm(key, force)

        def dinsert(key, *a, **k):
            if key not in disk.dict:
                tot["disk_chunks_stored"] += 1
            return o_dins(key, *a, **k)

        sm.batched_get, disk.contains, disk.batched_get_blocking = batched_get, dcontains, dget
        disk.remove, disk.insert_key = dremove, dinsert

        # A write takes far longer than submitting one store's chunks: hold every write until the
        # submission loop has ended (kvtk's rule), so no timing race decides which chunks of the
        # store are already in the disk's dict (visible, evictable) for the ones after them.
        import threading
        gate = threading.Event()
        gate.set()
        o_bsub, o_save = disk.batched_submit_put_task, disk.async_save_bytes_to_disk

        def bsubmit(*a, **k):
            gate.clear()
            try:
                return o_bsub(*a, **k)
            finally:
                gate.set()

        def save(*a, **k):
            gate.wait()
            return o_save(*a, **k)

        disk.batched_submit_put_task, disk.async_save_bytes_to_disk = bsubmit, save

    def retrieve(*a, **k):
        m = o_ret(*a, **k)
        tot["chunks_loaded"] += int(m.sum()) // CH
        return m

    def remove(key, force=True):
        if not force:
            tot["chunks_evicted"] += 1
        return o_rm(key, force)

    def submit(key, obj, **k):
        if key not in cpu.hot_cache:
            tot["chunks_promoted" if in_get[0] else "chunks_stored"] += 1
        return o_sub(key, obj, **k)

    eng.retrieve, cpu.remove, cpu.submit_put_task = retrieve, remove, submit
    asked = {}
    o_match = impl.get_num_new_matched_tokens

    def matched(req, nct):
        n = o_match(req, nct)
        spec_ = impl.load_specs.get(req.request_id)
        asked.setdefault(req.request_id, (nct, spec_.lmcache_cached_tokens if spec_ else 0, n))
        return n

    impl.get_num_new_matched_tokens = matched

    dense, unsched = {}, 0
    for i, r in enumerate(rows):
        if progress:  # the request under way, for the parent when LMCache stops (hang, raise)
            Path(progress).write_text(str(i))
        L, ids = int(r["input_length"]), r["hash_ids"]
        assert len(ids) == -(-L // B), (i, L, len(ids))  # else vLLM would see a shorter prompt
        if -(-L // B) > C:
            unsched += 1
            continue
        toks = []
        for j, h in enumerate(ids):
            t = dense.setdefault(h, len(dense) + 1)
            toks += [t] * (min(L, (j + 1) * B) - j * B)
        rid = str(i)
        s.add_request(Request(rid, toks, SamplingParams(max_tokens=1, ignore_eos=True), None,
                              arrival_time=float(i), block_hasher=hasher))
        steps = 0
        while s.has_requests():
            steps += 1
            assert steps < 50, rid
            out = s.schedule()
            w._parent._connector_metadata = out.kv_connector_metadata
            w.start_load_kv(fwd)
            w.wait_for_save()
            if D:  # every disk write lands before the next lookup (kvtk's rule)
                import time
                t0 = time.monotonic()
                while disk.disk_worker.put_tasks:
                    assert time.monotonic() - t0 < 60, "disk writes did not finish"
                    time.sleep(0.0005)
            ids_ = list(out.num_scheduled_tokens)
            mro = ModelRunnerOutput(req_ids=ids_, req_id_to_index={x: k for k, x in enumerate(ids_)},
                                    sampled_token_ids=[[] if s.requests[x].is_prefill_chunk
                                                       else [999] for x in ids_])
            s.update_from_output(out, mro)
        g, hit, n = asked[rid]
        tot["gpu_hit_blocks"] += g // B
        tot["lookup_hit_tokens"] += hit
        tot["loaded_tokens"] += n
    tot["unscheduled"] = unsched
    return tot


def run_kvtk(kvtk, rows, B, C, N, CH, policy, work, D=0):
    path = Path(work) / "trace.jsonl"
    if not path.exists():
        with open(path, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    spec = f"lmcache-cpu:{N * CH // B}:{policy},chunk_size={CH}" + (f",disk={D * CH // B}" if D else "")
    out = subprocess.run([kvtk, "replay", "--trace", str(path), "--block-tokens", str(B),
                          "--engine", "vllm", "--capacity", str(C), "--offload", spec, "--no-opt",
                          "--json", "-"], check=True, capture_output=True, text=True).stdout
    res = [x for x in json.loads(out)["results"] if "offload" in x]
    assert len(res) == 1, res
    return res[0]["offload"]["counters"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kvtk")
    ap.add_argument("trace")
    ap.add_argument("--block-tokens", type=int, default=16)
    ap.add_argument("--requests", type=int, default=0)
    ap.add_argument("--configs", default="2000:200:256:lru")
    ap.add_argument("--json")
    ap.add_argument("--timeout", type=int, default=1800,
                    help="seconds before a configuration counts as hung (LMCache's busy loop)")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # one configuration, in its own process
    ap.add_argument("--progress", help=argparse.SUPPRESS)  # where --one writes its request index
    a = ap.parse_args()
    rows = load_trace(a.trace, a.requests)
    work = tempfile.mkdtemp(prefix="kvtk-lmcache-")
    if a.one:
        # LMCache keeps its engine and config in process-wide singletons: one configuration per
        # process.
        import torch
        torch.set_num_threads(1)
        c, n, ch, policy, *d = a.one.split(":")
        try:
            out = run_lmcache(rows, a.block_tokens, int(c), int(n), int(ch), policy, work,
                              int(d[0]) if d else 0, a.progress)
        except BaseException:  # noqa: BLE001 - reported to the parent, which decides
            import traceback
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(3)  # LMCache's threads are not daemons: a plain raise would hang here
        print(json.dumps(out), flush=True)
        os._exit(0)  # LMCache's storage-manager thread is not a daemon
    results, bad = [], 0
    for cfg in a.configs.split(";"):
        c, n, ch, policy, *d = cfg.split(":")
        C, N, CH, D = int(c), int(n), int(ch), int(d[0]) if d else 0
        k = run_kvtk(a.kvtk, rows, a.block_tokens, C, N, CH, policy, work, D) if a.kvtk != "-" else {}
        progress = Path(work) / "progress"
        progress.write_text("-1")
        base = {"gpu_blocks": C, "cpu_chunks": N, "disk_chunks": D, "chunk_size": CH,
                "policy": policy, "gpu_block_tokens": a.block_tokens, "requests": len(rows)}

        def stopped(what, counter, first):
            # LMCache stopped (its retrieve's busy loop, or its disk LFU's KeyError): equal when
            # kvtk predicts that stop first at the very request LMCache stopped in.
            nonlocal bad
            at = int(progress.read_text() or -1)
            same = k.get(counter, 0) > 0 and k.get(first) == at
            bad += 0 if same else 1
            results.append(dict(base, lmcache=f"{what} at request {at}",
                                kvtk={counter: k.get(counter), first: k.get(first)}, equal=same))
            print(("equal " if same else "DIFFER") + f" C={C} N={N} D={D} chunk={CH} {policy}: "
                  f"LMCache: {what} at request {at}; kvtk: {k.get(counter)} {counter}, first at "
                  f"request {k.get(first)}", flush=True)

        try:
            one = subprocess.run([sys.executable, __file__, a.kvtk, a.trace, "--block-tokens",
                                  str(a.block_tokens), "--requests", str(a.requests), "--one", cfg,
                                  "--progress", str(progress)],
                                 capture_output=True, text=True, timeout=a.timeout)
        except subprocess.TimeoutExpired:
            stopped(f"no end in {a.timeout} s", "stalled_retrievals", "first_stall_request")
            continue
        if one.returncode != 0 and "KeyError" in one.stderr and "lfu.py" in one.stderr:
            stopped("KeyError in its disk LFU", "disk_lfu_key_errors", "first_key_error_request")
            continue
        if one.returncode != 0:
            sys.stderr.write(one.stderr[-4000:])
            sys.exit(2)
        lm = json.loads(one.stdout.strip().splitlines()[-1])
        if k.get("stalled_retrievals", 0) > 0 or k.get("disk_lfu_key_errors", 0) > 0:
            print(f"DIFFER C={C} N={N} D={D}: LMCache finished where kvtk predicts "
                  f"{k.get('stalled_retrievals')} stalled retrievals, "
                  f"{k.get('disk_lfu_key_errors')} LFU KeyErrors", flush=True)
            results.append(dict(base, lmcache=lm, kvtk=k, equal=False))
            bad += 1
            continue
        # unscheduled is the driver's own rule (a prompt longer than the GPU pool is not sent),
        # so it is reported, not compared; gpu_hit_blocks re-checks vLLM's pool model.
        same = all(lm[x] == k.get(x) for x in lm if x != "unscheduled")
        bad += 0 if same else 1
        results.append({"gpu_blocks": C, "cpu_chunks": N, "disk_chunks": D, "chunk_size": CH,
                        "policy": policy,
                        "gpu_block_tokens": a.block_tokens, "requests": len(rows),
                        "lmcache": lm, "kvtk": {x: k.get(x) for x in lm}, "equal": same})
        print(("equal " if same else "DIFFER") + f" C={C} N={N} D={D} chunk={CH} {policy}: "
              + ", ".join(f"{x} {lm[x]}" + ("" if lm[x] == k.get(x) else f" (kvtk {k.get(x)})")
                          for x in lm), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps({"vllm_version": "0.33.0", "lmcache_version": "0.5.6",
                                            "results": results}, indent=2) + "\n")
    sys.stdout.flush()
    os._exit(1 if bad else 0)  # LMCache's storage-manager thread is not a daemon


if __name__ == "__main__":
    main()
