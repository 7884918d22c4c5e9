#!/usr/bin/env python3
"""Vidur's own predicted batch times as a kvtk timing table (compare.py's step vidur-timing).

Runs inside Vidur's venv with cwd = Vidur's source root, with the same Vidur arguments as
run_vidur.sh (so the same trained random forests are loaded from the cache): builds the
Simulator, takes replica 0's execution-time predictor, and asks it for the time of real Vidur
Batch objects at kvtk's table points: a prefill row = `batch` requests each computing `tokens`
new tokens on `context` already processed; a decode row = `batch` requests with their prefill
complete at `context` processed tokens. The time is ExecutionTime.model_time (CPU overheads off,
as in the runs), so kvtk sees exactly what Vidur charges a uniform batch.

usage (from run_vidur.sh's environment):
  cd $VIDUR_HOME/src/vidur && PYTHONPATH=. $VIDUR_HOME/venv/bin/python \
     .../vidur_predicted_table.py --out table.csv -- <the vidur arguments of run_vidur.sh>
"""
import sys

from vidur.config import SimulationConfig
from vidur.entities.batch import Batch
from vidur.entities.request import Request
from vidur.simulator import Simulator


def predictor_of(sim):
    rs = sim.scheduler._replica_schedulers[0]
    return rs._replica_stage_schedulers[0]._execution_time_predictor


def prefill_s(pred, batch, tokens, context):
    reqs = []
    for _ in range(batch):
        r = Request(0.0, context + tokens, 2, num_processed_tokens=context)
        reqs.append(r)
    return pred.get_execution_time(Batch(0, reqs, [tokens] * batch), 0).model_time


def decode_s(pred, batch, context):
    reqs = []
    for _ in range(batch):
        r = Request(0.0, context, 16, num_processed_tokens=context)
        r._is_prefill_complete = True
        reqs.append(r)
    return pred.get_execution_time(Batch(0, reqs, [1] * batch), 0).model_time


def main():
    argv = sys.argv[1:]
    if "--out" not in argv or "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    out = argv[argv.index("--out") + 1]
    vidur_args = argv[argv.index("--") + 1:]
    sys.argv = [sys.argv[0]] + vidur_args
    config = SimulationConfig.create_from_cli_args()
    sim = Simulator(config)
    pred = predictor_of(sim)
    max_tokens = config.cluster_config.replica_scheduler_config.max_tokens_in_batch
    max_batch = config.cluster_config.replica_scheduler_config.batch_size_cap
    max_len = 4096
    lines = ["# Vidur's own predicted batch times (tools/vidur-check/vidur_predicted_table.py)",
             "kind,batch,tokens_per_request,context_tokens,ms"]
    chunks = [16, 32, 64, 128, 256, 512, 1024, 1536, 2048, 3072, 4096]
    contexts = [0, 256, 512, 1024, 2048, 3072, 4032]
    for b in sorted({1, 2, 4, 8, 16, 32, max_batch}):
        for t in chunks:
            if b * t > max_tokens:
                continue
            for c in contexts:
                if c + t > max_len:
                    continue
                try:
                    ms = 1e3 * prefill_s(pred, b, t, c)
                except KeyError:  # beyond Vidur's prediction grid (sum of kv sizes > 4096):
                    continue      # its vLLM scheduler never builds such a batch
                lines.append(f"prefill,{b},{t},{c},{ms:.6f}")
    for b in range(1, max_batch + 1):
        for c in [64, 128, 256, 512, 1024, 1536, 2048, 3072, 4032]:
            lines.append(f"decode,{b},1,{c},{1e3 * decode_s(pred, b, c):.6f}")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {out}: {len(lines) - 2} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
