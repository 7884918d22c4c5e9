"""Writes token_ids_example.jsonl: a small request log with token ids as a gateway would record
it (4 chat sessions growing turn by turn, a shared system prompt, one LoRA tenant, timestamps in
seconds), for `kvtk trace import`'s end-to-end test and docs/formats.md's example.
Deterministic: python3 tests/data/import/make_examples.py"""
import json
import random
from pathlib import Path

rng = random.Random(20261203)
system = [rng.randrange(1, 32000) for _ in range(40)]  # every session starts with it
sessions = {f"s{i}": list(system) for i in range(4)}
lines, t = [], 0.0
for turn in range(40):
    sid = f"s{rng.randrange(4)}"
    sessions[sid] += [rng.randrange(1, 32000) for _ in range(rng.randrange(8, 60))]
    t += round(rng.uniform(0.1, 2.0), 3)
    rec = {"timestamp": round(t, 3), "token_ids": sessions[sid], "output_length": rng.randrange(8, 64),
           "session": sid}
    if sid == "s3":
        rec["lora_name"], rec["lora_path"] = "sql-adapter", "/adapters/sql"
    lines.append(json.dumps(rec, separators=(",", ":")))
    sessions[sid] += [rng.randrange(1, 32000) for _ in range(rec["output_length"])]  # the reply
Path(__file__).with_name("token_ids_example.jsonl").write_text("\n".join(lines) + "\n")

# The same requests as a CSV log (a header line; ids space-separated in one cell; no LoRA is an
# empty cell) and, where pyarrow is installed, as Parquet: each imports to the JSONL's trace.
records = [json.loads(line) for line in lines]
csv_lines = ["timestamp,session,token_ids,output_length,lora_name,lora_path"]
for rec in records:
    csv_lines.append(",".join([str(rec["timestamp"]), rec["session"],
                               " ".join(map(str, rec["token_ids"])), str(rec["output_length"]),
                               rec.get("lora_name", ""), rec.get("lora_path", "")]))
Path(__file__).with_name("token_ids_example.csv").write_text("\n".join(csv_lines) + "\n")
try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError:
    print("pyarrow is not installed: token_ids_example.parquet not written")
else:
    columns = {k: [rec.get(k) for rec in records] for k in
               ("timestamp", "session", "token_ids", "output_length", "lora_name", "lora_path")}
    table = pa.table(columns, schema=pa.schema([
        ("timestamp", pa.float64()), ("session", pa.string()), ("token_ids", pa.list_(pa.int32())),
        ("output_length", pa.int32()), ("lora_name", pa.string()), ("lora_path", pa.string())]))
    pq.write_table(table, Path(__file__).with_name("token_ids_example.parquet"), compression="zstd")

# An OpenAI chat-completions log (what a gateway records: the request's model and messages, the
# response's created time and usage) of 3 conversations growing turn by turn, for the text import
# (kvtk.import_trace(format="openai-chat", tokenizer=...)); tests train a tokenizer for it.
topics = {"c0": "the cache hit ratio of a radix tree", "c1": "offloading KV blocks to NVMe",
          "c2": "pricing prefill tokens"}
words = ("the blocks cache prefix tokens hit miss tier host disk evict reuse session turn reply "
         "latency cost prefill decode page radix tree node leaf memory").split()
chats = {c: [{"role": "system", "content": "You are a helpful assistant for KV-cache questions."},
             {"role": "user", "content": f"Tell me about {topic}."}] for c, topic in topics.items()}
chat_lines, created = [], 1764700000
for turn in range(12):
    cid = f"c{rng.randrange(3)}"
    completion = " ".join(rng.choice(words) for _ in range(rng.randrange(6, 20)))
    created += rng.randrange(1, 30)
    chat_lines.append(json.dumps({
        "request": {"model": "toy-chat", "messages": list(chats[cid]), "user": cid},
        "response": {"created": created, "usage": {"completion_tokens": len(completion.split()) + 1}},
    }, separators=(",", ":")))
    chats[cid] += [{"role": "assistant", "content": completion},
                   {"role": "user", "content": "And " + " ".join(rng.choice(words) for _ in range(5)) + "?"}]
Path(__file__).with_name("openai_chat_example.jsonl").write_text("\n".join(chat_lines) + "\n")

# A Dynamo request trace (DYN_REQUEST_TRACE=1, schema dynamo.request.trace.v1, as Dynamo's jsonl
# sink wraps records: {"timestamp": ms since the sink started, "event": record}), written at
# request end (so not in arrival order), of the token-id example's requests: 4 chat sessions, the
# LoRA one ("s3") run as a sub-agent session spawned by "s0", plus tool events and one request
# without replay data, which the importer skips. The sequence hashes are stand-ins with Dynamo's
# shape (one per block of 64 tokens, the partial last block included, each chained to the ones
# before: blake2b here, XXH3 in Dynamo), since kvtk uses them as given and never recomputes them.
import hashlib

def sequence_hashes(tokens, block):
    out, prev = [], b""
    for start in range(0, len(tokens), block):
        prev = hashlib.blake2b(prev + json.dumps(tokens[start:start + block]).encode(),
                               digest_size=8).digest()
        out.append(int.from_bytes(prev, "big"))
    return out

drng = random.Random(37)
start_ms, events = 1764700000000, []
for i, rec in enumerate(records):
    received = start_ms + int(rec["timestamp"] * 1000)
    total = drng.randrange(200, 4000)
    ctx = {"session_id": rec["session"]}
    if rec["session"] == "s3":
        ctx["parent_session_id"] = "s0"
    request = {"request_id": f"req-{i}", "model": "toy", "input_tokens": len(rec["token_ids"]),
               "output_tokens": rec["output_length"], "request_received_ms": received,
               "total_time_ms": total}
    if i != 7:  # one request traced without replay data
        request["replay"] = {"trace_block_size": 64, "input_length": len(rec["token_ids"]),
                             "input_sequence_hashes": sequence_hashes(rec["token_ids"], 64)}
    events.append((received + total, {"schema": "dynamo.request.trace.v1", "event_type": "request_end",
                                      "event_time_unix_ms": received + total, "event_source": "dynamo",
                                      "agent_context": ctx, "request": request}))
    if i % 9 == 4:
        events.append((received + total + 5, {"schema": "dynamo.request.trace.v1", "event_type": "tool_start",
                                              "event_time_unix_ms": received + total + 5,
                                              "agent_context": ctx, "tool": {"name": "search"}}))
events.sort(key=lambda e: e[0])
Path(__file__).with_name("dynamo_request_trace_example.jsonl").write_text("".join(
    json.dumps({"timestamp": t - events[0][0], "event": e}, separators=(",", ":")) + "\n"
    for t, e in events))
