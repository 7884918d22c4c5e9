"""The report's HTML: five sections over the steps' JSON (build.Report), one file, no script.

Every figure in the text is a Sources span (values.py), so a test can check it against the JSON
of the commands listed at the end. Nothing time-dependent is on the page except the step
durations, which are not numbers from the commands.
"""
from __future__ import annotations

import html
import json
import os

import kvtk

from . import plots
from .build import DAYS_PER_MONTH, NET_TOLERANCE, Report

CSS = """
:root { color-scheme: light; }
body { font: 15px/1.5 "DejaVu Sans", system-ui, sans-serif; color: #1b1b1b; background: #fff;
       margin: 0; }
main { max-width: 980px; margin: 0 auto; padding: 16px 20px 48px; }
h1 { font-size: 1.6em; margin: 0.4em 0 0.1em; }
h2 { font-size: 1.25em; margin: 1.8em 0 0.4em; border-bottom: 2px solid #1b1b1b; }
h3 { font-size: 1.05em; margin: 1.2em 0 0.3em; }
p, li, h1, h2, h3 { overflow-wrap: anywhere; }
.sub { color: #555; margin: 0 0 1em; }
.decision { border: 2px solid #1b1b1b; padding: 8px 16px; background: #f6f6f6; }
.decision li { margin: 0.3em 0; }
.note { border-left: 4px solid #b5651d; padding: 2px 10px; background: #fbf4ec; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: 0.4em 0 0.8em; font-size: 0.92em; }
th, td { border-bottom: 1px solid #ccc; padding: 3px 9px; text-align: right; vertical-align: top; }
th { background: #eee; }
td:first-child, th:first-child { text-align: left; }
tr.best td { font-weight: bold; background: #f1f1f1; }
figure { margin: 0.6em 0 1em; }
figure svg { width: 100%; height: auto; max-width: 100%; display: block; }
figcaption { color: #444; font-size: 0.9em; }
pre, code { font-family: "DejaVu Sans Mono", monospace; font-size: 0.88em; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f3f3f3; padding: 8px 10px;
      border: 1px solid #ddd; }
details summary { cursor: pointer; color: #333; }
"""

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def e(text) -> str:
    return html.escape(str(text))


def table(head: list, rows: list, best: int = -1) -> str:
    out = ['<div class="scroll"><table><thead><tr>']
    out += [f"<th>{h}</th>" for h in head]
    out.append("</tr></thead><tbody>")
    for i, row in enumerate(rows):
        out.append('<tr class="best">' if i == best else "<tr>")
        out += [f"<td>{c}</td>" for c in row]
        out.append("</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def figure(svg: str, fig_id: str, caption: str) -> str:
    svg = svg.replace("<svg ", f'<svg id="{fig_id}-svg" ', 1)
    return (f'<figure id="{fig_id}"><span hidden id="{fig_id}-title">{e(caption)}</span>{svg}'
            f"<figcaption>{caption}</figcaption></figure>")


def notes(rep: Report, section: str) -> str:
    return "".join(f'<p class="note">{e(n)}</p>' for n in rep.notes.get(section, []))


def render(rep: Report) -> str:
    """The whole page."""
    s = rep.settings
    parts = [f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>kvtk report: {e(os.path.basename(s.trace))}</title>
<style>{CSS}</style></head><body><main>
<h1>KV-cache report: {e(os.path.basename(s.trace))}</h1>
<p class="sub">{e(s.engine)} on {s.gpus}&times; {e(s.gpu)} serving {e(s.model)}; prices
{e(s.pricing)}, GPU-hour ${s.gpu_hour:g}, DRAM ${s.dram_usd_per_gb_month:g}/GB-month.
kvtk {e(kvtk.__version__)}. Every number below comes from the kvtk commands listed in
<a href="#todo">section 5</a>.</p>
"""]
    parts.append(_decision(rep))
    parts.append(_glance(rep))
    parts.append(_capacity(rep))
    parts.append(_tiers(rep))
    parts.append(_money(rep))
    parts.append(_todo(rep))
    parts.append("</main></body></html>\n")
    return "".join(parts)


def _row_key(rep: Report, i: int, key: str) -> str:
    return f"results.{i}.{key}"


def _tier_label(rep: Report, i: int) -> str:
    if i == 0:
        return "none"
    gib = rep.tier_sizes[i - 1] * rep.block_bytes / 2**30
    return f"{gib:,.0f}" if gib >= 10 else f"{gib:.2g}"


def _even_formula(i: int) -> str:
    """The memory price (USD per GB-month) below which row i's tier nets more than the GPU
    alone's net / (1 - NET_TOLERANCE), so that the GPU alone is no longer within the tolerance
    of it (build.recommended_row): its GPU time saved per day less that, over its GB, times the
    days of a month. (The GPU alone pays no rent: its net is its GPU time saved.)"""
    return (f"({{cost:estimates.{i}.self_hosted.compute_usd_saved}} - "
            f"{{cost:estimates.0.self_hosted.compute_usd_saved}} / {1 - NET_TOLERANCE!r}) * {DAYS_PER_MONTH}"
            f" / ({{offload:results.{i}.offload.tiers.1.capacity_bytes}} / 1e9)")


def _first_to_pay(rep: Report):
    """The tier row with the highest break-even price (the first to beat the GPU alone by the
    tolerance as memory gets cheaper), or None when none would at any price."""
    rows = range(1, len(rep.tier_sizes) + 1)
    if not rows:
        return None
    best = max(rows, key=lambda i: (rep.sources.value(_even_formula(i)), -i))
    return best if rep.sources.value(_even_formula(best)) > 0 else None  # else no tier adds hits


def _tune_at_gpu(rep: Report):
    if "tune" not in rep.sources.docs:
        return None
    for i, r in enumerate(rep.sources.docs["tune"]["results"]):
        if r["capacity_blocks"] == rep.gpu_blocks:
            return i
    return None


def _decision(rep: Report) -> str:
    src, s = rep.sources, rep.settings
    items = []
    i = _tune_at_gpu(rep)
    if i is not None:
        k = f"results.{i}"
        items.append(
            f"<b>A better policy or a bigger cache?</b> At the GPU's {src.span('capacity', 'result.kv_capacity.blocks', 'int')} "
            f"blocks, on the held-out half of the trace: LRU hits {src.span('tune', k + '.lru.block_hit_ratio', 'pct')}, "
            f"the tuned policy ({src.span('tune', k + '.chosen.policy', 'str')}) {src.span('tune', k + '.chosen.block_hit_ratio', 'pct')}, "
            f"the offline optimum {src.span('tune', k + '.optimum.block_hit_ratio', 'pct')}; "
            f"an unbounded cache would hit {src.span('stats', 'ideal_block_hit_ratio', 'pct')} of the whole trace.")
    else:
        items.append(f"<b>A better policy or a bigger cache?</b> The GPU's {src.span('capacity', 'result.kv_capacity.blocks', 'int')} "
                     f"blocks already hold the trace's working set: every reuse hits (ideal "
                     f"{src.span('stats', 'ideal_block_hit_ratio', 'pct')}).")
    b = rep.best_row
    unit = "day"
    if not rep.tier_sizes:
        size = ("<b>How big should each tier be?</b> No tier can add a hit: the GPU holds the "
                "working set. The GPU alone nets")
    elif b == 0:
        size = ("<b>How big should each tier be?</b> No tier is worth its memory at these prices: "
                "the GPU alone nets the most (or within 1 % of it)")
    else:
        size = (f"<b>How big should each tier be?</b> A {'CPU' if s.engine == 'vllm' else 'host'} "
                f"tier of {_tier_label(rep, b)} GiB "
                f"({src.span('offload', f'results.{b}.offload.tiers.1.capacity_blocks', 'int')} blocks) "
                "has the highest net (or within 1 % of it)")
    first = _first_to_pay(rep) if b == 0 else None
    cheaper = "" if first is None else (
        f" A tier of {_tier_label(rep, first)} GiB would be the first to net over 1 % more, "
        f"with memory below {src.derived(_even_formula(first), 'usd')} per GB-month.")
    items.append(f"{size}{'' if not rep.tier_sizes else ':'} {src.span('cost', f'estimates.{b}.self_hosted.net_usd', 'usd')} per {unit} "
                 f"(GPU time saved less tier rent; <a href='#tiers'>section 3</a>).{cheaper}")
    items.append("<b>What to put in the engine's flags?</b> <a href='#todo'>Section 5</a>, ready to paste.")
    return ('<div class="decision"><ul>' + "".join(f"<li>{x}</li>" for x in items) + "</ul></div>")


def _glance(rep: Report) -> str:
    src = rep.sources
    st = src.docs["stats"]
    rows = [["requests", src.span("stats", "requests", "int")],
            ["input tokens (all requests)", src.span("mrc", "trace.token_refs", "int")],
            ["input tokens per request: mean / p50 / p99",
             " / ".join(src.span("stats", f"input_tokens.{q}", "int") for q in ("mean", "p50", "p99"))]]
    if st.get("output_tokens"):
        rows.append(["output tokens per request: mean / p99",
                     " / ".join(src.span("stats", f"output_tokens.{q}", "int") for q in ("mean", "p99"))])
    rows += [["tokens per block", src.span("mrc", "trace.block_tokens", "int")],
             ["block references (full blocks of prompts)", src.span("stats", "block_refs", "int")],
             ["distinct blocks", src.span("stats", "unique_blocks", "int")],
             ["hit ratio of an unbounded cache (blocks)", src.span("stats", "ideal_block_hit_ratio", "pct")]]
    if st.get("sessions"):
        rows += [["sessions (inferred from prefixes)", src.span("stats", "sessions.sessions", "int")],
                 ["requests in multi-request sessions", src.span("stats", "sessions.requests_in_multi_request_sessions", "int")]]
    rows.append(["time span", src.span("stats", "span_s", "s")])
    for key, label in (("arrival_rate_per_s", "arrival rate (requests/s)"),
                       ("inter_arrival_cv", "inter-arrival coefficient of variation")):
        if st.get(key) is not None:
            rows.append([label, src.span("stats", key, "f2")])
    if st.get("reuse_distance_block_refs"):
        rows.append(["reuse distance, block references: p50 / p90 / p99",
                     " / ".join(src.span("stats", f"reuse_distance_block_refs.{q}", "int") for q in ("p50", "p90", "p99"))])
    out = ['<section id="glance"><h2>1. The trace at a glance</h2>', notes(rep, "trace"),
           table(["", "value"], rows)]
    if rep.arrivals is not None:
        out.append(figure(plots.arrivals(rep.arrivals), "fig-arrivals",
                          "Arrivals: requests per minute over the trace's span."))
    out.append(figure(plots.reuse(rep.reuse), "fig-reuse",
                      f"Reuse distance: for each of the {len(rep.reuse):,} references to a block "
                      "referenced before, how far back its last reference was, in block references (log "
                      "scale). A flat LRU cache of C blocks serves every reference left of C (the "
                      "distinct blocks in between are fewer still), so that mass is a floor on its "
                      "hits."))
    out.append("</section>")
    return "".join(out)


def _capacity_cells(src, step: str, row: str) -> list:
    """A capacity in blocks (row.capacity_blocks of step's JSON), tokens and GiB of the model's KV."""
    blocks = f"{{{step}:{row}.capacity_blocks}}"
    block_bytes = "{capacity:result.kv_capacity.bytes} / {capacity:result.kv_capacity.blocks}"
    return [src.span(step, f"{row}.capacity_blocks", "int"),
            src.derived(f"{blocks} * {{mrc:trace.block_tokens}}", "int"),
            src.derived(f"{blocks} * {block_bytes}", "gib")]


def _capacity(rep: Report) -> str:
    src, s = rep.sources, rep.settings
    curve = src.docs["mrc"]["curve"]
    tune = src.docs["tune"]["results"] if "tune" in src.docs else []
    gpu_label = f"the GPU's capacity: {s.engine} on {s.gpus}x {s.gpu}, {rep.gpu_blocks:,} blocks"
    out = ['<section id="capacity"><h2>2. Hit ratio against capacity</h2>', notes(rep, "capacity"),
           figure(plots.hit_ratio(curve, tune, rep.gpu_blocks, gpu_label, rep.block_bytes), "fig-mrc",
                  "Block hit ratio of a prefix cache against its capacity: LRU exactly and the offline "
                  "optimum (a proven bound: no policy does better) over the whole trace; markers: the "
                  "policy tune chose on the first half, LRU and the optimum, all on the second half. "
                  "Dotted: the GPU's own capacity.")]
    if tune:
        rows = []
        for i, r in enumerate(tune):
            k = f"results.{i}"
            rows.append(_capacity_cells(src, "tune", k) + [
                         src.span("tune", k + ".chosen.index", "str") + " / " + src.span("tune", k + ".chosen.policy", "str"),
                         src.span("tune", k + ".chosen.block_hit_ratio", "pct"),
                         src.span("tune", k + ".lru.block_hit_ratio", "pct"),
                         src.span("tune", k + ".optimum.block_hit_ratio", "pct"),
                         src.span("tune", k + ".chosen.opt_fraction", "f3")])
        best = next((i for i, r in enumerate(tune) if r["capacity_blocks"] == rep.gpu_blocks), -1)
        out.append("<h3>The tuned policy, on data it was not tuned on</h3>")
        out.append(f"<p>tune chose each policy on the first {src.span('tune', 'trace.tune_requests', 'int')} "
                   f"requests and shows it on the other {src.span('tune', 'trace.holdout_requests', 'int')}; "
                   "the bold row is the GPU's capacity.</p>")
        out.append(table(["capacity (blocks)", "tokens", "GiB", "chosen policy", "chosen", "LRU",
                          "optimum", "chosen / optimum"], rows, best))
    rows = []
    for i, p in enumerate(curve):
        k = f"curve.{i}"
        rows.append(_capacity_cells(src, "mrc", k) + [
                     src.span("mrc", k + ".block_hit_ratio", "pct"),
                     src.span("mrc", k + ".token_hit_ratio", "pct"),
                     src.span("mrc", k + ".opt_block_hit_ratio", "pct")])
    out.append("<details><summary>The curve's points (whole trace)</summary>")
    out.append(table(["capacity (blocks)", "tokens", "GiB", "LRU blocks", "LRU tokens", "optimum blocks"], rows))
    out.append("</details></section>")
    return "".join(out)


def _tiers(rep: Report) -> str:
    src, s = rep.sources, rep.settings
    tier_name = "CPU" if s.engine == "vllm" else "host"
    unit = "day"
    out = ['<section id="tiers"><h2>3. Tiers</h2>', notes(rep, "tiers")]
    n = len(rep.tier_sizes) + 1
    rows, gpu_r, tier_r, saved, rent, net, labels = [], [], [], [], [], [], []
    for i in range(n):
        est = f"estimates.{i}.self_hosted"
        row_refs = f"{{offload:results.{i}.block_refs}}"
        if i == 0:
            size_cells = ["none", "0"]
            g = src.span("offload", "results.0.block_hit_ratio", "pct")
            t = "&mdash;"
            loaded = "&mdash;"
            even = "&mdash;"
            gpu_r.append(src.get("offload", "results.0.block_hit_ratio"))
            tier_r.append(0.0)
        else:
            tk = f"results.{i}.offload.tiers"
            size_cells = [src.span("offload", f"{tk}.1.capacity_blocks", "int"),
                          src.span("offload", f"{tk}.1.capacity_bytes", "gib")]
            g = src.derived(f"{{offload:{tk}.0.hit_blocks}} / {row_refs}", "pct")
            t = src.derived(f"{{offload:{tk}.1.hit_blocks}} / {row_refs}", "pct")
            scale = " * 86400 / {stats:span_s}"
            loaded = src.derived(f"{{offload:{tk}.1.bytes_loaded}}{scale}", "gib")
            # The DRAM price at which this tier's net equals the GPU alone's: its extra GPU time
            # saved per GB of tier and month.
            even = src.derived(_even_formula(i), "f2")
            gpu_r.append(src.value(f"{{offload:{tk}.0.hit_blocks}} / {row_refs}"))
            tier_r.append(src.value(f"{{offload:{tk}.1.hit_blocks}} / {row_refs}"))
        saved.append(src.get("cost", f"{est}.compute_usd_saved"))
        rent.append(src.get("cost", f"{est}.tier_rent_usd"))
        net.append(src.get("cost", f"{est}.net_usd"))
        labels.append(_tier_label(rep, i))
        rows.append(size_cells + [g, t, src.span("offload", f"results.{i}.block_hit_ratio", "pct"), loaded,
                                  src.span("cost", f"{est}.compute_usd_saved", "usd"),
                                  src.span("cost", f"{est}.tier_rent_usd", "usd"),
                                  src.span("cost", f"{est}.net_usd", "usd"), even])
    out.append(f"<p>{e(s.engine)}'s own offloading replayed request by request "
               f"({e(src.get('offload', 'results.1.offload.engine_version') if n > 1 else s.engine)}), "
               f"the GPU at {src.span('capacity', 'result.kv_capacity.blocks', 'int')} blocks, "
               f"an LRU {tier_name} tier of each size below; money per {unit} at "
               f"${s.dram_usd_per_gb_month:g} per GB-month of {tier_name} memory and "
               f"${s.gpu_hour:g} per GPU-hour.</p>")
    if n > 1:
        out.append(figure(plots.tiers(labels, gpu_r, tier_r, rep.best_row, tier_name), "fig-tiers",
                          f"Block hit ratio by {tier_name} tier size: the GPU's hits and the tier's."))
        out.append(figure(plots.money(labels, saved, rent, net, rep.best_row, unit, tier_name), "fig-money",
                          f"USD per {unit} by {tier_name} tier size: GPU time saved by all hits, the "
                          "tier's rent, and the net (saved less rent). The circled point is recommended."))
    head = [f"{tier_name} tier (blocks)", "GiB", "GPU hits", "tier hits", "all hits",
            f"loaded per {unit}", f"GPU time saved per {unit}", f"tier rent per {unit}",
            f"net per {unit}", "pays below $/GB-month"]
    out.append(table(head, rows, rep.best_row))
    if rep.best_row == 0 and n > 1:
        out.append(f"<p><b>Recommendation: no {tier_name} tier.</b> At ${s.dram_usd_per_gb_month:g}"
                   f"/GB-month no size nets more than 1 % above the GPU alone. The last column is the "
                   f"memory price below which each size would (memory already paid for costs 0 "
                   f"here).</p>")
    elif n > 1:
        out.append(f"<p><b>Recommendation: a {tier_name} tier of {_tier_label(rep, rep.best_row)} GiB</b> "
                   f"(the smallest size within 1 % of the highest net: a larger tier for less is "
                   f"not worth its memory).</p>")
    if n > 1:
        out.append(f"<p>The {tier_name} tier is the host's DRAM: sizes beyond a server's memory "
                   "need a disk or remote tier behind it (LMCache, KVBM, vLLM's fs tier: "
                   "kvtk replay --offload, docs/tiers.md).</p>")
    out.append("</section>")
    return "".join(out)


def _money(rep: Report) -> str:
    src, s = rep.sources, rep.settings
    b = rep.best_row
    k = f"estimates.{b}"
    unit = "day"
    month = True

    def pair(key: str, fmt: str) -> list:
        cells = [src.span("cost", f"{k}.{key}", fmt)]
        if month:
            cells.append(src.derived(f"{DAYS_PER_MONTH} * {{cost:{k}.{key}}}", fmt))
        return cells

    head = ["", f"per {unit}"] + (["per month (30 days)"] if month else [])
    api = [["bill with the cache", *pair("bill_usd", "usd")],
           ["bill without it", *pair("bill_without_cache_usd", "usd")],
           ["saving", *pair("saving_usd", "usd")],
           ["saving, share of the bill", src.span("cost", f"{k}.saving_fraction", "pct")] + ([""] if month else [])]
    own = [["GPU-hours saved", *pair("self_hosted.gpu_hours_saved", "f1")],
           ["GPU time saved", *pair("self_hosted.compute_usd_saved", "usd")],
           ["tier rent", *pair("self_hosted.tier_rent_usd", "usd")],
           ["net", *pair("self_hosted.net_usd", "usd")]]
    config = "the GPU alone" if b == 0 else f"the GPU and a {_tier_label(rep, b)} GiB tier"
    est = src.docs["cost"]["estimates"][b]
    assumptions = list(est["assumptions"]) + list(est["self_hosted"]["assumptions"])
    cap = src.docs["capacity"]["result"]["kv_capacity"]
    own_assumptions = [
        (f"GPU KV capacity: {cap['blocks']:,} blocks as given (--gpu-blocks)"
         if cap["source"] == "num_gpu_blocks_override" else
         f"GPU KV capacity: {cap['source']} {cap.get('fraction', 0):g} of {s.gpus}x {s.gpu}'s HBM "
         f"less the bf16 weights, no activation or CUDA-graph reserve (an upper bound; presets' "
         f"HBM is decimal, so the engine's own count is a few percent lower: pass --gpu-blocks "
         f"with it)"),
        f"the API view prices every token at the {s.pricing} table; the self-hosted view runs "
        f"{s.model} on {s.gpu} at {s.efficiency:g} of peak FLOP/s and ${s.gpu_hour:g} per GPU-hour",
        f"{'CPU' if s.engine == 'vllm' else 'host'} memory at ${s.dram_usd_per_gb_month:g} per "
        f"GB-month, 30-day months",
        "per day = the trace's counts x 86,400 s / its span (the traffic of the trace, repeated)",
        "hits counted as the engine counts them (its own replay: GPU prefix cache, then the tier)",
    ]
    out = ['<section id="money"><h2>4. Money</h2>', notes(rep, "money"),
           f"<p>At the recommended configuration ({config}), from the {e(s.pricing)} price table "
           f"({e(est.get('valid', ''))}) and the self-hosted view.</p>",
           "<h3>API bill</h3>", table(head, api), "<h3>Self-hosted GPU time</h3>", table(head, own),
           "<h3>Assumptions</h3><ul>",
           "".join(f"<li>{e(a)}</li>" for a in assumptions + own_assumptions), "</ul></section>"]
    return "".join(out)


def _todo(rep: Report) -> str:
    src, s = rep.sources, rep.settings
    out = ['<section id="todo"><h2>5. What to do</h2>']
    b = rep.best_row
    results = src.docs["offload"]["results"]
    serve = ("vllm serve $MODEL" if s.engine == "vllm"
             else "python -m sglang.launch_server --model-path $MODEL")
    if s.gpus > 1:  # the capacity above is for this many GPUs per instance
        serve += (f" --tensor-parallel-size {s.gpus}" if s.engine == "vllm" else f" --tp-size {s.gpus}")
    n = len(results)
    if b > 0:
        out.append(f"<h3>Engine flags for the recommended tier</h3><pre id='flags'>{e(serve)} "
                   f"{e(results[b]['offload']['engine_flags'])}</pre>")
    else:
        out.append(f"<h3>Engine flags</h3><p>No offload tier: keep {e(s.engine)}'s prefix cache "
                   f"as it is (no --kv-transfer-config / hierarchical cache):</p><pre>{e(serve)}</pre>")
        alt = _first_to_pay(rep)
        if alt is not None:
            out.append(f"<p>If your memory costs less than {src.derived(_even_formula(alt), 'usd')} "
                       f"per GB-month (or is already paid for), the first tier to net over 1 % "
                       f"more than the GPU alone is {_tier_label(rep, alt)} GiB:</p><pre id='flags'>{e(serve)} "
                       f"{e(results[alt]['offload']['engine_flags'])}</pre>")
    out.append(f"<p>$MODEL is your {e(s.model)} checkpoint. The block size is the trace's "
               f"({src.span('mrc', 'trace.block_tokens', 'int')} tokens): an engine running another "
               "block size should be replayed with a trace hashed at that size.</p>")
    i = _tune_at_gpu(rep)
    if i is not None:
        r = src.docs["tune"]["results"][i]
        k = f"results.{i}"
        out.append("<h3>Policy</h3>")
        if r["chosen"]["policy"] == "lru" and r["chosen"]["index"] == "radix":
            out.append("<p>Keep LRU: tune chose it on the first half of the trace.</p>")
        elif r["chosen"]["block_hit_ratio"] > r["lru"]["block_hit_ratio"]:
            out.append("<p>tune's choice at the GPU's capacity beat LRU on the held-out half "
                       f"({src.span('tune', k + '.chosen.block_hit_ratio', 'pct')} against "
                       f"{src.span('tune', k + '.lru.block_hit_ratio', 'pct')}), for a prefix cache "
                       "whose policy kvtk provides (its headers in your engine; "
                       "docs/policy-quality.md); the engine's own GPU pool keeps its LRU:</p>"
                       f"<pre>{e(r['recommendation']['command'])}</pre>")
        else:
            out.append(f"<p>Keep LRU: tune's choice on the first half "
                       f"({src.span('tune', k + '.chosen.policy', 'str')}) did not beat it on the "
                       f"held-out half ({src.span('tune', k + '.chosen.block_hit_ratio', 'pct')} "
                       f"against {src.span('tune', k + '.lru.block_hit_ratio', 'pct')}).</p>")
    out.append(f"<h3>Reproduce every number</h3><p>Run in <code>{e(os.getcwd())}</code>; each command "
               "writes the JSON its numbers come from (NAME.json):</p>")
    out.append("<ol class='steps'>")
    for st in rep.steps:
        out.append(f"<li><b>{e(st.name)}</b>: {e(st.title)}, {st.seconds:.1f} s"
                   f"<pre>{e(st.command)}</pre></li>")
    out.append("</ol>")
    total = sum(st.seconds for st in rep.steps)
    out.append(f"<p>The steps took {total:.1f} s in all (on the machine that built this page).</p>")
    commands = [{"name": st.name, "argv": st.argv} for st in rep.steps]
    out.append('<script type="application/json" id="kvtk-commands">'
               + json.dumps(commands).replace("</", "<\\/") + "</script></section>")
    return "".join(out)
