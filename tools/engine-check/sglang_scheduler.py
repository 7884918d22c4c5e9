"""Checks kvtk simulate's `sglang` engine scheduler (sim/des/engine_sched.cpp schedule_sglang)
against SGLang 0.5.23's real scheduling code, iteration by iteration, on CPU (no model: the driver
supplies the sampled tokens).

The full Scheduler cannot be built without a model worker, so the loop of
Scheduler.event_loop_normal (non-overlap, i.e. --disable-overlap-schedule) is assembled from the
real pieces, in the order of sglang/srt/managers/scheduler.py:
  get_next_batch_to_run   stash the chunked request (stash_chunked_request -> checkpoint_kv_cache),
                          filter the last prefill batch (minus the chunked request) and merge it
                          into the running batch (ScheduleBatch.filter_batch / merge_batch);
  _get_new_batch_prefill_raw  batch_is_full / allocatable-rows checks, SchedulePolicy.calc_priority
                          (real), PrefillAdder(page 16, RadixCache, allocator, running batch,
                          new_token_ratio_tracker.current, max_prefill_tokens, chunked_prefill_size)
                          (real), add_chunked_req for the chunked request, the waiting-queue loop
                          with budget_state / add_one_req (real), new ScheduleBatch.init_new(...)
                          .prepare_for_extend() (real allocation, alloc_for_extend);
  update_running_batch    check_decode_mem / retract_decode (real), decay_step or the
                          ratio from retract_decode, prepare_for_decode (real alloc_for_decode);
  process_batch_result_prefill / _decode  (batch_result_processor.py, re-written here): a
                          non-chunk request gets one sampled token; finished -> release_kv_cache(
                          checkpoint=True); an unfinished prefilled request -> checkpoint_kv_cache
                          (its prompt goes into the tree right after prefill).
Requests: Req(rid, "", tokens, SamplingParams(max_new_tokens=O, ignore_eos=IE)); IE=True is the
default mode (a trace replay with fixed output lengths), mode "eos" uses ignore_eos=False (then
PrefillAdder scales the reserved output by new_token_ratio).
Tokens: as vllm_scheduler.py (block j of a prompt = 16 copies of a dense id; sampled tokens unique).
ServerArgs: page_size 16, chunked_prefill_size B, max_running_requests S, max_prefill_tokens
(default 16384), schedule_policy lpm|fcfs, every other setting SGLang's default.

Usage: nice -n 19 build/engine-venv/bin/python tools/engine-check/sglang_scheduler.py [--scenarios a,b]
"""
import argparse
from array import array
import csv
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[2]
KVTK = REPO / "build" / "engine-check" / "kvtk-snapshot"
OUT = REPO / "build" / "engine-check" / "sglang_scheduler"
BT = 16

_spec = importlib.util.spec_from_file_location("vllm_scheduler",
                                               Path(__file__).with_name("vllm_scheduler.py"))
VS = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(VS)  # scenarios, trace writing, token layout (no vLLM import at load)


def run_kvtk(sc, d, policy):
    trace, it, rj = d / "trace.jsonl", d / f"kvtk_{policy}.csv", d / f"kvtk_{policy}.json"
    VS.write_trace(trace, sc["requests"])
    cmd = [str(KVTK), "simulate", "--trace", str(trace), "--engine", "sglang",
           "--set", "model=qwen2.5-7b", "--set", "gpu=h100", "--set", f"local_cache={sc['C']}",
           "--set", f"max_num_batched_tokens={sc['B']}", "--set", f"max_num_seqs={sc['S']}",
           "--set", f"schedule_policy={policy}"]
    if sc["K"] is not None:
        cmd += ["--set", f"max_output_tokens={sc['K']}"]
    cmd += ["--iterations", str(it), "--json", str(rj)]
    for p in (it, rj):
        p.unlink(missing_ok=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    steps = defaultdict(list)
    with open(it) as f:
        for row in csv.DictReader(f):
            steps[int(row["iteration"])].append(
                (int(row["request"]), int(row["new_tokens"]), int(row["context_tokens"])))
    n = max(steps) + 1 if steps else 0
    res = json.load(open(rj))["result"]
    return [sorted(steps[i]) for i in range(n)], {"preemptions": res["preemptions"],
                                                 "iterations": res["iterations"]}


class _CounterTime:
    def __init__(self):
        self.t = 0

    def monotonic(self):
        self.t += 1
        return float(self.t)

    def __getattr__(self, name):
        return getattr(time, name)


def publish(sc, policy, workdir):
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
                      page_size=BT, chunked_prefill_size=sc["B"],
                      max_running_requests=sc["S"], schedule_policy=policy,
                      disable_overlap_schedule=True)
    runtime_context.publish(args, role="scheduler")
    return args


def run_sglang(sc, policy, ignore_eos=True):
    import torch
    from types import SimpleNamespace
    from sglang.srt.managers.schedule_batch import Req, ScheduleBatch
    from sglang.srt.managers.schedule_policy import AddReqResult, PrefillAdder, SchedulePolicy
    from sglang.srt.managers.scheduler_components.new_token_ratio_tracker import \
        NewTokenRatioTracker
    from sglang.srt.mem_cache import radix_cache as radix_module
    from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams
    from sglang.srt.mem_cache.common import checkpoint_kv_cache, release_kv_cache
    from sglang.srt.mem_cache.memory_pool import ReqToTokenPool
    from sglang.srt.mem_cache.radix_cache import RadixCache
    from sglang.srt.sampling.sampling_params import SamplingParams
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    args = publish(sc, policy, tempfile.mkdtemp(prefix="sglang-sched-"))
    radix_module.time = _CounterTime()
    C, B, S = sc["C"], sc["B"], sc["S"]
    alloc = PagedTokenToKVPoolAllocator(C * BT, BT, torch.int64, "cpu", kvcache=None,
                                        need_sort=False)
    max_len = max(r["input_length"] + r["output_length"] for r in sc["requests"]) + 64
    r2t = ReqToTokenPool(size=S + 1, max_context_len=max_len, device="cpu",
                         enable_memory_saver=False)
    tree = RadixCache(CacheInitParams(disable=False, req_to_token_pool=r2t,
                                      token_to_kv_pool_allocator=alloc, page_size=BT,
                                      eviction_policy="lru"))
    pol = SchedulePolicy(policy, tree, False, False, False)
    ratio = NewTokenRatioTracker.from_config()
    mcfg = SimpleNamespace(vocab_size=1000, is_encoder_decoder=False)
    spec = SpeculativeAlgorithm.NONE
    max_prefill_tokens = args.max_prefill_tokens
    settings = {"chunked_prefill_size": args.chunked_prefill_size,
                "max_prefill_tokens": max_prefill_tokens,
                "max_running_requests": args.max_running_requests,
                "schedule_policy": args.schedule_policy,
                "schedule_conservativeness": args.schedule_conservativeness,
                "enable_mixed_chunk": args.enable_mixed_chunk,
                "new_token_ratio_init": ratio.init, "new_token_ratio_min": ratio.min,
                "new_token_ratio_decay": ratio.decay, "ignore_eos": ignore_eos,
                "overlap": False, "page_size": BT, "kv_tokens": C * BT}

    dense, reqs = {}, []
    for i, r in enumerate(sc["requests"]):
        O = r["output_length"] if sc["K"] is None else min(r["output_length"], sc["K"])
        O = max(O, 1)
        q = Req(str(i), "", array("q", VS.tokens_of(r, dense)),
                SamplingParams(max_new_tokens=O, ignore_eos=ignore_eos))
        q.sampling_params.normalize(None)  # as TokenizerManager does (stop_strs -> [])
        reqs.append(q)
    waiting = list(reqs)
    running = ScheduleBatch.init_new([], r2t, alloc, tree, mcfg, False, spec)
    chunked = None
    last_batch = None
    steps, retract_steps = [], []
    sampled = defaultdict(int)
    n_retract = 0

    def new_running(rs):
        return ScheduleBatch.init_new(rs, r2t, alloc, tree, mcfg, False, spec)

    while waiting or not running.is_empty() or chunked is not None or last_batch is not None:
        # ---- get_next_batch_to_run
        exclude = []
        if chunked is not None:
            exclude.append(chunked)
            if chunked.extend_end > chunked.prefix_len:
                checkpoint_kv_cache(chunked, tree)  # stash_chunked_request
        if last_batch is not None and last_batch.forward_mode.is_extend():
            if last_batch.chunked_req is not None:
                exclude.append(last_batch.chunked_req)
            n0 = last_batch.batch_size()
            last_batch.filter_batch(reqs_to_exclude=exclude)
            if last_batch.batch_size() < n0:
                running.batch_is_full = False
            if not last_batch.is_empty():
                if running.is_empty():
                    running = last_batch
                else:
                    running.merge_batch(last_batch)
        n0 = running.batch_size()
        running.filter_batch()
        if running.batch_size() < n0:
            running.batch_is_full = False
        # ---- _get_new_batch_prefill_raw
        new_batch = None
        if running.is_empty():
            running.batch_is_full = False
        if not ((running.batch_is_full or not waiting) and chunked is None):
            rbs = len(running.reqs)
            allocatable = lambda rbs, held=0: min(S - rbs, r2t.available_size() + held)
            if allocatable(rbs) <= 0 and chunked is None:
                running.batch_is_full = True
            else:
                pol.calc_priority(waiting, running)
                adder = PrefillAdder(BT, tree, alloc, running, ratio.current, max_prefill_tokens,
                                     B, 0, 0, max_prefill_bs=0, max_running_requests=S,
                                     prefill_max_requests=None, waiting_queue_len=len(waiting))
                if chunked is not None:
                    chunked.init_next_round_input()
                    adder.chunked_req_limit = pol.shortest_prefill_chunk_limit(
                        chunked, waiting, adder.rem_chunk_tokens or 0, BT)
                    chunked = adder.add_chunked_req(chunked)
                for q in waiting:
                    if adder.budget_state() == AddReqResult.OTHER:
                        break
                    held = sum(r.kv.holds_kv for r in adder.can_run_list)
                    if len(adder.can_run_list) >= allocatable(len(running.reqs), held):
                        running.batch_is_full = True
                    if running.batch_is_full:
                        break
                    q.init_next_round_input(tree)
                    res = adder.add_one_req(q, has_chunked_req=(chunked is not None),
                                            truncation_align_size=None)
                    if res != AddReqResult.CONTINUE:
                        if res == AddReqResult.NO_TOKEN:
                            running.batch_is_full = len(adder.can_run_list) > 0 or (
                                not running.is_empty())
                        break
                can_run = adder.can_run_list
                if can_run:
                    cs = set(can_run)
                    waiting = [x for x in waiting if x not in cs]
                    if adder.new_chunked_req is not None:
                        assert chunked is None
                        chunked = adder.new_chunked_req
                    if chunked is not None:
                        chunked.inflight_middle_chunks += 1
                    new_batch = ScheduleBatch.init_new(can_run, r2t, alloc, tree, mcfg, False,
                                                       spec, chunked_req=chunked)
                    new_batch.prepare_for_extend()
                    new_batch.decoding_reqs = None
        retracted = []
        if new_batch is not None:
            batch = new_batch
        elif not running.is_empty():
            # ---- update_running_batch
            batch = running
            if not batch.check_decode_mem():
                retracted, new_ratio, abort = batch.retract_decode()
                assert not abort, "SGLang aborted a request"
                ratio.current = new_ratio
                for q in retracted:  # _add_request_to_queue(is_retracted=True): appended
                    waiting.append(q)
                n_retract += len(retracted)
            else:
                ratio.decay_step()
            if batch.is_empty():
                batch = None
            else:
                batch.prepare_for_decode()
        else:
            batch = None
        if batch is None:
            if last_batch is None and not waiting and chunked is None:
                break
            last_batch = None
            if not waiting and chunked is None and running.is_empty():
                break
            raise RuntimeError("SGLang stalled")
        # ---- record and run (process_batch_result_*)
        if batch.forward_mode.is_extend():
            step = [(int(q.rid), q.extend_end - q.prefix_len, q.prefix_len) for q in batch.reqs]
        else:
            # alloc_for_decode (in prepare_for_decode) already advanced kv_committed_len
            step = [(int(q.rid), 1, q.kv.kv_committed_len - 1) for q in batch.reqs]
        steps.append(sorted(step))
        retract_steps.append(sorted(int(q.rid) for q in retracted))
        for q in batch.reqs:
            if batch.forward_mode.is_extend():
                if q is chunked:
                    q.inflight_middle_chunks -= 1
                    continue
                q.inflight_middle_chunks = max(0, q.inflight_middle_chunks - 1)
            q.output_ids.append(10**7 + int(q.rid) * 10**5 + sampled[q.rid])
            sampled[q.rid] += 1
            q.update_finish_state()
            if q.finished():
                release_kv_cache(q, tree, checkpoint=True)
            elif batch.forward_mode.is_extend():
                checkpoint_kv_cache(q, tree)
        last_batch = batch if batch.forward_mode.is_extend() else None
    bad = [q.rid for q in reqs if len(q.output_ids) != q.sampling_params.max_new_tokens]
    return steps, retract_steps, {"retractions": n_retract, "iterations": len(steps),
                                  "unfinished_or_wrong_length": bad}, settings


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenarios", default="a,b,c,d,e")
    ap.add_argument("--policies", default="lpm,fcfs")
    ap.add_argument("--window", type=int, default=3)
    ap.add_argument("--golden", metavar="DIR",
                    help="also write each run's trace and SGLang's iterations there "
                         "(tests/data/engine_sched/sglang: the ctest golden files)")
    a = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    sp = OUT / "summary.json"
    summary = json.loads(sp.read_text()) if sp.exists() else {"runs": {}}
    for key in a.scenarios.split(","):
        sc = VS.SCENARIOS[key]()
        d = OUT / sc["name"]
        d.mkdir(parents=True, exist_ok=True)
        for policy in a.policies.split(","):
            k_steps, k_info = run_kvtk(sc, d, policy)
            s_steps, s_ret, s_info, settings = run_sglang(sc, policy)
            json.dump({"steps": s_steps, "retracted": s_ret}, open(d / f"sglang_{policy}.json", "w"))
            if a.golden:
                g = Path(a.golden)
                g.mkdir(parents=True, exist_ok=True)
                (g / f"{sc['name']}.jsonl").write_text((d / "trace.jsonl").read_text())
                sets = {"local_cache": sc["C"], "max_num_batched_tokens": sc["B"],
                        "max_num_seqs": sc["S"], "schedule_policy": policy}
                if sc["K"] is not None:
                    sets["max_output_tokens"] = sc["K"]
                (g / f"{sc['name']}_{policy}.json").write_text(json.dumps(
                    {"sglang": "0.5.23", "trace": f"{sc['name']}.jsonl", "set": sets,
                     "retractions": sum(len(x) for x in s_ret),
                     "steps": [sorted(map(list, st)) for st in s_steps]},
                    separators=(",", ":")) + "\n")
            ft, fc = VS.compare(k_steps, s_steps)
            k_ret = sum(1 for _ in ())
            m = {"scenario": sc["name"], "what": sc["what"], "policy": policy,
                 "kvtk": k_info, "sglang": s_info, "settings": settings,
                 "equal": ft is None and fc is None, "first_divergence": ft,
                 "first_context_divergence": fc}
            focus = ft if ft is not None else fc
            if focus is not None:
                m["around"] = [{"iteration": i,
                                "kvtk": VS.fmt(k_steps[i] if i < len(k_steps) else None),
                                "sglang": VS.fmt(s_steps[i] if i < len(s_steps) else None),
                                "sglang_retracted": s_ret[i] if i < len(s_ret) else None}
                               for i in range(max(0, focus - a.window), focus + a.window + 1)
                               if i < max(len(k_steps), len(s_steps))]
            summary["runs"][f"{sc['name']}/{policy}"] = m
            print(f"{sc['name']:24s} {policy:5s} kvtk it={len(k_steps)} sglang it={len(s_steps)} "
                  f"preempt kvtk={k_info['preemptions']} sglang={s_info['retractions']} "
                  f"equal={m['equal']} first_div={ft} first_ctx_div={fc} "
                  f"bad={s_info['unfinished_or_wrong_length'][:5]}", flush=True)
            for row in m.get("around", []):
                print(f"    it {row['iteration']:4d} kvtk:   {row['kvtk']}\n"
                      f"            sglang: {row['sglang']}  retracted={row['sglang_retracted']}")
            sp.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
