"""Loading and checking a sweep spec (JSON, or YAML through PyYAML).

Every problem raises SpecError naming the spec and the place: ``sweep.yaml: runs[1].grid.polcy:
unknown option (known: ...)``. Option names are checked against the options the installed kvtk
library knows (``_kvtk.default_options(command)``); option values are checked by the library
itself when a cell runs (a bad value gives that cell an ``error`` row). docs/sweeps.md has the
schema.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from .. import _kvtk

COMMANDS = ("replay", "mrc", "simulate", "cost")
TRACE_COMMANDS = ("replay", "mrc", "simulate")

TOP_KEYS = ("version", "description", "traces", "runs", "retries")
RUN_KEYS = ("command", "traces", "options", "grid", "config", "description")
TRACE_KEYS = ("path", "ship", "format", "block_tokens", "skip_invalid")

# Options a sweep sets itself or that would write files from inside a cell.
FORBIDDEN = {"trace": "name the traces with the run's 'traces' list",
             "csv": "a sweep cell writes no per-request file",
             "force": "a sweep cell writes no file",
             "requests": "a sweep keeps no per-request outcomes",
             "output": "a sweep cell writes no file"}

# Option values that are always file paths (relative to the spec file), and those that are paths
# when they end in .json (otherwise preset names).
PATH_OPTIONS = ("config_file", "calibration", "timing_table", "tier_config", "from")
JSON_PATH_OPTIONS = ("pricing", "model", "gpu")


class SpecError(ValueError):
    """A sweep spec that cannot be run; the message names the spec and the place."""


@dataclass
class TraceSpec:
    name: str
    path: str                  # absolute, as the driver sees it
    ship: bool = False         # Ray: send the file through the object store
    options: dict = field(default_factory=dict)   # format, block_tokens, skip_invalid


@dataclass
class RunSpec:
    index: int
    command: str
    traces: list               # trace names; [None] for cost
    options: dict              # as written (paths relative to the spec file)
    axes: list                 # [(axis name, [values])]; "set.KEY" for simulate's set grid


@dataclass
class Spec:
    source: str                # the spec file, or "<spec>" for a dict
    base_dir: Path             # relative paths are relative to this
    traces: dict               # name -> TraceSpec
    runs: list                 # RunSpec
    retries: int = 2
    description: str = ""

    def axis_names(self) -> list:
        """Every axis of every run, in first-seen order (the sweep's parameter columns)."""
        names: list = []
        for run in self.runs:
            for name, _ in run.axes:
                if name not in names:
                    names.append(name)
        return names


_defaults: dict = {}


def default_options(command: str) -> dict:
    if command not in _defaults:
        _defaults[command] = json.loads(_kvtk.default_options(command))
    return _defaults[command]


def _fail(source: str, where: str, problem: str) -> SpecError:
    return SpecError(f"{source}: {where}: {problem}" if where else f"{source}: {problem}")


def _read(path: Path) -> Any:
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SpecError(f"{source}: cannot read the spec: {e.strerror or e}") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml  # optional dependency (pip install ./python[sweep])
        except ImportError:
            raise SpecError(f"{source}: reading a YAML spec needs PyYAML (pip install pyyaml, or "
                            f"pip install ./python[sweep]); or write the spec as JSON") from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
            raise SpecError(f"{source}: {where}not valid YAML: "
                            f"{getattr(e, 'problem', None) or e}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecError(f"{source}: line {e.lineno}, column {e.colno}: not valid JSON: {e.msg}") from None


def _known(allowed) -> str:
    return ", ".join(sorted(k for k in allowed if k not in FORBIDDEN))


def _check_option_name(source: str, where: str, command: str, name: Any) -> None:
    if not isinstance(name, str):
        raise _fail(source, where, "option names are strings")
    if name in FORBIDDEN:
        raise _fail(source, where, f"not allowed in a sweep ({FORBIDDEN[name]})")
    defaults = default_options(command)
    if name not in defaults:
        raise _fail(source, where, f"unknown option (known for {command}: "
                    f"{_known(defaults)})")


def _check_set(source: str, where: str, value: Any, grid: bool) -> dict:
    if not isinstance(value, dict):
        raise _fail(source, where, "must be a mapping of cluster config keys to "
                    + ("lists of values" if grid else "values"))
    for k, v in value.items():
        if not isinstance(k, str) or not k or "=" in k:
            raise _fail(source, f"{where}.{k}", "not a config key")
        if grid:
            _check_axis_values(source, f"{where}.{k}", v)
    return value


def _check_axis_values(source: str, where: str, values: Any) -> None:
    if not isinstance(values, list):
        raise _fail(source, where, "a grid axis is a list of values (null = option omitted)")
    if not values:
        raise _fail(source, where, "a grid axis needs at least one value")


def _trace(source: str, base: Path, name: Any, value: Any) -> TraceSpec:
    where = f"traces.{name}"
    if not isinstance(name, str) or not name:
        raise _fail(source, "traces", "trace names are non-empty strings")
    if isinstance(value, (str, os.PathLike)):
        value = {"path": os.fspath(value)}
    if not isinstance(value, dict):
        raise _fail(source, where, "a path, or a mapping with 'path' (and 'ship', 'format', "
                    "'block_tokens', 'skip_invalid')")
    for k in value:
        if k not in TRACE_KEYS:
            raise _fail(source, f"{where}.{k}", f"unknown key (known: {', '.join(TRACE_KEYS)})")
    path = value.get("path")
    if not isinstance(path, str) or not path:
        raise _fail(source, f"{where}.path", "a trace file path is required")
    full = Path(path).expanduser()
    if not full.is_absolute():
        full = base / full
    full = Path(os.path.abspath(full))
    if not full.is_file():
        raise _fail(source, f"{where}.path", f"no such file: {full}")
    ship = value.get("ship", False)
    if not isinstance(ship, bool):
        raise _fail(source, f"{where}.ship", "true or false")
    options = {k: value[k] for k in ("format", "block_tokens", "skip_invalid") if k in value}
    return TraceSpec(name=name, path=str(full), ship=ship, options=options)


def _run(source: str, i: int, value: Any, traces: dict) -> RunSpec:
    where = f"runs[{i}]"
    if not isinstance(value, dict):
        raise _fail(source, where, "a run is a mapping with 'command' (and 'traces', 'options', "
                    "'grid', 'config')")
    for k in value:
        if k not in RUN_KEYS:
            raise _fail(source, f"{where}.{k}", f"unknown key (known: {', '.join(RUN_KEYS)})")
    command = value.get("command")
    if command not in COMMANDS:
        raise _fail(source, f"{where}.command",
                    f"unknown command {command!r} (a sweep runs: {', '.join(COMMANDS)})")

    names = value.get("traces")
    if command in TRACE_COMMANDS:
        if names is None:
            raise _fail(source, f"{where}.traces", f"{command} needs a list of trace names")
        if isinstance(names, str):
            names = [names]
        if not isinstance(names, list) or not names:
            raise _fail(source, f"{where}.traces", "a non-empty list of trace names")
        for j, n in enumerate(names):
            if n not in traces:
                raise _fail(source, f"{where}.traces[{j}]", f"unknown trace {n!r} (the spec's "
                            f"traces: {', '.join(traces) or 'none'})")
        if len(set(names)) != len(names):
            raise _fail(source, f"{where}.traces", "a trace is listed twice")
    else:
        if names is not None:
            raise _fail(source, f"{where}.traces", f"{command} reads no trace")
        names = [None]

    options = value.get("options", {})
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise _fail(source, f"{where}.options", "a mapping of option names to values")
    options = dict(options)
    for k, v in options.items():
        if command == "simulate" and k == "set":
            _check_set(source, f"{where}.options.set", v, grid=False)
            continue
        _check_option_name(source, f"{where}.options.{k}", command, k)

    config = value.get("config")
    if config is not None:
        if command != "simulate":
            raise _fail(source, f"{where}.config", "only simulate takes a cluster config")
        key = "config" if isinstance(config, dict) else "config_file"
        if not isinstance(config, (dict, str)):
            raise _fail(source, f"{where}.config", "a config file path or a mapping of config keys")
        if key in options:
            raise _fail(source, f"{where}.config", f"given twice (also options.{key})")
        options[key] = config

    grid = value.get("grid", {})
    if grid is None:
        grid = {}
    if not isinstance(grid, dict):
        raise _fail(source, f"{where}.grid", "a mapping of option names to lists of values")
    axes = []
    for k, values in grid.items():
        here = f"{where}.grid.{k}"
        if command == "simulate" and k == "set":
            for sk, sv in _check_set(source, here, values, grid=True).items():
                if sk in options.get("set", {}):
                    raise _fail(source, f"{here}.{sk}", "also fixed in options.set")
                axes.append((f"set.{sk}", list(sv)))
            continue
        _check_option_name(source, here, command, k)
        if k in options:
            raise _fail(source, here, f"also fixed in options.{k} (an option is fixed or an axis)")
        _check_axis_values(source, here, values)
        axes.append((k, list(values)))
    return RunSpec(index=i, command=command, traces=list(names), options=options, axes=axes)


def load_spec(spec: Union[str, "os.PathLike[str]", dict], retries: Optional[int] = None) -> Spec:
    """Reads and checks a spec: a .json/.yaml/.yml file, or a dict (paths relative to the
    current directory). Raises SpecError."""
    if isinstance(spec, dict):
        source, base, data = "<spec>", Path.cwd(), spec
    else:
        path = Path(os.fspath(spec)).expanduser()
        source, base, data = str(spec), Path(os.path.abspath(path)).parent, _read(path)
    if not isinstance(data, dict):
        raise _fail(source, "", "a spec is a mapping with 'runs' (and 'traces', 'retries', 'version')")
    for k in data:
        if k not in TOP_KEYS:
            raise _fail(source, str(k), f"unknown key (known: {', '.join(TOP_KEYS)})")
    version = data.get("version", 1)
    if version != 1:
        raise _fail(source, "version", f"unsupported spec version {version!r} (this kvtk reads 1)")
    traces_in = data.get("traces") or {}
    if not isinstance(traces_in, dict):
        raise _fail(source, "traces", "a mapping of trace names to paths")
    traces = {name: _trace(source, base, name, v) for name, v in traces_in.items()}
    runs_in = data.get("runs")
    if not isinstance(runs_in, list) or not runs_in:
        raise _fail(source, "runs", "a non-empty list of runs")
    runs = [_run(source, i, r, traces) for i, r in enumerate(runs_in)]
    n = data.get("retries", 2) if retries is None else retries
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise _fail(source, "retries", "a whole number >= 0")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise _fail(source, "description", "a string")
    from .output import RESERVED_COLUMNS  # the axes become columns: no clash with the fixed ones
    spec_obj = Spec(source=source, base_dir=base, traces=traces, runs=runs, retries=n,
                    description=description)
    for run in runs:
        for name, _ in run.axes:
            if name in RESERVED_COLUMNS:
                raise _fail(source, f"runs[{run.index}].grid.{name}",
                            "this axis name is also an output column; fix it in options or rename")
    return spec_obj


def resolve_paths(command: str, options: dict, base: Path) -> dict:
    """The options with their file paths made absolute (relative to the spec file), as a cell
    runs them: a worker's working directory is not the driver's."""
    def absolute(v: Any) -> Any:
        if isinstance(v, str) and v and v != "-" and not os.path.isabs(os.path.expanduser(v)):
            return os.path.abspath(base / v)
        if isinstance(v, str) and v.startswith("~"):
            return os.path.expanduser(v)
        return v

    out = dict(options)
    v = out.get("next_use_cache")  # auto | off | a directory, relative to the spec
    if isinstance(v, str) and v not in ("auto", "off"):
        out["next_use_cache"] = absolute(v)
    for k in PATH_OPTIONS:
        if k in out and out[k] is not None:
            out[k] = [absolute(x) for x in out[k]] if isinstance(out[k], list) else absolute(out[k])
    for k in JSON_PATH_OPTIONS:
        v = out.get(k)
        if isinstance(v, str) and v.lower().endswith(".json"):
            out[k] = absolute(v)
    if command == "simulate":
        cfg = out.get("config")
        if isinstance(cfg, dict) and isinstance(cfg.get("timing_table"), str):
            out["config"] = dict(cfg, timing_table=absolute(cfg["timing_table"]))
        sets = out.get("set")
        if isinstance(sets, dict) and isinstance(sets.get("timing_table"), str):
            out["set"] = dict(sets, timing_table=absolute(sets["timing_table"]))
    return out
