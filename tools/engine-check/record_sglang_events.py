"""Publishes real SGLang 0.5.23 KV-cache events on CPU (no model, no GPU): a token-id log is run
through SGLang's own RadixCache (LRU, page_size 16 by default) over a real
PagedTokenToKVPoolAllocator and ReqToTokenPool, with CacheInitParams(enable_kv_cache_events=True),
so the events are made by SGLang's own KVCacheEventRecorder (one BlockStored per new radix node,
its pages coalesced; one BlockRemoved per evicted node). They go out through SGLang's own
ZmqEventPublisher, built by EventPublisherFactory.create from a --kv-events-config JSON as the
scheduler builds it (scheduler_components/kv_events_publisher.py), and are published as the
scheduler's publish_kv_events does after each step: KVEventBatch(ts=time.time(),
events=tree_cache.take_events()) when non-empty.

Requests run one at a time, prompt only, as tools/engine-check/engine_accounting.py drives
SGLang (its run_sglang: Req.init_next_round_input -> lock -> alloc_req_slots +
alloc_paged_token_slots_extend -> release_kv_cache(checkpoint=True)); a request whose new pages
exceed free + evictable pages is skipped (SGLang's PrefillAdder would not admit it). LoRA and
cache_salt are left out (SGLang namespaces those pages). The time module seen by radix_cache is
replaced by a counter clock, as engine_accounting.py does, so runs are reproducible.

Usage (repository root, after `source tools/engine-check/sglang_venv.sh`):
  build/engine-venv/bin/python tools/engine-check/record_sglang_events.py \
      [--log tests/data/import/token_ids_example.jsonl] [--pages 64] [--page-size 16] \
      [--endpoint tcp://*:5557] [--replay-endpoint tcp://127.0.0.1:5558] [--start-delay S] \
      [--linger S]
tools/engine-check/record_sglang_events.sh records it with `kvtk trace record --engine sglang`.
"""
import argparse
import json
from array import array
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools" / "engine-check"))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--log", default=str(REPO / "tests/data/import/token_ids_example.jsonl"))
    p.add_argument("--pages", type=int, default=64, help="KV pool size in pages")
    p.add_argument("--page-size", type=int, default=16)
    p.add_argument("--endpoint", default="tcp://*:5557")
    p.add_argument("--replay-endpoint", default="tcp://127.0.0.1:5558")
    p.add_argument("--topic", default="")
    p.add_argument("--start-delay", type=float, default=0.0,
                   help="seconds to wait after the publisher starts (a subscriber joins)")
    p.add_argument("--linger", type=float, default=0.0,
                   help="seconds to keep the publisher (and its replay socket) up at the end")
    return p.parse_args()


def main():
    a = parse_args()
    import engine_accounting as ea

    ea.BLOCK = a.page_size  # the ServerArgs page size _publish_sglang_config writes
    ea._publish_sglang_config(tempfile.mkdtemp(prefix="record-sglang-"))
    import torch
    from sglang.srt.disaggregation.kv_events import EventPublisherFactory, KVEventBatch
    from sglang.srt.managers.schedule_batch import FINISH_LENGTH, Req
    from sglang.srt.mem_cache import radix_cache as radix_module
    from sglang.srt.mem_cache.allocation import alloc_paged_token_slots_extend, alloc_req_slots
    from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams
    from sglang.srt.mem_cache.common import release_kv_cache
    from sglang.srt.mem_cache.memory_pool import ReqToTokenPool
    from sglang.srt.mem_cache.radix_cache import RadixCache
    from sglang.srt.sampling.sampling_params import SamplingParams

    rows = [json.loads(line) for line in open(a.log) if line.strip()]
    P = a.page_size
    radix_module.time = ea._CounterTime()
    allocator = PagedTokenToKVPoolAllocator(a.pages * P, P, torch.int64, "cpu", kvcache=None,
                                            need_sort=False)
    max_len = max(len(r["token_ids"]) for r in rows) + 1
    req_to_token = ReqToTokenPool(size=2, max_context_len=max_len, device="cpu",
                                  enable_memory_saver=False)
    tree = RadixCache(CacheInitParams(disable=False, req_to_token_pool=req_to_token,
                                      token_to_kv_pool_allocator=allocator, page_size=P,
                                      eviction_policy="lru", enable_kv_cache_events=True))
    config = json.dumps({"publisher": "zmq", "endpoint": a.endpoint,
                         "replay_endpoint": a.replay_endpoint, "topic": a.topic})
    publisher = EventPublisherFactory.create(config, 0)
    time.sleep(a.start_delay)

    batches = stored = removed = skipped = hits = 0
    for i, row in enumerate(rows):
        toks = array("q", (int(t) for t in row["token_ids"]))  # as the scheduler's Req holds them
        L = len(toks)
        req = Req(str(i), "", toks, SamplingParams(max_new_tokens=1))
        req.init_next_round_input(tree)
        pre = req.prefix_len
        req.extend_end = L
        req.lock = tree.lock(req.last_node)
        new_pages = -(-L // P) - pre // P
        if new_pages * P > allocator.available_size() + tree.evictable_size():
            tree.unlock(req.lock)
            req.lock = None
            skipped += 1
        else:
            alloc_req_slots(req_to_token, [req], tree)
            prefix = tree.prefix_device_indices(req)
            last_loc = prefix[-1:] if pre else torch.full((1,), -1, dtype=torch.int64)
            pre_t, len_t = torch.tensor([pre]), torch.tensor([L])
            out = alloc_paged_token_slots_extend(tree, pre_t, pre_t, len_t, len_t, last_loc, L - pre)
            row_idx = req.kv.req_pool_idx
            req_to_token.write((row_idx, slice(0, pre)), prefix)
            req_to_token.write((row_idx, slice(pre, L)), out)
            req.kv.kv_allocated_len = req.kv.kv_committed_len = L
            hits += pre // P
            req.finished_reason = FINISH_LENGTH(length=1)
            release_kv_cache(req, tree, checkpoint=True)
        events = tree.take_events()
        if events:  # scheduler_components/kv_events_publisher.py publish_kv_events
            for e in events:
                n = len(e.block_hashes) if hasattr(e, "block_hashes") else 0
                if type(e).__name__ == "BlockStored":
                    stored += n
                elif type(e).__name__ == "BlockRemoved":
                    removed += n
            publisher.publish(KVEventBatch(ts=time.time(), events=events))
            batches += 1
    time.sleep(a.linger)
    publisher.shutdown()
    print(json.dumps({"requests": len(rows), "skipped": skipped, "hit_pages": hits,
                      "batches": batches, "stored_pages": stored, "removed_pages": removed}))


if __name__ == "__main__":
    main()
