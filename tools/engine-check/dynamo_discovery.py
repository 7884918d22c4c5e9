"""Dynamo's file discovery (DYN_FILE_KV) as the engine-check scripts use it: a private store on
loopback, and the event-plane endpoint a KvEventPublisher registered (v1/event_channels/*:
transport.config.endpoint)."""
import asyncio
import glob
import json
import os
import tempfile
import time


def private_discovery() -> str:
    """Before Dynamo's runtime starts: discovery in a new temporary directory (returned, for the
    caller to remove), the event plane and RPC advertised on loopback, warnings only."""
    disc = tempfile.mkdtemp(prefix="dynamo-disc-")
    os.environ.setdefault("DYN_FILE_KV", disc)
    os.environ.setdefault("DYN_EVENT_PLANE_HOST", "127.0.0.1")
    os.environ.setdefault("DYN_TCP_RPC_HOST", "127.0.0.1")
    os.environ.setdefault("DYN_LOG", "warn")
    return disc


async def wait_channel(component: str, timeout=10.0) -> str:
    """The ZMQ endpoint a publisher of `component` registered in the file discovery store."""
    end = time.time() + timeout
    while time.time() < end:
        for f in glob.glob(os.path.join(os.environ["DYN_FILE_KV"], "v1/event_channels/*")):
            try:
                ch = json.load(open(f))
            except (OSError, ValueError):
                continue
            if ch.get("scope", {}).get("endpoint", {}).get("component") == component:
                return ch["transport"]["config"]["endpoint"]
        await asyncio.sleep(0.05)
    raise RuntimeError(f"no event channel registered for {component}")
