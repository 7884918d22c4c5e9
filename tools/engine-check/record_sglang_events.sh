#!/usr/bin/env bash
# Makes tests/data/import/sglang_events_example.jsonl: SGLang 0.5.23's own RadixCache on CPU
# (tools/engine-check/record_sglang_events.py) serves the committed token-id example log one
# request at a time, prompt only, over a pool of 64 pages of 16 tokens, with KV events on, made by
# SGLang's own KVCacheEventRecorder and published by its own ZmqEventPublisher over loopback;
# `kvtk trace record --engine sglang` (the kvtk package, pyzmq) subscribes and writes the
# recording, backfilling from SGLang's replay socket anything the subscription missed. LoRA is
# left out (SGLang namespaces adapter pages). Opt-in: it needs build/engine-venv with SGLang
# (tools/engine-check/sglang_venv.sh). CI reads the committed file.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/engine-check/sglang_venv.sh
source tools/engine-check/vllm_venv.sh  # the kvtk wheel (kvtk trace record)
out=${1:-tests/data/import/sglang_events_example.jsonl}
rm -f "$out"
"$venv/bin/python" -m kvtk._record --engine sglang --endpoint tcp://127.0.0.1:5557 \
  --replay-endpoint tcp://127.0.0.1:5558 --first-seq 0 --idle 10 --duration 600 -o "$out" &
recorder=$!
trap 'kill $recorder 2>/dev/null || true' EXIT  # a failed driver must not leave it waiting
sleep 1
"$venv/bin/python" tools/engine-check/record_sglang_events.py --endpoint 'tcp://*:5557' \
  --replay-endpoint 'tcp://127.0.0.1:5558' --pages 64 --page-size 16 --start-delay 2 --linger 12
wait $recorder
trap - EXIT
tail -1 "$out"
