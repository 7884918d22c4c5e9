#!/usr/bin/env python3
"""Records the KV-cache events (RouterEvents) that NVIDIA Dynamo 1.6.1 itself publishes, on CPU
over loopback, with no NATS and no etcd.

Dynamo's own classes do all the work:
  * dynamo._core.DistributedRuntime(loop, "file", "tcp", event_plane="zmq"): discovery in a
    private directory (DYN_FILE_KV), the event plane on ZMQ PUB/SUB instead of NATS;
  * dynamo.llm.KvEventPublisher on an endpoint of that runtime, in two modes:
      direct      publish_stored / publish_removed from Python (Dynamo computes tokens_hash);
      vllm_relay  zmq_endpoint=... : Dynamo's ZMQ listener reads vLLM-format KV event batches
                  ([topic, seq u64 BE, msgpack [ts, [events], dp_rank]]) from a local XPUB
                  socket of this script, converts them and publishes the RouterEvents;
  * dynamo.llm.RadixTree: the captured KvCacheEvents applied to Dynamo's indexer and dumped back
    with dump_tree_as_events() (Dynamo's JSON form of a RouterEvent).
The script subscribes (pyzmq SUB, topic "kv-events") to the PUB socket that each publisher
registered in the file discovery directory (v1/event_channels/*: transport.config.endpoint).

Wire format seen on that socket (Dynamo event plane, ZMQ transport), one message per flush:
  frame 0  topic, b"kv-events"
  frame 1  publisher_id, u64 big-endian
  frame 2  sequence, u64 big-endian (per publisher, from 0)
  frame 3  u8 frame version (1) + u32 big-endian length + msgpack EventEnvelope (named map):
           {publisher_id, sequence, published_at (ms), topic, payload: bin}
           payload = msgpack array of RouterEvent maps:
           {worker_id, storage_tier, residency_domain, event: {event_id, data, dp_rank}}

Run with the Dynamo venv (tools/engine-check/dynamo_replay.sh builds it; add pyzmq and msgpack):
  build/engine-check/dynamo-venv/bin/python tools/engine-check/record_dynamo_events.py \
      [--mode direct|vllm_relay|both] [--out FILE.jsonl]
Writes one JSON object per received ZMQ message (router_events decoded, the raw frame 3 as hex),
then one line of RadixTree dump per mode. Exit status 1 when an expected message is missing or a
tokens_hash differs from Dynamo's compute_block_hash_for_seq.
"""
import argparse
import asyncio
import json
import os
import shutil
import struct
import sys
import time

# Before the runtime starts: advertise the event plane on loopback, discovery in a temp dir.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dynamo_discovery import private_discovery, wait_channel  # noqa: E402

_disc = private_discovery()

import msgpack  # noqa: E402
import zmq  # noqa: E402
from dynamo._core import DistributedRuntime  # noqa: E402
from dynamo.llm import KvEventPublisher, RadixTree, compute_block_hash_for_seq  # noqa: E402

BLOCK = 4
A = list(range(1, 13))                 # 3 blocks
B = list(range(1, 9)) + [100, 101, 102, 103]  # shares A's first 2 blocks
# Engine ("external") block hashes: arbitrary, one negative to show the i64 -> u64 reinterpretation.
HA = [1001, 1002, -1003]
HB3 = 1004


def tokens_hashes(tokens):
    return compute_block_hash_for_seq(tokens, BLOCK)


def decode(source: str, frames) -> dict:
    topic, pid, seq, frame = frames
    version, length = frame[0], struct.unpack(">I", frame[1:5])[0]
    assert version == 1 and length == len(frame) - 5, (version, length, len(frame))
    env = msgpack.unpackb(frame[5:], raw=False)
    events = msgpack.unpackb(env["payload"], raw=False)
    return {"source": source, "topic": topic.decode(),
            "publisher_id": int.from_bytes(pid, "big"), "sequence": int.from_bytes(seq, "big"),
            "frame_version": version,
            "envelope": {k: env[k] for k in ("publisher_id", "sequence", "published_at", "topic")},
            "router_events": events, "frame_hex": frame.hex()}


async def collect(sub, n: int, timeout=5.0) -> list:
    out, end = [], time.time() + timeout
    while len(out) < n and time.time() < end:
        if sub.poll(50):
            out.append(sub.recv_multipart())
        else:
            await asyncio.sleep(0.01)
    while sub.poll(300):  # anything beyond the expected count is reported too
        out.append(sub.recv_multipart())
    return out


async def run_direct(rt, ctx) -> list:
    pub = KvEventPublisher(rt.endpoint("kvtk.direct.generate"), worker_id=7, kv_block_size=BLOCK)
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"kv-events")
    sub.connect(await wait_channel("direct"))
    await asyncio.sleep(1.0)  # ZMQ slow joiner: the SUB must be attached before the first send
    pub.publish_stored(A, [BLOCK] * 3, HA)
    pub.publish_stored(B[8:], [BLOCK], [HB3], parent_hash=HA[1])
    pub.publish_removed([HA[2]])
    msgs = await collect(sub, 3)
    pub.shutdown()
    sub.close(0)
    return [decode("direct", m) for m in msgs]


async def run_relay(rt, ctx) -> list:
    eng = ctx.socket(zmq.XPUB)  # XPUB: we see Dynamo's listener subscribe
    port = eng.bind_to_random_port("tcp://127.0.0.1")
    pub = KvEventPublisher(rt.endpoint("kvtk.relay.generate"), worker_id=8, kv_block_size=BLOCK,
                           zmq_endpoint=f"tcp://127.0.0.1:{port}", zmq_topic="")
    if not eng.poll(10000):
        raise RuntimeError("Dynamo's ZMQ listener never subscribed")
    eng.recv()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"kv-events")
    sub.connect(await wait_channel("relay"))
    await asyncio.sleep(1.0)
    # vLLM KVEventBatch (msgspec array_like, tagged): [ts, [event...], data_parallel_rank]
    # BlockStored: [tag, block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium]
    batches = [
        [["BlockStored", HA, None, A, BLOCK, None, "GPU"]],
        [["BlockStored", [HB3], HA[1], B[8:], BLOCK, None, "GPU"]],
        [["BlockRemoved", [HA[2]], "GPU"]],
        [["BlockStored", [HA[2]], HA[1], A[8:], BLOCK, None, "CPU"]],
        [["AllBlocksCleared"]],
    ]
    for i, evs in enumerate(batches):  # one engine batch each: Dynamo coalesces within a batch
        eng.send_multipart([b"", struct.pack(">Q", i), msgpack.packb([time.time(), evs, 0])])
    msgs = await collect(sub, len(batches))
    pub.shutdown()
    sub.close(0)
    eng.close(0)
    return [decode("vllm_relay", m) for m in msgs]


def check(records, source, expected_msgs) -> int:
    bad = 0
    if len(records) != expected_msgs:
        print(f"{source}: {len(records)} messages, expected {expected_msgs}", file=sys.stderr)
        bad += 1
    want = dict(zip([h % 2**64 for h in HA] + [HB3], tokens_hashes(A) + tokens_hashes(B)[2:]))
    for r in records:
        for ev in r["router_events"]:
            data = ev["event"]["data"]
            if isinstance(data, dict) and "stored" in data:
                for b in data["stored"]["blocks"]:
                    if want.get(b["block_hash"]) != b["tokens_hash"]:
                        print(f"{source}: tokens_hash mismatch {b}", file=sys.stderr)
                        bad += 1
    return bad


def radix_dump(records, source) -> dict:
    tree = RadixTree()
    for r in records:
        for ev in r["router_events"]:
            tree.apply_event(ev["worker_id"], json.dumps(ev["event"]).encode())
    return {"source": source + "_radix_dump",
            "router_events": [json.loads(s) for s in tree.dump_tree_as_events()]}


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["direct", "vllm_relay", "both"], default="both")
    ap.add_argument("--out", help="JSONL file (default: stdout)")
    a = ap.parse_args()
    rt = DistributedRuntime(asyncio.get_running_loop(), "file", "tcp", event_plane="zmq")
    ctx = zmq.Context()
    lines, bad = [], 0
    try:
        if a.mode in ("direct", "both"):
            recs = await run_direct(rt, ctx)
            bad += check(recs, "direct", 3)
            lines += recs + [radix_dump(recs, "direct")]
        if a.mode in ("vllm_relay", "both"):
            recs = await run_relay(rt, ctx)
            bad += check(recs, "vllm_relay", 5)
            lines += recs + [radix_dump(recs, "vllm_relay")]
    finally:
        rt.shutdown()
        if os.environ["DYN_FILE_KV"] == _disc:
            shutil.rmtree(_disc, ignore_errors=True)
    out = open(a.out, "w") if a.out else sys.stdout
    for rec in lines:
        out.write(json.dumps(rec) + "\n")
    if a.out:
        out.close()
    print(f"{len(lines)} records; {'OK' if not bad else f'{bad} problem(s)'}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
