#!/usr/bin/env python3
"""Re-compute Vidur's per-iteration execution time from the prediction tables its
random-forest predictor leaves in the cache dir ($VIDUR_HOME/cache/<op>_<hash>_predictions.csv),
with the formula of vidur@7d47513 (execution_time.py, sklearn_execution_time_predictor.py),
TP=1, PP=1, CPU overheads off. Checked to match batch_execution_time in batch_metrics.csv
exactly. Times in the tables are ms per layer; the result is seconds per iteration.

  step_time.py --prefill 2048 1024        # a prefill batch of two fresh prompts
  step_time.py --decode 16 --ctx 2000     # 16 decoding requests, mean context 2000 tokens
  step_time.py --grid > table.csv         # decode (batch 1..48, ctx 64..4096) and prefill (1..4096) table

Caveat: Vidur keys the prediction cache on the model hyper-parameters and config, not on
the profile's contents; use a fresh cache dir if the profile changes.
"""
import argparse
import glob
import os
import sys

import pandas as pd

NUM_LAYERS = 28  # Qwen2-7B
LINEAR = ["attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj", "mlp_act",
          "attn_rope", "input_layernorm", "post_attention_layernorm", "add"]
GQA_BATCHING_OVERHEAD = 0.1  # attention_{decode,prefill}_batching_overhead_fraction (num_q_heads > num_kv_heads)
KV_GRAN = 64                  # kv_cache_prediction_granularity


def load(cache):
    t = {}
    for f in glob.glob(os.path.join(cache, "*_predictions.csv")):
        if f.endswith("_training_predictions.csv"):
            continue
        name = os.path.basename(f).rsplit("_", 2)[0]
        d = pd.read_csv(f)
        keys = [c for c in d.columns if c != "prediction"]
        t[name] = dict(zip(map(tuple, d[keys].itertuples(index=False, name=None)), d["prediction"]))
    return t


def up(x, g):
    return (x + g - 1) // g * g


def step(t, prefills=(), decode_ctx=()):
    """prefills: prompt lengths of fresh (kv=0) prefills; decode_ctx: context length of each decoding request."""
    n_tok = sum(prefills) + len(decode_ctx)
    r8 = up(n_tok, 8)
    per = sum(t[k][(r8,)] for k in LINEAR) + t["attn_kv_cache_save"][(n_tok,)]
    if prefills:
        agg = round(sum(p * p for p in prefills) ** 0.5) ** 2
        per += t["attn_prefill"][(0, agg)] * (1 + GQA_BATCHING_OVERHEAD * (len(prefills) > 1))
    if decode_ctx:
        b = len(decode_ctx)
        kv = up(int(sum(decode_ctx) / b), KV_GRAN)
        per += t["attn_decode"][(b, kv)] * (1 + GQA_BATCHING_OVERHEAD * (b > 1))
    return NUM_LAYERS * per / 1000.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", default=os.path.join(os.environ.get("VIDUR_HOME", "/work/vidur"), "cache"))
    ap.add_argument("--prefill", type=int, nargs="*", default=[])
    ap.add_argument("--decode", type=int, default=0, help="number of decoding requests")
    ap.add_argument("--ctx", type=int, default=0, help="mean context length of the decoding requests")
    ap.add_argument("--grid", action="store_true")
    a = ap.parse_args()
    t = load(a.cache)
    if a.grid:
        w = sys.stdout
        w.write("kind,batch,tokens,context,seconds\n")
        for b in range(1, 49):
            for ctx in range(64, 4097, 64):
                w.write(f"decode,{b},{b},{ctx},{step(t, decode_ctx=[ctx] * b):.6g}\n")
        for n in range(1, 4097):
            w.write(f"prefill,1,{n},0,{step(t, prefills=[n]):.6g}\n")
        return
    print(f"{step(t, a.prefill, [a.ctx] * a.decode):.6f}")


if __name__ == "__main__":
    main()
