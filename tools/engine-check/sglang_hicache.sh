#!/usr/bin/env bash
# The SGLang HiCache check of `kvtk replay --engine sglang --offload host:...` (docs/tiers.md
# "Engine offload tiers"): SGLang 0.5.23's own UnifiedRadixCache with init_hicache (its
# HiCacheController and host pool) on CPU against kvtk's totals (tools/engine-check/sglang_hicache.py
# says what is and is not SGLang's code).
#   1. the cached venv build/engine-venv with vLLM 0.33.0 plus SGLang 0.5.23 without its
#      dependencies (as engine_accounting.sh makes it);
#   2. the conversation trace (512-token pages, its first 2,000 requests, Rust and Python tree
#      cores) and a generated chat trace with 16-token pages (nodes of many pages).
# Writes build/engine-check/sglang_hicache_{conversation,pycore,gen16}.json; exit 1 on any
# difference. Opt-in (KVTK_ENGINE_TESTS=1 in scripts/test): it needs the 9 GB venv. ~12 minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=build/engine-venv
pip=("$venv/bin/pip" install --quiet --disable-pip-version-check)
if [ ! -x "$venv/bin/python" ]; then
  echo "installing vLLM 0.33.0 into $venv (large: torch and its CUDA libraries)"
  python3 -m venv "$venv"
  "${pip[@]}" "vllm==0.33.0"
fi
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('sglang') != '0.5.23')" 2>/dev/null; then
  "${pip[@]}" --no-deps "sglang==0.5.23"
fi
"${pip[@]}" --no-deps \
  ipython==9.18.1 ipython_pygments_lexers==1.1.1 decorator jedi==0.20.1 parso==0.8.7 \
  matplotlib-inline==0.2.2 pexpect==4.9.0 ptyprocess==0.7.0 prompt_toolkit==3.0.53 \
  wcwidth==0.9.4 stack_data==0.6.3 asttokens==3.0.2 executing==2.3.0 pure_eval==0.2.4 \
  traitlets==5.16.1 pygments gguf==0.19.0
[ -x build/release/sim/kvtk ] || { cmake --preset release && cmake --build --preset release --target kvtk; }
kvtk="$PWD/build/release/sim/kvtk"
mkdir -p build/engine-check
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
