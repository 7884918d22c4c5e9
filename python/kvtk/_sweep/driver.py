"""The driver: spec -> cells -> a backend, with every finished cell's rows written at once."""
from __future__ import annotations

import datetime
import os
import sys
import time
from typing import Any, Callable, Optional, Union

from . import cells as cells_mod
from .output import Output, OutputError, columns_for, dumps, promote
from .spec import Spec, load_spec

BACKENDS = ("local", "ray")


class SweepSummary:
    """What a sweep did: counts of cells by status, and the rows (when kept in memory)."""

    def __init__(self, cells: int, skipped: int):
        self.cells = cells
        self.skipped = skipped      # already in the output (resume)
        self.ok = self.error = self.failed = 0
        self.kept_error = 0         # resumed cells whose kept rows are errors
        self.rows: list = []
        self.path: Optional[str] = None
        self.versions: set = set()

    @property
    def complete(self) -> bool:
        return self.error == 0 and self.failed == 0 and self.kept_error == 0


def _axis_value(v: Any) -> Optional[str]:
    return None if v is None else v if isinstance(v, str) else dumps(v)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def make_rows(cell, spec: Spec, out: dict, attempts: int, checksum: Optional[str],
              axes: list) -> list:
    """The output rows of one cell's last outcome."""
    trace = spec.traces[cell.trace] if cell.trace else None
    base = {"cell_id": cell.id, "command": cell.command, "trace": cell.trace,
            "trace_path": trace.path if trace else None, "trace_checksum": checksum,
            "kvtk_version": out.get("kvtk_version"), "params": dumps(cell.options)}
    for a in axes:
        base[a] = _axis_value(cell.axes[a]) if a in cell.axes else None
    base.update(status=out["status"], error=out.get("error"), attempts=attempts,
                worker=out.get("worker"), wall_s=out.get("wall_s"), finished_at=_now())
    if out["status"] != "ok":
        return [dict(base, row=0, cell_rows=1, timing=None, context=None, result=None,
                     **promote(None, None))]
    rows = []
    pairs = out["rows"]
    context = out.get("context") or {}
    for i, (row, timing) in enumerate(pairs):
        rows.append(dict(base, row=i, cell_rows=len(pairs), timing=dumps(timing),
                         context=dumps(context), result=dumps(row), **promote(row, context)))
    return rows


def _done(rows: list, checksum: Optional[str]) -> bool:
    """Whether a resumed cell's rows are final: complete, ok or error (error = bad input, the
    same next time), and computed on the same trace."""
    if not rows or rows[0].get("status") not in ("ok", "error"):
        return False
    if rows[0].get("trace_checksum") != checksum:
        return False
    n = rows[0].get("cell_rows") or 0
    return n == len(rows) and sorted(r.get("row") for r in rows) == list(range(n))


def run_sweep(spec: Union[str, "os.PathLike[str]", dict, Spec], backend: str = "local",
              out: Optional[str] = None, workers: int = 0, address: Optional[str] = None,
              resume: bool = False, force: bool = False, retries: Optional[int] = None,
              pool: str = "process", log: Optional[Callable[[str], Any]] = None) -> SweepSummary:
    """Runs a sweep; see kvtk.sweep(). `log` gets one line per finished cell (None: quiet)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend: {' or '.join(BACKENDS)}, not {backend!r}")
    if address and backend != "ray":
        raise ValueError("address goes with backend='ray'")
    if not isinstance(spec, Spec):
        spec = load_spec(spec, retries=retries)
    elif retries is not None:
        spec.retries = retries
    cells = cells_mod.expand(spec)
    axes = spec.axis_names()
    columns = columns_for(axes)
    used = {c.trace for c in cells if c.trace}
    checksums = {name: cells_mod.trace_checksum(spec.traces[name].path) for name in used}

    output = Output(out, columns, resume=resume, force=force) if out else None
    previous = output.cells if output else {}
    todo = [c for c in cells if not _done(previous.get(c.id, []), checksums.get(c.trace))]
    summary = SweepSummary(cells=len(cells), skipped=len(cells) - len(todo))
    # Cells kept from a resumed output count as what they are: an error row still makes the
    # sweep incomplete (exit status 1), as it did when it was written.
    todo_ids = {c.id for c in todo}
    summary.kept_error = sum(1 for c in cells if c.id not in todo_ids and
                             (previous.get(c.id) or [{}])[0].get("status") == "error")
    summary.path = output.path if output else None
    kept: dict = {}
    by_id = {c.id: c for c in cells}
    order = [c.id for c in cells]
    stop_after = int(os.environ.get("KVTK_SWEEP_TEST_INTERRUPT_AFTER") or 0)
    written = [0]
    started = time.monotonic()
    if log and summary.skipped:
        log(f"kvtk sweep: {summary.skipped} of {len(cells)} cells already in {output.path}")

    def report(task: dict, outcome: dict, attempts: int) -> None:
        cell = by_id[task["cell_id"]]
        rows = make_rows(cell, spec, outcome, attempts, checksums.get(cell.trace), axes)
        if output:
            output.add(cell.id, rows)
        else:
            kept[cell.id] = rows
        status = outcome["status"]
        setattr(summary, status, getattr(summary, status) + 1)
        if outcome.get("kvtk_version"):
            summary.versions.add(outcome["kvtk_version"])
        if log:
            done = summary.ok + summary.error + summary.failed
            tail = f" ({outcome.get('wall_s', 0):.2f} s)" if status == "ok" else f": {outcome.get('error')}"
            tries = f", attempt {attempts}" if attempts > 1 else ""
            log(f"[{done}/{len(todo)}] {cell.label()}: {status}{tries}{tail}")
        written[0] += len(rows)
        if stop_after and written[0] >= stop_after:
            raise KeyboardInterrupt(f"KVTK_SWEEP_TEST_INTERRUPT_AFTER={stop_after}")

    tasks = [cells_mod.task_of(c, spec, checksums) for c in todo]
    try:
        if tasks:
            if backend == "local":
                from . import local

                local.run(tasks, spec.retries, report, workers=workers, pool=pool)
            else:
                from . import ray_backend

                ship = {checksums[n]: spec.traces[n].path for n in used if spec.traces[n].ship}
                ray_backend.run(tasks, spec.retries, report, workers=workers, address=address,
                                ship=ship)
    finally:
        if output:
            output.close(order)
    import kvtk

    others = summary.versions - {kvtk.__version__}
    if others and log:
        log(f"kvtk sweep: warning: workers ran kvtk {', '.join(sorted(summary.versions))}; "
            f"this driver is {kvtk.__version__}")
    if log:
        log(f"kvtk sweep: {summary.ok} ok, {summary.error} error, {summary.failed} failed"
            + (f", {summary.skipped} already done" if summary.skipped else "")
            + f" in {time.monotonic() - started:.1f} s"
            + (f" -> {output.path}" if output else ""))
    if not output:
        summary.rows = [r for cid in order if cid in kept for r in kept[cid]]
    return summary


def stderr_log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


__all__ = ["run_sweep", "SweepSummary", "OutputError", "stderr_log"]
