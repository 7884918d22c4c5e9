#!/usr/bin/env bash
# The vLLM engine check of kvtk.integrations.vllm (docs/python.md "The vLLM adapter"):
#   1. a cached venv build/engine-venv with vLLM 0.33.0 and its dependencies from PyPI (about
#      9.4 GB with torch and its CUDA libraries; 3 minutes the first time, nothing afterwards);
#   2. the kvtk wheel of scripts/python (built first when missing) installed into it;
#   3. vllm_offload.py: vLLM's own CPUOffloadingManager driven with kvtk policies loaded by name
#      and module path, on the conversation trace, checked equal to kvtk's native run.
# Writes build/engine-check/vllm_offload.json; exit 1 on any mismatch.
# scripts/test runs this only when KVTK_ENGINE_TESTS=1 (CI does not: it is large).
set -euo pipefail
cd "$(dirname "$0")/../.."

source tools/engine-check/vllm_venv.sh
# Outside the source tree, so `import kvtk` is the installed wheel.
cd build/engine-check
"../../$venv/bin/python" ../../tools/engine-check/vllm_offload.py \
  ../../traces/mooncake_fast25_conversation_trace.jsonl \
  --capacity "${KVTK_ENGINE_CAPACITIES:-1000,10000,30000}" \
  --policy "${KVTK_ENGINE_POLICIES:-lru,s3fifo,arc,sieve,wtinylfu}" \
  --json vllm_offload.json
