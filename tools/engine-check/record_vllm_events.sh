#!/usr/bin/env bash
# Makes tests/data/import/vllm_events_example.jsonl: vLLM 0.33.0's own Scheduler + KVCacheManager
# on CPU (tools/engine-check/record_vllm_events.py) serves the committed token-id example log one
# request at a time, prompt only (max_tokens 1), 64 GPU blocks (63 usable), with KV events on and
# published by vLLM's own ZmqEventPublisher over loopback; `kvtk trace record` (the kvtk package,
# pyzmq) subscribes and writes the recording, backfilling from vLLM's replay socket anything the
# subscription missed. LoRA is left out (vLLM's events name the adapter but not its path, which
# its block hashes include). REPORT_MODE=full sets every request's kv_cache_report_mode to "full"
# (reused prefixes reported too: tests/data/import/vllm_events_full_example.jsonl). Opt-in: it
# needs build/engine-venv. CI reads the committed files.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=build/engine-venv
source tools/engine-check/vllm_venv.sh
out=${1:-tests/data/import/vllm_events_example.jsonl}
rm -f "$out"
"$venv/bin/python" -m kvtk._record --endpoint tcp://127.0.0.1:5557 \
  --replay-endpoint tcp://127.0.0.1:5558 --first-seq 0 --idle 10 --duration 600 -o "$out" &
recorder=$!
trap 'kill $recorder 2>/dev/null || true' EXIT  # a failed driver must not leave it waiting
sleep 1
"$venv/bin/python" tools/engine-check/record_vllm_events.py --endpoint 'tcp://*:5557' \
  --replay-endpoint 'tcp://127.0.0.1:5558' --num-gpu-blocks 64 --max-tokens 1 --report-mode "${REPORT_MODE:-incremental}" --no-lora --start-delay 2 --linger 12 --show 0
wait $recorder
trap - EXIT
tail -1 "$out"
