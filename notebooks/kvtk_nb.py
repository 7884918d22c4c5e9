"""Helpers the kvtk notebooks share: find the built `kvtk` binary, run it, read its JSON/CSV.

The notebooks never simulate anything in Python: every number comes from the `kvtk` command.
This module only locates the binary, runs it, parses what it writes and saves figures.

Environment:
  KVTK_BIN     the kvtk executable (default: build/release/sim/kvtk, then build/dev/sim/kvtk)
  KVTK_NB_OUT  folder for outputs: JSON/CSV written by kvtk, generated traces, figures/
               (default: build/notebooks under the repository root)
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO / "traces"
CONFIGS = REPO / "sim" / "configs"

BUILD_HINT = "cmake --preset release && cmake --build --preset release --target kvtk_cli"


class KvtkError(RuntimeError):
    """A kvtk command failed (non-zero exit) or could not be found."""


def _use_agg_when_headless() -> None:
    # Inside a Jupyter kernel the inline backend is used (it renders with Agg). Elsewhere, with no
    # display, select Agg before pyplot is imported so plotting never needs a window system.
    if "ipykernel" in sys.modules:
        return
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or os.environ.get("MPLBACKEND"):
        return
    import matplotlib

    matplotlib.use("Agg")


_use_agg_when_headless()


def kvtk_bin() -> Path:
    """The kvtk executable: $KVTK_BIN, else build/release/sim/kvtk, else build/dev/sim/kvtk."""
    env = os.environ.get("KVTK_BIN")
    if env:
        p = Path(env).expanduser()
        if p.is_file() and os.access(p, os.X_OK):
            return p.resolve()
        raise KvtkError(f"KVTK_BIN={env} is not an executable file")
    for rel in ("build/release/sim/kvtk", "build/dev/sim/kvtk"):
        p = REPO / rel
        if p.is_file() and os.access(p, os.X_OK):
            return p
    raise KvtkError(
        "kvtk binary not found (looked at $KVTK_BIN, build/release/sim/kvtk, build/dev/sim/kvtk). "
        f"Build it from the repository root with:\n    {BUILD_HINT}\n"
        "or point KVTK_BIN at an existing kvtk executable."
    )


def out_dir(*parts: str) -> Path:
    """$KVTK_NB_OUT (default build/notebooks) joined with parts; the folder is created."""
    base = Path(os.environ.get("KVTK_NB_OUT") or (REPO / "build" / "notebooks")).expanduser()
    if not base.is_absolute():
        base = (Path.cwd() / base).resolve()
    p = base.joinpath(*parts)
    p.mkdir(parents=True, exist_ok=True)
    return p


def trace(name: str) -> Path:
    """A bundled trace under traces/."""
    p = TRACES / name
    if not p.is_file():
        raise KvtkError(f"bundled trace {p} is missing")
    return p


def config(name: str) -> Path:
    """A cluster config under sim/configs/."""
    p = CONFIGS / name
    if not p.is_file():
        raise KvtkError(f"cluster config {p} is missing")
    return p


def _fmt(args) -> list[str]:
    out = []
    for a in args:
        if isinstance(a, (list, tuple)):
            out.append(",".join(str(x) for x in a))
        else:
            out.append(str(a))
    return out


VERBOSE = os.environ.get("KVTK_NB_VERBOSE", "") not in ("", "0")


def run(*args, check: bool = True) -> subprocess.CompletedProcess:
    """Run `kvtk ARGS...` (lists become comma-separated values); raise KvtkError on failure."""
    cmd = [str(kvtk_bin())] + _fmt(args)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    dt = time.perf_counter() - t0
    if VERBOSE:
        print(f"[{dt:.2f}s] kvtk {shlex.join(cmd[1:])}", file=sys.stderr)
    if check and proc.returncode != 0:
        raise KvtkError(
            f"kvtk exited with {proc.returncode}: {shlex.join(cmd)}\n"
            f"stderr:\n{proc.stderr.strip()}"
        )
    return proc


def run_json(name: str, *args) -> dict:
    """Run kvtk with `--json KVTK_NB_OUT/data/NAME.json` appended and return the parsed JSON."""
    path = out_dir("data") / f"{name}.json"
    run(*args, "--json", path, "--force")  # the notebook's own output: replaced on a rerun
    with open(path) as f:
        return json.load(f)


def run_csv(name: str, *args):
    """Run kvtk with `--csv KVTK_NB_OUT/data/NAME.csv` appended and return a pandas DataFrame."""
    import pandas as pd

    path = out_dir("data") / f"{name}.csv"
    run(*args, "--csv", path, "--force")
    return pd.read_csv(path)


def run_json_csv(name: str, *args):
    """Run kvtk writing both --json and --csv under KVTK_NB_OUT/data/; return (dict, DataFrame)."""
    import pandas as pd

    jpath, cpath = out_dir("data") / f"{name}.json", out_dir("data") / f"{name}.csv"
    run(*args, "--json", jpath, "--csv", cpath, "--force")
    with open(jpath) as f:
        return json.load(f), pd.read_csv(cpath)


def data_path(name: str) -> Path:
    """A path under KVTK_NB_OUT/data/ for a file kvtk writes (a generated trace, a JSON)."""
    return out_dir("data") / name


def gen_trace(name: str, **opts) -> Path:
    """`kvtk trace gen` into KVTK_NB_OUT/data/NAME (options as keyword arguments, _ -> -)."""
    path = data_path(name)
    args = ["trace", "gen", "-o", path, "--force"]
    for k, v in opts.items():
        args += [f"--{k.replace('_', '-')}", v]
    run(*args)
    return path


def replay_frame(result: dict):
    """The `results` list of a kvtk replay JSON as a DataFrame (nested objects left as dicts)."""
    import pandas as pd

    return pd.DataFrame(result["results"])


def savefig(fig, name: str) -> Path:
    """Save a figure as KVTK_NB_OUT/figures/NAME.png and return the path."""
    path = out_dir("figures") / f"{name}.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    return path


def version_line() -> str:
    """Which kvtk binary the notebook uses (printed at the top of each notebook)."""
    return f"kvtk binary: {kvtk_bin()}\noutputs:     {out_dir()}"
