#!/usr/bin/env bash
# Makes tests/data/import/dynamo_events_example.jsonl: NVIDIA Dynamo 1.6.1's own KvEventPublisher
# (its vLLM relay: Dynamo's ZMQ listener converts vLLM's KV event batches into RouterEvents and
# publishes them on its event plane, ZMQ, file discovery: no NATS, no etcd) republishes the
# committed vLLM 0.33.0 recording, and `kvtk trace record --engine dynamo` records what Dynamo
# publishes (tools/engine-check/record_dynamo_relay.py). Opt-in: it needs the Dynamo venv of
# tools/engine-check/dynamo_replay.sh (plus pyzmq, msgpack) and the kvtk package
# (build/nbvenv, scripts/python). CI reads the committed file.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=${DYNAMO_VENV:-build/engine-check/dynamo-venv}
if ! "$venv/bin/python" -c "import dynamo.llm, zmq, msgpack" 2>/dev/null; then
  echo "installing Dynamo 1.6.1 (+ pyzmq 27.3.0, msgpack 1.2.4) into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "ai-dynamo-runtime==1.6.1" pyzmq==27.3.0 msgpack==1.2.4
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps "ai-dynamo==1.6.1"
fi
[ -x build/nbvenv/bin/python ] || scripts/python --install-only
"$venv/bin/python" tools/engine-check/record_dynamo_relay.py --recorder-python build/nbvenv/bin/python \
  --out "${1:-tests/data/import/dynamo_events_example.jsonl}"
