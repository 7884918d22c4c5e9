#!/usr/bin/env bash
# The SGLang HiCache check of `kvtk replay --engine sglang --offload host:...` (docs/tiers.md
# "Engine offload tiers"): SGLang 0.5.23's own UnifiedRadixCache with init_hicache (its
# HiCacheController and host pool) on CPU against kvtk's totals (tools/engine-check/sglang_hicache.py
# says what is and is not SGLang's code).
#   1. the cached venv build/engine-venv with vLLM 0.33.0 plus SGLang 0.5.23 without its
#      dependencies (tools/engine-check/sglang_venv.sh);
#   2. the conversation trace (512-token pages, its first 2,000 requests, Rust and Python tree
#      cores) and a generated chat trace with 16-token pages (nodes of many pages).
# Writes build/engine-check/sglang_hicache_{conversation,pycore,gen16}.json; exit 1 on any
# difference. Opt-in (KVTK_ENGINE_TESTS=1 in scripts/test): it needs the 9 GB venv. ~12 minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."

source tools/engine-check/sglang_venv.sh
[ -x build/release/sim/kvtk ] || { cmake --preset release && cmake --build --preset release --target kvtk; }
kvtk="$PWD/build/release/sim/kvtk"
gen16=build/engine-check/gen16_chat_1500.jsonl
"$kvtk" trace gen --profile chat --requests 1500 --block-tokens 16 --to mooncake -o "$gen16" --force 2>/dev/null
py=("$venv/bin/python" tools/engine-check/sglang_hicache.py "$kvtk")
"${py[@]}" traces/mooncake_fast25_conversation_trace.jsonl --requests 2000 \
  --configs "300:601:write_through;300:601:write_through_selective;300:601:write_back;1000:3001:write_through;300:2001:write_back;100:1001:write_through_selective;200:251:write_back" \
  --json build/engine-check/sglang_hicache_conversation.json
"${py[@]}" traces/mooncake_fast25_conversation_trace.jsonl --requests 1000 --tree-core python \
  --configs "300:601:write_through;300:601:write_back;300:1001:write_through_selective" \
  --json build/engine-check/sglang_hicache_pycore.json
"${py[@]}" "$gen16" --block-tokens 16 \
  --configs "2000:4001:write_through;2000:4001:write_through_selective;2000:4001:write_back;1000:1501:write_through;1000:1501:write_back;3000:12001:write_through_selective;500:801:write_back;1500:1601:write_back" \
  --json build/engine-check/sglang_hicache_gen16.json
