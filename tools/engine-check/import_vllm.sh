#!/usr/bin/env bash
# The vLLM check of `kvtk trace import --format token-ids --engine vllm` (docs/formats.md
# "Importing your traffic"): vLLM 0.33.0's own request block hasher against kvtk's imported keys
# (tools/engine-check/import_vllm.py), on the committed example log and a generated one with
# LoRA and cache_salt requests, 16- and 64-token blocks. Opt-in: it needs build/engine-venv.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=build/engine-venv
[ -x "$venv/bin/python" ] || source tools/engine-check/vllm_venv.sh
[ -x build/release/sim/kvtk ] || { cmake --preset release && cmake --build --preset release --target kvtk; }
mkdir -p build/engine-check
gen=build/engine-check/import_gen.jsonl
python3 - "$gen" <<'PY'
import json, random, sys
random.seed(5)
convs = [[random.randrange(1, 50000) for _ in range(30)] for _ in range(6)]
with open(sys.argv[1], "w") as f:
    t = 0
    for i in range(1500):
        c = random.randrange(6)
        convs[c] += [random.randrange(1, 50000) for _ in range(random.randrange(3, 120))]
        if len(convs[c]) > 4000:
            convs[c] = convs[c][:30]
        t += 0.1
        rec = {"timestamp": round(t, 3), "token_ids": convs[c], "output_length": 16}
        if c == 5:
            rec["cache_salt"] = "tenant-b"
        if c == 4:
            rec["lora_name"], rec["lora_path"] = "a", "/p/a"
        f.write(json.dumps(rec) + "\n")
PY
for log in tests/data/import/token_ids_example.jsonl "$gen"; do
  for bs in 16 64; do
    "$venv/bin/python" tools/engine-check/import_vllm.py build/release/sim/kvtk "$log" --block-size "$bs"
  done
done
