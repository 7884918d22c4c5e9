"""kvtk sweeps (kvtk._sweep, docs/sweeps.md): the spec's checks, cell ids, the local and Ray
backends against direct calls, retries after a dead worker, interrupted and resumed sweeps, and
the output files. Tests that need Ray, pyarrow or PyYAML skip without them, unless
KVTK_REQUIRE_SWEEP_DEPS=1 (scripts/python sets it) makes a missing one a failure."""
import importlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import kvtk
from conftest import CONVERSATION, FORMATS, ROOT

VOLATILE = ("worker", "wall_s", "finished_at", "timing")


def need(module):
    try:
        return importlib.import_module(module)
    except ImportError:
        if os.environ.get("KVTK_REQUIRE_SWEEP_DEPS") == "1":
            pytest.fail(f"{module} is not installed and KVTK_REQUIRE_SWEEP_DEPS=1 "
                        f"(pip install -r python/requirements-sweep.txt)")
        pytest.skip(f"{module} is not installed (pip install ./python[sweep])")


def stable(rows):
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in rows]


def grid_spec(policies=("lru", "s3fifo"), capacities=(1000, 5000), **run):
    return {"version": 1, "traces": {"conv": str(CONVERSATION)},
            "runs": [dict({"command": "replay", "traces": ["conv"], "options": {"opt": False},
                           "grid": {"policy": list(policies), "capacity": list(capacities)}},
                          **run)]}


MIXED = {"version": 1, "traces": {"conv": str(CONVERSATION)},
         "runs": [{"command": "replay", "traces": ["conv"], "options": {"opt": False},
                   "grid": {"policy": ["lru", "s3fifo"], "capacity": [1000, 5000]}},
                  {"command": "mrc", "traces": ["conv"], "options": {"points": 3}},
                  {"command": "cost", "options": {"input_tokens": 1e9},
                   "grid": {"hit_ratio": [0.25, 0.5]}}]}
MIXED_ROWS = 4 + 3 + 2


def write_spec(path, spec):
    path.write_text(json.dumps(spec, indent=1))
    return path


def cli(*args, env=None, cwd=None, **kw):
    full = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "kvtk._sweep", *map(str, args)], env=full,
                          cwd=cwd, capture_output=True, text=True, timeout=180, **kw)


# --- the spec -------------------------------------------------------------------------------

@pytest.mark.parametrize("change, message", [
    (lambda s: s.update(bogus=1), "bogus: unknown key"),
    (lambda s: s.update(version=2), "version: unsupported spec version"),
    (lambda s: s["runs"][0].update(command="tune"), "runs[0].command: unknown command 'tune'"),
    (lambda s: s["runs"].append({"command": "replay", "traces": ["conv"],
                                 "grid": {"polcy": ["lru"]}}), "runs[1].grid.polcy: unknown option"),
    (lambda s: s["runs"][0]["options"].update(bogus=True), "runs[0].options.bogus: unknown option"),
    (lambda s: s["runs"][0]["options"].update(trace="x"), "runs[0].options.trace: not allowed"),
    (lambda s: s["runs"][0].update(traces=["nope"]), "runs[0].traces[0]: unknown trace 'nope'"),
    (lambda s: s["runs"][0]["grid"].update(policy="lru"), "runs[0].grid.policy: a grid axis is a list"),
    (lambda s: s["runs"][0]["grid"].update(policy=[]), "runs[0].grid.policy: a grid axis needs"),
    (lambda s: s["runs"][0]["options"].update(policy="lru"), "runs[0].grid.policy: also fixed in options"),
    (lambda s: s["runs"].append({"command": "cost", "traces": ["conv"]}), "runs[1].traces: cost reads no trace"),
    (lambda s: s["runs"].append({"command": "mrc"}), "runs[1].traces: mrc needs a list"),
    (lambda s: s["runs"][0].update(config="x.json"), "runs[0].config: only simulate"),
    (lambda s: s["traces"].update(gone="nowhere.jsonl"), "traces.gone.path: no such file"),
    (lambda s: s["traces"].update(x={"path": str(CONVERSATION), "shipp": True}), "traces.x.shipp: unknown key"),
    (lambda s: s.update(retries=-1), "retries: a whole number"),
    (lambda s: s.update(runs=[]), "runs: a non-empty list"),
])
def test_spec_errors_name_the_file_and_the_place(tmp_path, change, message):
    spec = grid_spec()
    change(spec)
    path = write_spec(tmp_path / "bad.json", spec)
    with pytest.raises(ValueError) as e:
        kvtk.sweep(path)
    assert str(e.value).startswith(f"{path}: ")
    assert message in str(e.value)


def test_spec_syntax_error_and_missing_yaml(tmp_path, monkeypatch):
    bad = tmp_path / "s.json"
    bad.write_text('{"runs": [}')
    with pytest.raises(ValueError, match=r"s\.json: line 1, column 11: not valid JSON"):
        kvtk.sweep(bad)
    monkeypatch.setitem(sys.modules, "yaml", None)  # import yaml raises ImportError
    y = tmp_path / "s.yaml"
    y.write_text("runs: []\n")
    with pytest.raises(ValueError, match="reading a YAML spec needs PyYAML"):
        kvtk.sweep(y)


def test_yaml_spec_equals_json(tmp_path):
    yaml = need("yaml")
    from kvtk._sweep import cells, spec

    j = write_spec(tmp_path / "s.json", MIXED)
    y = tmp_path / "s.yaml"
    y.write_text(yaml.safe_dump(MIXED, sort_keys=False))
    a, b = cells.expand(spec.load_spec(j)), cells.expand(spec.load_spec(y))
    assert [c.id for c in a] == [c.id for c in b]
    assert len(a) == 4 + 1 + 2


def test_paths_are_relative_to_the_spec_file(tmp_path):
    from kvtk._sweep import cells, spec

    sub = tmp_path / "specs"
    sub.mkdir()
    s = {"traces": {"conv": os.path.relpath(CONVERSATION, sub)},
         "runs": [{"command": "replay", "traces": ["conv"],
                   "options": {"pricing": "prices.json", "capacity": 1000}}]}
    (sub / "prices.json").write_text("{}")
    loaded = spec.load_spec(write_spec(sub / "s.json", s))
    assert loaded.traces["conv"].path == str(CONVERSATION)
    (cell,) = cells.expand(loaded)
    assert cell.run_options["pricing"] == str(sub / "prices.json")
    assert cell.options["pricing"] == "prices.json"  # the id keeps what the spec says


def test_example_specs_in_docs():
    from kvtk._sweep import cells, spec

    j = cells.expand(spec.load_spec(ROOT / "docs" / "examples" / "sweep.json"))
    assert len(j) == 48 + 2 + 4 + 3
    if importlib.util.find_spec("yaml") or os.environ.get("KVTK_REQUIRE_SWEEP_DEPS") == "1":
        y = cells.expand(spec.load_spec(ROOT / "docs" / "examples" / "sweep.yaml"))
        assert [c.id for c in y] == [c.id for c in j]


# --- cell ids ---------------------------------------------------------------------------------

def test_golden_cell_id():
    # Pinned: changing how ids are made would make every existing output's cells rerun on
    # --resume. sha256 of {"command":"replay","options":{"capacity":["1000"],"opt":false,
    # "policy":["lru"]},"trace":"conv"} (sorted keys, compact), first 16 hex digits.
    from kvtk._sweep import cells, spec

    (c,) = cells.expand(spec.load_spec(grid_spec(policies=["lru"], capacities=[1000])))
    assert c.id == "85c6ae688a7465af"
    (c,) = cells.expand(spec.load_spec({"runs": [{"command": "cost", "options": {"input_tokens": 1e9},
                                                  "grid": {"hit_ratio": [0.5]}}]}))
    assert c.id == "5311c0eebe7c8460"


def test_ids_ignore_spelling_order_and_location(tmp_path):
    from kvtk._sweep import cells, spec

    def ids(s):
        return sorted(c.id for c in cells.expand(spec.load_spec(s)))

    a = grid_spec(capacities=[1000, 5000])
    b = grid_spec(capacities=["1000", [5000]], policies=["s3fifo", "lru"])
    assert ids(a) == ids(b)
    # Another copy of the trace under another path: the same cells (the id has the trace's
    # spec name, not its path), and a grid point of null omits the option.
    other = tmp_path / "copy.jsonl"
    other.write_bytes(CONVERSATION.read_bytes())
    c = grid_spec()
    c["traces"]["conv"] = str(other)
    assert ids(c) == ids(a)
    d = grid_spec(policies=[None])
    d["runs"][0]["grid"]["capacity"] = [1000]
    (cell,) = cells.expand(spec.load_spec(d))
    assert "policy" not in cell.options and cell.axes == {"policy": None, "capacity": 1000}
    # Two runs giving the same cell keep it once.
    e = grid_spec()
    e["runs"].append(e["runs"][0])
    assert len(ids(e)) == 4


def test_kvtb_checksum_is_the_header_checksum():
    from kvtk._sweep.cells import trace_checksum

    # bytes 120..127 of the header, little-endian (sim/formats/kvtb.hpp)
    assert trace_checksum(str(FORMATS / "small.kvtb")) == "kvtb:2dba4def530dbabd"
    rows = kvtk.sweep({"traces": {"small": str(FORMATS / "small.kvtb")},
                       "runs": [{"command": "replay", "traces": ["small"],
                                 "options": {"capacity": 100}}]}, pool="thread")
    assert rows[0]["trace_checksum"] == "kvtb:2dba4def530dbabd" and rows[0]["status"] == "ok"


# --- running ----------------------------------------------------------------------------------

def test_local_sweep_equals_direct_replay():
    rows = kvtk.sweep(grid_spec(), workers=2)
    assert [(r["policy"], r["capacity"]) for r in rows] == [
        ("lru", "1000"), ("lru", "5000"), ("s3fifo", "1000"), ("s3fifo", "5000")]
    direct = kvtk.replay(CONVERSATION, policy=["lru", "s3fifo"], capacity=[1000, 5000], opt=False)
    want = [{k: v for k, v in r.items() if k not in ("seconds", "block_refs_per_second")}
            for r in direct]
    assert [json.loads(r["result"]) for r in rows] == want
    for r in rows:
        assert r["status"] == "ok" and r["attempts"] == 1 and r["error"] is None
        assert r["block_hit_ratio"] == json.loads(r["result"])["block_hit_ratio"]
        assert r["ideal_block_hit_ratio"] == direct.trace["ideal_block_hit_ratio"]
        assert r["trace_checksum"].startswith("sha256:") and r["kvtk_version"] == kvtk.__version__
        assert json.loads(r["context"])["trace"]["path"] == str(CONVERSATION)
        assert "seconds" in json.loads(r["timing"])
    threads = kvtk.sweep(grid_spec(), workers=2, pool="thread")
    assert stable(threads) == stable(rows)


def test_sweep_over_engine_offload_tiers():
    # The engines' own offload tiers sweep like any replay option: one cell per spec, each with
    # the engine's GPU-only row and its offload row, equal to the direct replay.
    specs = ["host:2x,write_policy=write_through", "host:2x,write_policy=write_back"]
    spec = {"version": 1, "traces": {"conv": str(CONVERSATION)},
            "runs": [{"command": "replay", "traces": ["conv"],
                      "options": {"opt": False, "engine": "sglang", "capacity": [300]},
                      "grid": {"offload": specs}}]}
    rows = kvtk.sweep(spec, workers=1)
    assert [r["cell_rows"] for r in rows] == [2] * 4 and all(r["status"] == "ok" for r in rows)
    offload = [json.loads(r["result"]) for r in rows if r["row"] == 1]
    for o, s in zip(offload, specs):
        direct = kvtk.replay(CONVERSATION, engine="sglang", capacity=[300], offload=s, opt=False)
        assert o["offload"] == direct[1]["offload"]
    assert offload[1]["block_hits"] > offload[0]["block_hits"]  # write_back wins here


def test_mixed_commands_and_a_bad_cell(tmp_path):
    spec = json.loads(json.dumps(MIXED))
    spec["runs"].append({"command": "replay", "traces": ["conv"], "grid": {"policy": ["nope"]}})
    path = write_spec(tmp_path / "s.json", spec)
    r = cli("--spec", path, "--out", tmp_path / "o.jsonl", "--workers", 2)
    assert r.returncode == 1, r.stderr
    rows = kvtk.read_sweep(tmp_path / "o.jsonl")
    assert len(rows) == MIXED_ROWS + 1
    assert [r["command"] for r in rows] == ["replay"] * 4 + ["mrc"] * 3 + ["cost"] * 2 + ["replay"]
    mrc = [r for r in rows if r["command"] == "mrc"]
    assert [r["row"] for r in mrc] == [0, 1, 2] and all(r["cell_rows"] == 3 for r in mrc)
    assert mrc == sorted(mrc, key=lambda r: r["capacity_blocks"])
    cost = [r for r in rows if r["command"] == "cost"]
    assert [r["saving_fraction"] for r in cost] == [
        kvtk.cost(hit_ratio=h, input_tokens=1e9)["saving_fraction"] for h in (0.25, 0.5)]
    bad = rows[-1]
    assert bad["status"] == "error" and bad["attempts"] == 1 and "unknown policy 'nope'" in bad["error"]
    assert bad["result"] is None and bad["block_hit_ratio"] is None
    assert "7 ok, 1 error, 0 failed" in r.stderr


def test_dead_worker_costs_one_attempt(tmp_path, monkeypatch):
    marker = tmp_path / "kill"
    monkeypatch.setenv("KVTK_SWEEP_TEST_KILL_ONCE", str(marker))
    rows = kvtk.sweep(grid_spec(), workers=2)
    monkeypatch.delenv("KVTK_SWEEP_TEST_KILL_ONCE")
    assert marker.exists()
    assert [r["status"] for r in rows] == ["ok"] * 4
    assert sorted(r["attempts"] for r in rows) == [1, 1, 1, 2]
    assert stable([dict(r, attempts=1) for r in rows]) == stable(kvtk.sweep(grid_spec(), workers=2))


def test_failed_cell_is_rerun_by_resume(tmp_path):
    # With no retries the killed cell fails (exit 1); --resume reruns failed cells only.
    spec = write_spec(tmp_path / "s.json", grid_spec())
    out = tmp_path / "o.jsonl"
    r = cli("--spec", spec, "--out", out, "--workers", 1, "--retries", 0,
            env={"KVTK_SWEEP_TEST_KILL_ONCE": str(tmp_path / "kill")})
    assert r.returncode == 1, r.stderr
    rows = kvtk.read_sweep(out)
    assert [r["status"] for r in rows] == ["failed", "ok", "ok", "ok"]
    assert "worker process died" in rows[0]["error"]
    before = {r["cell_id"]: r["finished_at"] for r in rows}
    r = cli("--spec", spec, "--out", out, "--resume")
    assert r.returncode == 0, r.stderr
    assert "3 of 4 cells already" in r.stderr
    again = kvtk.read_sweep(out)
    assert [r["status"] for r in again] == ["ok"] * 4
    assert [r["finished_at"] == before[r["cell_id"]] for r in again] == [False, True, True, True]


def test_a_changed_trace_reruns_its_cells(tmp_path):
    trace = tmp_path / "t.jsonl"
    lines = CONVERSATION.read_bytes().splitlines(keepends=True)
    trace.write_bytes(b"".join(lines[:3000]))
    spec = grid_spec()
    spec["traces"]["conv"] = str(trace)
    out = tmp_path / "o.jsonl"
    first = kvtk.read_sweep(kvtk.sweep(spec, out=out, workers=2))
    trace.write_bytes(b"".join(lines[:2000]))
    second = kvtk.read_sweep(kvtk.sweep(spec, out=out, workers=2, resume=True))
    assert [r["cell_id"] for r in second] == [r["cell_id"] for r in first]
    assert all(a["trace_checksum"] != b["trace_checksum"] for a, b in zip(first, second))
    assert all(json.loads(b["context"])["trace"]["requests"] == 2000 for b in second)


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_interrupted_then_resumed_equals_uninterrupted(tmp_path, suffix):
    if suffix == "parquet":
        need("pyarrow")
    spec = write_spec(tmp_path / "s.json", MIXED)
    whole, part = tmp_path / f"whole.{suffix}", tmp_path / f"part.{suffix}"
    assert cli("--spec", spec, "--out", whole, "--workers", 2).returncode == 0
    r = cli("--spec", spec, "--out", part, "--workers", 2,
            env={"KVTK_SWEEP_TEST_INTERRUPT_AFTER": "3"})
    assert r.returncode == 130, r.stderr
    assert "interrupted" in r.stderr
    partial = kvtk.read_sweep(part)  # a valid file
    assert 3 <= len(partial) < MIXED_ROWS
    assert not os.path.exists(f"{part}.journal.jsonl")
    r = cli("--spec", spec, "--out", part)
    assert r.returncode == 2 and "--resume" in r.stderr  # refused without --resume/--force
    r = cli("--spec", spec, "--out", part, "--workers", 2, "--resume")
    assert r.returncode == 0, r.stderr
    assert stable(kvtk.read_sweep(part)) == stable(kvtk.read_sweep(whole))
    r = cli("--spec", spec, "--out", part, "--force", "--workers", 2)
    assert r.returncode == 0 and "already" not in r.stderr


def test_torn_last_line_is_dropped_on_resume(tmp_path):
    spec = write_spec(tmp_path / "s.json", grid_spec())
    out = tmp_path / "o.jsonl"
    assert cli("--spec", spec, "--out", out, "--workers", 2).returncode == 0
    whole = kvtk.read_sweep(out)
    lines = out.read_bytes().splitlines(keepends=True)
    out.write_bytes(b"".join(lines[:2]) + lines[2][:40])  # a crash while writing the third row
    assert len(kvtk.read_sweep(out)) == 2
    r = cli("--spec", spec, "--out", out, "--resume", "--workers", 2)
    assert r.returncode == 0, r.stderr
    assert stable(kvtk.read_sweep(out)) == stable(whole)


def test_resume_never_truncates_a_file_that_is_not_a_sweep(tmp_path):
    # A user's JSON file without a final newline is not a "torn" sweep row: refused, untouched.
    spec = write_spec(tmp_path / "s.json", grid_spec())
    notes = tmp_path / "notes.jsonl"
    notes.write_bytes(b'{"name": "my notes"}')
    r = cli("--spec", spec, "--out", notes, "--resume")
    assert r.returncode == 2 and "not a sweep" in r.stderr
    assert notes.read_bytes() == b'{"name": "my notes"}'


def test_resume_keeps_columns_of_a_changed_grid(tmp_path):
    out = tmp_path / "o.jsonl"
    first = write_spec(tmp_path / "a.json", grid_spec(policies=("lru",), capacities=(1000,)))
    assert cli("--spec", first, "--out", out).returncode == 0
    spec = grid_spec(policies=("lru",), capacities=(1000,))
    spec["runs"][0]["options"] = dict(spec["runs"][0].get("options", {}), policy="lru")
    del spec["runs"][0]["grid"]["policy"]
    second = write_spec(tmp_path / "b.json", spec)
    assert cli("--spec", second, "--out", out, "--resume").returncode == 0
    rows = kvtk.read_sweep(out)
    assert any(r.get("policy") == "lru" for r in rows)  # the dropped axis's column survives


def test_resume_reports_kept_error_cells(tmp_path):
    bad = grid_spec(policies=("lru",), capacities=(1000,))
    bad["runs"].append({"command": "replay", "traces": ["conv"], "grid": {"policy": ["nope"]}})
    spec = write_spec(tmp_path / "s.json", bad)
    out = tmp_path / "o.jsonl"
    assert cli("--spec", spec, "--out", out, "--workers", 2).returncode == 1  # one bad cell
    r = cli("--spec", spec, "--out", out, "--resume", "--workers", 2)
    assert r.returncode == 1, r.stderr  # still an error row in the output


def test_parquet_equals_jsonl(tmp_path):
    need("pyarrow")
    import pyarrow.parquet as pq

    a = kvtk.sweep(MIXED, out=tmp_path / "o.parquet", workers=2)
    b = kvtk.sweep(MIXED, out=tmp_path / "o.jsonl", workers=2)
    assert a == str(tmp_path / "o.parquet")
    assert stable(kvtk.read_sweep(a)) == stable(kvtk.read_sweep(b))
    schema = pq.read_schema(a)
    assert str(schema.field("block_hit_ratio").type) == "double"
    assert str(schema.field("attempts").type) == "int64"
    assert str(schema.field("result").type) == "string"
    with pytest.raises(ValueError, match="exists: --resume"):
        kvtk.sweep(MIXED, out=a)


def test_sigint_closes_a_valid_output(tmp_path):
    spec = write_spec(tmp_path / "s.json", grid_spec(capacities=[1000, 2000, 3000, 4000, 5000]))
    out = tmp_path / "o.jsonl"
    env = dict(os.environ, KVTK_SWEEP_TEST_CELL_DELAY="0.4")
    p = subprocess.Popen([sys.executable, "-m", "kvtk._sweep", "--spec", str(spec), "--out",
                          str(out), "--workers", "2"], env=env, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not out.exists() or not out.read_bytes().count(b"\n")):
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGINT)  # as Ctrl-C does: the driver and its workers
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    rows = kvtk.read_sweep(out)
    assert 1 <= len(rows) < 10 and all(r["status"] == "ok" for r in rows)


def test_cli_usage_and_dry_run(tmp_path):
    spec = write_spec(tmp_path / "s.json", MIXED)
    r = cli("--spec", spec, "--dry-run")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 7
    assert r.stdout.split()[0] == "85c6ae688a7465af"  # the golden id: the first cell
    assert cli("--out", tmp_path / "o.jsonl").returncode == 2  # no --spec
    assert cli("--spec", spec).returncode == 2  # no --out
    r = cli("--spec", spec, "--out", tmp_path / "o.csv")
    assert r.returncode == 2 and ".jsonl or .parquet" in r.stderr
    bad = write_spec(tmp_path / "bad.json", {"runs": [{"command": "replay", "traces": ["x"]}]})
    r = cli("--spec", bad, "--out", tmp_path / "o.jsonl")
    assert r.returncode == 2 and "runs[0].traces[0]: unknown trace 'x'" in r.stderr
    assert not (tmp_path / "o.jsonl").exists()


# --- Ray --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ray_session():
    """One single-node Ray for the module (its start-up takes seconds)."""
    ray = need("ray")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Ray's session files in a directory of this module's own (short: Ray's socket paths must
    # fit in 107 bytes), removed afterwards.
    import shutil
    import tempfile

    temp = tempfile.mkdtemp(prefix="kr")
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=128 << 20,
             logging_level="WARNING", _temp_dir=temp)
    yield ray
    ray.shutdown()
    shutil.rmtree(temp, ignore_errors=True)


def test_ray_equals_local(ray_session, tmp_path):
    local = kvtk.sweep(MIXED, workers=2)
    on_ray = kvtk.sweep(MIXED, backend="ray")
    assert stable(on_ray) == stable(local)
    assert all(r["worker"].startswith("ray:") for r in on_ray)


def test_ray_dead_worker_is_retried(ray_session, tmp_path, monkeypatch):
    monkeypatch.setenv("KVTK_SWEEP_TEST_KILL_ONCE", str(tmp_path / "kill"))
    rows = kvtk.sweep(grid_spec(), backend="ray")
    assert (tmp_path / "kill").exists()
    assert [r["status"] for r in rows] == ["ok"] * 4
    assert sorted(r["attempts"] for r in rows) == [1, 1, 1, 2]


def test_ray_shipped_trace_equals_shared_path(ray_session, tmp_path, monkeypatch):
    # The ship dir is the test's own: set on the driver after Ray started, it must still reach
    # the workers (the driver passes it with each task).
    ship = tmp_path / "ship"
    monkeypatch.setenv("KVTK_SWEEP_SHIP_DIR", str(ship))
    spec = grid_spec()
    shipped = json.loads(json.dumps(spec))
    shipped["traces"]["conv"] = {"path": str(CONVERSATION), "ship": True}
    a = kvtk.sweep(spec, backend="ray")
    b = kvtk.sweep(shipped, backend="ray", out=tmp_path / "o.jsonl")
    assert stable(kvtk.read_sweep(b)) == stable(a)
    checksum = a[0]["trace_checksum"]
    copy = ship / checksum.replace(":", "-") / CONVERSATION.name
    assert copy.read_bytes() == CONVERSATION.read_bytes()
    assert (ship.stat().st_mode & 0o777) == 0o700


def test_ship_dir_refuses_a_directory_others_can_write(monkeypatch, tmp_path):
    from kvtk._sweep import ray_backend

    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    with pytest.raises(OSError, match="writable by no one else|only this user can write"):
        ray_backend._check_private(str(open_dir))
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    ray_backend._check_private(str(private))  # accepted


def test_ship_dir_default_is_per_user_under_tempdir(monkeypatch, tmp_path):
    from kvtk._sweep import ray_backend

    monkeypatch.delenv("KVTK_SWEEP_SHIP_DIR", raising=False)
    monkeypatch.setattr(ray_backend.tempfile, "gettempdir", lambda: str(tmp_path))
    assert ray_backend.ship_dir() == str(tmp_path / f"kvtk-sweep-traces-{os.getuid()}")
    monkeypatch.setenv("KVTK_SWEEP_SHIP_DIR", "rel/ship")
    assert ray_backend.ship_dir() == os.path.abspath("rel/ship")
    assert ray_backend.ship_dir(str(tmp_path / "given")) == str(tmp_path / "given")
