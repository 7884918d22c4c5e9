#!/usr/bin/env bash
# The Dynamo check of `kvtk replay --engine vllm --offload kvbm:...` (docs/tiers.md "Dynamo
# KVBM"): Dynamo 1.6.1's offline trace replay (AISimulate, CPU only) against kvtk on the rows where
# its rules and KVBM's agree, and beside it on the rows where they do not
# (tools/engine-check/dynamo_replay_compare.py says which).
#   1. the venv build/engine-check/dynamo-venv: ai-dynamo-runtime==1.6.1, then ai-dynamo==1.6.1
#      with --no-deps (its plain install fails on a placeholder dependency);
#   2. kvtk built first, so that the check never runs an old binary;
#   3. the first 1,500 requests of the two Mooncake traces and of the generated mixed trace.
# Exit 1 when a row that must be equal is not. Opt-in (KVTK_ENGINE_TESTS=1 in scripts/test).
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=${DYNAMO_VENV:-build/engine-check/dynamo-venv}
if ! "$venv/bin/python" -c "import dynamo.replay" 2>/dev/null; then
  echo "installing Dynamo 1.6.1 into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "ai-dynamo-runtime==1.6.1"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps "ai-dynamo==1.6.1"
fi
[ -d build/release ] || cmake --preset release
cmake --build --preset release --target kvtk  # never an old binary
out=build/engine-check/dynamo
mkdir -p "$out"
"$venv/bin/python" tools/engine-check/dynamo_replay_compare.py "$PWD/build/release/sim/kvtk" "$out" \
  traces/mooncake_fast25_conversation_trace.jsonl traces/mooncake_fast25_synthetic_trace.jsonl \
  traces/kvtk_gen_mixed_1k.jsonl 2> "$out/replay.log" | tee "$out/result.txt"
