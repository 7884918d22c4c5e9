#!/usr/bin/env python3
"""How a kvtk sweep scales on this machine (docs/sweeps.md "How it scales").

usage: build/nbvenv/bin/python bench/sweep_scaling.py [--json FILE] [--no-ray] [--repeat N]

1. 24 replay cells (2 generated traces of 40,000 requests each, `kvtk trace gen --seed 1|2`,
   kvtb, about 2.4 M block references each; x 4 flat-index policies x 3 capacities, with the
   offline optimum): serially in this process (kvtk.replay, the baseline), then as a sweep
   on the local backend with 1 and 2 worker processes, and on a single-node Ray with 1 and 2
   CPUs (Ray's start-up timed apart from the sweep).
2. The per-cell overhead: 200 trivial `cost` cells (each well under a millisecond of work) on 1
   worker process, 1 thread and 1 Ray CPU, minus the same 200 calls made directly.
Every sweep writes a JSONL output, as a user's would. Prints a Markdown table; the best of
--repeat runs (default 2) is reported for each configuration.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import kvtk
from kvtk._sweep.driver import run_sweep

REQUESTS = 40000
TRACES: dict = {}  # name -> path, generated in main()
POLICIES = ["lru", "fifo", "arc", "s3fifo"]
CAPACITIES = [2000, 20000, 100000]
COST_CELLS = 200
COST = {"version": 1,
        "runs": [{"command": "cost", "options": {"input_tokens": 1e9},
                  "grid": {"hit_ratio": [i / COST_CELLS for i in range(COST_CELLS)]}}]}
COST1 = {"version": 1, "runs": [{"command": "cost", "options": {"input_tokens": 1e9, "hit_ratio": 0.5}}]}


def _busy_s() -> float:
    """CPU seconds the whole machine has spent busy (all processes, all cores)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def _own_s() -> float:
    """CPU seconds of this process and every process under it (the local pool's workers, Ray's
    raylet and workers), including their reaped children: /proc/PID/stat utime..cstime."""
    tick = os.sysconf("SC_CLK_TCK")
    stats = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    text = f.read()
            except OSError:
                continue
            rest = text[text.rindex(")") + 2:].split()
            stats[int(d)] = (int(rest[1]), sum(int(x) for x in rest[11:15]))  # ppid, CPU ticks
    children: dict = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += stats.get(pid, (0, 0))[1]
        todo += children.get(pid, [])
    return total / tick


OTHER: dict = {}  # label -> CPU seconds other processes used during its best run


def best_of(n, fn, label=None):
    best = None
    for _ in range(n):
        b0, o0 = _busy_s(), _own_s()
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        other = max(0.0, (_busy_s() - b0) - (_own_s() - o0))
        if best is None or dt < best[0]:
            best = (dt, other)
    if label:
        OTHER[label] = best[1]
    return best[0]


def sweep(spec, tmp, **kw):
    out = os.path.join(tmp, "out.jsonl")
    s = run_sweep(spec, out=out, force=True, **kw)
    assert s.complete and s.ok == s.cells, (s.ok, s.error, s.failed)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--ray-only", action="store_true", help="skip the local measurements")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    n = args.repeat
    fig: dict = {"kvtk": kvtk.__version__, "python": platform.python_version(),
                 "cores": len(os.sched_getaffinity(0)), "load_before": os.getloadavg()}
    cells = 2 * len(POLICIES) * len(CAPACITIES)
    fig["replay_cells"] = cells

    def direct_replay():
        for path in TRACES.values():
            for pol in POLICIES:
                for cap in CAPACITIES:
                    kvtk.replay(path, index="flat", policy=pol, capacity=cap, opt=True)

    def direct_cost():  # what a cell's worker calls (kvtk.cost adds a temporary folder)
        for i in range(COST_CELLS):
            kvtk._kvtk.run_command("cost", json.dumps({"hit_ratio": i / COST_CELLS,
                                                       "input_tokens": 1e9}), None)

    with tempfile.TemporaryDirectory(prefix="kvtk-sweep-bench-") as tmp:
        for seed in (1, 2):
            TRACES[f"gen{seed}"] = path = os.path.join(tmp, f"gen{seed}.kvtb")
            kvtk.trace_gen(path, requests=REQUESTS, seed=seed)
        fig["block_refs"] = {n: kvtk.load_trace(p).block_refs for n, p in TRACES.items()}
        REPLAY = {"version": 1, "traces": TRACES,
                  "runs": [{"command": "replay", "traces": list(TRACES),
                            "options": {"index": "flat", "opt": True},
                            "grid": {"policy": POLICIES, "capacity": CAPACITIES}}]}
        fig["replay_serial_direct_s"] = best_of(n, direct_replay, "replay_serial_direct_s")
        fig["cost_direct_s"] = best_of(n, direct_cost)
        for w in (() if args.ray_only else (1, 2)):
            fig[f"replay_local_{w}_s"] = best_of(n, lambda: sweep(REPLAY, tmp, workers=w),
                                                 f"replay_local_{w}_s")
        if not args.ray_only:
            fig["replay_thread_2_s"] = best_of(n, lambda: sweep(REPLAY, tmp, workers=2, pool="thread"),
                                               "replay_thread_2_s")
            fig["cost_local_1_s"] = best_of(n, lambda: sweep(COST, tmp, workers=1))
            fig["one_cell_local_1_s"] = best_of(n, lambda: sweep(COST1, tmp, workers=1))
            fig["cost_thread_1_s"] = best_of(n, lambda: sweep(COST, tmp, workers=1, pool="thread"))
            fig["one_cell_thread_1_s"] = best_of(n, lambda: sweep(COST1, tmp, workers=1, pool="thread"))
        if not args.no_ray:
            import ray

            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            for c in (1, 2):
                t0 = time.perf_counter()
                ray.init(num_cpus=c, include_dashboard=False, object_store_memory=128 << 20,
                         logging_level="WARNING")
                fig[f"ray_init_{c}_s"] = time.perf_counter() - t0
                # The first sweep also starts Ray's worker processes: timed separately.
                t0 = time.perf_counter()
                sweep(REPLAY, tmp, backend="ray")
                fig[f"replay_ray_{c}_first_s"] = time.perf_counter() - t0
                fig[f"replay_ray_{c}_s"] = best_of(n, lambda: sweep(REPLAY, tmp, backend="ray"),
                                                   f"replay_ray_{c}_s")
                if c == 1:
                    fig["cost_ray_1_s"] = best_of(n, lambda: sweep(COST, tmp, backend="ray"))
                    fig["one_cell_ray_1_s"] = best_of(n, lambda: sweep(COST1, tmp, backend="ray"))
                ray.shutdown()
    fig["load_after"] = os.getloadavg()

    def per(kind):  # ms per cell beyond the work itself, start-up (a 1-cell sweep) excluded
        many, one = fig[f"cost_{kind}_1_s"], fig[f"one_cell_{kind}_1_s"]
        return ((many - one) / (COST_CELLS - 1) - fig["cost_direct_s"] / COST_CELLS) * 1e3
    print(f"kvtk {fig['kvtk']}, Python {fig['python']}, {fig['cores']} cores, load average "
          f"{fig['load_before'][0]:.2f} before / {fig['load_after'][0]:.2f} after\n")
    print(f"| {cells} replay cells (opt) | wall s | speed-up vs serial | CPU s used by other processes meanwhile |")
    print("|---|---|---|---|")
    base = fig["replay_serial_direct_s"]
    rows = [("serial, in-process kvtk.replay", "replay_serial_direct_s"),
            ("local, 1 worker process", "replay_local_1_s"),
            ("local, 2 worker processes", "replay_local_2_s"),
            ("local, 2 threads", "replay_thread_2_s")]
    if not args.no_ray:
        rows += [("ray, 1 CPU (Ray started)", "replay_ray_1_s"),
                 ("ray, 2 CPUs (Ray started)", "replay_ray_2_s")]
    for label, key in rows:
        if key not in fig:
            continue
        other = f"{OTHER[key]:.2f}" if key in OTHER else "n/a"
        print(f"| {label} | {fig[key]:.2f} | {base / fig[key]:.2f}x | {other} |")
    if not args.no_ray:
        print(f"\nray.init: {fig['ray_init_1_s']:.1f} s (1 CPU), {fig['ray_init_2_s']:.1f} s (2 CPUs); "
              f"first sweep after it (workers starting): {fig['replay_ray_1_first_s']:.1f} s, "
              f"{fig['replay_ray_2_first_s']:.1f} s")
    kinds = [k for k in ("local", "thread", "ray") if f"cost_{k}_1_s" in fig]
    for kind in kinds:
        fig[f"overhead_{kind}_ms"] = per(kind)
    print(f"\nper-cell overhead ({COST_CELLS} cost cells vs 1, minus {fig['cost_direct_s'] * 1e3 / COST_CELLS:.2f} ms "
          "of direct work each): " + ", ".join(f"{k} {fig[f'overhead_{k}_ms']:.2f} ms" for k in kinds))
    print("fixed cost of a sweep (a 1-cell sweep, Ray already started): "
          + ", ".join(f"{k} {fig[f'one_cell_{k}_1_s']:.3f} s" for k in kinds))
    fig["other_cpu_s"] = OTHER
    if args.json:
        Path(args.json).write_text(json.dumps(fig, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
