"""The report's figures, drawn by matplotlib (no pyplot: no global state, no display) as SVG text
to inline in the page. Legible in grayscale: series differ by line style, marker and hatch, not
only by colour; axes carry units. Each figure has its own svg.hashsalt, so the ids matplotlib
gives clip paths and markers do not collide between the figures of one page.
"""
from __future__ import annotations

import io
import re

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter, PercentFormatter

INK = ("#1b1b1b", "#4d6fa8", "#b5651d", "#6a9a4b", "#888888")
RC = {"svg.fonttype": "none", "font.family": "DejaVu Sans", "font.size": 10,
      "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True,
      "grid.color": "#dddddd", "grid.linewidth": 0.6, "legend.frameon": False}


def _svg(fig: Figure, name: str) -> str:
    buf = io.StringIO()
    with matplotlib.rc_context({**RC, "svg.hashsalt": f"kvtk-{name}"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    text = buf.getvalue()
    text = re.sub(r"<\?xml[^>]*\?>\s*|<!DOCTYPE[^>]*>\s*", "", text)
    # Element ids (figure_1, patch_1, ... and the clip paths) are unique within one SVG only:
    # prefixed with the figure's name, with every reference to them, they stay unique on a page.
    ids = set(re.findall(r'\bid="([^"]+)"', text))
    text = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{name}-{m.group(1)}"', text)
    text = re.sub(r'#([A-Za-z_][\w.\-]*)',
                  lambda m: f"#{name}-{m.group(1)}" if m.group(1) in ids else m.group(0), text)
    return text.replace("<svg ", f'<svg role="img" aria-labelledby="{name}-title" ', 1)


def _figure(width: float = 7.2, height: float = 3.4) -> Figure:
    with matplotlib.rc_context(RC):
        return Figure(figsize=(width, height), layout="constrained")


def _thousands(x, _pos=None) -> str:
    return f"{x:,.0f}" if x >= 1 and float(x).is_integer() else f"{x:,.3g}"


def _log_x(axis) -> None:
    """A log axis labelled at its decades only, as plain numbers."""
    axis.set_major_formatter(FuncFormatter(_thousands))
    axis.set_minor_formatter(NullFormatter())


def arrivals(arrival_s: np.ndarray) -> str:
    """Requests per minute over the trace's span."""
    with matplotlib.rc_context(RC):
        fig = _figure(height=2.8)
        ax = fig.add_subplot()
        t = (arrival_s - arrival_s.min()) / 60.0
        edges = np.arange(0.0, max(1.0, float(np.ceil(t.max()))) + 1.0)
        counts, _ = np.histogram(t, bins=edges)
        ax.stairs(counts, edges, fill=True, color="#9fb3d1", edgecolor=INK[0], linewidth=0.8)
        ax.set_xlabel("minutes since the first request")
        ax.set_ylabel("requests per minute")
        ax.set_xlim(edges[0], edges[-1])
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 5, 10]))
        ax.yaxis.set_major_formatter(FuncFormatter(_thousands))
        return _svg(fig, "fig-arrivals")


def reuse(distances: np.ndarray) -> str:
    """How far back (in block references) each reused block was last referenced."""
    with matplotlib.rc_context(RC):
        fig = _figure(height=2.8)
        ax = fig.add_subplot()
        if len(distances) == 0:
            ax.text(0.5, 0.5, "no block is referenced twice", ha="center", va="center",
                    transform=ax.transAxes)
            ax.set_xticks([])
            ax.set_yticks([])
        else:
            top = max(2.0, float(distances.max()) * 1.05)
            edges = np.unique(np.geomspace(1.0, top, 40).round())
            ax.hist(distances, bins=edges, color="#c9c9c9", edgecolor=INK[0], linewidth=0.6,
                    hatch="///")
            ax.set_xscale("log")
        ax.set_xlabel("reuse distance (block references since the block's last reference)")
        ax.set_ylabel("references")
        _log_x(ax.xaxis)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 5, 10]))
        ax.yaxis.set_major_formatter(FuncFormatter(_thousands))
        return _svg(fig, "fig-reuse")


def hit_ratio(curve: list, tune: list, gpu_blocks: int, gpu_label: str, block_bytes: float) -> str:
    """The exact LRU curve and the optimum against capacity, the tuned policies' holdout figures
    as markers, the GPU's capacity marked; capacity in blocks below, GiB above."""
    with matplotlib.rc_context(RC):
        fig = _figure(height=4.4)
        ax = fig.add_subplot()
        caps = [p["capacity_blocks"] for p in curve]
        ax.plot(caps, [p["opt_block_hit_ratio"] for p in curve], color=INK[0], linestyle="--",
                linewidth=1.6, label="offline optimum (whole trace)")
        ax.plot(caps, [p["block_hit_ratio"] for p in curve], color=INK[1], linewidth=2.0,
                label="LRU, exact (whole trace)")
        if tune:
            x = [r["capacity_blocks"] for r in tune]
            ax.scatter(x, [r["chosen"]["block_hit_ratio"] for r in tune], marker="D", s=42,
                       color=INK[2], edgecolor=INK[0], zorder=3,
                       label="tuned policy, on the held-out half")
            ax.scatter(x, [r["lru"]["block_hit_ratio"] for r in tune], marker="o", s=30,
                       facecolor="white", edgecolor=INK[1], linewidth=1.4, zorder=3,
                       label="LRU, on the held-out half")
            ax.scatter(x, [r["optimum"]["block_hit_ratio"] for r in tune], marker="^", s=36,
                       facecolor="white", edgecolor=INK[0], zorder=3,
                       label="optimum, on the held-out half")
        ax.axvline(gpu_blocks, color=INK[2], linestyle=":", linewidth=1.8, label=gpu_label)
        ax.set_xscale("log")
        ax.set_xlabel("cache capacity (blocks)")
        ax.set_ylabel("block hit ratio")
        top_ratio = max([p["opt_block_hit_ratio"] for p in curve] +
                        [r[k]["block_hit_ratio"] for r in tune for k in ("chosen", "lru", "optimum")])
        ax.set_ylim(0, max(0.05, top_ratio * 1.1))
        ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
        _log_x(ax.xaxis)
        gib = block_bytes / 2**30
        top = ax.secondary_xaxis("top", functions=(lambda b: b * gib, lambda g: g / gib))
        top.set_xlabel("cache capacity (GiB of KV for the model)")
        _log_x(top.xaxis)
        fig.legend(loc="outside lower center", ncols=2, fontsize=8.5)
        return _svg(fig, "fig-mrc")


def tiers(labels: list, gpu_ratio: list, tier_ratio: list, best: int, tier_name: str) -> str:
    """Hit ratio per tier size: the GPU's share and the lower tier's, stacked."""
    with matplotlib.rc_context(RC):
        fig = _figure(height=3.2)
        ax = fig.add_subplot()
        x = np.arange(len(labels))
        ax.bar(x, gpu_ratio, color="#9fb3d1", edgecolor=INK[0], linewidth=0.6, label="GPU hits")
        ax.bar(x, tier_ratio, bottom=gpu_ratio, color="#e8e8e8", edgecolor=INK[0], linewidth=0.6,
               hatch="xx", label=f"{tier_name} tier hits")
        ax.annotate("recommended", xy=(best, gpu_ratio[best] + tier_ratio[best]),
                    xytext=(0, 6), textcoords="offset points", ha="center", fontsize=8.5)
        ax.set_xticks(x, labels, rotation=0, fontsize=8.5)
        ax.set_xlabel(f"{tier_name} tier size (GiB)")
        ax.set_ylabel("block hit ratio")
        ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
        ax.set_ylim(0, max(0.05, max(g + t for g, t in zip(gpu_ratio, tier_ratio)) * 1.18))
        fig.legend(loc="outside right upper", fontsize=8.5)
        return _svg(fig, "fig-tiers")


def money(labels: list, saved: list, rent: list, net: list, best: int, unit: str,
          tier_name: str) -> str:
    """Per tier size: GPU time saved, tier rent and their difference, in USD per day."""
    with matplotlib.rc_context(RC):
        fig = _figure(height=3.2)
        ax = fig.add_subplot()
        x = np.arange(len(labels))
        ax.plot(x, saved, color=INK[3], marker="o", linewidth=1.6, label="GPU time saved")
        ax.plot(x, rent, color=INK[2], marker="s", linestyle="--", linewidth=1.6, label="tier rent")
        ax.plot(x, net, color=INK[0], marker="D", linestyle="-.", linewidth=2.0, label="net")
        ax.scatter([best], [net[best]], s=160, facecolor="none", edgecolor=INK[0], linewidth=1.6,
                   zorder=3, label="recommended")
        ax.axhline(0, color=INK[4], linewidth=0.8)
        ax.set_xticks(x, labels, fontsize=8.5)
        ax.set_xlabel(f"{tier_name} tier size (GiB)")
        ax.set_ylabel(f"USD per {unit}")
        fig.legend(loc="outside right upper", fontsize=8.5)
        return _svg(fig, "fig-money")
