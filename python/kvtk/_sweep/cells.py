"""Cells: one command on one trace with one point of a run's grid.

``expand(spec)`` turns a spec into its cells, in spec order (runs, then each run's traces, then
the product of its axes, the first axis slowest). A cell's id names what it computes and nothing
about where: the first 16 hex digits of the sha256 of the canonical JSON of ``{command, trace
(the spec's name for it), options}``, with the options as written in the spec (relative paths)
and canonicalised the way kvtk.replay() & co. pass them to the library (``kvtk._options``: a
null is omitted, a list option given one value becomes a one-item list, numbers in list options
become strings). No absolute path, checksum or version goes into it.

``execute(task)`` runs one cell in a worker (a local process or thread, or a Ray task) and
returns its rows or its error; it only needs ``kvtk`` importable.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import os
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from .spec import Spec, default_options, resolve_paths

KVTB_MAGIC = b"KVTB\r\n\x1a\n"

# Keys whose values are run times (they differ between two runs of the same cell): moved out of
# the result into the row's `timing` column, so that `result` is reproducible.
VOLATILE_KEYS = ("seconds", "block_refs_per_second", "timings", "wall_s")


@dataclass
class Cell:
    id: str
    index: int                 # position in spec order
    run: int                   # the run it came from (runs[i])
    command: str
    trace: Optional[str]       # the spec's trace name (None for cost)
    axes: dict                 # axis name -> value as written (None = omitted)
    options: dict              # canonical options (the id's), paths as written
    run_options: dict = field(default_factory=dict)  # what the worker passes to the library

    def label(self) -> str:
        parts = [self.command] + ([self.trace] if self.trace else [])
        parts += [f"{k}={_short(v)}" for k, v in self.axes.items()]
        return " ".join(parts)


def _short(v: Any) -> str:
    return "null" if v is None else v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))


def canonical(command: str, options: dict) -> dict:
    """The options as the library takes them (kvtk._options), `set` as sorted "key=json" items."""
    from .. import _options

    opts = dict(options)
    sets = opts.pop("set", None) if command == "simulate" else None
    out = _options(command, opts)
    if sets:
        out["set"] = sorted(f"{k}={json.dumps(v, sort_keys=True, separators=(',', ':'))}"
                            for k, v in sets.items() if v is not None)
        if not out["set"]:
            del out["set"]
    return out


def cell_id(command: str, trace: Optional[str], canon: dict) -> str:
    text = json.dumps({"command": command, "trace": trace, "options": canon}, sort_keys=True,
                      separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def expand(spec: Spec) -> list:
    """The spec's cells in spec order; a cell that two runs both give is kept once (its first
    place)."""
    cells: list = []
    seen: set = set()
    for run in spec.runs:
        names = [a for a, _ in run.axes]
        for trace in run.traces:
            base = dict(spec.traces[trace].options) if trace else {}
            for point in itertools.product(*[values for _, values in run.axes]):
                merged = dict(base)
                merged.update(run.options)
                if "set" in merged:
                    merged["set"] = dict(merged["set"])
                for name, value in zip(names, point):
                    if name.startswith("set."):
                        merged.setdefault("set", {})[name[4:]] = value
                    elif value is None:
                        merged.pop(name, None)
                    else:
                        merged[name] = value
                canon = canonical(run.command, merged)
                cid = cell_id(run.command, trace, canon)
                if cid in seen:
                    continue
                seen.add(cid)
                run_options = canonical(run.command, resolve_paths(run.command, merged, spec.base_dir))
                if run.command == "simulate" and "requests" in default_options("simulate"):
                    run_options["requests"] = False
                cells.append(Cell(id=cid, index=len(cells), run=run.index, command=run.command,
                                  trace=trace, axes=dict(zip(names, point)), options=canon,
                                  run_options=run_options))
    return cells


def trace_checksum(path: str) -> str:
    """"kvtb:<header checksum>" for a kvtb file (its header checksum covers the payload's
    checksum and size), else "sha256:<hex>" of the whole file."""
    with open(path, "rb") as f:
        head = f.read(128)
        if len(head) == 128 and head[:8] == KVTB_MAGIC:
            return "kvtb:%016x" % struct.unpack_from("<Q", head, 120)[0]
        h = hashlib.sha256(head)
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def task_of(cell: Cell, spec: Spec, checksums: dict) -> dict:
    """What a worker needs to run a cell (plain data: it crosses a pipe or Ray)."""
    trace = spec.traces[cell.trace] if cell.trace else None
    return {"cell_id": cell.id, "command": cell.command, "options": cell.run_options,
            "trace_path": trace.path if trace else None,
            "ship": checksums[cell.trace] if trace is not None and trace.ship else None}


def _test_hooks(allow_exit: bool) -> None:
    """KVTK_SWEEP_TEST_KILL_ONCE=<marker>: the first worker to create the marker dies before
    running its cell. KVTK_SWEEP_TEST_CELL_DELAY=<s>: sleep before each cell."""
    marker = os.environ.get("KVTK_SWEEP_TEST_KILL_ONCE")
    if marker and allow_exit:
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            pass
        else:
            os.close(fd)
            os._exit(1)
    delay = os.environ.get("KVTK_SWEEP_TEST_CELL_DELAY")
    if delay:
        time.sleep(float(delay))


def _split(command: str, result: dict) -> tuple:
    """(rows, context): the command's result rows and the rest of its JSON."""
    key = {"replay": "results", "mrc": "curve", "simulate": "result"}.get(command)
    if key is None:
        return [result], {}
    context = {k: v for k, v in result.items() if k != key}
    rows = result.get(key)
    if command == "simulate":
        rows = [rows]
    return list(rows or []), context


def _take_volatile(obj: Any, timing: dict, prefix: str = "") -> Any:
    if not isinstance(obj, dict):
        return obj
    out = {}
    for k, v in obj.items():
        if k in VOLATILE_KEYS:
            timing[prefix + k] = v
        else:
            out[k] = v
    return out


def worker_name(kind: str) -> str:
    return f"{kind}:{socket.gethostname()}:{os.getpid()}"


def execute(task: dict, trace_path: Optional[str] = None, allow_exit: bool = True,
            worker: str = "") -> dict:
    """Runs one cell. Returns {"status": "ok", "rows": [(row, timing)], "context": ...} or
    {"status": "error"} (ValueError / TraceError: bad options or a bad trace, not retried) or
    {"status": "exception"} (anything else: retried), with wall_s, worker and kvtk_version."""
    import kvtk
    from .. import _kvtk

    _test_hooks(allow_exit)
    t0 = time.perf_counter()
    out: dict = {"cell_id": task["cell_id"], "worker": worker or worker_name("thread"),
                 "kvtk_version": kvtk.__version__}
    options = dict(task["options"])
    if task.get("trace_path"):
        options["trace"] = trace_path or task["trace_path"]
    try:
        if task["command"] == "simulate":
            text, _columns = _kvtk.simulate(json.dumps(options), None)
        else:
            text = _kvtk.run_command(task["command"], json.dumps(options), None)
        result = json.loads(text)
        rows, context = _split(task["command"], result)
        cell_timing: dict = {}
        context = _take_volatile(context, cell_timing)
        trace = context.get("trace")
        if isinstance(trace, dict) and task.get("trace_path") and "path" in trace:
            # The path the driver named (a shipped copy or a worker's view of it would make the
            # same cell's result differ between backends).
            context["trace"] = dict(trace, path=task["trace_path"])
        pairs = []
        for r in rows or [None]:
            timing = dict(cell_timing)
            pairs.append((_take_volatile(r, timing), timing))
        out.update(status="ok", rows=pairs, context=context)
    except ValueError as e:  # includes kvtk.TraceError
        out.update(status="error", error=f"{type(e).__name__}: {e}")
    except Exception as e:  # noqa: BLE001 - anything else costs an attempt and is retried
        out.update(status="exception", error=f"{type(e).__name__}: {e}")
    out["wall_s"] = time.perf_counter() - t0
    return out
