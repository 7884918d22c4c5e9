#!/usr/bin/env python3
"""Convert a kvtk/Mooncake JSONL trace into the CSV read by Vidur's trace-replay
request generator (vidur/request_generator/trace_replay_request_generator.py).

Vidur reads exactly three columns (others are ignored):
  arrived_at          arrival time in SECONDS (float)
  num_prefill_tokens  prompt tokens
  num_decode_tokens   output tokens; Vidur counts the token produced by the prefill
                      iteration as the first of these (so a request runs
                      num_decode_tokens - 1 decode iterations after its prefill)
We also write trace_index (0-based line number in the JSONL) so that Vidur's
"Request Id" (= 0-based row number of this CSV) can be mapped back.

Vidur's own constraints, applied silently by the generator if not met here:
  * num_prefill_tokens and num_decode_tokens are clipped to >= 1;
  * if prefill + decode > max_tokens (trace_request_generator_config_max_tokens,
    default 4096), the PREFILL is shortened by the excess (requests are not dropped).
This script instead DROPS requests with input_length + output_length > --max-tokens
(default 4096), as the comparison asks, so Vidur never has to truncate anything.

Load factor L: arrived_at = timestamp_ms / 1000 / L  (1x, 2x = twice the rate, ...).
"""
import argparse
import csv
import json
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", help="JSONL with timestamp (ms), input_length, output_length")
    ap.add_argument("out", help="output CSV for --trace_request_generator_config_trace_file")
    ap.add_argument("--load", type=float, default=1.0, help="arrival-rate multiplier (timestamps divided by it)")
    ap.add_argument("--max-tokens", type=int, default=4096, help="keep input+output <= this")
    args = ap.parse_args()
    if args.load <= 0:
        ap.error("--load must be > 0")

    kept = dropped = 0
    with open(args.trace) as f, open(args.out, "w", newline="") as g:
        w = csv.writer(g)
        w.writerow(["arrived_at", "num_prefill_tokens", "num_decode_tokens", "trace_index"])
        last = -1.0
        for i, line in enumerate(f):
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            inp, out = int(r["input_length"]), int(r["output_length"])
            if inp + out > args.max_tokens:
                dropped += 1
                continue
            if inp < 1 or out < 1:
                raise SystemExit(f"line {i}: Vidur needs input_length >= 1 and output_length >= 1")
            t = float(r["timestamp"]) / 1000.0 / args.load
            if t < last:
                raise SystemExit(f"line {i}: timestamps not sorted")
            last = t
            w.writerow([repr(t), inp, out, i])
            kept += 1
    print(f"{args.out}: kept {kept}, dropped {dropped} (input+output > {args.max_tokens}), load {args.load}x",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
