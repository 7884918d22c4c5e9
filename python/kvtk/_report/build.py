"""The report's steps: each a kvtk command (its exact CLI line is on the page) run through the
Python API, whose result is that command's --json. Decisions (which capacities to tune at, the
tier sizes to try, the recommended size) are made here from those results; page.py lays them out.
"""
from __future__ import annotations

import math
import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

import kvtk

from .values import Sources

ENGINES = ("vllm", "sglang")
TIER_MULTIPLES = (1, 2, 4, 8, 16, 32)  # tier sizes tried, in GPU capacities
MRC_POINTS = 24
DAYS_PER_MONTH = 30  # the tier rent's month (kvtk replay --offload: usd_per_month = 30 x per day)


class ReportError(ValueError):
    """Input the report cannot be built from (the message says why)."""


@dataclass
class Settings:
    trace: str
    engine: str = "vllm"
    gpu: str = "h200"
    model: str = "qwen2.5-7b"
    gpus: int = 1
    gpu_blocks: Optional[int] = None
    pricing: str = "deepseek-v3.2"
    gpu_hour: float = 2.0
    efficiency: float = 0.5
    dram_usd_per_gb_month: float = 2.5
    threads: int = 0

    def check(self) -> None:
        if self.engine not in ENGINES:
            raise ReportError(f"--engine {self.engine}: unknown engine (vllm or sglang)")
        if self.gpus < 1:
            raise ReportError(f"--gpus {self.gpus}: a number >= 1")
        if self.gpu_blocks is not None and self.gpu_blocks < 1:
            raise ReportError(f"--gpu-blocks {self.gpu_blocks}: a number >= 1")
        # Prices up to 1e6 USD (replay's own bound on a tier's price): beyond it the money
        # overflows to no number at all.
        for name, low, high, what in (("gpu_hour", 0.0, 1e6, "USD in [0, 1e6]"),
                                      ("dram_usd_per_gb_month", 0.0, 1e6, "USD in [0, 1e6]"),
                                      ("efficiency", 1e-6, 1.0, "a share in [1e-6, 1]")):
            v = getattr(self, name)
            if not (math.isfinite(v) and low <= v <= high):
                raise ReportError(f"--{name.replace('_', '-')} {v}: {what}")
        if self.threads < 0:
            raise ReportError(f"--threads {self.threads}: a number >= 0 (0 = one per core)")
        if self.threads == 0:
            self.threads = os.cpu_count() or 1


@dataclass
class Step:
    name: str          # the JSON file the command writes is NAME.json
    title: str
    argv: list         # the kvtk command line, from "kvtk"
    seconds: float = 0.0

    @property
    def command(self) -> str:
        return " ".join(shlex.quote(a) for a in self.argv)


@dataclass
class Report:
    settings: Settings
    sources: Sources = field(default_factory=Sources)
    steps: list = field(default_factory=list)
    notes: dict = field(default_factory=dict)      # section -> sentences about the input
    arrivals: Optional[np.ndarray] = None           # arrival times (s)
    reuse: Optional[np.ndarray] = None              # reuse distances in block references
    gpu_blocks: int = 0
    block_bytes: float = 0.0
    saturation: int = 0
    tune_caps: list = field(default_factory=list)
    tier_sizes: list = field(default_factory=list)  # offload rows 1.. (row 0: the GPU alone)
    best_row: int = 0

    def note(self, section: str, text: str) -> None:
        self.notes.setdefault(section, []).append(text)


Log = Callable[[str], Any]


def stderr_log(line: str) -> None:
    print(f"kvtk report: {line}", file=sys.stderr, flush=True)


def build_report(settings: Settings, log: Optional[Log] = None) -> Report:
    """Runs every step on the trace and returns what the page shows. Raises ReportError."""
    settings.check()
    rep = Report(settings)
    log = log or (lambda line: None)
    trace = settings.trace
    _call("cost", kvtk.cost, hit_ratio=0.0, input_tokens=1, pricing=settings.pricing)  # fail early
    steps = [_stats, _capacity, _mrc, _tune, _offload, _cost]
    for i, run in enumerate(steps, 1):
        started = time.perf_counter()
        step = run(rep, trace, lambda title: log(f"[{i}/{len(steps)}] {title} ..."))
        if step is not None:
            step.seconds = time.perf_counter() - started
            rep.steps.append(step)
            log(f"[{i}/{len(steps)}] {step.title}: {step.seconds:.1f} s")
    return rep


def _call(what: str, fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except kvtk.TraceError as e:
        raise ReportError(str(e)) from None
    except ValueError as e:
        hint = (" (kvtk report: --gpus N, or --gpu-blocks N)"
                if "gpus_per_instance" in str(e) else "")
        raise ReportError(f"{what}: {e}{hint}") from None


def _stats(rep: Report, trace: str, start: Log) -> Step:
    step = Step("stats", "the trace at a glance (trace stats)",
                ["kvtk", "trace", "stats", "--trace", trace, "--json", "stats.json"])
    start(step.title)
    stats = _call("trace stats", kvtk.trace_stats, trace)
    rep.sources.docs["stats"] = stats
    if stats["requests"] < 2:
        raise ReportError(f"{trace}: {stats['requests']} request(s); a report needs at least 2 "
                          "(tune chooses a policy on one part of the trace and shows it on the rest)")
    if stats["block_refs"] == 0:
        raise ReportError(f"{trace}: no prompt fills one block of {stats['trace']['block_tokens']} "
                          "tokens, so nothing is cacheable")
    if not stats.get("span_s"):
        raise ReportError(f"{trace}: no arrival times (or all at one instant); a report needs "
                          "them: the GPU's capacity comes from kvtk simulate and money is per day")
    t = _call("load", kvtk.load_trace, trace)
    rep.arrivals = np.asarray(t.arrival_s, dtype=float)
    rep.reuse = reuse_distances(t)
    return step


def reuse_distances(t) -> np.ndarray:
    """Per reference to a block seen before, the references since its previous one, over the
    cacheable blocks (a prompt's full blocks: kvtk trace stats' definition, partial_block skip)."""
    offsets = np.asarray(t.block_offsets, dtype=np.int64)
    keys = np.asarray(t.block_keys)
    counts = np.diff(offsets)
    full = np.minimum(np.asarray(t.input_tokens, dtype=np.int64) // t.block_tokens, counts)
    take = np.repeat(np.arange(len(counts)), counts)
    within = np.arange(len(keys)) - np.repeat(offsets[:-1], counts)
    stream = keys[within < full[take]]
    order = np.argsort(stream, kind="stable")
    ordered = stream[order]
    again = ordered[1:] == ordered[:-1]
    return (order[1:][again] - order[:-1][again]).astype(np.int64)


def _capacity(rep: Report, trace: str, start: Log) -> Step:
    s = rep.settings
    sets = {"engine": s.engine, "gpu": s.gpu, "model": s.model, "gpus_per_instance": s.gpus,
            "max_output_tokens": 1}
    if s.gpu_blocks is not None:
        sets["num_gpu_blocks_override"] = s.gpu_blocks
    argv = ["kvtk", "simulate", "--trace", trace]
    for k, v in sets.items():
        argv += ["--set", f"{k}={v}"]
    step = Step("capacity", f"the GPU's KV capacity ({s.engine}, {s.gpus}x {s.gpu}, {s.model})",
                argv + ["--json", "capacity.json"])
    start(step.title)
    sim = _call("simulate", kvtk.simulate, trace, requests=False, **sets)
    sim.pop("requests", None)
    rep.sources.docs["capacity"] = sim
    cap = sim["result"]["kv_capacity"]
    rep.gpu_blocks = int(cap["blocks"])  # >= 1: simulate refuses a model that leaves none
    rep.block_bytes = cap["bytes"] / cap["blocks"]
    return step


def _mrc(rep: Report, trace: str, start: Log) -> Step:
    step = Step("mrc", "hit ratio against capacity: exact LRU and the optimum (mrc --opt)",
                ["kvtk", "mrc", "--trace", trace, "--opt", "--points", str(MRC_POINTS),
                 "--json", "mrc.json"])
    start(step.title)
    rep.sources.docs["mrc"] = _call("mrc", kvtk.mrc, trace, opt=True, points=MRC_POINTS)
    rep.saturation = int(rep.sources.docs["mrc"]["trace"]["saturation_blocks"])
    if rep.gpu_blocks >= rep.saturation:
        rep.note("capacity", f"The GPU's {rep.gpu_blocks:,} blocks are at least the trace's "
                 f"working set ({rep.saturation:,} blocks, where LRU stops missing but for first "
                 "references): beyond it a larger cache adds no hit, so no tier is tried.")
    return step


def tune_capacities(gpu_blocks: int, saturation: int) -> list:
    """The GPU's capacity and three round ones across the curve, all under the saturation; a
    round one within 10 % of the GPU's adds nothing to see and is left out."""
    caps = {gpu_blocks} if gpu_blocks < saturation else set()
    for share in (0.02, 0.1, 0.4):
        c = saturation * share
        if c >= 1:
            e = 10 ** max(0, int(math.floor(math.log10(c))) - 1)
            c = max(1, int(round(c / e) * e))
            if not (gpu_blocks < saturation and abs(c - gpu_blocks) <= 0.1 * gpu_blocks):
                caps.add(c)
    return sorted(c for c in caps if c < saturation)


def _tune(rep: Report, trace: str, start: Log) -> Optional[Step]:
    rep.tune_caps = tune_capacities(rep.gpu_blocks, rep.saturation)
    if not rep.tune_caps:
        rep.note("capacity", "The working set is at most one block: there is no capacity to "
                 "tune a policy at.")
        return None
    step = Step("tune", "the best online policy, chosen on the first half (tune)",
                ["kvtk", "tune", "--trace", trace, "--capacity", ",".join(map(str, rep.tune_caps)),
                 "--threads", str(rep.settings.threads), "--json", "tune.json"])
    start(step.title)
    rep.sources.docs["tune"] = _call("tune", kvtk.tune, trace, capacity=rep.tune_caps,
                                     threads=rep.settings.threads)
    return step


def tier_sizes(gpu_blocks: int, saturation: int, engine: str = "vllm") -> list:
    """Lower-tier sizes in blocks: multiples of the GPU's capacity under the working set, then
    the working set itself (a tier that holds every block the trace reuses). SGLang's host pool
    must be larger than the device pool (its HostKVCache asserts it), so SGLang starts at 2x."""
    if gpu_blocks >= saturation:
        return []
    least = 2 if engine == "sglang" else 1
    sizes = [gpu_blocks * m for m in TIER_MULTIPLES if m >= least and gpu_blocks * m < saturation]
    return sizes + [max(saturation, least * gpu_blocks)]


def _offload(rep: Report, trace: str, start: Log) -> Step:
    s = rep.settings
    rep.tier_sizes = tier_sizes(rep.gpu_blocks, rep.saturation, s.engine)
    medium = "cpu" if s.engine == "vllm" else "host"
    price = repr(float(s.dram_usd_per_gb_month))
    specs = [f"{medium}:{n}:lru:{price}" for n in rep.tier_sizes]
    argv = ["kvtk", "replay", "--trace", trace, "--engine", s.engine,
            "--capacity", str(rep.gpu_blocks), "--no-opt", "--model", s.model]
    for spec in specs:
        argv += ["--offload", spec]
    step = Step("offload", f"tier what-if: {s.engine}'s own offloading at {len(specs)} sizes "
                "(replay --offload)", argv + ["--threads", str(s.threads), "--json", "offload.json"])
    start(step.title)
    result = _call("replay", kvtk.replay, trace, engine=[s.engine], capacity=[rep.gpu_blocks],
                   opt=False, model=s.model, offload=specs, threads=s.threads)
    rep.sources.docs["offload"] = result.result
    if len(result) != len(specs) + 1:
        raise ReportError(f"replay returned {len(result)} rows for {len(specs)} tier sizes")
    lost = max(r.get("engine_state", {}).get("unscheduled_requests", 0) for r in result)
    if lost:
        for section in ("tiers", "money"):
            rep.note(section, f"{lost:,} requests never ran in the engine's replay: their "
                     f"prompts need more blocks than the GPU's {rep.gpu_blocks:,}. They count as "
                     "misses in every row and in the money; a real engine would refuse them.")
    return step


def _cost(rep: Report, trace: str, start: Log) -> Step:
    s = rep.settings
    argv = ["kvtk", "cost", "--from", "offload.json", "--per-day"]
    argv += ["--model", s.model, "--gpu", s.gpu, "--gpu-hour", repr(float(s.gpu_hour)),
             "--efficiency", repr(float(s.efficiency)), "--pricing", s.pricing, "--json", "cost.json"]
    step = Step("cost", "money per day of each row (cost)", argv)
    start(step.title)
    # gpus_per_instance is a simulate key; the cost of GPU time is per GPU-hour of work done.
    cost = _call("cost", kvtk.cost, from_result=rep.sources.docs["offload"], per_day=True,
                 model=s.model, gpu=s.gpu, gpu_hour=float(s.gpu_hour),
                 efficiency=float(s.efficiency), pricing=s.pricing)
    rep.sources.docs["cost"] = cost
    nets = [e["self_hosted"]["net_usd"] for e in cost["estimates"]]
    if not all(isinstance(n, (int, float)) and math.isfinite(n) for n in nets):
        raise ReportError(f"cost: a net of {nets} is not a finite number (prices or efficiency "
                          "out of range)")
    rep.best_row = recommended_row(nets)
    return step


NET_TOLERANCE = 0.01  # a larger tier for under 1 % more net is not worth its memory


def recommended_row(nets: list) -> int:
    """The smallest row (rows go GPU alone, then tiers by size) whose net is within 1 % of the
    highest net; the GPU alone's net is GPU time saved with no rent, so the highest is >= 0."""
    top = max(nets)
    return next(i for i, n in enumerate(nets) if n >= top - NET_TOLERANCE * abs(top))
