"""Records real vLLM 0.33.0 KV-cache event streams on CPU (no model, no GPU): a token-id log is
run through vLLM's own V1 Scheduler + KVCacheManager with prefix caching and KV events on, and
the events go out through vLLM's own ZmqEventPublisher, which the Scheduler builds itself from
VllmConfig.kv_events_config (EventPublisherFactory.create, v1/core/sched/scheduler.py) and
feeds at the end of every Scheduler.update_from_output (KVEventBatch(ts, events) of
kv_cache_manager.take_events(), when non-empty), exactly as in a served engine.

Driving: as vllm_scheduler.py (tests/v1/core/utils.py create_scheduler style): VllmConfig with
SchedulerConfig, a config-only tiny Llama ModelConfig (vllm_common.tiny_llama), CacheConfig
(block_size, enable_prefix_caching=True) and KVEventsConfig(enable_kv_cache_events=True,
publisher="zmq", endpoint, replay_endpoint, topic); one FullAttentionSpec group with
num_blocks = --num-gpu-blocks (vLLM's count: block 0 is the null block, so one fewer is
usable); sha256 block hasher after init_none_hash (as EngineCore does). Requests are added one
at a time and run to completion (schedule / fake ModelRunnerOutput / update_from_output, as
EngineCore.step) before the next is added, so the event order is deterministic. Output token k
of request r is 100000 + 1000 * r + k (no model: any fixed tokens do; they land in the
BlockStored token_ids of decode blocks, which vLLM hashes and caches too).

Log: JSONL rows {"timestamp", "token_ids", "output_length", "session", [lora_name, lora_path]}.
session -> Request(session_id=...) (published as BlockStored.session_id); lora_name/lora_path ->
LoRARequest(name, int id (1, 2, ... by first appearance), path) unless --no-lora (the scheduler
needs no LoRA config for that: it only reads lora_request when lora_config is set; the LoRA
name and path enter the block hashes, and events carry lora_id, lora_name and extra_keys).

Outputs:
  --raw-out FILE   one JSON line per published message {"topic", "seq", "payload_hex"}: the
                   publisher's replay buffer (ZmqEventPublisher._buffer: the (seq, payload)
                   it sent, payload = msgspec.msgpack.Encoder().encode(batch)).
  --subscribe-self a pyzmq SUB thread (started before the first request) records what arrives;
                   a seq gap (e.g. the SUB joined late) is filled through the replay ROUTER
                   with a DEALER: send [b"", seq as 8 bytes big-endian], receive
                   [b"", topic, seq8, payload] ... until [b"", b"", ff*8, b""].
Checks printed: event/block counts, that every event hash is the low 64 bits (last 8 bytes,
big-endian) of the request's sha256 block hash, that each removed hash was stored before, and
that the SUB and replay copies equal the published frames byte for byte.

Endpoints (vLLM's rule, ZmqEventPublisher._is_bind_endpoint): a PUB endpoint with '*' or '::'
(or ipc/inproc) is bound, any other is connected to (then the subscriber must bind it); the
replay endpoint is always bound. Defaults: PUB tcp://*:5557 (vLLM's default, the SUB connects to
tcp://127.0.0.1:5557), replay tcp://127.0.0.1:5558. All traffic stays on loopback.

Usage (repository root, after `source tools/engine-check/vllm_venv.sh`):
  build/engine-venv/bin/python tools/engine-check/record_vllm_events.py \
      [--log tests/data/import/token_ids_example.jsonl] [--num-gpu-blocks 64] \
      [--endpoint tcp://*:5557] [--replay-endpoint tcp://127.0.0.1:5558|none] [--topic T] \
      [--raw-out FILE] [--subscribe-self] [--report-mode incremental|full] [--no-lora] \
      [--late-join I] [--reset-after I ...] [--bytes-hashes] [--limit N] [--show N]
"""
import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "build" / "engine-check" / "record_vllm_events"
END_SEQ = b"\xff" * 8  # ZmqEventPublisher.END_SEQ = (-1).to_bytes(8, "big", signed=True)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--log", default=str(REPO / "tests/data/import/token_ids_example.jsonl"))
    p.add_argument("--num-gpu-blocks", type=int, default=64,
                   help="vLLM num_gpu_blocks (block 0 is the null block: one fewer usable)")
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--endpoint", default="tcp://*:5557")
    p.add_argument("--replay-endpoint", default="tcp://127.0.0.1:5558",
                   help="ROUTER replay endpoint (always bound); 'none' disables it")
    p.add_argument("--topic", default="")
    p.add_argument("--raw-out", help="JSONL of published messages {topic, seq, payload_hex}")
    p.add_argument("--subscribe-self", action="store_true",
                   help="SUB thread in this process; prints what arrived")
    p.add_argument("--late-join", type=int, default=-1,
                   help="with --subscribe-self: start the SUB only after request I finished "
                        "(tests the replay gap fill)")
    p.add_argument("--report-mode", choices=["incremental", "full"], default="incremental",
                   help="SamplingParams.extra_args kv_cache_report_mode of every request "
                        "('full' also publishes BlockStored for prefix-cache hits)")
    p.add_argument("--no-lora", action="store_true", help="ignore lora_name/lora_path")
    p.add_argument("--reset-after", type=int, action="append", default=[],
                   help="Scheduler.reset_prefix_cache() after request I (0-based) finished; "
                        "its AllBlocksCleared is published with the next request's first step")
    p.add_argument("--bytes-hashes", action="store_true",
                   help="VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0: publish 32-byte hashes")
    p.add_argument("--limit", type=int, default=0, help="first N log rows only (0 = all)")
    p.add_argument("--max-tokens", type=int, default=0,
                   help="every request's max_tokens (1 = prompt only, as kvtk check-engine's "
                        "model; 0 = the log's output_length)")
    p.add_argument("--start-delay", type=float, default=0.0,
                   help="seconds between the publisher's start and the first request (outside "
                        "subscribers connect meanwhile, as they would to a serving engine)")
    p.add_argument("--linger", type=float, default=0.0,
                   help="seconds to keep the publisher (and its replay socket) up at the end, "
                        "for an outside recorder to catch up")
    p.add_argument("--show", type=int, default=3, help="decoded payloads to print")
    return p.parse_args()


# ---------------------------------------------------------------------------- subscriber
class SelfSubscriber(threading.Thread):
    """What `kvtk trace record` does: SUB on the PUB endpoint (connect, or bind when vLLM's PUB
    connects), frames [topic, seq8, payload]; on a seq gap, replay from the missing seq through
    the ROUTER (DEALER: [b"", seq8] -> [b"", topic, seq8, payload]* then [b"", b"", END, b""])."""

    def __init__(self, endpoint, replay_endpoint, topic):
        super().__init__(daemon=True, name="self-subscriber")
        import zmq
        self.zmq = zmq
        self.ctx = zmq.Context.instance()
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, topic.encode())
        bind = "*" in endpoint or "::" in endpoint or endpoint.startswith(("ipc://", "inproc://"))
        if bind:  # vLLM binds: connect (loopback)
            self.sub.connect(endpoint.replace("*", "127.0.0.1"))
        else:  # vLLM connects: bind
            self.sub.bind(endpoint)
        self.replay_endpoint = replay_endpoint
        self.frames = {}  # seq -> (topic, payload)
        self.live = 0
        self.replayed = 0
        self.replay_requests = []
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def replay_from(self, start):
        zmq = self.zmq
        d = self.ctx.socket(zmq.DEALER)
        d.connect(self.replay_endpoint)
        d.send_multipart([b"", start.to_bytes(8, "big")])
        n = 0
        try:
            while True:
                if not d.poll(5000):
                    raise RuntimeError("replay: no reply in 5 s")
                msg = d.recv_multipart()
                assert msg[0] == b"" and len(msg) == 4, msg
                _, topic, seq8, payload = msg
                if seq8 == END_SEQ:
                    assert topic == b"" and payload == b""
                    break
                seq = int.from_bytes(seq8, "big")
                with self.lock:
                    if seq not in self.frames:
                        self.frames[seq] = (topic, payload)
                        self.replayed += 1
                n += 1
        finally:
            d.close(linger=0)
        self.replay_requests.append((start, n))
        return n

    def next_missing(self):
        with self.lock:
            s = 0
            while s in self.frames:
                s += 1
            return s

    def run(self):
        while not self.stop.is_set():
            if not self.sub.poll(50):
                continue
            topic, seq8, payload = self.sub.recv_multipart()
            seq = int.from_bytes(seq8, "big")
            with self.lock:
                if seq not in self.frames:
                    self.frames[seq] = (topic, payload)
                    self.live += 1
            missing = self.next_missing()
            if missing < seq and self.replay_endpoint:
                self.replay_from(missing)

    def finish(self, n_published, timeout=10.0):
        t0 = time.time()
        while len(self.frames) < n_published and time.time() - t0 < timeout:
            time.sleep(0.05)
        self.stop.set()
        self.join()
        if len(self.frames) < n_published and self.replay_endpoint:
            self.replay_from(self.next_missing())
        self.sub.close(linger=0)


# ------------------------------------------------------------------------------------ vLLM
def make_scheduler(a, max_len):
    import torch
    from vllm.config import (CacheConfig, KVEventsConfig, ModelConfig, SchedulerConfig,
                             VllmConfig)
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from vllm_common import tiny_llama

    B = max(2048, max_len)
    scfg = SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=B, max_model_len=max_len,
                           enable_chunked_prefill=True, async_scheduling=False,
                           is_encoder_decoder=False)
    mcfg = ModelConfig(model=tiny_llama(OUT), dtype="float16", seed=0, skip_tokenizer_init=True,
                       max_model_len=max_len)
    ccfg = CacheConfig(block_size=a.block_size, enable_prefix_caching=True)
    replay = None if a.replay_endpoint.lower() == "none" else a.replay_endpoint
    ecfg = KVEventsConfig(enable_kv_cache_events=True, publisher="zmq", endpoint=a.endpoint,
                          replay_endpoint=replay, topic=a.topic)
    vcfg = VllmConfig(scheduler_config=scfg, model_config=mcfg, cache_config=ccfg,
                      kv_events_config=ecfg)
    spec = FullAttentionSpec(block_size=a.block_size, num_kv_heads=1, head_size=1,
                             dtype=torch.float16)
    kcfg = KVCacheConfig(num_blocks=a.num_gpu_blocks, kv_cache_tensors=[],
                         kv_cache_groups=[KVCacheGroupSpec(["layer.0"], spec)])
    ccfg.num_gpu_blocks = a.num_gpu_blocks
    s = Scheduler(vllm_config=vcfg, kv_cache_config=kcfg,
                  structured_output_manager=StructuredOutputManager(vcfg),
                  block_size=a.block_size, log_stats=False)
    return s


def load_log(path, limit):
    rows = []
    with open(path) as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
                if limit and len(rows) == limit:
                    break
    return rows


def main():
    a = parse_args()
    if a.bytes_hashes:
        os.environ["VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES"] = "0"
    OUT.mkdir(parents=True, exist_ok=True)
    rows = load_log(a.log, a.limit)
    max_len = max(len(r["token_ids"]) + int(r["output_length"]) for r in rows) + 64

    import msgspec
    import vllm
    from vllm.distributed.kv_events import KVEventBatch
    from vllm.lora.request import LoRARequest
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.outputs import ModelRunnerOutput
    from vllm.v1.request import Request

    hash_fn = get_hash_fn_by_name("sha256")
    init_none_hash(hash_fn)
    hasher = get_request_block_hasher(a.block_size, hash_fn)
    s = make_scheduler(a, max_len)
    pub = s.kv_event_publisher
    print(f"vLLM {vllm.__version__}: {type(pub).__name__} PUB {pub._endpoint} "
          f"replay {pub._replay_endpoint} topic {a.topic!r}; num_gpu_blocks {a.num_gpu_blocks} "
          f"(usable {s.kv_cache_manager.block_pool.get_num_free_blocks()}), block_size "
          f"{a.block_size}, report mode {a.report_mode}")

    n_published = [0]
    publish = pub.publish

    def counting_publish(batch):  # count only; vLLM's publish does the rest
        n_published[0] += 1
        publish(batch)
    pub.publish = counting_publish

    sub = None

    def start_sub():
        nonlocal sub
        sub = SelfSubscriber(pub._endpoint, pub._replay_endpoint, a.topic)
        sub.start()
        time.sleep(0.5)  # let the subscription reach the PUB (late joins are replayed)
    if a.subscribe_self and a.late_join < 0:
        start_sub()
    if a.start_delay > 0:
        time.sleep(a.start_delay)

    # every (request-local) block hash vLLM computed: for the 64-bit key check
    all_hashes = {}
    loras = {}
    for i, r in enumerate(rows):
        lora = None
        if not a.no_lora and r.get("lora_name"):
            lid = loras.setdefault(r["lora_name"], len(loras) + 1)
            lora = LoRARequest(r["lora_name"], lid, r.get("lora_path", ""))
        O = a.max_tokens if a.max_tokens > 0 else max(1, int(r["output_length"]))
        sp = SamplingParams(max_tokens=O, ignore_eos=True,
                            extra_args={"kv_cache_report_mode": a.report_mode})
        q = Request(str(i), list(r["token_ids"]), sp, None, arrival_time=float(r["timestamp"]),
                    lora_request=lora, block_hasher=hasher, session_id=r.get("session"))
        s.add_request(q)
        k = 0
        while s.has_requests():
            out = s.schedule()
            ids = list(out.num_scheduled_tokens)
            toks = []
            for rid in ids:
                if s.requests[rid].is_prefill_chunk:
                    toks.append([])
                else:
                    toks.append([100000 + 1000 * i + k])
                    k += 1
            mro = ModelRunnerOutput(req_ids=ids, req_id_to_index={x: j for j, x in enumerate(ids)},
                                    sampled_token_ids=toks)
            s.update_from_output(out, mro)  # take_events() + publish(KVEventBatch) inside
        assert q.num_output_tokens == O, (i, q.num_output_tokens, O)
        for h in q.block_hashes:
            all_hashes[int.from_bytes(h[-8:], "big")] = h
        if i in a.reset_after:
            ok = s.reset_prefix_cache()
            print(f"reset_prefix_cache after request {i}: {ok}")
        if a.subscribe_self and i == a.late_join:
            start_sub()

    # let the publisher thread drain its queue (task_done after each send)
    t0 = time.time()
    while pub._event_queue.unfinished_tasks and time.time() - t0 < 10:
        time.sleep(0.02)
    published = [(pub._topic_bytes, seq, payload) for seq, payload in pub._buffer]
    assert len(published) == n_published[0] and [x[1] for x in published] == list(
        range(n_published[0])), "replay buffer does not hold every batch (raise buffer_steps)"

    if sub is not None:
        sub.finish(n_published[0])
    if a.linger > 0:
        time.sleep(a.linger)
    # replay check (public protocol) before shutdown
    replay_ok = None
    if pub._replay_endpoint:
        chk = SelfSubscriber.__new__(SelfSubscriber)
        import zmq
        chk.zmq, chk.ctx, chk.replay_endpoint = zmq, zmq.Context.instance(), pub._replay_endpoint
        chk.frames, chk.replayed, chk.replay_requests, chk.lock = {}, 0, [], threading.Lock()
        chk.replay_from(0)
        replay_ok = [(t, q, p) for q, (t, p) in sorted(chk.frames.items())] == published
    s.shutdown()

    if a.raw_out:
        with open(a.raw_out, "w") as f:
            for topic, seq, payload in published:
                f.write(json.dumps({"topic": topic.decode(), "seq": seq,
                                    "payload_hex": payload.hex()}) + "\n")

    # ------------------------------------------------------------------ decode and check
    try:
        import msgpack
    except ImportError:
        msgpack = None
    dec = msgspec.msgpack.Decoder(KVEventBatch)
    counts = {"BlockStored": [0, 0], "BlockRemoved": [0, 0], "AllBlocksCleared": [0, 0]}
    stored = set()
    bad_key = removed_unknown = 0
    hash_types = set()
    for _, seq, payload in published:
        batch = dec.decode(payload)  # vLLM's own type round-trips
        for ev in batch.events:
            name = type(ev).__name__
            counts[name][0] += 1
            if name == "AllBlocksCleared":
                stored.clear()
                continue
            counts[name][1] += len(ev.block_hashes)
            for h in ev.block_hashes:
                hash_types.add(type(h).__name__)
                key = h if isinstance(h, int) else int.from_bytes(h[-8:], "big")
                if key not in all_hashes:
                    bad_key += 1
                if name == "BlockStored":
                    stored.add(key)
                elif key in stored:
                    stored.discard(key)
                else:
                    removed_unknown += 1
    print(f"published {n_published[0]} batches (seq 0..{n_published[0] - 1}), "
          f"{sum(len(p) for _, _, p in published)} payload bytes, requests {len(rows)}")
    for name, (ne, nb) in counts.items():
        print(f"  {name}: {ne} events, {nb} block hashes")
    print(f"  hash type(s): {sorted(hash_types)}; hashes not equal to a request's "
          f"int.from_bytes(block_hash[-8:], 'big'): {bad_key}; removed before stored: "
          f"{removed_unknown}; still cached at end: {len(stored)}")
    if replay_ok is not None:
        print(f"  replay ROUTER from seq 0: {'identical to published' if replay_ok else 'DIFFERS'}")
    if sub is not None:
        got = [(t, q, p) for q, (t, p) in sorted(sub.frames.items())]
        print(f"  self-subscriber: {len(sub.frames)} messages ({sub.live} live, {sub.replayed} "
              f"by replay only, replay requests {sub.replay_requests}); "
              f"{'identical to published' if got == published else 'DIFFERS'}")
    if a.raw_out:
        print(f"  raw messages written to {a.raw_out}")
    for _, seq, payload in published[: a.show]:
        obj = msgpack.unpackb(payload, raw=False, strict_map_key=False) if msgpack else \
            msgspec.msgpack.decode(payload)
        print(f"--- seq {seq}: {len(payload)} bytes, hex {payload[:48].hex()}...")
        print("    " + short(obj))
    return 0 if (bad_key == 0 and removed_unknown == 0 and replay_ok is not False) else 1


def short(obj):
    def cut(x):
        if isinstance(x, list) and len(x) > 6:
            return [cut(v) for v in x[:4]] + [f"...({len(x)})"]
        if isinstance(x, list):
            return [cut(v) for v in x]
        if isinstance(x, dict):
            return {k: cut(v) for k, v in x.items()}
        return x
    return json.dumps(cut(obj), default=repr)


if __name__ == "__main__":
    sys.exit(main())
