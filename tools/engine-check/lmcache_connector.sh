#!/usr/bin/env bash
# The LMCache check of `kvtk replay --engine vllm --offload lmcache-cpu:...` (docs/tiers.md
# "Engine offload tiers"): vLLM 0.33.0's real Scheduler with LMCache 0.5.6's own connector, lookup,
# storage manager and cache policies on CPU against kvtk's totals
# (tools/engine-check/lmcache_connector.py says what is and is not LMCache's code).
#   1. the cached venv build/engine-venv with vLLM 0.33.0 (as vllm_offload.sh makes it);
#   2. LMCache 0.5.6 unpacked beside it, not installed (its wheel's pins would replace vLLM's
#      torch; its CUDA extension is not needed on CPU), with its four small pure-Python
#      dependencies that vLLM lacks, pinned, in build/engine-check/lmcache/deps;
#   3. (kvtk built first, so that the check never runs an old binary) the conversation trace (512-token GPU blocks, chunk_size 512 and 1024, its first 2,000
#      requests) and a generated chat trace with 16-token GPU blocks (chunks of 1, 4 and 16
#      blocks: LMCache's default 256 tokens is 16 of them), each also with LMCache's local disk
#      backend under the CPU (the last field of a configuration: disk chunks), and one disk
#      configuration whose CPU is too small to stage its disk reads, where LMCache's retrieve
#      busy-loops forever and kvtk must predict stalled retrievals (and one LFU configuration
#      whose disk LFU raises KeyError in LMCache, which kvtk must predict too).
# Writes build/engine-check/lmcache_connector_{conversation,gen16}.json; exit 1 on any difference. Opt-in
# (KVTK_ENGINE_TESTS=1 in scripts/test).
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=build/engine-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import vllm, sys; sys.exit(vllm.__version__ != '0.33.0')" 2>/dev/null; then
  echo "installing vLLM 0.33.0 into $venv (large: torch and its CUDA libraries)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "vllm==0.33.0"
fi
lm=build/engine-check/lmcache
mkdir -p "$lm"
if [ ! -d "$lm/w056/lmcache" ]; then
  ls "$lm"/lmcache-0.5.6-*.whl >/dev/null 2>&1 ||
    "$venv/bin/pip" download --quiet --disable-pip-version-check --no-deps "lmcache==0.5.6" -d "$lm"
  "$venv/bin/python" -m zipfile -e "$lm"/lmcache-0.5.6-*.whl "$lm/w056"
fi
[ -d "$lm/deps/sortedcontainers" ] ||
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --target "$lm/deps" \
    sortedcontainers==2.4.0 aiofile==3.12.3 caio==0.12.10 aiofiles==25.1.0
[ -d build/release ] || cmake --preset release
cmake --build --preset release --target kvtk  # never an old binary
kvtk="$PWD/build/release/sim/kvtk"
gen16=build/engine-check/gen16_chat_1500.jsonl
[ -f "$gen16" ] || "$kvtk" trace gen --profile chat --requests 1500 --block-tokens 16 --to mooncake -o "$gen16" --force 2>/dev/null
py=(env PYTHONPATH="$PWD/$lm/w056:$PWD/$lm/deps" "$venv/bin/python" tools/engine-check/lmcache_connector.py "$kvtk")
"${py[@]}" traces/mooncake_fast25_conversation_trace.jsonl --block-tokens 512 --requests 2000 \
  --configs "300:2000:512:lru;300:1000:1024:lru;1000:3000:512:lfu;300:400:512:lru:2000;300:200:1024:lfu:600;300:200:512:mru:1500" \
  --json build/engine-check/lmcache_connector_conversation.json
"${py[@]}" "$gen16" --block-tokens 16 \
  --configs "${KVTK_LMCACHE_CONFIGS:-2000:200:256:lru;2000:800:64:lru;2000:3000:16:lru;1000:200:256:lfu;2000:200:256:fifo;2000:200:256:mru;2000:800:64:lfu;2000:8:256:lru;2000:20:64:mru;2000:6:256:lfu;300:100:64:lru:400;300:40:256:lfu:1200;300:40:256:lfu:120;200:30:256:fifo:100;300:100:64:mru:300}" \
  --json build/engine-check/lmcache_connector_gen16.json
"${py[@]}" "$gen16" --block-tokens 16 --requests 300 --timeout 150 --configs "300:20:64:lru:200" \
  --json build/engine-check/lmcache_connector_stall.json
