"""kvtk report (kvtk._report, docs/report.md), checked as a person would: the page built by the
kvtk executable on the bundled conversation trace; every number on it against the JSON of the
commands it lists (run again with the executable); the page self-contained; rendered in headless
Chromium with no network (no console error, nothing overflowing, every plot drawn) at a desktop
and a phone width, and screenshot to PNG; bad input refused or reported. Chromium tests skip
without it unless KVTK_REQUIRE_REPORT_DEPS=1 (scripts/python sets it; scripts/install-deps --test
installs Debian's chromium)."""
import html
import html.parser
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

try:
    import matplotlib  # noqa: F401  (the report extra; scripts/python's venv has it)
except ImportError:
    if os.environ.get("KVTK_REQUIRE_REPORT_DEPS") == "1":
        raise
    pytest.skip("matplotlib is not installed (pip install ./python[report])", allow_module_level=True)

import kvtk  # noqa: E402
from conftest import CONVERSATION  # noqa: E402
from kvtk._report.build import recommended_row, tier_sizes, tune_capacities  # noqa: E402
from kvtk._report.values import evaluate, format_value, lookup  # noqa: E402

FIGURES = ("fig-arrivals", "fig-reuse", "fig-mrc", "fig-tiers", "fig-money")
SOURCES = ("stats", "capacity", "mrc", "tune", "offload", "cost")


class Spans(html.parser.HTMLParser):
    """Every element with data-value (its attributes and text), and the commands' JSON."""

    def __init__(self):
        super().__init__()
        self.spans, self.stack, self.commands, self.in_commands = [], [], None, False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script" and a.get("id") == "kvtk-commands":
            self.in_commands = True
        if "data-value" in a:
            self.stack.append({**a, "text": ""})

    def handle_endtag(self, tag):
        if tag == "span" and self.stack:
            self.spans.append(self.stack.pop())
        self.in_commands = False

    def handle_data(self, data):
        if self.in_commands:
            self.commands = json.loads(data)
        for s in self.stack:
            s["text"] += data


@pytest.fixture(scope="module")
def built(tmp_path_factory, kvtk_bin):
    """The report of the conversation trace, written by `kvtk report` (the executable running
    this Python), and the directory its commands run in."""
    where = tmp_path_factory.mktemp("report")
    env = dict(os.environ, KVTK_SWEEP_PYTHON=sys.executable)
    run = subprocess.run([kvtk_bin, "report", "--trace", str(CONVERSATION), "-o", "report.html"],
                         cwd=where, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    for step in ("[1/6]", "[6/6]", "wrote"):
        assert step in run.stderr  # progress on the terminal
    page = (where / "report.html").read_text()
    return where, page


def test_numbers_equal_the_json_of_the_commands_listed(built, kvtk_bin):
    where, page = built
    spans = Spans()
    spans.feed(page)
    assert [c["name"] for c in spans.commands] == list(SOURCES)
    docs = {}
    for c in spans.commands:
        assert c["argv"][0] == "kvtk"
        run = subprocess.run([kvtk_bin] + c["argv"][1:], cwd=where, capture_output=True,
                             text=True, timeout=300)
        assert run.returncode == 0, f"{c['argv']}: {run.stderr}"
        docs[c["name"]] = json.loads((where / f"{c['name']}.json").read_text())
    sourced = [s for s in spans.spans if "data-key" in s]
    derived = [s for s in spans.spans if "data-formula" in s]
    assert len(sourced) > 150 and len(derived) > 40
    assert {s["data-src"] for s in sourced} == set(SOURCES)
    for s in sourced:
        want = lookup(docs[s["data-src"]], s["data-key"])
        got = s["data-value"]
        assert (got == want) if isinstance(want, str) else (float(got) == want), s
        assert s["text"] == format_value(want, s["data-fmt"]), s
    for s in derived:
        want = evaluate(s["data-formula"], docs)
        assert float(s["data-value"]) == want, s
        assert s["text"] == format_value(want, s["data-fmt"]), s


def test_the_recommendation_is_the_smallest_within_one_percent_of_the_highest_net(built):
    assert recommended_row([5.0, 4.0, 9.0, 9.05, 8.0]) == 2
    assert recommended_row([5.0, 5.04, 4.0]) == 0  # the GPU alone within 1 %
    assert recommended_row([5.0, 6.0, 7.0]) == 2
    assert recommended_row([0.0, -1.0]) == 0
    _, page = built
    check_recommendation(page)
    assert "beat LRU on the held-out half" in page  # section 5: tune's choice is pasted


def check_recommendation(page):
    spans = Spans()
    spans.feed(page)
    nets = {int(s["data-key"].split(".")[1]): float(s["data-value"]) for s in spans.spans
            if re.fullmatch(r"estimates\.\d+\.self_hosted\.net_usd", s.get("data-key", ""))}
    best = recommended_row([nets[i] for i in range(len(nets))])
    bold = re.search(r'<tr class="best">(.*?)</tr>', page[page.index('id="tiers"'):], re.S).group(1)
    assert f'data-key="estimates.{best}.self_hosted.net_usd"' in bold
    money = page[page.index('id="money"'):page.index('id="todo"')]
    assert f"estimates.{best}.self_hosted.net_usd" in money
    return best, nets


def test_memory_already_paid_for(tmp_path):
    """At a memory price of 0 every tier nets more than a smaller one: the 1 % rule, not the
    highest net, picks the size, and its flags are the ones to paste."""
    page = pathlib.Path(kvtk.report(CONVERSATION, tmp_path / "r.html", dram_usd_per_gb_month=0)).read_text()
    best, nets = check_recommendation(page)
    assert 0 < best < max(nets, key=nets.get)
    assert "Engine flags for the recommended tier" in page


def test_grids():
    assert tier_sizes(100, 1000) == [100, 200, 400, 800, 1000]
    assert tier_sizes(100, 1000, "sglang") == [200, 400, 800, 1000]  # host > device
    assert tier_sizes(100, 150, "sglang") == [200]
    assert tier_sizes(1000, 1000) == []
    assert tune_capacities(3804, 147881) == [3000, 3804, 15000, 59000]
    assert tune_capacities(3800, 190000) == [3800, 19000, 76000]  # not 3,800 twice
    assert tune_capacities(3804, 190000) == [3804, 19000, 76000]  # 3,800 is within 10 %
    assert tune_capacities(10, 5) == [2]


def test_the_page_is_self_contained(built):
    _, page = built
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    for m in re.finditer(r'(?<![\w-])(?:src|href)\s*=\s*["\']([^"\']*)', page):
        assert m.group(1).startswith("#"), m.group(0)  # in-page links only
    for m in re.finditer(r"url\(([^)]*)\)", page):
        assert m.group(1).startswith("#"), m.group(0)  # SVG clip paths only
    assert "<link" not in page and "<img" not in page and "@import" not in page
    scripts = re.findall(r"<script([^>]*)>", page)
    assert scripts == [' type="application/json" id="kvtk-commands"']  # data, never run
    text = re.sub(r"<[^>]+>", " ", page)
    assert not re.search(r"\b(nan|NaN|inf|Infinity)\b", text)
    for fig in FIGURES:
        assert f'<figure id="{fig}">' in page
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), "element ids repeat (SVG clip paths of two figures?)"


CHECK = """<script>(function () {
  var errs = [];
  window.addEventListener('error', function (e) {
    errs.push('error: ' + (e.message || (e.target && (e.target.src || e.target.href)) || e.type));
  }, true);
  document.addEventListener('securitypolicyviolation', function (e) {
    errs.push('csp: ' + e.violatedDirective + ' ' + e.blockedURI);
  });
  ['error', 'warn'].forEach(function (k) {
    var f = console[k];
    console[k] = function () { errs.push(k + ': ' + [].join.call(arguments, ' ')); f.apply(console, arguments); };
  });
  window.addEventListener('load', function () {
    var W = document.documentElement.clientWidth, over = [];
    if (document.documentElement.scrollWidth > W) over.push('page ' + document.documentElement.scrollWidth);
    document.querySelectorAll('body *').forEach(function (el) {
      if (el.closest('.scroll') || (el.closest('svg') && el.tagName.toLowerCase() !== 'svg')) return;
      var r = el.getBoundingClientRect();
      if (r.width > 0 && r.right > W + 0.5) over.push(el.tagName + '#' + el.id + ' right ' + r.right);
      if (/^(PRE|P|LI|H1|H2|H3|FIGCAPTION)$/.test(el.tagName) && el.scrollWidth > el.clientWidth + 1)
        over.push(el.tagName + ' scrolls ' + el.scrollWidth + ' > ' + el.clientWidth);
    });
    var figs = [].map.call(document.querySelectorAll('figure'), function (f) {
      var s = f.querySelector('svg'), r = s ? s.getBoundingClientRect() : {width: 0, height: 0};
      return {id: f.id, w: r.width, h: r.height,
              n: s ? s.querySelectorAll('path,use,text,rect,line,polyline').length : 0};
    });
    var loads = performance.getEntriesByType('resource').map(function (e) { return e.name; });
    var out = document.createElement('pre');
    out.id = 'kvtk-check';
    out.textContent = JSON.stringify({errors: errs, overflow: over, figures: figs, loads: loads, width: W});
    document.body.appendChild(out);
  });
})();</script>"""


def chromium():
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("KVTK_REQUIRE_REPORT_DEPS") == "1":
            pytest.fail("chromium is not installed and KVTK_REQUIRE_REPORT_DEPS=1 "
                        "(scripts/install-deps --test installs it)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return exe


def headless(exe, tmp, *args):
    """Chromium without a network: a dead proxy and no name resolution."""
    env = dict(os.environ, HOME=str(tmp))
    return subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu",
                           "--disable-dev-shm-usage", f"--user-data-dir={tmp / 'profile'}",
                           "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
                           "--no-first-run", "--hide-scrollbars", *args],
                          env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("width", [1280, 420])
def test_renders_in_chromium_without_network(built, tmp_path, width):
    exe = chromium()
    _, page = built
    # The copy allows inline script (the check) and nothing else the original forbids.
    checked = page.replace("default-src 'none';", "default-src 'none'; script-src 'unsafe-inline';", 1)
    checked = checked.replace("<head>", "<head>" + CHECK, 1)
    path = tmp_path / "checked.html"
    path.write_text(checked)
    run = headless(exe, tmp_path, f"--window-size={width},3000", "--virtual-time-budget=5000",
                   "--dump-dom", path.as_uri())
    assert run.returncode == 0, run.stderr
    m = re.search(r'<pre id="kvtk-check">(.*?)</pre>', run.stdout, re.S)
    assert m, f"the check did not run:\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}"
    check = json.loads(m.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
                       .replace("&amp;", "&"))
    assert check["errors"] == []
    assert check["overflow"] == []
    assert check["loads"] == []  # nothing fetched: no network, no file
    assert [f["id"] for f in check["figures"]] == list(FIGURES)
    for f in check["figures"]:
        assert f["w"] > 0.5 * min(width, 940) and f["h"] > 100 and f["n"] > 20, f


def test_screenshot(built, tmp_path):
    exe = chromium()
    where, _ = built
    png = tmp_path / "report.png"
    run = headless(exe, tmp_path, "--window-size=1280,2400", f"--screenshot={png}",
                   (where / "report.html").as_uri())
    assert run.returncode == 0, run.stderr
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000  # a page, not a blank


def mooncake(path, rows):
    with open(path, "w") as f:
        for i, (t, n, ids) in enumerate(rows):
            f.write(json.dumps({"timestamp": t, "input_length": n, "output_length": 8,
                                "hash_ids": ids}) + "\n")
    return path


def test_one_request_is_refused_with_the_reason(tmp_path):
    trace = mooncake(tmp_path / "one.jsonl", [(0, 1024, [1, 2])])
    with pytest.raises(ValueError, match=r"1 request\(s\); a report needs at least 2"):
        kvtk.report(trace, tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


def test_a_trace_without_times_is_refused(tmp_path):
    trace = tmp_path / "notimes.jsonl"
    trace.write_text('{"kvtk_trace": 1, "block_tokens": 4}\n'
                     '{"input_length": 9, "hash_ids": [1, 2, 3]}\n'
                     '{"input_length": 9, "hash_ids": [1, 2, 4]}\n')
    with pytest.raises(ValueError, match="no arrival times"):
        kvtk.report(trace, tmp_path / "r.html")


def test_bad_settings_are_refused(tmp_path):
    for kwargs, message in [(dict(engine="tgi"), "unknown engine"),
                            (dict(model="gpt-5"), "simulate: .*gpt-5"),
                            (dict(gpus=0), "--gpus 0"), (dict(efficiency=1.5), "efficiency"),
                            (dict(threads=-3), "--threads -3"), (dict(pricing="nope"), "nope"),
                            (dict(model="llama-3-70b"), r"no KV blocks.*--gpus N"),
                            (dict(gpu_hour=float("nan")), "gpu-hour"),
                            (dict(gpu_hour=1e308), r"--gpu-hour 1e\+308: USD in \[0, 1e6\]"),
                            (dict(dram_usd_per_gb_month=1e7), "dram-usd-per-gb-month"),
                            (dict(efficiency=1e-300), "efficiency")]:
        with pytest.raises(ValueError, match=message):
            kvtk.report(CONVERSATION, tmp_path / "r.html", **kwargs)
    (tmp_path / "r.html").write_text("keep")
    with pytest.raises(ValueError, match="exists; pass --force"):
        kvtk.report(CONVERSATION, tmp_path / "r.html")
    assert (tmp_path / "r.html").read_text() == "keep"
    assert os.listdir(tmp_path) == ["r.html"]  # no temporary left


def small_trace(tmp_path):
    """Two requests sharing a prefix, one second apart."""
    return mooncake(tmp_path / "two.jsonl", [(0, 2048, [1, 2, 3, 4]), (1000, 2048, [1, 2, 3, 5])])


def test_two_requests_give_a_page_without_nan(tmp_path):
    out = kvtk.report(small_trace(tmp_path), tmp_path / "r.html", gpu_blocks=2)
    page = pathlib.Path(out).read_text()
    text = re.sub(r"<[^>]+>", " ", page)
    assert not re.search(r"\b(nan|NaN|inf|Infinity)\b", text)
    assert '<figure id="fig-mrc">' in page
    assert "Keep LRU" in page  # tune's choice did not beat LRU on the held-out half


def test_requests_the_engine_never_ran_are_named(tmp_path):
    trace = mooncake(tmp_path / "long.jsonl", [(0, 4096, list(range(8))), (500, 4096, list(range(8))),
                                               (900, 1024, [1, 2])])
    page = html.unescape(pathlib.Path(kvtk.report(trace, tmp_path / "r.html", gpu_blocks=4)).read_text())
    assert page.count("2 requests never ran in the engine's replay") == 2  # tiers and money


def test_tensor_parallel_flags(tmp_path):
    page = pathlib.Path(kvtk.report(small_trace(tmp_path), tmp_path / "r.html", gpus=2,
                                    model="llama-3-70b")).read_text()
    assert "vllm serve $MODEL --tensor-parallel-size 2" in page
    page = pathlib.Path(kvtk.report(small_trace(tmp_path), tmp_path / "r.html", gpus=2, force=True,
                                    engine="sglang", model="llama-3-70b")).read_text()
    assert "--model-path $MODEL --tp-size 2" in page


def test_a_gpu_beyond_the_working_set_says_so(tmp_path):
    out = kvtk.report(small_trace(tmp_path), tmp_path / "r.html", gpu_blocks=1000)
    page = html.unescape(pathlib.Path(out).read_text())
    assert "at least the trace's working set" in page
    assert "fig-tiers" not in page  # no tier can add a hit: none is tried
    assert "already hold the trace's working set" in page
