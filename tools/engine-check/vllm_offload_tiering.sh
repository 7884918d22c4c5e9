#!/usr/bin/env bash
# The vLLM check of `kvtk replay --engine vllm --offload cpu:...,secondary=fs` (docs/tiers.md
# "Engine offload tiers"): vLLM 0.33.0's real Scheduler with the OffloadingConnector and
# TieringOffloadingSpec (a CPU primary tier and a filesystem secondary tier) on CPU against
# kvtk's totals (tools/engine-check/vllm_offload_tiering.py).
#   1. the cached venv build/engine-venv with vLLM 0.33.0 (as vllm_offload.sh makes it; this
#      check loads no kvtk policy, so it needs no kvtk wheel);
#   2. the conversation trace (512-token GPU blocks, its first 600 requests) and a generated
#      chat trace with 16-token GPU blocks (offloaded chunks of 1 and 4 GPU blocks).
# Only lru: kvtk refuses arc and kvtk policies with secondary=fs.
# Writes build/engine-check/vllm_offload_tiering_{conversation,gen16}.json; exit 1 on any
# difference. Opt-in (KVTK_ENGINE_TESTS=1 in scripts/test): it needs the 9 GB venv.
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=build/engine-venv
if [ ! -x "$venv/bin/python" ]; then
  source tools/engine-check/vllm_venv.sh
fi
[ -x build/release/sim/kvtk ] || { cmake --preset release && cmake --build --preset release --target kvtk; }
kvtk="$PWD/build/release/sim/kvtk"
mkdir -p build/engine-check
gen16=build/engine-check/gen16_chat_600.jsonl
"$kvtk" trace gen --profile chat --requests 600 --block-tokens 16 --to mooncake -o "$gen16" --force 2>/dev/null
cd build/engine-check
py="../../$venv/bin/python ../../tools/engine-check/vllm_offload_tiering.py"
status=0
$py "$kvtk" ../../traces/mooncake_fast25_conversation_trace.jsonl --requests 600 \
  --configs "300:400:1:lru;300:2000:1:lru;300:400:2:lru;1000:3000:1:lru" \
  --json vllm_offload_tiering_conversation.json || status=1
$py "$kvtk" "../../$gen16" --block-tokens 16 \
  --configs "2000:800:4:lru;2000:3000:1:lru" \
  --json vllm_offload_tiering_gen16.json || status=1
exit $status
