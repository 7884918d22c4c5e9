"""kvtk report: one command from a trace to a decision page (docs/report.md).

The page is one self-contained HTML file: inline SVG plots (matplotlib), inline CSS, no script,
no network. Every number on it is a field of the JSON of a kvtk command the page lists (or a
formula over such fields), so the page can be checked by rerunning them.

Importing this package imports matplotlib: `kvtk report` (sim/cli/main.cpp) and kvtk.report()
use the import to tell a user without it what to install (pip install "./python[report]").
"""
from __future__ import annotations

import matplotlib  # noqa: F401  (the optional dependency this feature needs)

from .build import ReportError, build_report

__all__ = ["ReportError", "build_report"]
