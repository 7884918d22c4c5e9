"""kvtk sweeps: a grid of replay / mrc / simulate / cost runs over traces, run on a local pool of
processes or on a Ray cluster, with every result row written to a JSONL or Parquet file as it
finishes (docs/sweeps.md).

Entry points: ``kvtk.sweep()`` and ``kvtk.read_sweep()`` (kvtk/__init__.py, lazy), and
``python -m kvtk._sweep`` (the ``kvtk sweep`` CLI execs it). The package is named ``_sweep`` so that
``import kvtk.sweep`` can never replace the function ``kvtk.sweep``.
"""
from __future__ import annotations

from .driver import run_sweep
from .output import read_rows
from .spec import SpecError, load_spec

__all__ = ["run_sweep", "read_rows", "load_spec", "SpecError"]
