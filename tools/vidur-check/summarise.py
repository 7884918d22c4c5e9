#!/usr/bin/env python3
"""Summarise one Vidur run (its output dir) as JSON on stdout.

Column meanings, read from vidur@7d47513 (vidur/metrics/metrics_store.py::_on_request_end,
vidur/entities/request.py). All times in seconds of simulated time.
  request_e2e_time            completed_at - arrived_at
  prefill_e2e_time            prefill_completed_at - arrived_at            -> our TTFT.
                              Includes queueing (scheduling delay); prefill_completed_at is
                              the end of the batch that finished the FIRST prefill (a later
                              restart does not move it). No CPU/tokeniser/network time.
  request_scheduling_delay    scheduled_at - arrived_at, scheduled_at = start of the first
                              batch that contained the request (kept across restarts).
  decode_time_execution_plus_preemption_normalized
                              (completed_at - prefill_completed_at) / num_decode_tokens
                              -> Vidur's "TPOT". num_decode_tokens is read at completion: it
                              counts the token produced by prefill (so it is output_length,
                              not output_length-1), and after a restart (preemption by
                              recompute) it is only the tokens left at the restart, while
                              the numerator still spans from the first prefill, so restarted
                              requests get an inflated value.
  request_num_restarts        preemptions (each one = free all blocks, re-prefill later).
  request_num_decode_tokens   recorded at arrival = output_length of the trace.
We also report tpot_per_output_token_after_first = (e2e - ttft) / (output_length - 1) over
requests with output_length > 1 (output_length from the trace CSV), the usual definition.
Throughput: makespan = last completion - first arrival (completion = arrival + e2e).
"""
import argparse
import json
import os
import sys

import numpy as np
import pandas as pd


def stats(x, pct=(50, 90, 99)):
    x = np.asarray(x, dtype=float)
    x = x[~np.isnan(x)]
    if len(x) == 0:
        return None
    d = {"n": int(len(x)), "mean": float(np.mean(x))}
    for p in pct:
        d[f"p{p}"] = float(np.percentile(x, p))
    d["max"] = float(np.max(x))
    return d


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir", help="Vidur output dir (contains request_metrics.csv)")
    ap.add_argument("--trace-csv", required=True, help="the CSV given to Vidur (make_trace.py)")
    ap.add_argument("--wall-s", type=float, default=None, help="wall-clock seconds of the run")
    a = ap.parse_args()

    rm = pd.read_csv(os.path.join(a.outdir, "request_metrics.csv"))
    tr = pd.read_csv(a.trace_csv)
    rm = rm.sort_values("Request Id").reset_index(drop=True)
    # Request Id = 0-based row number of the trace CSV (Request ids count from 0 in creation order)
    rm["arrived_at"] = tr["arrived_at"].to_numpy()[rm["Request Id"].to_numpy()]
    rm["output_length"] = tr["num_decode_tokens"].to_numpy()[rm["Request Id"].to_numpy()]
    rm["input_length"] = tr["num_prefill_tokens"].to_numpy()[rm["Request Id"].to_numpy()]
    assert (rm["output_length"] == rm["request_num_decode_tokens"]).all(), "id mapping mismatch"
    assert (rm["input_length"] == rm["request_num_prefill_tokens"]).all(), "id mapping mismatch"

    done = rm[rm["request_e2e_time"].notna()]
    completion = done["arrived_at"] + done["request_e2e_time"]
    first_arrival = float(rm["arrived_at"].min())
    makespan = float(completion.max() - first_arrival)
    out_tokens = int(done["output_length"].sum())
    multi = done[done["output_length"] > 1]
    tpot_alt = (multi["request_e2e_time"] - multi["prefill_e2e_time"]) / (multi["output_length"] - 1)

    extra = {}
    p = os.path.join(a.outdir, "vidur_check_extra.json")
    if os.path.exists(p):
        extra = json.load(open(p))
    cfg = json.load(open(os.path.join(a.outdir, "config.json")))

    res = {
        "vidur_output_dir": os.path.abspath(a.outdir),
        "num_requests_in_trace": int(len(tr)),
        "num_requests_completed": int(len(done)),
        "ttft_s": stats(done["prefill_e2e_time"]),
        "tpot_s": stats(done["decode_time_execution_plus_preemption_normalized"]),
        "tpot_per_output_token_after_first_s": stats(tpot_alt),
        "e2e_s": stats(done["request_e2e_time"]),
        "scheduling_delay_s": stats(done["request_scheduling_delay"], pct=(50, 90)),
        "preemptions_total_restarts": int(done["request_num_restarts"].sum()),
        "requests_with_restarts": int((done["request_num_restarts"] > 0).sum()),
        "makespan_s": makespan,
        "throughput_req_per_s": len(done) / makespan,
        "throughput_output_tok_per_s": out_tokens / makespan,
        "output_tokens_total": out_tokens,
        "kv_blocks_per_replica": {k: int(v["num_blocks"]) for k, v in extra.get("replicas", {}).items()},
        "kv_block_size": cfg["cluster_config"]["replica_scheduler_config"]["block_size"],
        "watermark_blocks_per_replica": {k: v["watermark_blocks"] for k, v in extra.get("replicas", {}).items()},
        "vidur_setup_wall_s": extra.get("setup_wall_s"),
        "vidur_simulate_wall_s": extra.get("simulate_wall_s"),
        "run_wall_s": a.wall_s,
        "definitions": {
            "ttft_s": "request_metrics.csv:prefill_e2e_time = prefill_completed_at - arrived_at (includes queueing; end of the batch that completed the first prefill)",
            "tpot_s": "request_metrics.csv:decode_time_execution_plus_preemption_normalized = (completed_at - prefill_completed_at) / num_decode_tokens (num_decode_tokens includes the prefill's token; after a restart it is the remaining count)",
            "tpot_per_output_token_after_first_s": "(request_e2e_time - prefill_e2e_time) / (output_length - 1), output_length > 1 only",
            "e2e_s": "request_metrics.csv:request_e2e_time = completed_at - arrived_at",
            "scheduling_delay_s": "request_metrics.csv:request_scheduling_delay = first scheduled_at - arrived_at",
            "preemptions_total_restarts": "sum of request_metrics.csv:request_num_restarts",
            "throughput": "completed requests (output tokens) / (last completion - first arrival)",
        },
    }
    # per-batch records, if written (keep_individual_batch_metrics)
    bp = os.path.join(a.outdir, "batch_metrics.csv")
    if os.path.exists(bp):
        bm = pd.read_csv(bp)
        res["batches"] = {
            "count": int(len(bm)),
            "batch_size": stats(bm["batch_size"]),
            "batch_num_tokens": stats(bm["batch_num_tokens"]),
            "batch_execution_time_s": stats(bm["batch_execution_time"]),
            "prefill_batches": int((bm["batch_num_prefill_tokens"] > 0).sum()),
            "mixed_batches": int(((bm["batch_num_prefill_tokens"] > 0) & (bm["batch_num_decode_tokens"] > 0)).sum()),
        }
    json.dump(res, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
