"""Numbers on the page, each tied to where it comes from.

A sourced number is rendered as <span data-src="STEP" data-key="a.0.b" data-value="REPR"
data-fmt="F">TEXT</span>: STEP names one of the page's commands, the key is a dotted path into
that command's JSON, the value is the JSON value itself (Python's repr of the float, so nothing is
rounded away) and TEXT is format_value(value, F). A derived number carries data-formula instead of
data-key: an arithmetic expression over {STEP:key} references, which tests evaluate again from the
commands' JSON (python/tests/test_report.py).
"""
from __future__ import annotations

import html
import math
import re
from typing import Any

REFERENCE = re.compile(r"\{([a-z_]+):([A-Za-z0-9_.\-]+)\}")


def lookup(doc: Any, key: str) -> Any:
    """The value at dotted path `key` (list indices as numbers) in a JSON document."""
    for part in key.split("."):
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def evaluate(formula: str, sources: dict) -> float:
    """A data-formula's value: every {step:key} replaced by that JSON value, then the arithmetic
    (numbers, + - * / ( ) and min/max only; nothing else is evaluated)."""
    def value(m: re.Match) -> str:
        v = lookup(sources[m.group(1)], m.group(2))
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"{m.group(0)} is not a number: {v!r}")
        return repr(float(v))
    expr = REFERENCE.sub(value, formula)
    if not re.fullmatch(r"[0-9eE.+\-*/() ,minax]*", expr):
        raise ValueError(f"formula {formula!r} has more than arithmetic")
    return float(eval(expr, {"__builtins__": {}}, {"min": min, "max": max}))  # noqa: S307


def format_value(v: Any, fmt: str) -> str:
    """The text of a number in format `fmt` (int, pct, usd, gib, tib, f1, f2, f3, s, str)."""
    if fmt == "str":
        return str(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"not a finite number: {v!r}")  # never a page of NaN
    if fmt == "int":
        return f"{round(v):,}"
    if fmt == "pct":
        return f"{100.0 * v:.1f}\u202f%"
    if fmt == "usd":
        text = f"${abs(v):,.2f}"
        return ("\u2212" if v < 0 and text != "$0.00" else "") + text
    if fmt == "gib":
        return f"{v / 2**30:,.1f}\u202fGiB"
    if fmt == "gb":
        return f"{v / 1e9:,.1f}\u202fGB"
    if fmt in ("f1", "f2", "f3"):
        return f"{v:,.{fmt[1]}f}"
    if fmt == "s":
        return f"{v:,.0f}\u202fs"
    raise ValueError(f"unknown format {fmt}")


class Sources:
    """The JSON of each step that ran (by step name), and the spans that cite it."""

    def __init__(self) -> None:
        self.docs: dict[str, Any] = {}

    def get(self, src: str, key: str) -> Any:
        return lookup(self.docs[src], key)

    def span(self, src: str, key: str, fmt: str) -> str:
        """A sourced number: the value of `key` in step `src`'s JSON."""
        v = self.get(src, key)
        return (f'<span class="num" data-src="{src}" data-key="{key}" '
                f'data-value="{html.escape(_repr(v))}" data-fmt="{fmt}">'
                f"{html.escape(format_value(v, fmt))}</span>")

    def derived(self, formula: str, fmt: str) -> str:
        """A derived number: `formula` over {step:key} references."""
        v = evaluate(formula, self.docs)
        return (f'<span class="num" data-formula="{html.escape(formula)}" '
                f'data-value="{_repr(v)}" data-fmt="{fmt}">{html.escape(format_value(v, fmt))}</span>')

    def value(self, formula: str) -> float:
        return evaluate(formula, self.docs)


def _repr(v: Any) -> str:
    return v if isinstance(v, str) else repr(v)
