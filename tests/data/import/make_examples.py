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
