"""Checks `kvtk replay --engine vllm --offload cpu:...` (include/kvtk/tier/vllm_offload.hpp)
against vLLM 0.33.0's own code on CPU: its V1 Scheduler with the OffloadingConnector (the
scheduler-side OffloadingConnectorScheduler and the CPUOffloadingManager with its cache policy)
built by KVConnectorFactory from a kv_transfer_config, as `vllm serve --kv-transfer-config` builds
it. No model and no worker run: the driver plays the model runner (one sampled token per
finished prefill) and the offloading worker (every load and store job it is handed completes in
the same step: loads are reported in finished_recving and in the worker metadata, stores in the
worker metadata). What the real worker would copy between GPU and CPU tensors is not driven;
every decision that sets the counts below is vLLM's code.

Per configuration the trace's requests go one at a time (each added when the previous one has
finished and no transfer is pending), max_tokens 1, max_num_batched_tokens above every prompt,
so each prompt runs in one step, as kvtk's replay runs them. Token ids: block j of a prompt is
B copies of a dense id of its hash id, the last block cut to the prompt length (as
vllm_scheduler.py). Counted from vLLM's calls: per request the GPU hit (the num_computed_tokens
the connector is asked with) and the loaded tokens (what get_num_new_matched_tokens returns);
in total the chunks prepare_load reads, the chunks prepare_store stores, the chunks it evicts
(PrepareStoreOutput.evicted_keys) and the prepare_store calls that return None.

kvtk runs the same configurations through `kvtk replay --engine vllm --capacity C --offload ...
--json` and the totals must be equal.

Usage: build/engine-venv/bin/python tools/engine-check/vllm_offload_connector.py KVTK TRACE
         [--requests N] [--configs C:N:K:POLICY[:THRESHOLD];...] [--json OUT]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from vllm_common import tiny_llama  # noqa: E402


def load_trace(path, limit):
    reqs = []
    with open(path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                reqs.append(r)
                if limit and len(reqs) >= limit:
                    break
    return reqs


class VllmEnv:
    def __init__(self, bt, work):
        import torch
        from vllm.utils.hashing import get_hash_fn_by_name
        from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
        hash_fn = get_hash_fn_by_name("sha256")
        init_none_hash(hash_fn)
        self.torch = torch
        self.hasher = get_request_block_hasher(bt, hash_fn)
        self.bt = bt
        self.model = tiny_llama(work)

    def chunk_bytes(self, K):
        """The bytes of one offloaded block of K GPU blocks, aligned as CPUOffloadingSpec does,
        and the GPU block's KV spec."""
        from vllm.v1.kv_cache_interface import FullAttentionSpec
        from vllm.v1.kv_offload.cpu.spec import CPUOffloadingSpec
        spec = FullAttentionSpec(block_size=self.bt, num_kv_heads=1, head_size=1,
                                 dtype=self.torch.float16)
        align = CPUOffloadingSpec.BLOCK_SIZE_ALIGNMENT
        return -(-(spec.page_size_bytes * K) // align) * align, spec

    def scheduler_with(self, C, extra, max_len):
        """vLLM's V1 Scheduler with the OffloadingConnector configured by `extra`
        (kv_connector_extra_config) over a GPU pool of C blocks; returns (scheduler,
        connector scheduler)."""
        from vllm.config import (CacheConfig, KVTransferConfig, ModelConfig, SchedulerConfig,
                                 VllmConfig)
        from vllm.v1.core.sched.scheduler import Scheduler
        from vllm.v1.kv_cache_interface import KVCacheConfig, KVCacheGroupSpec
        from vllm.v1.structured_output import StructuredOutputManager
        bt = self.bt
        _, spec = self.chunk_bytes(1)
        scfg = SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=max_len,
                               max_model_len=max_len, enable_chunked_prefill=True,
                               async_scheduling=False, is_encoder_decoder=False)
        mcfg = ModelConfig(model=self.model, dtype="float16", seed=0, skip_tokenizer_init=True,
                           max_model_len=max_len)
        ccfg = CacheConfig(block_size=bt, enable_prefix_caching=True)
        kt = KVTransferConfig(kv_connector="OffloadingConnector", kv_role="kv_both",
                              kv_connector_extra_config=extra)
        vcfg = VllmConfig(scheduler_config=scfg, model_config=mcfg, cache_config=ccfg,
                          kv_transfer_config=kt)
        kcfg = KVCacheConfig(num_blocks=C + 1, kv_cache_tensors=[],
                             kv_cache_groups=[KVCacheGroupSpec(["layer.0"], spec)])
        ccfg.num_gpu_blocks = C + 1
        s = Scheduler(vllm_config=vcfg, kv_cache_config=kcfg,
                      structured_output_manager=StructuredOutputManager(vcfg), block_size=bt,
                      log_stats=False)
        assert s.kv_cache_manager.block_pool.get_num_free_blocks() == C
        return s, s.connector.connector_scheduler

    def scheduler(self, C, N, K, policy, threshold, max_len):
        chunk_bytes, _ = self.chunk_bytes(K)
        extra = {"cpu_bytes_to_use": N * chunk_bytes, "block_size": K * self.bt,
                 "store_threshold": threshold}
        if policy.startswith("kvtk-"):
            extra["eviction_policy"] = "Kvtk_" + policy[5:]
            extra["cache_policy_module_path"] = "kvtk_policy_shim"
        else:
            extra["eviction_policy"] = policy
        s, cs = self.scheduler_with(C, extra, max_len)
        assert cs.manager._num_chunks == N, (cs.manager._num_chunks, N)
        assert cs.config.blocks_per_chunk == K
        return s, cs


def run_vllm(env, reqs, C, N, K, policy, threshold):
    from vllm.distributed.kv_transfer.kv_connector.v1.offloading.common import (
        OffloadingWorkerMetadata)
    from vllm.sampling_params import SamplingParams
    from vllm.v1.outputs import KVConnectorOutput, ModelRunnerOutput
    from vllm.v1.request import Request
    bt = env.bt
    max_len = max(r["input_length"] for r in reqs) + 2 * bt
    s, cs = env.scheduler(C, N, K, policy, threshold, max_len)
    mgr = cs.manager
    tot = {"requests": 0, "unscheduled": 0, "gpu_hit_blocks": 0, "cpu_hit_blocks": 0,
           "loaded_tokens": 0, "chunks_loaded": 0, "chunks_stored": 0, "chunks_evicted": 0,
           "store_refusals": 0}
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

    asked = {}
    orig_match = cs.get_num_new_matched_tokens

    def matched(request, num_computed_tokens, *a, **kw):
        n, async_load = orig_match(request, num_computed_tokens, *a, **kw)
        asked.setdefault(request.request_id, (num_computed_tokens, n or 0))
        return n, async_load
    cs.get_num_new_matched_tokens = matched

    dense = {}
    for i, r in enumerate(reqs):
        L = r["input_length"]
        tot["requests"] += 1
        if -(-L // bt) > C:
            tot["unscheduled"] += 1  # vLLM never admits it (kvtk counts it and skips it)
            per_request.append((0, 0))
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
        steps = 0
        while s.has_requests() or cs.has_pending_push_work():
            out = s.schedule()
            meta = out.kv_connector_metadata
            done = {}
            recving = set()
            if meta is not None:
                for jid, job in meta.load_jobs.items():
                    done[jid] = 1
                    recving.add(job.req_id)
                for jid in meta.store_jobs:
                    done[jid] = 1
            ids = list(out.num_scheduled_tokens)
            toks_out = []
            for x in ids:
                toks_out.append([] if s.requests[x].is_prefill_chunk else [10**7 + i])
            mro = ModelRunnerOutput(
                req_ids=ids, req_id_to_index={x: k for k, x in enumerate(ids)},
                sampled_token_ids=toks_out,
                kv_connector_output=KVConnectorOutput(
                    finished_recving=recving or None,
                    kv_connector_worker_meta=OffloadingWorkerMetadata(completed_jobs=done)))
            s.update_from_output(out, mro)
            steps += 1
            if steps > 50:
                raise RuntimeError(f"request {i} did not finish: {s.get_request_counts()}")
        g, h = asked.get(rid, (0, 0))
        assert g % bt == 0 and h % bt == 0, (g, h)
        per_request.append((g // bt, h // bt))
        tot["gpu_hit_blocks"] += g // bt
        tot["cpu_hit_blocks"] += h // bt
        tot["loaded_tokens"] += h
    return tot, per_request


def run_kvtk(kvtk, trace_rows, bt, C, N, K, policy, threshold, work):
    path = Path(work) / "trace.jsonl"
    if not path.exists():
        with open(path, "w") as f:
            for r in trace_rows:
                f.write(json.dumps(r) + "\n")
    spec = f"cpu:{N * K}:{policy},block_size={K * bt}"
    if threshold:
        spec += f",store_threshold={threshold}"
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
    ap.add_argument("--configs", default="300:400:1:lru;300:2000:1:lru;300:400:2:lru;"
                    "1000:400:1:lru;300:400:1:lru:2;300:400:1:kvtk-s3fifo;300:400:2:kvtk-lru")
    ap.add_argument("--json")
    a = ap.parse_args()
    reqs = load_trace(a.trace, a.requests)
    work = tempfile.mkdtemp(prefix="kvtk-vllm-offload-")
    sys.path.insert(0, work)
    # kvtk policies load into vLLM by name and module path, as a user's deployment does.
    Path(work, "kvtk_policy_shim.py").write_text(
        "from kvtk.integrations.vllm import make_policy_class\n"
        "def __getattr__(name):\n"
        "    if name.startswith('Kvtk_'):\n"
        "        return make_policy_class(name[5:])\n"
        "    raise AttributeError(name)\n")
    env = VllmEnv(a.block_tokens, work)
    results, bad = [], 0
    for cfg in a.configs.split(";"):
        parts = cfg.split(":")
        C, N, K = int(parts[0]), int(parts[1]), int(parts[2])
        rest = parts[3:]
        threshold = 0
        if rest and rest[-1].isdigit():
            threshold = int(rest.pop())
        policy = ":".join(rest)
        v, _ = run_vllm(env, reqs, C, N, K, policy, threshold)
        k = run_kvtk(a.kvtk, reqs, a.block_tokens, C, N, K, policy, threshold, work)
        keys = [x for x in v if x != "requests"]
        same = all(v[x] == k.get(x) for x in keys)
        bad += 0 if same else 1
        row = {"gpu_blocks": C, "cpu_chunks": N, "blocks_per_chunk": K, "policy": policy,
               "store_threshold": threshold, "gpu_block_tokens": a.block_tokens,
               "requests": len(reqs), "vllm": v, "kvtk": {x: k.get(x) for x in keys},
               "equal": same}
        results.append(row)
        print(("equal " if same else "DIFFER") + f" C={C} N={N} k={K} {policy} T={threshold}: "
              + ", ".join(f"{x} {v[x]}" + ("" if v[x] == k.get(x) else f" (kvtk {k.get(x)})")
                          for x in keys), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps({"vllm_version": "0.33.0", "results": results},
                                           indent=2) + "\n")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
