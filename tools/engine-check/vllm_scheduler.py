"""Checks kvtk simulate's `vllm-v1` engine scheduler (sim/des/engine_sched.cpp schedule_v1)
against vLLM 0.33.0's real V1 Scheduler (vllm/v1/core/sched/scheduler.py), iteration by
iteration, on CPU (no model: the driver plays the model runner).

Per scenario:
  1. the requests are written as a kvtk trace (block_tokens 16, all arrivals 0) and run through
     the kvtk snapshot binary with --iterations (one row per (iteration, scheduled request));
  2. the same requests go through vLLM's Scheduler, built as vLLM's unit tests build it
     (tests/v1/core/utils.py create_scheduler): VllmConfig(SchedulerConfig(max_num_seqs=S,
     max_num_batched_tokens=B, enable_chunked_prefill=True), ModelConfig(local tiny llama
     config.json, skip_tokenizer_init), CacheConfig(block_size=16, enable_prefix_caching=True)),
     KVCacheConfig with one FullAttentionSpec group and num_blocks = C + 1 (BlockPool takes
     block 0 as the null block), cache_config.num_gpu_blocks = C + 1, sha256 block hasher from
     get_request_block_hasher after init_none_hash (as EngineCore does). VLLM_TARGET_DEVICE=cpu
     selects the CPU platform; every other scheduler setting is vLLM's default (printed into
     the summary: watermark 0, long_prefill_token_threshold 0, scheduler_reserve_full_isl True,
     policy fcfs, no spec decode, num_lookahead_tokens 0).
     Requests: Request(prompt token ids, SamplingParams(max_tokens=O, ignore_eos=True)),
     added in trace order. Token ids: block j of a prompt is 16 copies of token(h_j), h_j the
     trace's hash id (dense index from 1), the last block cut to the prompt length; sampled
     token k of request r is 10**7 + r*10**5 + k (never equal to a prompt token, so an output
     block can only ever match its own request's block after a preemption).
     Loop (EngineCore.step): out = schedule(); the model runner output gives one sampled token
     to every scheduled request that is not a prefill chunk after the step
     (request.is_prefill_chunk, set by _update_after_schedule) and none to the others;
     update_from_output(out, mro). Steps that schedule nothing are not counted as iterations
     (kvtk's start() also retries an empty schedule without logging an iteration).
  vLLM modes:
     sync-prompthash   Scheduler; the block hasher hashes prompt blocks only (kvtk's
                       assumption: generated tokens' blocks are never cached/reused)
     sync              Scheduler; the real hasher (blocks of generated tokens are hashed too)
     async             AsyncScheduler driven as EngineCore.step_with_batch_queue does with
                       batch_queue_size 2 (what `async_scheduling=None` resolves to on CUDA in
                       config/vllm.py VllmConfig: True; the CPU platform forces False), real
                       hasher
     ...-noisl         diagnostic: the same with SchedulerConfig.scheduler_reserve_full_isl=False
                       (vLLM's default is True)
     async-prompthash  diagnostic: async with the prompt-only hasher
  3. per iteration the multiset {(request, new_tokens)} (and each request's context before the
     iteration) of kvtk and vLLM are compared; the first divergence is reported with both
     schedules around it.

Writes build/engine-check/scheduler/summary.json (+ per scenario traces and schedules) and
prints a table.

Usage: build/engine-venv/bin/python tools/engine-check/vllm_scheduler.py [--scenarios a,b,...]
"""
import argparse
import csv
import json
import math
import os
import subprocess
import sys
from collections import defaultdict, deque
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

REPO = Path(__file__).resolve().parents[2]
KVTK = REPO / "build" / "engine-check" / "kvtk-snapshot"
OUT = REPO / "build" / "engine-check" / "scheduler"
BT = 16
MOONCAKE = REPO / "traces" / "mooncake_fast25_conversation_trace.jsonl"


# ------------------------------------------------------------------------------ scenarios
def req(L, O, ids):
    assert len(ids) == -(-L // BT), (L, ids)
    return {"input_length": L, "output_length": O, "hash_ids": list(ids)}


def scenario_a():
    """8 requests, 3 shared prefixes, no memory pressure, budget 64 forces chunked prefill."""
    rs = []
    nid = [100]

    def fresh(n):
        out = list(range(nid[0], nid[0] + n))
        nid[0] += n
        return out
    p1, p2, p3 = [1, 2, 3, 4, 5], [6, 7, 8], [9, 10, 11, 12, 13, 14, 15]
    spec = [(p1, 90, 5), (p1, 70, 7), (p2, 60, 4), (p1[:3], 50, 9), (p3, 40, 3), (p2, 33, 6),
            (p3[:5], 75, 5), (p1, 20, 8)]
    for pre, extra, O in spec:
        L = len(pre) * BT + extra
        rs.append(req(L, O, pre + fresh(-(-L // BT) - len(pre))))
    return {"name": "a_prefix_chunked", "requests": rs, "C": 1000, "B": 64, "S": 8, "K": None,
            "what": "8 requests with shared prefixes, no memory pressure, B=64 < prompts"}


def scenario_b():
    """memory pressure: decodes outgrow the cache and force recompute preemptions."""
    rs = []
    nid = [1000]

    def fresh(n):
        out = list(range(nid[0], nid[0] + n))
        nid[0] += n
        return out
    shared = [1, 2, 3]
    spec = [(shared, 70, 60), ([], 100, 50), (shared, 40, 70), ([], 90, 40), (shared[:2], 60, 55),
            ([], 120, 35), (shared, 10, 45), ([], 64, 64)]
    for pre, extra, O in spec:
        L = len(pre) * BT + extra
        rs.append(req(L, O, pre + fresh(-(-L // BT) - len(pre))))
    return {"name": "b_preemption", "requests": rs, "C": 40, "B": 128, "S": 8, "K": None,
            "what": "8 requests (prompts 60-168 tokens, 35-70 output tokens), C=40 blocks "
                    "(640 tokens): decode growth forces preemptions"}


def mooncake_slice(n, scale=32, cap=1024):
    """first n requests of the bundled conversation trace, lengths / scale (block 512 -> 16),
    prompts capped at `cap` tokens (hash ids cut to match) so that every request fits C."""
    rs = []
    with open(MOONCAKE) as f:
        for line in f:
            d = json.loads(line)
            if "input_length" not in d:
                continue
            L = min(-(-int(d["input_length"]) // scale), cap)
            rs.append(req(L, int(d["output_length"]), d["hash_ids"][: -(-L // BT)]))
            if len(rs) == n:
                break
    return rs


def scenario_c():
    return {"name": "c_mooncake50", "requests": mooncake_slice(50), "C": 4000, "B": 256,
            "S": 16, "K": 32,
            "what": "first 50 requests of mooncake_fast25_conversation_trace, input_length/32 "
                    "(512-token blocks -> 16) capped at 1024, output capped at 32 "
                    "(max_output_tokens), "
                    "C=4000 (no pressure)"}


def scenario_d():
    return {"name": "d_mooncake50_pressure", "requests": mooncake_slice(50), "C": 150,
            "B": 256, "S": 16, "K": 32,
            "what": "as c with C=150 blocks (2400 tokens): memory pressure"}


def scenario_e():
    return {"name": "e_mooncake50_tight", "requests": mooncake_slice(50), "C": 80,
            "B": 512, "S": 32, "K": 48,
            "what": "as c with C=80 blocks, B=512, S=32, output capped at 48: heavy pressure, "
                    "long chunks"}


# What the runs show (see the summary's table): the causes of every divergence found, in vLLM's
# source, and the smallest change to kvtk's rules that removes it.
DIFFERENCES = [
    {"id": "full_isl_admission",
     "shows_in": "sync-prompthash vs sync-prompthash-noisl (d, e): equal once it is off",
     "vllm_cause": "SchedulerConfig.scheduler_reserve_full_isl = True (config/scheduler.py); "
                   "Scheduler.schedule (v1/core/sched/scheduler.py, WAITING loop) calls "
                   "kv_cache_manager.allocate_slots(..., full_sequence_must_fit="
                   "self.scheduler_reserve_full_isl); KVCacheManager.allocate_slots "
                   "(v1/core/kv_cache_manager.py) first returns None unless "
                   "get_num_blocks_to_allocate(num_tokens=request.num_tokens, the hit blocks) "
                   "<= block_pool.get_num_free_blocks(): a waiting/preempted request is admitted "
                   "only if ALL its current tokens (prompt + tokens generated before a "
                   "preemption) fit, although only the first chunk's blocks are allocated",
     "kvtk_change": "vllm_kv::admit (sim/des/engine_kv.hpp): test "
                    "pool_.can_allocate(hit, blocks_for(seq, bt_) - h) instead of "
                    "blocks_for(hit + new, bt_) - h; still take() only hit + new tokens"},
    {"id": "generated_blocks_hashed",
     "shows_in": "sync-noisl vs sync-prompthash-noisl (d, e)",
     "vllm_cause": "Request.append_output_token_ids -> update_block_hashes with "
                   "kv_cache_utils.get_request_block_hasher hashes every full block of "
                   "prompt + output; KVCacheManager.allocate_slots caches blocks up to "
                   "min(computed + new, request.num_tokens) (coordinator.cache_blocks), decode "
                   "blocks included. Effects: (1) a preempted request re-admitted hits its own "
                   "blocks past the prompt (the partial prompt tail + generated tokens), e.g. "
                   "e it 244 r12 hit 224 vs kvtk 192; (2) BlockPool.free_blocks "
                   "(v1/core/block_pool.py) prepends unhashed blocks to the free queue (reused "
                   "first) but appends hashed ones (LRU tail), so hashed output blocks push "
                   "prompt blocks out earlier, e.g. d it 99 r18 hit 48 vs kvtk 64",
     "kvtk_change": "give each request keys for its blocks past the full prompt blocks "
                    "(unique per (request, block index)); in vllm_kv::take cache up to "
                    "min(upto, seq) / bt blocks (not min(upto / bt, prompt blocks)), and look "
                    "hits up over prompt keys + those keys (cap seq - 1) on re-admission"},
    {"id": "async_scheduling_finish_lag",
     "shows_in": "async* vs sync* (b, c, d, e): first divergence is always the iteration after "
                 "a request samples its last token",
     "vllm_cause": "on CUDA VllmConfig resolves async_scheduling=None to True "
                   "(config/vllm.py), so EngineCore uses AsyncScheduler with "
                   "step_with_batch_queue (v1/engine/core.py, batch_queue_size 2): schedule() of "
                   "iteration N+1 runs before update_from_output() of iteration N. A request "
                   "that samples its last token in N is still in Scheduler.running when N+1 is "
                   "scheduled: the RUNNING loop skips it (the `num_output_placeholders > 0 and "
                   "num_computed_tokens + 2 - num_output_placeholders >= num_prompt_tokens + "
                   "max_tokens` check), but it still holds its KV blocks (free happens in "
                   "update_from_output -> _free_request) and counts in len(self.running) "
                   "against max_num_active_reqs (= max_num_seqs); admissions that its blocks or "
                   "its slot would have allowed move one iteration later. (It can also still "
                   "be chosen as the preemption victim, being running[-1]-ordered as before.)",
     "kvtk_change": "optional async mode for vllm-v1: in end(), a request whose last token "
                    "is sampled stays in `running` (flag finishing, not scheduled, not given "
                    "budget) through the next schedule_v1 and its blocks are released "
                    "(kv.finish) right after that schedule; sync vLLM (CPU, "
                    "--no-async-scheduling) is what kvtk models today"},
]

SCENARIOS = {"a": scenario_a, "b": scenario_b, "c": scenario_c, "d": scenario_d, "e": scenario_e}


# ------------------------------------------------------------------------------------ kvtk
def write_trace(path, reqs):
    with open(path, "w") as f:
        f.write(json.dumps({"kvtk_trace": 1, "block_tokens": BT}) + "\n")
        for r in reqs:
            f.write(json.dumps({"arrival_s": 0, **r}) + "\n")


def run_kvtk(sc, d, async_scheduling=False):
    tag = "_async" if async_scheduling else ""
    trace, it, rj = d / "trace.jsonl", d / f"kvtk_iterations{tag}.csv", d / f"kvtk_result{tag}.json"
    write_trace(trace, sc["requests"])
    cmd = [str(KVTK), "simulate", "--trace", str(trace), "--engine", "vllm",
           "--set", "model=qwen2.5-7b", "--set", "gpu=h100", "--set", f"local_cache={sc['C']}",
           "--set", f"max_num_batched_tokens={sc['B']}", "--set", f"max_num_seqs={sc['S']}"]
    if sc["K"] is not None:
        cmd += ["--set", f"max_output_tokens={sc['K']}"]
    if async_scheduling:
        cmd += ["--set", "async_scheduling=true"]
    cmd += ["--iterations", str(it), "--json", str(rj)]
    for p in (it, rj):  # kvtk refuses to overwrite
        p.unlink(missing_ok=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    steps = defaultdict(list)
    with open(it) as f:
        for row in csv.DictReader(f):
            steps[int(row["iteration"])].append(
                (int(row["request"]), int(row["new_tokens"]), int(row["context_tokens"])))
    n = max(steps) + 1 if steps else 0
    assert sorted(steps) == list(range(n))
    res = json.load(open(rj))["result"]
    return [sorted(steps[i]) for i in range(n)], {"preemptions": res["preemptions"],
                                                 "iterations": res["iterations"],
                                                 "rejected": res.get("rejected", 0)}


# ------------------------------------------------------------------------------------ vLLM
_VLLM = {}


def vllm_env():
    if _VLLM:
        return _VLLM
    import torch
    import vllm
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    hash_fn = get_hash_fn_by_name("sha256")
    init_none_hash(hash_fn)
    from vllm_common import tiny_llama
    _VLLM.update(torch=torch, vllm=vllm, hasher=get_request_block_hasher(BT, hash_fn),
                 model=tiny_llama(OUT))
    return _VLLM


def make_scheduler(sc, async_sched, reserve_full_isl=True):
    env = vllm_env()
    torch = env["torch"]
    from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
    from vllm.v1.core.sched.async_scheduler import AsyncScheduler
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager

    max_len = max(r["input_length"] + r["output_length"] for r in sc["requests"]) + 64
    max_len = max(max_len, sc["B"])
    scfg = SchedulerConfig(max_num_seqs=sc["S"], max_num_batched_tokens=sc["B"],
                           max_model_len=max_len, enable_chunked_prefill=True,
                           async_scheduling=async_sched, is_encoder_decoder=False,
                           scheduler_reserve_full_isl=reserve_full_isl)
    mcfg = ModelConfig(model=env["model"], dtype="float16", seed=0, skip_tokenizer_init=True,
                       max_model_len=max_len)
    ccfg = CacheConfig(block_size=BT, enable_prefix_caching=True)
    vcfg = VllmConfig(scheduler_config=scfg, model_config=mcfg, cache_config=ccfg)
    spec = FullAttentionSpec(block_size=BT, num_kv_heads=1, head_size=1, dtype=torch.float16)
    kcfg = KVCacheConfig(num_blocks=sc["C"] + 1, kv_cache_tensors=[],
                         kv_cache_groups=[KVCacheGroupSpec(["layer.0"], spec)])
    ccfg.num_gpu_blocks = sc["C"] + 1
    cls = AsyncScheduler if async_sched else Scheduler
    s = cls(vllm_config=vcfg, kv_cache_config=kcfg,
            structured_output_manager=StructuredOutputManager(vcfg), block_size=BT,
            log_stats=False)
    assert s.kv_cache_manager.block_pool.get_num_free_blocks() == sc["C"]
    c = vcfg.scheduler_config
    settings = {"scheduler_cls": cls.__name__, "max_num_batched_tokens": c.max_num_batched_tokens,
                "max_num_scheduled_tokens": s.max_num_scheduled_tokens,
                "max_num_seqs": c.max_num_seqs, "max_num_active_reqs": s.max_num_active_reqs,
                "enable_chunked_prefill": c.enable_chunked_prefill,
                "enable_prefix_caching": vcfg.cache_config.enable_prefix_caching,
                "long_prefill_token_threshold": c.long_prefill_token_threshold,
                "watermark": c.watermark, "watermark_blocks": s.kv_cache_manager.watermark_blocks,
                "scheduler_reserve_full_isl": c.scheduler_reserve_full_isl,
                "policy": c.policy, "async_scheduling": c.async_scheduling,
                "num_lookahead_tokens": s.num_lookahead_tokens,
                "prefill_schedule_interval": c.prefill_schedule_interval,
                "max_model_len": s.max_model_len, "block_size": BT,
                "num_gpu_blocks": sc["C"] + 1}
    return s, settings


def tokens_of(r, dense):
    L, ids = r["input_length"], r["hash_ids"]
    toks = []
    for j, h in enumerate(ids):
        toks += [dense.setdefault(h, len(dense) + 1)] * min(BT, L - BT * j)
    assert len(toks) == L
    return toks


def run_vllm(sc, mode):
    from vllm.sampling_params import SamplingParams
    from vllm.v1.outputs import ModelRunnerOutput
    from vllm.v1.request import Request
    async_sched = mode.startswith("async")
    s, settings = make_scheduler(sc, async_sched, reserve_full_isl="noisl" not in mode)
    base = vllm_env()["hasher"]
    dense = {}
    reqs = {}
    for i, r in enumerate(sc["requests"]):
        O = r["output_length"] if sc["K"] is None else min(r["output_length"], sc["K"])
        O = max(O, 1)
        hasher = base
        if "prompthash" in mode:
            cap = r["input_length"] // BT

            def hasher(req, cap=cap):  # prompt blocks only (kvtk: generated blocks not cached)
                return base(req)[: max(0, cap - len(req.block_hashes))]
        q = Request(str(i), tokens_of(r, dense), SamplingParams(max_tokens=O, ignore_eos=True),
                    None, arrival_time=float(i), block_hasher=hasher)
        reqs[str(i)] = q
        s.add_request(q)
    sampled_n = defaultdict(int)
    steps, preempt_steps = [], []

    def record(out):
        step = []
        samples = {}
        for rid, n in out.num_scheduled_tokens.items():
            q = s.requests[rid]
            step.append((int(rid), n, q.num_computed_tokens - n))
            samples[rid] = not q.is_prefill_chunk
        if out.total_num_scheduled_tokens > 0:
            steps.append(sorted(step))
            preempt_steps.append(sorted(int(x) for x in out.preempted_req_ids))
        return samples

    def mro_for(out, samples):
        ids = list(out.num_scheduled_tokens)
        toks = []
        for rid in ids:
            if samples[rid]:
                toks.append([10**7 + int(rid) * 10**5 + sampled_n[rid]])
                sampled_n[rid] += 1
            else:
                toks.append([])
        return ModelRunnerOutput(req_ids=ids, req_id_to_index={r: k for k, r in enumerate(ids)},
                                 sampled_token_ids=toks)

    empty = 0
    if not async_sched:
        while s.has_requests():
            out = s.schedule()
            samples = record(out)
            s.update_from_output(out, mro_for(out, samples))
            empty = empty + 1 if out.total_num_scheduled_tokens == 0 else 0
            if empty > 3:
                raise RuntimeError(f"vLLM stalled: {s.get_request_counts()}")
    else:  # EngineCore.step_with_batch_queue, batch_queue_size 2
        queue = deque()
        while s.has_requests() or queue:
            if s.has_requests():
                out = s.schedule()
                samples = record(out)
                executed = out.total_num_scheduled_tokens > 0
                queue.appendleft((out, samples))
                if len(queue) < 2 and (executed or s.has_requests()):
                    continue
                empty = empty + 1 if not executed else 0
                if empty > 6:
                    raise RuntimeError(f"vLLM stalled: {s.get_request_counts()}")
            out, samples = queue.pop()
            s.update_from_output(out, mro_for(out, samples))
    npre = sum(q.num_preemptions for q in reqs.values())
    bad = [rid for rid, q in reqs.items() if q.num_output_tokens != q.max_tokens]
    return steps, preempt_steps, {"preemptions": npre, "iterations": len(steps),
                                  "unfinished_or_wrong_length": bad}, settings


# --------------------------------------------------------------------------------- compare
def compare(k_steps, v_steps):
    """first iteration whose {(request, new_tokens)} differ, and the first whose contexts do."""
    first_tok = first_ctx = None
    for i in range(max(len(k_steps), len(v_steps))):
        a = k_steps[i] if i < len(k_steps) else None
        b = v_steps[i] if i < len(v_steps) else None
        if first_tok is None and (a is None or b is None or
                                  sorted((r, n) for r, n, _ in a) !=
                                  sorted((r, n) for r, n, _ in b)):
            first_tok = i
        if first_ctx is None and a != b:
            first_ctx = i
        if first_tok is not None:
            break
    return first_tok, first_ctx


def fmt(step):
    return " ".join(f"r{r}:{n}@{c}" for r, n, c in step) if step is not None else "-"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--modes", default="sync-prompthash,sync,async,sync-prompthash-noisl,"
                                       "sync-noisl,async-prompthash-noisl")
    ap.add_argument("--window", type=int, default=3)
    a = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    summary = {"kvtk_binary": str(KVTK.relative_to(REPO)), "scenarios": []}
    table = []
    for key in a.scenarios.split(","):
        sc = SCENARIOS[key]()
        d = OUT / sc["name"]
        d.mkdir(parents=True, exist_ok=True)
        k_runs = {False: run_kvtk(sc, d), True: run_kvtk(sc, d, async_scheduling=True)}
        k_steps, k_info = k_runs[False]
        entry = {"name": sc["name"], "what": sc["what"], "C_blocks": sc["C"],
                 "max_num_batched_tokens": sc["B"], "max_num_seqs": sc["S"],
                 "max_output_tokens": sc["K"], "block_tokens": BT,
                 "requests": len(sc["requests"]),
                 "prompt_tokens": sum(r["input_length"] for r in sc["requests"]),
                 "kvtk": k_info, "vllm": {}}
        for mode in a.modes.split(","):
            v_steps, v_pre, v_info, settings = run_vllm(sc, mode)
            # kvtk's async_scheduling option against vLLM's async modes.
            k_steps, k_info = k_runs[mode.startswith("async")]
            json.dump({"steps": v_steps, "preempted": v_pre},
                      open(d / f"vllm_{mode}.json", "w"))
            ft, fc = compare(k_steps, v_steps)
            equal = ft is None and fc is None
            m = {**v_info, "settings": settings, "schedules_equal": equal,
                 "token_schedules_equal": ft is None,
                 "first_divergence": ft, "first_context_divergence": fc}
            w = a.window
            focus = ft if ft is not None else fc
            if focus is not None:
                lo = max(0, focus - w)
                m["around"] = [{"iteration": i,
                                "kvtk": fmt(k_steps[i] if i < len(k_steps) else None),
                                "vllm": fmt(v_steps[i] if i < len(v_steps) else None),
                                "vllm_preempted": v_pre[i] if i < len(v_pre) else None}
                               for i in range(lo, focus + w + 1)
                               if i < max(len(k_steps), len(v_steps))]
            entry["vllm"][mode] = m
            table.append((sc["name"], mode, len(k_steps), len(v_steps), k_info["preemptions"],
                          v_info["preemptions"], "yes" if equal else
                          ("tokens" if ft is None else "no"),
                          "-" if ft is None else ft, "-" if fc is None else fc))
            print(f"{sc['name']:24s} {mode:16s} kvtk it={len(k_steps):4d} vllm it="
                  f"{len(v_steps):4d} preempt kvtk={k_info['preemptions']:3d} "
                  f"vllm={v_info['preemptions']:3d} equal={equal} first_div={ft} "
                  f"first_ctx_div={fc}", flush=True)
            if focus is not None:
                for row in m["around"]:
                    print(f"    it {row['iteration']:4d}  kvtk: {row['kvtk']}\n"
                          f"              vllm: {row['vllm']}  preempted={row['vllm_preempted']}")
        summary["scenarios"].append(entry)
    summary["table"] = [dict(zip(["scenario", "vllm_mode", "kvtk_iterations", "vllm_iterations",
                                  "kvtk_preemptions", "vllm_preemptions", "equal",
                                  "first_divergence", "first_context_divergence"], t))
                        for t in table]
    summary["vllm"] = vllm_env()["vllm"].__version__
    summary["differences"] = DIFFERENCES
    json.dump(summary, open(OUT / "summary.json", "w"), indent=2)
    print()
    hdr = ("scenario", "mode", "kvtk_it", "vllm_it", "kvtk_pre", "vllm_pre", "equal", "1st_div",
           "1st_ctx")
    print("%-24s %-16s %7s %7s %8s %8s %6s %7s %7s" % hdr)
    for t in table:
        print("%-24s %-16s %7s %7s %8s %8s %6s %7s %7s" % tuple(map(str, t)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
