"""Compares kvtk's engine accounting modes (kvtk replay --engine vllm,sglang) with the engines'
own counts written by engine_accounting.py (summary.json): hit tokens, hit blocks, evicted
blocks and the final cache contents, per trace x engine x capacity. Exit 1 on any difference.

  python3 tools/engine-check/compare_accounting.py build/release/sim/kvtk \
      build/engine-check/accounting/summary.json
"""
import json
import subprocess
import sys
from pathlib import Path

TRACES = Path(__file__).resolve().parents[2] / "traces"


def kvtk_rows(kvtk, trace, capacities):
    out = subprocess.run(
        [kvtk, "replay", "--trace", str(TRACES / (trace + ".jsonl")), "--engine", "vllm,sglang",
         "--capacity", ",".join(map(str, capacities)), "--no-opt", "--no-ideal", "--json", "-"],
        check=True, capture_output=True, text=True).stdout
    return {(r["engine"], r["capacity_blocks"]): r for r in json.loads(out)["results"]}


def main():
    kvtk, summary = sys.argv[1], json.load(open(sys.argv[2]))
    runs = summary["runs"]
    caps = sorted({r["capacity_blocks"] for r in runs})
    mine = {t: kvtk_rows(kvtk, t, caps) for t in sorted({r["trace"] for r in runs})}
    bad = 0
    print(f"{'trace':28} {'engine':7} {'capacity':>8} {'hit tokens':>11} {'evicted':>8} "
          f"{'cached':>7}  kvtk = engine")
    for r in runs:
        k = mine[r["trace"]][(r["engine"], r["capacity_blocks"])]
        cached = r["final"].get("tree_pages", r["final"].get("cached_blocks"))
        got = (k["token_hits"], k["block_hits"], k["evictions"], k["engine_state"]["cached_blocks"])
        want = (r["hit_tokens"], r["hit_blocks"], r["evicted_blocks"], cached)
        same = got == want
        bad += not same
        print(f"{r['trace']:28} {r['engine']:7} {r['capacity_blocks']:>8} {want[0]:>11} "
              f"{want[2]:>8} {want[3]:>7}  {'yes' if same else 'NO: kvtk ' + str(got)}")
    print(f"{len(runs) - bad} of {len(runs)} equal")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
