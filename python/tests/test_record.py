"""kvtk trace record (kvtk._record) against a publisher that speaks vLLM 0.33.0's protocol
(PUB frames [topic, seq 8 bytes big-endian, payload]; a ROUTER replay socket answering
[b"", seq] with [b"", topic, seq, payload]... and the end marker seq -1), as
tools/engine-check/record_vllm_events.py found vLLM's ZmqEventPublisher to do. The recording made
from vLLM itself is tests/data/import/vllm_events_example.jsonl (C++ tests read it). Needs pyzmq
(the events extra); skips without it unless KVTK_REQUIRE_TEXT_DEPS=1."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import kvtk


def zmq_or_skip():
    try:
        import zmq
        return zmq
    except ImportError:
        if os.environ.get("KVTK_REQUIRE_TEXT_DEPS") == "1":
            pytest.fail("pyzmq is not installed")
        pytest.skip("pyzmq is not installed (pip install ./python[events])")


class FakeEngine:
    """Publishes batches 0..n-1 (payload = b"batch<seq>"), dropping the ones in `drop` from the
    PUB stream (kept in the replay buffer unless also in `forget`)."""

    def __init__(self, zmq, n, drop=(), forget=(), start_delay=0.5, restart=0, restart_delay=0.3):
        """restart=m: after the n batches the engine "restarts": its buffer is emptied and it
        publishes m more batches numbered from 0 again (payload b"again<seq>")."""
        self.zmq, self.n, self.drop, self.forget = zmq, n, set(drop), set(forget)
        self.restart, self.restart_delay = restart, restart_delay
        self.ctx = zmq.Context()
        self.pub = self.ctx.socket(zmq.PUB)
        self.port = self.pub.bind_to_random_port("tcp://127.0.0.1")
        self.router = self.ctx.socket(zmq.ROUTER)
        self.replay_port = self.router.bind_to_random_port("tcp://127.0.0.1")
        self.buffer = []
        self.start_delay = start_delay
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _serve_replay(self, poller, ms):
        for sock, _ in poller.poll(ms):
            ident, _, start = self.router.recv_multipart()
            first = int.from_bytes(start, "big")
            for seq, payload in self.buffer:
                if seq >= first:
                    self.router.send_multipart([ident, b"", b"", seq.to_bytes(8, "big"), payload])
            self.router.send_multipart([ident, b"", b"", b"\xff" * 8, b""])

    def _run(self):
        poller = self.zmq.Poller()
        poller.register(self.router, self.zmq.POLLIN)
        end = time.time() + self.start_delay
        while time.time() < end:
            self._serve_replay(poller, 20)
        for seq in range(self.n):
            payload = b"batch%d" % seq
            if seq not in self.forget:
                self.buffer.append((seq, payload))
            if seq not in self.drop:
                self.pub.send_multipart([b"", seq.to_bytes(8, "big"), payload])
            self._serve_replay(poller, 20)
        if self.restart:
            end = time.time() + self.restart_delay
            while time.time() < end:
                self._serve_replay(poller, 20)
            self.buffer = []
            for seq in range(self.restart):
                payload = b"again%d" % seq
                self.buffer.append((seq, payload))
                self.pub.send_multipart([b"", seq.to_bytes(8, "big"), payload])
                self._serve_replay(poller, 20)
        while not self.done.is_set():
            self._serve_replay(poller, 20)

    def close(self):
        self.done.set()
        self.thread.join()
        self.pub.close(0)
        self.router.close(0)
        self.ctx.term()


def lines(path):
    return [json.loads(x) for x in open(path)]


def record_from(eng, out, started=True, **kw):
    """kvtk.record_events on the fake engine's sockets (its thread started here unless already),
    from sequence number 0; the engine is closed afterwards."""
    if not started:
        eng.thread.start()
    kw.setdefault("idle_s", 1.5)
    try:
        return kvtk.record_events(out, f"tcp://127.0.0.1:{eng.port}",
                                  replay_endpoint=f"tcp://127.0.0.1:{eng.replay_port}",
                                  first_seq=0, duration_s=30, **kw)
    finally:
        eng.close()


def batches_and_restarts(out):
    """The recording's batch payloads and restart lines, in file order."""
    import base64
    return [("restart", x["restart"]["seq"]) if "restart" in x else
            (base64.b64decode(x["payload"]).decode(), x["seq"]) for x in lines(out)
            if "restart" in x or "seq" in x]


def test_record_live_gaps_backfilled_and_lost(tmp_path):
    zmq = zmq_or_skip()
    eng = FakeEngine(zmq, 12, drop={3, 4, 9}, forget={9})
    out = tmp_path / "rec.jsonl"
    r = record_from(eng, out, started=False)
    got = lines(out)
    assert got[0]["kvtk_events"] == 1 and got[-1]["kvtk_events_end"]["stopped"] == "idle"
    batches = [x for x in got if "seq" in x]
    # Every batch but the forgotten one, in order, with its exact bytes.
    assert [b["seq"] for b in batches] == [s for s in range(12) if s != 9]
    import base64
    assert all(base64.b64decode(b["payload"]) == b"batch%d" % b["seq"] for b in batches)
    assert [x["gap"] for x in got if "gap" in x] == [{"first": 9, "last": 9}]
    assert (r["batches"], r["recovered"], r["lost"], r["gaps"]) == (11, 2, 1, 1)


def test_record_an_engine_restart(tmp_path):
    # The engine restarts mid-recording: its numbers start again at 0. Nothing is skipped as a
    # duplicate: a restart line, then the new run's batches.
    zmq = zmq_or_skip()
    eng = FakeEngine(zmq, 4, restart=3)
    out = tmp_path / "restart.jsonl"
    r = record_from(eng, out, started=False)
    assert batches_and_restarts(out) == [("batch0", 0), ("batch1", 1), ("batch2", 2), ("batch3", 3), ("restart", 0),
                     ("again0", 0), ("again1", 1), ("again2", 2)]
    assert (r["batches"], r["restarts"]) == (7, 1)


def test_record_a_restart_after_a_replayed_burst(tmp_path):
    # The first run's batches came only from the replay socket (a burst before the subscription),
    # so no live number was seen; the restarted run's live 0 is told from the replayed 0 by its
    # payload.
    zmq = zmq_or_skip()
    eng = FakeEngine(zmq, 3, start_delay=0, restart=2, restart_delay=3.0)
    eng.thread.start()
    time.sleep(0.5)
    out = tmp_path / "burst-restart.jsonl"
    # The restart comes ~1.5 s after the replayed burst is recorded; idle stops 4 s after.
    r = record_from(eng, out, idle_s=4.0)
    assert batches_and_restarts(out) == [("batch0", 0), ("batch1", 1), ("batch2", 2), ("restart", 0), ("again0", 0),
                     ("again1", 1)]
    assert (r["recovered"], r["restarts"]) == (3, 1)


def test_record_a_burst_before_the_subscription(tmp_path):
    # Everything published before the subscriber connects: only the replay socket has it.
    zmq = zmq_or_skip()
    eng = FakeEngine(zmq, 5, start_delay=0)
    eng.thread.start()
    time.sleep(0.5)  # the burst is over
    out = tmp_path / "late.jsonl"
    r = record_from(eng, out)
    assert [x["seq"] for x in lines(out) if "seq" in x] == [0, 1, 2, 3, 4]
    assert r["recovered"] == 5


def test_record_interrupted_and_refusals(tmp_path):
    zmq_or_skip()
    out = tmp_path / "int.jsonl"
    # Nobody publishes: the command runs until SIGINT and still writes its end line.
    p = subprocess.Popen([sys.executable, "-m", "kvtk._record", "--endpoint", "tcp://127.0.0.1:1",
                          "-o", str(out)], stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(1.5)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=20)
    assert p.returncode == 0, err
    assert lines(out)[-1]["kvtk_events_end"]["stopped"] == "interrupt"
    # An endpoint zmq refuses: the earlier recording is left as it was, even with force.
    before = out.read_bytes()
    with pytest.raises(ValueError, match="--endpoint"):
        kvtk.record_events(out, "not-an-endpoint", force=True)
    assert out.read_bytes() == before
    with pytest.raises(ValueError, match="exists; pass --force"):
        kvtk.record_events(out, "tcp://127.0.0.1:1", count=1)
    with pytest.raises(ValueError, match="not vllm, sglang or dynamo"):
        kvtk.record_events(tmp_path / "x", "tcp://127.0.0.1:1", engine="trtllm")
    with pytest.raises(ValueError, match="Dynamo's event plane has no replay socket"):
        kvtk.record_events(tmp_path / "x", "tcp://127.0.0.1:1", engine="dynamo",
                           replay_endpoint="tcp://127.0.0.1:2")
    with pytest.raises(ValueError, match="count: must be a positive"):
        kvtk.record_events(tmp_path / "x", "tcp://127.0.0.1:1", count=0)
