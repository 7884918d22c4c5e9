"""``kvtk trace record``: a KV-event stream (vLLM, SGLang: ZMQ PUB) recorded to a file.

The engines publish multipart messages ``(topic, sequence number: 8 bytes big-endian, payload:
one msgpack-encoded event batch)`` on a PUB socket, and keep the last batches for a ROUTER
"replay" socket: a client sends the 8-byte sequence number to start from and receives
``(b"", seq, payload)`` frames for every buffered batch from there, ending with seq -1.

PUB/SUB drops messages (a slow joiner misses the first ones; a subscriber behind the high-water
mark loses some). The recorder sees a gap when a sequence number skips, asks the replay socket for
the missing batches at once (so the file stays in sequence order), and records what it could not
recover. A live sequence number at or below the last live one, or one recorded from the replay
socket with another payload, means the engine restarted (one publisher's PUB/SUB order is kept):
a restart line is written and the new run recorded from its
first batch (backfilled from the replay socket). When nothing arrives live for a second it asks the replay socket too: an engine that
published a burst before the subscription completed (seen with vLLM on CPU: 40 requests in well
under the connection time) sends nothing live afterwards, and only the replay socket has them. The batches are kept raw (base64 of the payload bytes): decoding is the importer's job
(``kvtk trace import --format vllm-events``), so a change of the engine's encoding never loses a
recording.

File (JSONL, docs/formats.md "KV-event recordings"):
  {"kvtk_events": 1, "engine": ..., "endpoint": ..., "replay_endpoint": ..., "topic": ...,
   "started_unix_s": ...}
  {"seq": N, "t": receive time (unix s), "topic": ..., "payload": base64}   one per batch
  {"gap": {"first": a, "last": b}}          batches a..b were lost and could not be replayed
  {"restart": {"seq": s, "t": ...}}          the engine restarted (its numbers went back live to s;
                                             its cache starts empty); numbering starts anew
  {"kvtk_events_end": {"batches": ..., "recovered": ..., "lost": ..., "stopped": why}}
The end line is written on every normal stop, Ctrl-C included; a file without one was killed.
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import signal
import sys
import time
from typing import Optional

END_OF_REPLAY = -1


def _need_zmq():
    try:
        import zmq
    except ImportError as e:
        raise ImportError("kvtk trace record needs pyzmq: pip install './python[events]'") from e
    return zmq


def _seq(frame: bytes) -> int:
    if len(frame) != 8:
        raise ValueError(f"a sequence frame of {len(frame)} bytes (the engines send 8)")
    return int.from_bytes(frame, "big", signed=True)


class Recorder:
    """Subscribes to `endpoint` and writes every batch to `out` (an open text file)."""

    def __init__(self, endpoint: str, replay_endpoint: Optional[str], topic: str,
                 engine: str, replay_timeout_s: float = 2.0):
        """Connects the sockets; nothing is written until start(out)."""
        zmq = _need_zmq()
        self.zmq = zmq
        self.ctx = zmq.Context()
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, topic.encode())
        self.sub.setsockopt(zmq.RCVHWM, 0)  # never drop on our side: the engine's HWM is the limit
        self.sub.connect(endpoint)
        self.replay = None
        if replay_endpoint:
            self.replay = self.ctx.socket(zmq.DEALER)
            self.replay.setsockopt(zmq.LINGER, 0)
            self.replay.connect(replay_endpoint)
        self.replay_timeout_ms = int(replay_timeout_s * 1000)
        self.out = None
        self.last: Optional[int] = None  # the last sequence number recorded (live or replayed)
        self.live_last: Optional[int] = None  # the last one received live
        self.replayed: dict = {}  # seq -> sha256 of a payload recorded from replay, not yet live
        self.publisher: Optional[int] = None  # Dynamo: the one publisher id recorded
        self.counts = {"batches": 0, "recovered": 0, "lost": 0, "gaps": 0, "restarts": 0}
        self.engine = engine
        self.header = {"kvtk_events": 1, "engine": engine, "endpoint": endpoint,
                       "replay_endpoint": replay_endpoint or "", "topic": topic}

    def start(self, out) -> None:
        self.out = out
        self._write(dict(self.header, started_unix_s=time.time()))

    def _write(self, obj: dict) -> None:
        self.out.write(json.dumps(obj, separators=(",", ":")) + "\n")

    def _batch(self, seq: int, topic: bytes, payload: bytes) -> None:
        self._write({"seq": seq, "t": time.time(), "topic": topic.decode(errors="replace"),
                     "payload": base64.b64encode(payload).decode()})
        self.counts["batches"] += 1
        self.last = seq
        self._count_events(payload)

    def _count_events(self, payload: bytes) -> None:
        """Events by type, for the summary (msgpack: the events extra); the file keeps the bytes
        whatever they hold, so a payload msgpack cannot read is counted, not dropped."""
        try:
            import msgpack
        except ImportError:
            return
        try:
            if self.engine == "dynamo":  # version byte, u32 length, envelope whose payload is
                env = msgpack.unpackb(payload[5:], raw=False, strict_map_key=False)  # RouterEvents
                for e in msgpack.unpackb(env["payload"], raw=False, strict_map_key=False):
                    data = e["event"]["data"]
                    kind = {"stored": "BlockStored", "removed": "BlockRemoved"}.get(
                        next(iter(data)) if isinstance(data, dict) else "",
                        "AllBlocksCleared" if data == "cleared" else "other")
                    self.counts[f"events_{kind}"] = self.counts.get(f"events_{kind}", 0) + 1
                return
            batch = msgpack.unpackb(payload, raw=False, strict_map_key=False)
            events = batch[1] if isinstance(batch, list) else batch["events"]
            for e in events:
                kind = e[0] if isinstance(e, list) else e.get("type")
                key = f"events_{kind}" if kind in ("BlockStored", "BlockRemoved", "AllBlocksCleared") \
                    else "events_other"
                self.counts[key] = self.counts.get(key, 0) + 1
        except Exception:  # noqa: BLE001 — any payload; the importer says what is wrong with it
            self.counts["undecodable_batches"] = self.counts.get("undecodable_batches", 0) + 1

    def _replay_from(self, first: int) -> list:
        """(seq, topic, payload) of every batch the replay socket still holds from `first` on."""
        got = []
        if self.replay is None:
            return got
        poller = self.zmq.Poller()
        poller.register(self.replay, self.zmq.POLLIN)
        # A reply that came after an earlier request timed out would end this one early: drop it.
        while poller.poll(0):
            self.replay.recv_multipart()
        self.replay.send_multipart([b"", first.to_bytes(8, "big", signed=True)])
        while poller.poll(self.replay_timeout_ms):
            frames = self.replay.recv_multipart()  # [b"", topic, seq, payload] or the end marker
            if len(frames) < 3:
                raise ValueError(f"a replay reply of {len(frames)} frames")
            seq = _seq(frames[-2])
            if seq == END_OF_REPLAY:
                break
            if seq >= first:
                got.append((seq, frames[-3], frames[-1]))
        return got

    def _probe(self) -> None:
        """No live batch for a while: asks the replay socket whether batches were published that
        the subscription never saw (a slow joiner misses everything published before its
        connection completes, and a short burst can be all of it)."""
        if self.last is None:
            return
        got = self._replay_from(self.last + 1)
        if got:
            newest = max(seq for seq, _, _ in got)
            self._backfill(self.last + 1, newest, got[0][1], got)
            self.out.flush()

    def _backfill(self, first: int, last: int, topic: bytes, got: Optional[list] = None) -> None:
        """Asks the replay socket for batches first..last (or takes `got`); records the ones it
        returns and a gap line for the rest."""
        if got is None:
            got = self._replay_from(first)
        got = [(seq, payload) for seq, _, payload in got if first <= seq <= last]
        have = {seq for seq, _ in got}
        missing = [s for s in range(first, last + 1) if s not in have]
        for seq, payload in sorted(got):
            self._batch(seq, topic, payload)
            self.counts["recovered"] += 1
            # Kept until the same number arrives live: an equal payload is the duplicate, another
            # one means the engine restarted meanwhile.
            self.replayed[seq] = hashlib.sha256(payload).digest()
        # Contiguous runs of what stayed lost.
        run = None
        for s in missing + [None]:
            if run is not None and (s is None or s != run[1] + 1):
                self._write({"gap": {"first": run[0], "last": run[1]}})
                self.counts["gaps"] += 1
                run = None
            if s is not None:
                run = [s, s] if run is None else [run[0], s]
        self.counts["lost"] += len(missing)
        self.last = last

    def run(self, count: Optional[int], duration_s: Optional[float], first_seq: Optional[int],
            idle_s: Optional[float] = None) -> str:
        """Records until `count` batches, `duration_s` seconds, `idle_s` seconds without a batch
        (after the first), or Ctrl-C. Returns why it stopped."""
        deadline = time.monotonic() + duration_s if duration_s is not None else None
        last_batch = None
        last_probe = time.monotonic()
        poller = self.zmq.Poller()
        poller.register(self.sub, self.zmq.POLLIN)
        if first_seq is not None:
            self.last = first_seq - 1  # batches before the first one received count as a gap
        while True:
            if count is not None and self.counts["batches"] >= count:
                return "count"
            wait_ms = 200
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return "duration"
                wait_ms = min(wait_ms, max(1, int(left * 1000)))
            if idle_s is not None and last_batch is not None and time.monotonic() - last_batch >= idle_s:
                return "idle"
            if not poller.poll(wait_ms):
                if self.replay is not None and time.monotonic() - last_probe >= 1.0:
                    last_probe = time.monotonic()
                    before = self.counts["batches"]
                    self._probe()
                    if self.counts["batches"] > before:
                        last_batch = time.monotonic()
                continue
            last_batch = time.monotonic()
            frames = self.sub.recv_multipart()
            if self.engine == "dynamo":
                # Dynamo's event plane (ZMQ transport): topic, publisher id, sequence (u64 BE,
                # per publisher, from 0), framed envelope; the envelope is kept as the payload.
                if len(frames) != 4:
                    raise ValueError(f"a message of {len(frames)} frames (Dynamo's event plane "
                                     "sends topic, publisher id, sequence number, envelope)")
                publisher = int.from_bytes(frames[1], "big")
                if self.publisher is None:
                    self.publisher = publisher
                elif publisher != self.publisher:  # another worker's numbers: not this stream
                    self.counts["other_publishers"] = self.counts.get("other_publishers", 0) + 1
                    if self.counts["other_publishers"] == 1:
                        print(f"kvtk trace record: messages of a second Dynamo publisher "
                              f"({publisher}, after {self.publisher}) are counted and not "
                              "recorded: record each worker's endpoint apart", file=sys.stderr)
                    continue
                frames = [frames[0], frames[2], frames[3]]
            if len(frames) != 3:
                raise ValueError(f"a message of {len(frames)} frames (the engines send topic, "
                                 "sequence number, payload)")
            topic, seq, payload = frames[0], _seq(frames[1]), frames[2]
            if self.live_last is not None and seq <= self.live_last:
                self._restart(seq, topic)  # PUB/SUB keeps one publisher's order: it started anew
            elif self.last is not None and seq <= self.last:
                if self.replayed.get(seq) == hashlib.sha256(payload).digest():
                    self.live_last = seq  # already recorded (from the replay socket)
                    for old in [s for s in self.replayed if s <= seq]:
                        del self.replayed[old]
                    continue
                self._restart(seq, topic)  # a number recorded from replay, another payload
            self.live_last = seq
            if self.last is not None and seq > self.last + 1:
                self._backfill(self.last + 1, seq - 1, topic)
            self._batch(seq, topic, payload)
            self.out.flush()

    def _restart(self, seq: int, topic: bytes) -> None:
        """The engine restarted (its sequence numbers went back live; its cache is empty): a
        restart line, then the new run's batches before `seq` from its replay socket."""
        self._write({"restart": {"seq": seq, "t": time.time()}})
        self.counts["restarts"] += 1
        self.last = -1
        self.replayed.clear()
        if seq > 0:
            self._backfill(0, seq - 1, topic)

    def close(self, stopped: str) -> None:
        self._write({"kvtk_events_end": dict(self.counts, stopped=stopped)})
        self.out.flush()
        self.sub.close(linger=0)
        if self.replay is not None:
            self.replay.close(linger=0)
        self.ctx.term()


def record(output: str, endpoint: str, replay_endpoint: Optional[str] = None, topic: str = "",
           engine: str = "vllm", count: Optional[int] = None, duration_s: Optional[float] = None,
           first_seq: Optional[int] = None, force: bool = False,
           idle_s: Optional[float] = None) -> dict:
    """Records the KV events published at `endpoint` to `output` until `count` batches,
    `duration_s` seconds, `idle_s` seconds without a batch (after the first one) or Ctrl-C
    (KeyboardInterrupt), whichever comes first; returns the
    counts (batches, recovered, lost, gaps) and why it stopped. `first_seq`: the sequence number
    the engine starts from (vLLM and SGLang: 0), so that batches published before the recorder
    joined are asked from the replay socket too."""
    if engine not in ("vllm", "sglang", "dynamo"):
        raise ValueError(f"engine: '{engine}' is not vllm, sglang or dynamo")
    if engine == "dynamo" and replay_endpoint:
        raise ValueError("replay_endpoint: Dynamo's event plane has no replay socket (gaps are "
                         "recorded as lost)")
    if count is not None and count <= 0:
        raise ValueError("count: must be a positive number of batches")
    if duration_s is not None and not duration_s > 0:
        raise ValueError("duration_s: must be a positive number of seconds")
    if idle_s is not None and not idle_s > 0:
        raise ValueError("idle_s: must be a positive number of seconds")
    if os.path.exists(output) and not os.path.isfile(output):
        raise ValueError(f"-o: '{output}' is not a regular file; kvtk never writes to a device or FIFO")
    if os.path.exists(output) and not force:
        raise ValueError(f"-o: '{output}' exists; pass --force to replace it")
    # pyzmq and the endpoints are checked before the output is touched: a recorder that cannot
    # subscribe leaves any earlier recording as it was.
    try:
        rec = Recorder(endpoint, replay_endpoint, topic, engine)
    except Exception as e:
        zmq = sys.modules.get("zmq")
        if zmq is not None and isinstance(e, zmq.ZMQError):
            raise ValueError(f"--endpoint / --replay-endpoint: {e}") from None
        raise
    with open(output, "w", encoding="utf-8") as out:
        rec.start(out)
        stopped = "interrupt"
        try:
            stopped = rec.run(count, duration_s, first_seq, idle_s)
        except KeyboardInterrupt:
            stopped = "interrupt"
        except Exception as e:  # noqa: BLE001 — recorded in the end line, then raised
            stopped = f"error: {e}"
            raise
        finally:
            rec.close(stopped)
    return dict(rec.counts, stopped=stopped, output=output)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="kvtk trace record",
        description="Record an engine's KV-cache events (vLLM, SGLang: ZMQ PUB) to a file for "
                    "kvtk trace import --format vllm-events. Stops at --count batches, after "
                    "--duration seconds, or at Ctrl-C; gaps are backfilled from the replay socket.")
    p.add_argument("--endpoint", required=True, help="the engine's PUB endpoint, e.g. tcp://host:5557")
    p.add_argument("--replay-endpoint", help="the engine's replay (ROUTER) endpoint, for backfill")
    p.add_argument("--topic", default="", help="the topic to subscribe to (default: all)")
    p.add_argument("--engine", default="vllm",
                   help="vllm | sglang | dynamo (Dynamo's event plane on ZMQ: its RouterEvents)")
    p.add_argument("-o", "--output", required=True, help="the recording to write")
    p.add_argument("--count", type=int, help="stop after this many batches")
    p.add_argument("--duration", type=float, help="stop after this many seconds")
    p.add_argument("--idle", type=float, help="stop after this many seconds without a batch "
                   "(after the first)")
    p.add_argument("--first-seq", type=int, help="the engine's first sequence number (0): "
                   "batches before the first received are backfilled too")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    args = p.parse_args(argv)
    # SIGTERM stops as Ctrl-C does: the end line is written.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        r = record(args.output, args.endpoint, args.replay_endpoint, args.topic, args.engine,
                   args.count, args.duration, args.first_seq, args.force, args.idle)
    except (ValueError, ImportError, OSError) as e:
        print(f"kvtk trace record: {e}", file=sys.stderr)
        return 2
    print(f"kvtk trace record: {r['batches']} batches to {r['output']} ({r['recovered']} "
          f"recovered from the replay socket, {r['lost']} lost in {r['gaps']} gaps; stopped: "
          f"{r['stopped']})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
