#!/usr/bin/env python3
"""kvtk simulate beside Vidur on the same workload, step by step (docs/simulate.md "Side by side
with Vidur").

For each load (arrivals x L) it runs `kvtk simulate` on the conversation trace's requests with
input + output <= 4,096 tokens (the 3,873 Vidur replays; make_trace.py) with Vidur's setup: 2
instances, round-robin, vLLM V0-style scheduling (`scheduler: vllm-v0`: prefill first, whole
prompts, preemption by recompute), batch cap 48, 4,096 tokens per batch, 16-token pages, prefix
caching off; then compares with Vidur's summary (summarise.py) at that load.

Steps, so that a gap is attributed to timing, memory or scheduling:
  vidur-rules   as vidur-timing, with Vidur's two vLLM scheduling rules kvtk's vllm-v0 lacks:
                the padded prefill budget (requests x longest prompt <= 4,096) and the 1 %
                block watermark at admission
  vidur-timing  Vidur's own predicted batch times (vidur_predicted_table.py: its trained random
                forests, composed as Vidur composes them) and Vidur's KV block count
  profile       kvtk's converter of the same profile CSVs (python -m kvtk.vidur: piecewise
                linear, no random forest), Vidur's block count
  kvtk-memory   the converter's table, kvtk's own KV capacity (A30 24 GiB x
                gpu_memory_utilization 0.9 - weights)
  prefix-on     as kvtk-memory with prefix caching on (Vidur has none)

Writes JSON (every metric of both, and the ratios) and prints a Markdown table.
Usage: compare.py --vidur-results DIR --kvtk build/release/sim/kvtk --vidur-table T1
                  --profile-table T2 --vidur-blocks N [--loads 1,2,4] [--out results.json]
"""
import argparse
import csv
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TRACE = os.path.join(REPO, "traces", "mooncake_fast25_conversation_trace.jsonl")
# Qwen2-7B's shape (28 layers, hidden 3584, 4 KV heads of 128: 57,344 KV bytes per token) is
# kvtk's qwen2.5-7b preset; the A30 (165 dense fp16 TFLOP/s, 933 GB/s, 24 GiB as Vidur's
# device config counts it) is given as a custom GPU.
A30 = {"tflops": 165, "hbm_gb_per_s": 933, "hbm_gb": 24 * 1.073741824, "host_link_gb_per_s": 25}
BASE = {"scheduler": "vllm-v0", "model": "qwen2.5-7b", "gpu": A30, "prefill_instances": 2,
        "router": "round-robin", "max_num_seqs": 48, "max_num_batched_tokens": 4096,
        "page_tokens": 16, "enable_prefix_caching": False}


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def stats(xs):
    return {"mean": sum(xs) / len(xs), "p50": pct(xs, 50), "p90": pct(xs, 90), "p99": pct(xs, 99)}


def write_trace(load, path):
    """The requests Vidur replays (input + output <= 4096), arrivals divided by `load`."""
    with open(TRACE) as f, open(path, "w") as out:
        for line in f:
            d = json.loads(line)
            if d["input_length"] + d["output_length"] > 4096:
                continue
            d["timestamp"] = d["timestamp"] / load
            out.write(json.dumps(d) + "\n")


def run_kvtk(kvtk, trace, cfg, table, tmp):
    conf = os.path.join(tmp, "config.json")
    json.dump(cfg, open(conf, "w"))
    rows, res = os.path.join(tmp, "requests.csv"), os.path.join(tmp, "result.json")
    cmd = [kvtk, "simulate", "--trace", trace, "--config", conf, "--engine", "vllm",
           "--csv", rows, "--json", res, "--force"]
    if table:
        cmd += ["--timing-table", table]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    result = json.load(open(res))["result"]
    reqs = list(csv.DictReader(open(rows)))
    return summarise(reqs, result)


def summarise(reqs, result):
    done = [r for r in reqs if r["rejected"] == "0"]
    a = lambda r, k: float(r[k])  # noqa: E731
    ttft = [a(r, "first_token_s") - a(r, "arrival_s") for r in done]
    e2e = [a(r, "done_s") - a(r, "arrival_s") for r in done]
    delay = [a(r, "prefill_start_s") - a(r, "arrival_s") for r in done]
    multi = [r for r in done if int(r["output_tokens"]) > 1]
    tpot = [(a(r, "done_s") - a(r, "first_token_s")) / (int(r["output_tokens"]) - 1) for r in multi]
    first = min(a(r, "arrival_s") for r in done)
    span = max(a(r, "done_s") for r in done) - first
    out_tokens = sum(int(r["output_tokens"]) for r in done)
    return {"requests": len(done), "ttft_s": stats(ttft), "tpot_s": stats(tpot),
            "e2e_s": stats(e2e), "scheduling_delay_s": stats(delay),
            "preemptions": result["preemptions"], "throughput_req_per_s": len(done) / span,
            "throughput_output_tok_per_s": out_tokens / span,
            "kv_blocks_per_instance": result["kv_blocks_per_instance"],
            "gpu_busy_fraction": result.get("gpu_busy_fraction")}


def vidur_summary(d):
    return {"requests": d["num_requests_completed"], "ttft_s": d["ttft_s"],
            "tpot_s": d["tpot_per_output_token_after_first_s"], "e2e_s": d["e2e_s"],
            "scheduling_delay_s": d["scheduling_delay_s"],
            "preemptions": d["preemptions_total_restarts"],
            "throughput_req_per_s": d["throughput_req_per_s"],
            "throughput_output_tok_per_s": d["throughput_output_tok_per_s"],
            "kv_blocks_per_instance": d.get("kv_blocks_per_replica")}


def ratio(k, v):
    return {m: (k[m] / v[m] if v.get(m) else float("nan")) for m in ("mean", "p50", "p90", "p99")
            if m in k and m in v}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vidur-results", required=True, help="dir of {L}x.json (summarise.py)")
    ap.add_argument("--kvtk", default=os.path.join(REPO, "build", "release", "sim", "kvtk"))
    ap.add_argument("--vidur-table", help="vidur_predicted_table.py's table (step vidur-timing)")
    ap.add_argument("--profile-table", required=True, help="python -m kvtk.vidur's table")
    ap.add_argument("--vidur-blocks", type=int, required=True, help="Vidur's KV blocks per replica")
    ap.add_argument("--loads", default="1,2,4")
    ap.add_argument("--steps", default="vidur-rules,vidur-timing,profile,kvtk-memory,prefix-on")
    ap.add_argument("--out", default="-")
    a = ap.parse_args()
    vidur_rules = {"padded_prefill_budget": True, "watermark_blocks_fraction": 0.01}
    steps = {
        "vidur-rules": (a.vidur_table, {"num_gpu_blocks_override": a.vidur_blocks, **vidur_rules}),
        "vidur-timing": (a.vidur_table, {"num_gpu_blocks_override": a.vidur_blocks}),
        "profile": (a.profile_table, {"num_gpu_blocks_override": a.vidur_blocks}),
        "kvtk-memory": (a.profile_table, {"gpu_memory_utilization": 0.9}),
        "prefix-on": (a.profile_table, {"gpu_memory_utilization": 0.9,
                                        "enable_prefix_caching": True}),
    }
    out = {"setup": BASE, "vidur_blocks": a.vidur_blocks, "loads": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for load_s in a.loads.split(","):
            load = float(load_s)
            tag = f"{load_s}x"
            vp = os.path.join(a.vidur_results, f"{tag}.json")
            vidur = vidur_summary(json.load(open(vp))) if os.path.exists(vp) else None
            trace = os.path.join(tmp, f"trace_{tag}.jsonl")
            write_trace(load, trace)
            entry = {"vidur": vidur, "kvtk": {}}
            for name in a.steps.split(","):
                table, extra = steps[name]
                if name in ("vidur-rules", "vidur-timing") and not table:
                    continue
                k = run_kvtk(a.kvtk, trace, {**BASE, **extra}, table, tmp)
                if vidur:
                    k["ratio_to_vidur"] = {m: ratio(k[m], vidur[m]) for m in
                                           ("ttft_s", "tpot_s", "e2e_s", "scheduling_delay_s")}
                    k["ratio_to_vidur"]["throughput_req_per_s"] = (
                        k["throughput_req_per_s"] / vidur["throughput_req_per_s"])
                entry["kvtk"][name] = k
            out["loads"][tag] = entry
    out["ttft_doubling_load"] = doubling_loads(out)
    text = json.dumps(out, indent=1)
    if a.out == "-":
        print(text)
    else:
        open(a.out, "w").write(text + "\n")
    print(markdown(out), file=sys.stderr)
    return 0


def doubling_loads(out):
    """For Vidur and each step: the load at which mean TTFT reaches twice its value at the
    first load, linear between the two measured loads around it (None: not reached)."""
    loads = [(float(t[:-1]), e) for t, e in out["loads"].items()]
    series = {"Vidur": [(l, e["vidur"]["ttft_s"]["mean"]) for l, e in loads if e["vidur"]]}
    for l, e in loads:
        for name, k in e["kvtk"].items():
            series.setdefault(name, []).append((l, k["ttft_s"]["mean"]))
    res = {}
    for name, pts in series.items():
        pts.sort()
        res[name] = None
        if not pts:
            continue
        target = 2 * pts[0][1]
        for (l0, t0), (l1, t1) in zip(pts, pts[1:]):
            if t1 >= target > t0:
                res[name] = l0 + (l1 - l0) * (target - t0) / (t1 - t0)
                break
    return res


def markdown(out):
    lines = ["| load | who | TTFT mean / p90 (s) | TPOT mean / p90 (ms) | E2E mean / p90 (s) | "
             "sched. delay mean (s) | preemptions | req/s |", "|---|---|---|---|---|---|---|---|"]
    for tag, e in out["loads"].items():
        rows = ([("Vidur", e["vidur"])] if e["vidur"] else []) + list(e["kvtk"].items())
        for who, m in rows:
            lines.append(
                f"| {tag} | {who} | {m['ttft_s']['mean']:.3f} / {m['ttft_s']['p90']:.3f} | "
                f"{1e3 * m['tpot_s']['mean']:.1f} / {1e3 * m['tpot_s']['p90']:.1f} | "
                f"{m['e2e_s']['mean']:.2f} / {m['e2e_s']['p90']:.2f} | "
                f"{m['scheduling_delay_s']['mean']:.3f} | {m['preemptions']} | "
                f"{m['throughput_req_per_s']:.3f} |")
    lines.append("")
    lines.append("Load at which mean TTFT doubles: " + ", ".join(
        f"{k} {v:.2f}x" if v else f"{k} not reached" for k, v in out["ttft_doubling_load"].items()))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
