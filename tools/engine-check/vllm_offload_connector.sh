#!/usr/bin/env bash
# The vLLM offloading check of `kvtk replay --engine vllm --offload` (docs/tiers.md "Engine
# offload tiers"): vLLM 0.33.0's real Scheduler with the OffloadingConnector on CPU against kvtk's
# totals (tools/engine-check/vllm_offload_connector.py).
#   1. the cached venv build/engine-venv with vLLM 0.33.0 (as vllm_offload.sh makes it);
#   2. the kvtk wheel installed into it (kvtk policies load into vLLM through
#      kvtk.integrations.vllm, as a deployment loads them);
#   3. the conversation trace (512-token GPU blocks, its first 2,000 requests) and a generated
#      chat trace with 16-token GPU blocks (offloaded blocks of 1, 4 and 16 GPU blocks).
# Writes build/engine-check/vllm_offload_connector_{conversation,gen16}.json; exit 1 on any
# difference. Opt-in (KVTK_ENGINE_TESTS=1 in scripts/test): it needs the 9 GB venv.
set -euo pipefail
cd "$(dirname "$0")/../.."

source tools/engine-check/vllm_venv.sh
[ -x build/release/sim/kvtk ] || { cmake --preset release && cmake --build --preset release --target kvtk; }
kvtk="$PWD/build/release/sim/kvtk"
mkdir -p build/engine-check
gen16=build/engine-check/gen16_chat_1500.jsonl
"$kvtk" trace gen --profile chat --requests 1500 --block-tokens 16 --to mooncake -o "$gen16" --force 2>/dev/null
cd build/engine-check  # outside the source tree: `import kvtk` is the installed wheel
py="../../$venv/bin/python ../../tools/engine-check/vllm_offload_connector.py"
$py "$kvtk" ../../traces/mooncake_fast25_conversation_trace.jsonl --requests 2000 \
  --configs "300:400:1:lru;300:2000:1:lru;300:400:2:lru;1000:3000:1:lru;300:1000:1:lru:2;300:400:1:arc;300:2000:1:arc;300:400:2:arc;1000:3000:1:arc;300:1000:1:arc:2;300:2000:1:kvtk-s3fifo;300:2000:2:kvtk-lru;1000:3000:1:kvtk-arc;300:2000:1:kvtk-sieve:2" \
  --json vllm_offload_connector_conversation.json
$py "$kvtk" "../../$gen16" --block-tokens 16 \
  --configs "2000:3000:1:lru;2000:800:4:lru;2000:200:16:lru;1000:600:4:lru:2;2000:800:4:arc;2000:200:16:arc;2000:800:4:kvtk-s3fifo;2000:200:16:kvtk-clock;2000:800:4:kvtk-2q" \
  --json vllm_offload_connector_gen16.json
