"""The kvtk Python package against the CLI it mirrors: same results, same errors, and the
behaviour of long calls (progress, Ctrl-C, the GIL)."""
import json
import os
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

import kvtk
from conftest import CONVERSATION, FORMATS, ROOT


def cli_json(kvtk_bin, *args):
    out = subprocess.run([kvtk_bin, *args, "--json", "-"], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def without_time(rows):
    return [{k: v for k, v in r.items() if k not in ("seconds", "block_refs_per_second")}
            for r in rows]


def test_version_equals_cli(kvtk_bin):
    out = subprocess.run([kvtk_bin, "--version"], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == f"kvtk {kvtk.__version__}"


def test_trace_views_are_consistent_and_read_only():
    t = kvtk.load_trace(CONVERSATION)
    assert len(t) == 12031
    assert t.format == "mooncake" and t.block_tokens == 512
    assert t.block_offsets[0] == 0 and t.block_offsets[-1] == t.block_refs == len(t.block_keys)
    assert len(t.input_tokens) == len(t.output_tokens) == len(t.arrival_s) == len(t)
    assert t.block_keys.dtype == np.uint64 and not t.block_keys.flags.writeable
    with pytest.raises(ValueError):
        t.block_keys[0] = 1
    # Views keep the trace alive after the Trace object itself is gone.
    keys = t.block_keys
    first = int(keys[0])
    del t
    assert int(keys[0]) == first


def test_kvtb_and_jsonl_load_the_same_trace():
    a = kvtk.load_trace(FORMATS / "small.kvtb")
    b = kvtk.load_trace(FORMATS / "small.kvtk.jsonl")
    assert a.format == "kvtb" and b.format == "kvtk"
    for col in ("block_keys", "block_offsets", "input_tokens", "output_tokens", "arrival_s"):
        assert np.array_equal(getattr(a, col), getattr(b, col)), col


def test_replay_equals_cli(kvtk_bin):
    t = kvtk.load_trace(CONVERSATION)
    py = kvtk.replay(t, index=["radix", "flat"], policy=["lru", "s3fifo", "lru+adaptive"],
                     capacity=[1000, "5000"])
    cli = cli_json(kvtk_bin, "replay", "--trace", str(CONVERSATION), "--index", "radix,flat",
                   "--policy", "lru,s3fifo,lru+adaptive", "--capacity", "1000,5000")["results"]
    assert len(py) == 10  # lru+adaptive is a radix policy only
    assert without_time(py) == without_time(cli)
    assert all(0 < r["bound_fraction"] <= r["opt_fraction"] <= 1 for r in py)


def test_engine_modes_equal_cli(kvtk_bin):
    # replay's engine accounting and simulate's engine scheduler, as the CLI gives them.
    py = kvtk.replay(CONVERSATION, engine=["vllm", "sglang"], capacity=[1000], opt=False)
    cli = cli_json(kvtk_bin, "replay", "--trace", str(CONVERSATION), "--engine", "vllm,sglang",
                   "--capacity", "1000", "--no-opt")["results"]
    assert [r["engine"] for r in py] == ["vllm", "sglang"]
    assert without_time(py) == without_time(cli)
    # The engine's GPU cache on top of kvtk's tiers (tier_top), as the CLI's --tier-top.
    py = kvtk.replay(CONVERSATION, tiers="hbm:1000:vllm,dram:4000:lru", tier_top="vllm")
    cli = cli_json(kvtk_bin, "replay", "--trace", str(CONVERSATION), "--tier-top", "vllm",
                   "--tiers", "hbm:1000:vllm,dram:4000:lru")["results"]
    assert without_time(py) == without_time(cli)
    assert py[0]["engine"] == "vllm" and py[0]["tiers"]["top_tier"] == "vllm"
    # vLLM's own CPU offloading under its pool (offload), as the CLI's --offload.
    py = kvtk.replay(CONVERSATION, engine="vllm", capacity=[1000], offload="cpu:4000:lru",
                     opt=False)
    cli = cli_json(kvtk_bin, "replay", "--trace", str(CONVERSATION), "--engine", "vllm",
                   "--capacity", "1000", "--offload", "cpu:4000:lru", "--no-opt")["results"]
    assert without_time(py) == without_time(cli)
    assert [r["index"] for r in py] == ["hashchain", "offload"]
    assert py[1]["block_hits"] > py[0]["block_hits"]
    # SGLang's HiCache under its radix cache: a host spec runs under --engine sglang.
    py = kvtk.replay(CONVERSATION, engine="sglang", capacity=[300],
                     offload="host:2x,write_policy=write_through_selective", opt=False)
    cli = cli_json(kvtk_bin, "replay", "--trace", str(CONVERSATION), "--engine", "sglang",
                   "--capacity", "300", "--offload", "host:2x,write_policy=write_through_selective",
                   "--no-opt")["results"]
    assert without_time(py) == without_time(cli)
    assert py[1]["offload"]["counters"]["host_hit_blocks"] == 859
    # Dynamo KVBM's host and disk tiers under vLLM's pool.
    spec = "kvbm:2000,disk=8000,disk_filter=off"
    py = kvtk.replay(CONVERSATION, engine="vllm", capacity=[1000], offload=spec, opt=False)
    cli = cli_json(kvtk_bin, "replay", "--trace", str(CONVERSATION), "--engine", "vllm",
                   "--capacity", "1000", "--offload", spec, "--no-opt")["results"]
    assert without_time(py) == without_time(cli)
    assert [t["name"] for t in py[1]["offload"]["tiers"]] == ["gpu", "host", "disk"]
    assert py[1]["offload"]["counters"]["disk_hit_blocks"] > 0
    # LMCache's CPU and local disk backends under vLLM's pool.
    spec = "lmcache-cpu:400:lru,chunk_size=512,disk=2000"
    py = kvtk.replay(CONVERSATION, engine="vllm", capacity=[300], offload=spec, opt=False)
    cli = cli_json(kvtk_bin, "replay", "--trace", str(CONVERSATION), "--engine", "vllm",
                   "--capacity", "300", "--offload", spec, "--no-opt")["results"]
    assert without_time(py) == without_time(cli)
    assert [t["name"] for t in py[1]["offload"]["tiers"]] == ["gpu", "lmcache-cpu", "disk"]
    assert py[1]["offload"]["tiers"][2]["hit_blocks"] == 3784
    sim = kvtk.simulate(CONVERSATION, engine="sglang", model="qwen2.5-7b", gpu="h100",
                        max_output_tokens=8)
    assert sim["result"]["scheduler"]["scheduler"] == "sglang"
    assert sim["result"]["preemptions"] >= 0


def test_tune_equals_cli(kvtk_bin):
    py = kvtk.tune(CONVERSATION, capacity=[1000, "5859"], partial_block="cache")
    cli = cli_json(kvtk_bin, "tune", "--trace", str(CONVERSATION), "--capacity", "1000,5859",
                   "--partial-block", "cache")
    assert py["results"] == cli["results"]
    assert py["trace"]["tune_requests"] + py["trace"]["holdout_requests"] == 12031
    for row in py["results"]:
        assert row["chosen"]["opt_fraction"] > row["lru"]["opt_fraction"]
    with pytest.raises(ValueError, match="holdout"):
        kvtk.tune(CONVERSATION, capacity=100, holdout=1.5)


def test_mrc_and_trace_stats_equal_cli(kvtk_bin):
    py = kvtk.mrc(CONVERSATION, points=6, opt=True)
    cli = cli_json(kvtk_bin, "mrc", "--trace", str(CONVERSATION), "--points", "6", "--opt")
    assert py["curve"] == cli["curve"] and py["trace"] == cli["trace"]
    assert kvtk.trace_stats(CONVERSATION) == cli_json(kvtk_bin, "trace", "stats",
                                                      str(CONVERSATION))


def test_simulate_equals_cli_and_has_request_columns(kvtk_bin):
    t = kvtk.load_trace(CONVERSATION)
    config = ROOT / "sim" / "configs" / "fig10_local.json"
    s = kvtk.simulate(t, config, router="cache-aware")
    cli = cli_json(kvtk_bin, "simulate", "--trace", str(CONVERSATION), "--config", str(config),
                   "--set", "router=cache-aware")
    assert s["result"] == cli["result"]
    req = s["requests"]
    assert len(req["arrival_s"]) == len(t)
    assert req["rejected"].dtype == np.bool_
    assert np.all(req["first_token_s"] >= req["arrival_s"])
    assert np.all(req["hit_blocks"] <= req["blocks"])
    # The override reached the config, as --set router=cache-aware does.
    assert s["config"]["router"] == "cache-aware"
    # A dict config is the same as the file.
    with open(config) as f:
        inline = kvtk.simulate(t, json.load(f), router="cache-aware")
    assert inline["result"] == s["result"]


@pytest.mark.parametrize("engine,spec,hits", [("vllm", "cpu:8000:lru", "cpu_hit_blocks"),
                                               ("vllm", "lmcache-cpu:8000,chunk_size=512", "cpu_hit_blocks"),
                                               ("vllm", "kvbm:2000,disk=8000,disk_filter=off", "disk.hit_blocks"),
                                               ("vllm", "lmcache-cpu:2000,chunk_size=512,disk=8000", "disk.hit_blocks"),
                                               ("sglang", "host:8000", "host_hit_blocks")])
def test_simulate_with_engine_offload_equals_cli(kvtk_bin, engine, spec, hits):
    opts = dict(engine=engine, model="qwen2.5-7b", gpu="h100", local_cache=1000,
                max_output_tokens=4, offload=spec)
    s = kvtk.simulate(CONVERSATION, requests=False, **opts)
    cli = cli_json(kvtk_bin, "simulate", "--trace", str(CONVERSATION),
                   *[a for k, v in opts.items() for a in ("--set", f"{k}={v}")])
    assert s["result"] == cli["result"]
    off = s["result"]["offload"]
    counted = off
    for key in hits.split("."):
        counted = counted[key]
    assert off["spec"] == spec and counted > 0
    assert s["result"]["dram_block_hits"] > 0
    with pytest.raises(ValueError, match="needs scheduler vllm-v1"):
        kvtk.simulate(CONVERSATION, engine="sglang", offload="cpu:100")
    with pytest.raises(ValueError, match="needs scheduler sglang"):
        kvtk.simulate(CONVERSATION, engine="vllm", offload="host:100")


def test_bad_options_raise_value_error_with_the_cli_message():
    with pytest.raises(ValueError, match="unknown policy 'nope'"):
        kvtk.replay(CONVERSATION, policy="nope")
    with pytest.raises(ValueError, match="unknown key 'bogus'"):
        kvtk.replay(CONVERSATION, bogus=1)
    with pytest.raises(ValueError, match="--sample"):
        kvtk.mrc(CONVERSATION, sample=2.0)
    # Non-finite numbers get a message naming the option, as the CLI's do (not a JSON error).
    with pytest.raises(ValueError, match="--hit-ratio: must be a finite number, got nan"):
        kvtk.cost(hit_ratio=float("nan"), input_tokens=1000)
    with pytest.raises(ValueError, match=r"--capacity\[1\]: must be a finite number, got inf"):
        kvtk.replay(CONVERSATION, capacity=[1000, float("inf")])
    with pytest.raises(ValueError, match="--local-cache: must be a finite number"):
        kvtk.simulate(CONVERSATION, local_cache=float("nan"))
    with pytest.raises(ValueError, match=r"--config.gpu.tflops: must be a finite number, got inf"):
        kvtk.simulate(CONVERSATION, {"gpu": {"tflops": float("inf")}})


def test_keys_must_be_unsigned_integers():
    # Floats would be truncated and negative int64 keys wrapped to huge ones: both are refused,
    # naming the argument; non-negative signed and narrower unsigned arrays are taken as keys.
    for make in (lambda: kvtk.BlockCache("lru", 4), lambda: kvtk.PrefixTree("lru", 4)):
        c = make()
        call = c.access if isinstance(c, kvtk.BlockCache) else c.insert
        with pytest.raises(TypeError, match="unsigned integers expected"):
            call(np.array([1.5, 2.5]))
        with pytest.raises(TypeError, match="unsigned integers expected"):
            call(np.array([True, False]))
        with pytest.raises(ValueError, match="-3 at index 1 is negative"):
            call(np.array([1, -3], dtype=np.int64))
    c = kvtk.BlockCache("lru", 4)
    assert list(c.access(np.array([7, 8], dtype=np.int64))) == [False, False]
    assert list(c.access(np.array([7, 8], dtype=np.uint32))) == [True, True]
    assert list(c.access(np.array([9, 7, 8], dtype=np.uint64)[::2])) == [False, True]  # strided
    assert list(c.access(np.array([8, 1, 9], dtype=np.int64)[::-1])) == [True, False, True]  # reversed
    with pytest.raises(ValueError, match="is negative"):
        c.evict(1, protected=np.array([-1]))
    with pytest.raises(TypeError, match="block_keys: unsigned integers expected"):
        kvtk.Trace.from_arrays(np.array([1.0]), np.array([0, 1]), np.array([16]), block_tokens=16)
    with pytest.raises(ValueError, match="output_tokens: -4 at index 0 is negative"):
        kvtk.Trace.from_arrays(np.array([1]), np.array([0, 1]), np.array([16]),
                               output_tokens=np.array([-4]), block_tokens=16)


def test_bad_trace_raises_trace_error_with_path_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 1, "input_length": 10, "hash_ids": [1]}\n{"timestamp": x}\n')
    with pytest.raises(kvtk.TraceError) as e:
        kvtk.load_trace(bad)
    assert e.value.path == str(bad) and e.value.line == 2
    with pytest.raises(kvtk.TraceError):
        kvtk.replay(bad)
    with pytest.raises(kvtk.TraceError):
        kvtk.load_trace(tmp_path / "missing.jsonl")


def test_skipped_lines_are_python_warnings_not_stderr(tmp_path, capfd):
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text('{"timestamp": 1, "input_length": 1024, "hash_ids": [1, 2]}\n'
                     '{"timestamp": x}\n'
                     '{"timestamp": 2, "input_length": 1024, "hash_ids": [1, 2]}\n')
    with pytest.warns(UserWarning, match="skipped 1 invalid line"):
        t = kvtk.load_trace(mixed, skip_invalid=True)
    assert t.skipped_lines == 1
    with pytest.warns(UserWarning, match="kvtk replay: skipped 1 invalid line"):
        rows = kvtk.replay(mixed, skip_invalid=True, capacity=10)
    assert rows[0]["block_hits"] == 2
    # The library prints nothing: the warning is the caller's to show or filter.
    assert "skipped" not in capfd.readouterr().err


def test_progress_reaches_the_total_and_its_errors_stop_the_run():
    calls = []
    kvtk.replay(CONVERSATION, capacity=1000, progress=lambda d, n: calls.append((d, n)))
    assert calls and calls[-1][0] == calls[-1][1]
    assert all(a[0] <= b[0] for a, b in zip(calls, calls[1:]))

    def stop(done, total):
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        kvtk.replay(CONVERSATION, capacity=[1000, 2000], progress=stop)


def test_ctrl_c_stops_a_long_replay_within_a_second():
    # SIGINT lands while the main thread is inside C++ with the GIL released; the next progress
    # report (replay reports in slices of requests) raises KeyboardInterrupt.
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        kvtk.replay(CONVERSATION, index=["radix", "flat", "hashchain"], policy="all",
                    capacity=[1000, 2000, 5000, 10000, 20000, 50000] * 4)
    assert time.monotonic() - start < 1.3


def test_long_calls_release_the_gil():
    ticks = 0
    done = threading.Event()

    def count():
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            time.sleep(0.001)

    counter = threading.Thread(target=count)
    counter.start()
    try:
        kvtk.replay(CONVERSATION, policy="all", capacity=[1000, 5000])
    finally:
        done.set()
        counter.join()
    assert ticks > 20


def test_results_frame():
    pd = pytest.importorskip("pandas")
    rows = kvtk.replay(CONVERSATION, policy=["lru", "fifo"], capacity=[1000, 2000])
    frame = kvtk.results_frame(rows)
    assert isinstance(frame, pd.DataFrame) and len(frame) == 4
    assert list(frame["capacity_blocks"]) == [r["capacity_blocks"] for r in rows]
    curve = kvtk.results_frame(kvtk.mrc(CONVERSATION, points=5))
    assert len(curve) == 5


def test_cost_and_sparse():
    c = kvtk.cost(hit_ratio=0.563, input_tokens=608e9, output_tokens=168e9, pricing="deepseek-r1")
    assert 0 < c["saving_usd"] < c["bill_without_cache_usd"]
    s = kvtk.sparse(steps=200, scorer=["selection-lru", "h2o"], budget=128)
    assert [r["scorer"] for r in s["results"]] == ["selection-lru", "h2o"]


def test_block_cache_lru_equals_a_reference_lru():
    from collections import OrderedDict

    rng = np.random.default_rng(5)
    keys = (rng.zipf(1.2, 20000) % 5000).astype(np.uint64)
    evicted = []
    cache = kvtk.BlockCache("lru", 100, on_evict=evicted.append)
    hits = cache.access(keys[:15000])
    hits_one = [cache.access_one(int(k)) for k in keys[15000:]]
    ref, ref_hits, ref_evicted = OrderedDict(), [], []
    for k in keys.tolist():
        if k in ref:
            ref.move_to_end(k)
            ref_hits.append(True)
        else:
            ref_hits.append(False)
            ref[k] = None
            if len(ref) > 100:
                ref_evicted.append(ref.popitem(last=False)[0])
    assert hits.dtype == np.bool_
    assert hits.tolist() + hits_one == ref_hits
    assert evicted == ref_evicted
    assert len(cache) == 100 and cache.capacity == 100 and cache.policy == "lru"
    assert cache.stats["hits"] == sum(ref_hits)


def test_block_cache_shared_between_threads():
    # One cache, two threads: big batches without the GIL on one, single calls on the other.
    # Every access is counted once and the callback sees every eviction exactly once.
    evicted = []
    cache = kvtk.BlockCache("lru", 1000, on_evict=evicted.append)
    rng = np.random.default_rng(11)
    batch = (rng.integers(0, 50000, 2_000_000)).astype(np.uint64)
    singles = rng.integers(0, 50000, 20000).tolist()

    def batches():
        for _ in range(3):
            cache.access(batch)

    t = threading.Thread(target=batches)
    t.start()
    for k in singles:
        cache.access_one(k)
        cache.contains(k + 1)
        if cache.pin(k):
            cache.unpin(k)
    t.join()
    st = cache.stats
    assert st["hits"] + st["misses"] == 3 * len(batch) + len(singles)
    assert len(cache) == 1000
    assert len(evicted) == st["misses"] - 1000  # every miss was admitted; all but 1000 left


def test_block_cache_pins_and_errors():
    cache = kvtk.BlockCache("s3fifo", 4)
    assert cache.insert(1) and 1 in cache
    assert cache.pin(1)
    cache.access(np.arange(100, 200, dtype=np.uint64))
    assert 1 in cache  # pinned: never evicted
    assert not cache.erase(1)  # pinned
    assert cache.unpin(1) and cache.erase(1) and 1 not in cache
    with pytest.raises(ValueError, match="s3fifo"):
        kvtk.BlockCache("nope", 4)  # the message lists the valid names
    with pytest.raises(ValueError, match="offline"):
        kvtk.BlockCache("belady", 4)


def test_block_cache_evict_is_all_or_nothing_and_respects_protection():
    evicted = []
    cache = kvtk.BlockCache("lru", 8, on_evict=evicted.append)
    cache.access(np.arange(1, 9, dtype=np.uint64))  # LRU order 1..8
    cache.pin(1)
    victims = cache.evict(3, protected=np.array([2], dtype=np.uint64))
    assert victims.tolist() == [3, 4, 5] and evicted == [3, 4, 5]
    assert 1 in cache and 2 in cache and len(cache) == 5
    with pytest.raises(RuntimeError, match="cannot free 5"):
        cache.evict(5, protected=np.array([2], dtype=np.uint64))  # only 6, 7, 8 may go
    assert len(cache) == 5  # nothing was evicted
    assert cache.unpin(1)


def test_trace_from_arrays_round_trips_and_runs(tmp_path, kvtk_bin):
    t = kvtk.load_trace(CONVERSATION)
    copy = kvtk.Trace.from_arrays(t.block_keys, t.block_offsets, t.input_tokens,
                                  arrival_s=t.arrival_s, output_tokens=t.output_tokens,
                                  block_tokens=t.block_tokens)
    assert len(copy) == len(t) and copy.path == ""
    # Commands take it (saved to a temporary .kvtb) and give the same results as the file.
    assert without_time(kvtk.replay(copy, capacity=[1000, 10000])) == \
        without_time(kvtk.replay(t, capacity=[1000, 10000]))
    out = tmp_path / "copy.kvtb"
    copy.save(out)
    back = kvtk.load_trace(out)
    for col in ("block_keys", "block_offsets", "input_tokens", "output_tokens", "arrival_s"):
        assert np.array_equal(getattr(back, col), getattr(t, col)), col
    with pytest.raises(ValueError, match="exists"):
        copy.save(out)  # no overwrite without force
    copy.save(out, force=True)
    jsonl = tmp_path / "copy.jsonl"
    copy.save(jsonl, "kvtk")
    cli = cli_json(kvtk_bin, "trace", "stats", str(jsonl), "--partial-block", "cache")
    assert cli["requests"] == len(t) and cli["block_refs"] == t.block_refs
    with pytest.raises(ValueError, match="block_offsets"):
        kvtk.Trace.from_arrays(t.block_keys, t.block_offsets[:-1], t.input_tokens)


def test_prefix_tree_requests_equal_radix_replay():
    # A request at a time through the engine-shaped API gives replay's radix-LRU hits exactly.
    t = kvtk.load_trace(CONVERSATION)
    keys, offsets, inputs = t.block_keys, t.block_offsets, t.input_tokens
    for capacity in (1000, 10000):
        tree = kvtk.PrefixTree("lru", capacity)
        hits = 0
        for r in range(len(t)):
            full = min(int(inputs[r]) // t.block_tokens, int(offsets[r + 1] - offsets[r]))
            hits += tree.insert(keys[offsets[r]:offsets[r] + full])
        row = kvtk.replay(t, index="radix", policy="lru", capacity=capacity, opt=False)[0]
        assert hits == row["block_hits"], capacity
        assert len(tree) == capacity


def test_prefix_tree_locks_protect_a_running_request():
    evicted = []
    tree = kvtk.PrefixTree("lru", 4, on_evict=evicted.append)
    a = np.array([1, 2, 3], dtype=np.uint64)
    assert tree.insert(a) == 0 and tree.match(a) == 3
    assert tree.lock(a) == 3  # the request using 1, 2, 3 runs
    b = np.array([10, 11], dtype=np.uint64)
    tree.insert(b)  # only 1 free slot and a, b's own path locked while inserting: b is cut short
    assert tree.match(a) == 3 and evicted == []
    assert tree.unlock(a)
    tree.insert(np.array([20, 21, 22], dtype=np.uint64))
    assert evicted  # now a's leaves may go
    with pytest.raises(ValueError, match="radix leaf policy"):
        kvtk.PrefixTree("nope", 4)


def test_vllm_adapter_without_vllm_says_what_it_needs():
    pytest.importorskip("numpy")
    try:
        import vllm  # noqa: F401
        pytest.skip("vLLM is installed here: tools/engine-check/vllm_offload.sh checks the adapter")
    except ImportError:
        pass
    from kvtk.integrations import vllm as adapter
    with pytest.raises(ImportError, match="needs vLLM"):
        adapter.KvtkS3FIFO(cache_capacity=8)
    with pytest.raises(ValueError, match="unknown policy"):
        adapter.make_policy_class("nope")
    assert adapter.offload_key_to_u64(b"abc") == adapter.offload_key_to_u64(b"abc")
    assert adapter.offload_key_to_u64(b"abc") != adapter.offload_key_to_u64(b"abd")


def test_simulate_reports_progress_and_stops_on_its_errors():
    calls = []
    config = ROOT / "sim" / "configs" / "fig10_local.json"
    kvtk.simulate(CONVERSATION, config, progress=lambda d, n: calls.append((d, n)))
    assert calls[-1] == (12031, 12031) and len(calls) >= 100

    def stop(done, total):
        if done > total // 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        kvtk.simulate(CONVERSATION, config, progress=stop)
    assert kvtk.BlockCache("lru", 100, max_entries=None).capacity == 100


def test_block_cache_batches_report_progress():
    calls = []
    keys = np.arange(3 << 20, dtype=np.uint64) % 5000
    hits = kvtk.BlockCache("lru", 1000).access(keys, progress=lambda d, n: calls.append((d, n)))
    assert calls == [(1 << 20, 3 << 20), (2 << 20, 3 << 20), (3 << 20, 3 << 20)]
    assert not hits.any()  # a cyclic scan over 5,000 keys never hits a 1,000-block LRU


def test_import_trace_equals_the_cli(kvtk_bin, tmp_path):
    # kvtk.import_trace is `kvtk trace import`: the same trace file, byte for byte, and the same
    # counts; its result replays under --engine vllm.
    log = ROOT / "tests" / "data" / "import" / "token_ids_example.jsonl"
    r = kvtk.import_trace(log, tmp_path / "py.kvtb", engine="vllm", block_tokens=16, threads=2)
    assert (r["requests"], r["tokens"], r["full_blocks"]) == (40, 14835, 912)
    subprocess.run([kvtk_bin, "trace", "import", str(log), "-o", str(tmp_path / "cli.kvtb")],
                   check=True, capture_output=True)
    assert (tmp_path / "py.kvtb").read_bytes() == (tmp_path / "cli.kvtb").read_bytes()
    rows = kvtk.replay(tmp_path / "py.kvtb", engine="vllm", capacity=100, opt=False)
    assert rows[0]["block_hits"] == 639
    with pytest.raises(ValueError, match="it exists"):
        kvtk.import_trace(log, tmp_path / "py.kvtb")
    with pytest.raises(kvtk.TraceError, match="missing field 'prompt_token_ids'"):
        kvtk.import_trace(log, tmp_path / "p2.kvtb", preset="vllm")
