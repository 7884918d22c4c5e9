"""Helpers the kvtk notebooks share: paths, saved results and figures.

The notebooks never simulate anything in Python: every number comes from the kvtk library,
called through its Python package (`import kvtk`: the same `run()` functions as the `kvtk`
executable; `scripts/python` installs it into build/nbvenv). This module only locates the
bundled data, keeps a JSON copy of each result and saves figures.

Environment:
  KVTK_NB_OUT  folder for outputs: the results as JSON, generated traces, figures/
               (default: build/notebooks under the repository root)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import kvtk

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO / "traces"
CONFIGS = REPO / "sim" / "configs"


class KvtkError(RuntimeError):
    """Bundled data is missing."""


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


def data_path(name: str) -> Path:
    """A path under KVTK_NB_OUT/data/ (a generated trace, a config written for kvtk)."""
    return out_dir("data") / name


def keep(name: str, result):
    """Saves a result as KVTK_NB_OUT/data/NAME.json (the notebook's record of what kvtk gave)
    and returns it unchanged. replay()'s list is saved as its whole JSON."""
    whole = getattr(result, "result", result)
    serialisable = {k: v for k, v in whole.items() if k != "requests"} if isinstance(whole, dict) else whole
    with open(data_path(f"{name}.json"), "w") as f:
        json.dump(serialisable, f, indent=1)
    return result


def gen_trace(name: str, **opts) -> Path:
    """kvtk.trace_gen into KVTK_NB_OUT/data/NAME (replaced on a rerun)."""
    path = data_path(name)
    kvtk.trace_gen(path, force=True, **opts)
    return path


def replay_frame(result):
    """replay()'s rows as a DataFrame (nested objects left as dicts)."""
    import pandas as pd

    return pd.DataFrame(list(result))


def savefig(fig, name: str) -> Path:
    """Save a figure as KVTK_NB_OUT/figures/NAME.png and return the path."""
    path = out_dir("figures") / f"{name}.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    return path


def version_line() -> str:
    """Which kvtk the notebook uses (printed at the top of each notebook)."""
    return f"kvtk {kvtk.__version__} (Python package: {Path(kvtk.__file__).parent})\noutputs:     {out_dir()}"
