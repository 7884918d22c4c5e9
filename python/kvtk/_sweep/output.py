"""A sweep's output file: JSONL or Parquet, one row per result row, valid at every moment.

JSONL: each cell's rows are appended in one unbuffered write of complete lines. A crash can
leave at most a torn last line, which reading drops (and --resume cuts off). Parquet (pyarrow):
rows go to ``<out>.journal.jsonl`` the same way, and the Parquet file is rewritten from all rows
so far (temporary + rename) every 30 s or 256 rows (less often once a rewrite takes long: at
most a tenth of the time goes to rewriting) and on close, so it is always a complete file; reading merges the journal that a crash left behind. On close both are rewritten in spec
order. Columns: docs/sweeps.md "Output".
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Iterable, Optional

HEAD = ["cell_id", "row", "cell_rows", "command", "trace", "trace_path", "trace_checksum",
        "kvtk_version", "params"]
TAIL = ["status", "error", "attempts", "worker", "wall_s", "finished_at", "timing"]
# Promoted numeric columns: (column, paths tried in the row, then "context." paths in the rest
# of the command's JSON). Absent or non-numeric values are null.
PROMOTED = [
    ("capacity_blocks", ["capacity_blocks"]),
    ("block_hit_ratio", ["block_hit_ratio"]),
    ("token_hit_ratio", ["token_hit_ratio"]),
    ("opt_fraction", ["opt_fraction"]),
    ("bound_fraction", ["bound_fraction"]),
    ("opt_block_hit_ratio", ["opt_block_hit_ratio"]),
    ("opt_token_hit_ratio", ["opt_token_hit_ratio"]),
    ("ideal_block_hit_ratio", ["context.trace.ideal_block_hit_ratio"]),
    ("ideal_token_hit_ratio", ["context.trace.ideal_token_hit_ratio"]),
    ("ttft_mean_s", ["ttft_s.mean"]),
    ("ttft_p50_s", ["ttft_s.p50"]),
    ("ttft_p90_s", ["ttft_s.p90"]),
    ("ttft_p99_s", ["ttft_s.p99"]),
    ("tbt_mean_s", ["tbt_s.mean"]),
    ("tbt_p50_s", ["tbt_s.p50"]),
    ("tbt_p90_s", ["tbt_s.p90"]),
    ("tbt_p99_s", ["tbt_s.p99"]),
    ("e2e_mean_s", ["e2e_s.mean"]),
    ("e2e_p50_s", ["e2e_s.p50"]),
    ("e2e_p99_s", ["e2e_s.p99"]),
    ("queueing_mean_s", ["queueing_s.mean"]),
    ("throughput_requests_per_s", ["throughput_requests_per_s"]),
    ("goodput_requests_per_s", ["goodput_requests_per_s"]),
    ("output_tokens_per_s", ["output_tokens_per_s"]),
    ("gpu_busy_fraction", ["gpu_busy_fraction"]),
    ("rejected", ["rejected"]),
    ("bill_usd", ["bill_usd", "cost.bill_usd", "context.cost.bill_usd"]),
    ("bill_without_cache_usd", ["bill_without_cache_usd", "cost.bill_without_cache_usd",
                                "context.cost.bill_without_cache_usd"]),
    ("saving_usd", ["saving_usd", "cost.saving_usd", "context.cost.saving_usd"]),
    ("saving_fraction", ["saving_fraction", "cost.saving_fraction", "context.cost.saving_fraction"]),
]
LAST = ["context", "result"]
INT_COLUMNS = {"row", "cell_rows", "attempts"}
FLOAT_COLUMNS = {"wall_s"} | {name for name, _ in PROMOTED}
VOLATILE_COLUMNS = ("worker", "wall_s", "finished_at", "timing")
RESERVED_COLUMNS = set(HEAD) | set(TAIL) | set(LAST) | FLOAT_COLUMNS

PARQUET_EVERY_S = 30.0
PARQUET_EVERY_ROWS = 256


class OutputError(ValueError):
    """The output cannot be used as asked (exists without resume/force, unreadable, ...)."""


def columns_for(axes: Iterable[str]) -> list:
    return HEAD + list(axes) + TAIL + [name for name, _ in PROMOTED] + LAST


def _lookup(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def promote(row: Any, context: Any) -> dict:
    out = {}
    source = {"context": context or {}}
    if isinstance(row, dict):
        source = dict(row, context=context or {})
    for name, paths in PROMOTED:
        value = None
        for p in paths:
            v = _lookup(source, p)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                value = float(v)
                break
        out[name] = value
    return out


def dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _line(row: dict) -> str:
    """One output line: the row's columns in order, as compact JSON."""
    return json.dumps(row, separators=(",", ":"), ensure_ascii=False) + "\n"


def format_of(path: str) -> str:
    lower = path.lower()
    if lower.endswith((".parquet", ".pq")):
        return "parquet"
    if lower.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    raise OutputError(f"{path}: the output's name ends in .jsonl or .parquet (its format)")


def _read_jsonl(path: str, cut: bool) -> list:
    """Rows of a JSONL file. A torn last line (no newline, or not JSON) is dropped and, with
    cut, removed from the file. A bad line before the last is an error."""
    with open(path, "rb") as f:
        data = f.read()
    rows, good_end, pos, lineno = [], 0, 0, 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        lineno += 1
        line = data[pos:] if nl < 0 else data[pos:nl]
        end = len(data) if nl < 0 else nl + 1
        try:
            row = json.loads(line) if line.strip() else None
        except ValueError:
            row = False
        if row is False or nl < 0:
            if end >= len(data) and rows:  # the last line after sweep rows: torn by a crash
                break
            if end >= len(data):  # no sweep row before it: some other file, left untouched
                raise OutputError(f"{path}:{lineno}: not a sweep row (the file is not a sweep "
                                  f"output; nothing was changed)")
            raise OutputError(f"{path}:{lineno}: not a JSON row (the file is not a sweep output)")
        if row is not None:
            if not isinstance(row, dict) or "cell_id" not in row:
                raise OutputError(f"{path}:{lineno}: not a sweep row (no cell_id)")
            rows.append(row)
        good_end, pos = end, end
    if cut and good_end < len(data):
        with open(path, "r+b") as f:
            f.truncate(good_end)
    return rows


def _write_atomic(path: str, write) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _arrow_schema(columns: list):
    import pyarrow as pa

    def kind(c):
        return pa.int64() if c in INT_COLUMNS else pa.float64() if c in FLOAT_COLUMNS else pa.string()
    return pa.schema([(c, kind(c)) for c in columns])


def _write_parquet(path: str, columns: list, rows: list) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist([{c: r.get(c) for c in columns} for r in rows],
                                 schema=_arrow_schema(columns))
    _write_atomic(path, lambda tmp: pq.write_table(table, tmp))


def _import_pyarrow(path: str):
    try:
        import pyarrow.parquet as pq  # optional dependency (pip install ./python[sweep])
    except ImportError:
        raise OutputError(f"{path}: writing Parquet needs pyarrow (pip install pyarrow, or pip "
                          f"install ./python[sweep]); or name a .jsonl output") from None
    return pq


def read_rows(path: str) -> list:
    """A sweep output's rows as dicts (a Parquet file's leftover journal is merged in)."""
    path = os.fspath(path)
    if format_of(path) == "jsonl":
        return _read_jsonl(path, cut=False)
    pq = _import_pyarrow(path)
    rows = pq.read_table(path).to_pylist() if os.path.exists(path) else []
    journal = path + ".journal.jsonl"
    if os.path.exists(journal):
        rows = _merge(rows, _read_jsonl(journal, cut=False))
    if not rows and not os.path.exists(path):
        raise OutputError(f"{path}: no such sweep output")
    return rows


def _merge(old: list, new: list) -> list:
    """old rows, with each cell's rows replaced by its rows in new (the later write wins)."""
    by_cell: dict = {}
    for r in old:
        by_cell.setdefault(r["cell_id"], []).append(r)
    fresh: dict = {}
    for r in new:
        fresh.setdefault(r["cell_id"], []).append(r)
    for cid, rows in fresh.items():
        # A cell's rows are written together; keep its last complete write.
        n = rows[-1].get("cell_rows") or len(rows)
        by_cell[cid] = rows[-n:] if len(rows) >= n else rows
    return [r for rows in by_cell.values() for r in rows]


class Output:
    """The open output of one sweep run. Rows are kept per cell (dict, spec order applied on
    close); ``cells`` holds what was read back on resume."""

    def __init__(self, path: str, columns: list, resume: bool = False, force: bool = False):
        self.path = os.path.abspath(os.fspath(path))
        self.format = format_of(self.path)
        self.columns = columns
        self.journal = self.path + ".journal.jsonl" if self.format == "parquet" else None
        self.cells: dict = {}
        self._since_rewrite = 0
        self._last_rewrite = time.monotonic()
        self._rewrite_s = 0.0
        self._file = None
        if self.format == "parquet":
            _import_pyarrow(self.path)
        parent = Path(self.path).parent
        if not parent.is_dir():
            raise OutputError(f"{self.path}: no such directory {parent}")
        present = [p for p in (self.path, self.journal) if p and os.path.exists(p)]
        if present and not (resume or force):
            raise OutputError(f"{present[0]} exists: --resume continues the sweep it holds, "
                              f"--force replaces it")
        if present and force and not resume:
            for p in present:
                os.unlink(p)
            present = []
        rows: list = []
        if present:
            try:
                rows = _read_jsonl(self.path, cut=True) if self.format == "jsonl" else read_rows(self.path)
            except OutputError:
                raise
            except Exception as e:  # noqa: BLE001 - e.g. pyarrow's ArrowInvalid for a non-Parquet file
                raise OutputError(f"{self.path}: cannot read it as a sweep output to resume "
                                  f"({type(e).__name__}: {e})") from None
        # Columns the existing rows have and this spec does not (an axis dropped from the
        # grid) are kept, so resuming never deletes what the file held.
        known = set(self.columns)
        for r in rows:
            for k in r:
                if k not in known:
                    known.add(k)
                    self.columns = list(self.columns) + [k]
        for r in _merge([], rows):
            self.cells.setdefault(r["cell_id"], []).append(self._fit(r))
        if self.format == "parquet":
            if present:
                self._rewrite(list(self.cells))  # fold the journal in, then start a fresh one
            self._file = open(self.journal, "wb", buffering=0)
        else:
            self._file = open(self.path, "ab", buffering=0)

    def _fit(self, row: dict) -> dict:
        return {c: row.get(c) for c in self.columns}

    def add(self, cell_id: str, rows: list) -> None:
        """Writes one cell's rows (replacing any it had): one write of complete lines."""
        rows = [self._fit(r) for r in rows]
        data = memoryview("".join(_line(r) for r in rows).encode("utf-8"))
        while data:  # a short write (a full disk) must not leave half a line unnoticed
            n = self._file.write(data)
            if not n:
                raise OSError(f"{self._file.name}: short write")
            data = data[n:]
        self.cells[cell_id] = rows
        if self.format == "parquet":
            self._since_rewrite += len(rows)
            # Each rewrite costs time in proportion to all rows so far: rewrite after 256 new rows
            # or 30 s, but never spend more than a tenth of the time rewriting (a big sweep's
            # file is rewritten less often; the journal keeps every row meanwhile).
            since = time.monotonic() - self._last_rewrite
            if ((self._since_rewrite >= PARQUET_EVERY_ROWS or since >= PARQUET_EVERY_S)
                    and since >= 10 * self._rewrite_s):
                self._rewrite(list(self.cells))

    def _ordered(self, order: list) -> list:
        seen = set(order)
        ids = [c for c in order if c in self.cells] + [c for c in self.cells if c not in seen]
        return [r for c in ids for r in self.cells[c]]

    def _rewrite(self, order: list) -> None:
        t0 = time.monotonic()
        _write_parquet(self.path, self.columns, self._ordered(order))
        self._rewrite_s = time.monotonic() - t0
        if self._file is not None:
            self._file.truncate(0)
            self._file.seek(0)
        self._since_rewrite = 0
        self._last_rewrite = time.monotonic()

    def close(self, order: list) -> None:
        """Rewrites the file with every row in `order` (cell ids; cells not in it go last)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        rows = self._ordered(order)
        if self.format == "parquet":
            _write_parquet(self.path, self.columns, rows)
            if os.path.exists(self.journal):
                os.unlink(self.journal)
        else:
            def write(tmp):
                with open(tmp, "wb") as f:
                    f.write("".join(_line(r) for r in rows).encode("utf-8"))
            _write_atomic(self.path, write)
