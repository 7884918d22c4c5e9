#!/usr/bin/env python3
"""Makes a recording of NVIDIA Dynamo 1.6.1's own KV-event stream (RouterEvents on its event
plane) on CPU over loopback, no NATS, no etcd: Dynamo's vLLM relay republishes a real vLLM
recording, and `kvtk trace record --engine dynamo` records what Dynamo publishes.

  * dynamo._core.DistributedRuntime(loop, "file", "tcp", event_plane="zmq"): file discovery in a
    private directory (DYN_FILE_KV), the event plane on ZMQ PUB/SUB;
  * dynamo.llm.KvEventPublisher(endpoint, worker_id, kv_block_size, zmq_endpoint=...): Dynamo's
    ZMQ listener subscribes to this script's XPUB socket, reads vLLM-format KV event batches
    ([topic, seq u64 BE, msgpack batch]), converts them to RouterEvents and publishes them;
  * the batches sent are the raw payloads of a kvtk recording of vLLM 0.33.0 itself
    (tests/data/import/vllm_events_example.jsonl by default), one message each, in order;
  * the recorder (`python -m kvtk._record --engine dynamo`, run with --recorder-python) subscribes
    to the PUB socket the publisher registered (v1/event_channels/*: transport.config.endpoint).

So `kvtk trace import OUT --format dynamo-events --keys engine` must give the same miss stream as
`kvtk trace import` of the vLLM recording with `--keys engine`: Dynamo passes the engine's block
hashes through. tools/engine-check/record_dynamo_events.py shows the wire format in detail.

Usage (repository root; the Dynamo venv of tools/engine-check/dynamo_replay.sh plus pyzmq and
msgpack, and a Python with the kvtk package):
  build/engine-check/dynamo-venv/bin/python tools/engine-check/record_dynamo_relay.py \
      --recorder-python build/nbvenv/bin/python --out tests/data/import/dynamo_events_example.jsonl
"""
import argparse
import asyncio
import base64
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dynamo_discovery import private_discovery, wait_channel  # noqa: E402

_disc = private_discovery()

import zmq  # noqa: E402
from dynamo._core import DistributedRuntime  # noqa: E402
from dynamo.llm import KvEventPublisher  # noqa: E402


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vllm-recording", default="tests/data/import/vllm_events_example.jsonl")
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--worker-id", type=int, default=1)
    ap.add_argument("--recorder-python", required=True, help="a Python with the kvtk package")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    payloads = [base64.b64decode(json.loads(line)["payload"]) for line in open(a.vllm_recording)
                if '"payload"' in line]
    rt = DistributedRuntime(asyncio.get_running_loop(), "file", "tcp", event_plane="zmq")
    ctx = zmq.Context()
    eng = ctx.socket(zmq.XPUB)  # XPUB: Dynamo's listener is seen subscribing
    port = eng.bind_to_random_port("tcp://127.0.0.1")
    recorder = None
    try:
        pub = KvEventPublisher(rt.endpoint("kvtk.relay.generate"), worker_id=a.worker_id,
                               kv_block_size=a.block_size, zmq_endpoint=f"tcp://127.0.0.1:{port}",
                               zmq_topic="")
        if not eng.poll(10000):
            raise RuntimeError("Dynamo's ZMQ listener never subscribed")
        eng.recv()
        endpoint = await wait_channel("relay")
        recorder = subprocess.Popen([a.recorder_python, "-m", "kvtk._record", "--engine", "dynamo",
                                     "--endpoint", endpoint, "--first-seq", "0", "--idle", "4",
                                     "--duration", "120", "--force", "-o", a.out])
        await asyncio.sleep(2.0)  # the SUB attaches before the first message (no replay socket)
        for i, p in enumerate(payloads):  # one vLLM batch per message, as the engine sent them
            eng.send_multipart([b"", i.to_bytes(8, "big"), p])
            await asyncio.sleep(0.05)
        rc = await asyncio.get_running_loop().run_in_executor(None, recorder.wait)
        pub.shutdown()
        print(f"relayed {len(payloads)} vLLM batches; recorder exit {rc}", file=sys.stderr)
        return rc
    finally:
        if recorder is not None and recorder.poll() is None:
            recorder.kill()
        eng.close(0)
        rt.shutdown()
        if os.environ["DYN_FILE_KV"] == _disc:
            shutil.rmtree(_disc, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
