#!/usr/bin/env bash
# Reference hit counts from the real prefix caches of vLLM 0.33.0 and SGLang 0.5.23 for kvtk's
# engine accounting modes (engine_accounting.py says how each engine is driven):
#   1. the cached venv build/engine-venv with vLLM 0.33.0 (as tools/engine-check/vllm_offload.sh
#      makes it; 3 minutes and ~9.4 GB the first time);
#   2. SGLang 0.5.23 added to it WITHOUT its dependencies (its pins would replace vLLM's torch,
#      transformers, xgrammar), plus only the pure-Python packages that importing
#      sglang.srt.mem_cache / sglang.srt.managers.schedule_batch needs: IPython (sglang/utils.py
#      imports IPython.display at package import) with its own dependencies, and gguf
#      (sglang/srt/layers/quantization/gguf.py, reached through server_args). Pinned, --no-deps.
#   3. engine_accounting.py over the three bundled traces x capacities 1000,10000,30000,100000.
# Writes build/engine-check/accounting/{summary.json,<trace>.<engine>.<capacity>.txt}.
# Extra arguments go to engine_accounting.py (e.g. --engines sglang --capacities 1000).
# About 5 minutes on 2 cores for everything; CPU only, no model weights, no network at run time.
set -euo pipefail
cd "$(dirname "$0")/../.."

vllm_version=0.33.0
sglang_version=0.5.23
venv=build/engine-venv
pip=("$venv/bin/pip" install --quiet --disable-pip-version-check)

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import vllm, sys; sys.exit(vllm.__version__ != '$vllm_version')" 2>/dev/null; then
  echo "installing vLLM $vllm_version into $venv (large: torch and its CUDA libraries)"
  python3 -m venv "$venv"
  "${pip[@]}" "vllm==$vllm_version"
fi

if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('sglang') != '$sglang_version')" 2>/dev/null; then
  echo "installing SGLang $sglang_version into $venv (no dependencies)"
  "${pip[@]}" --no-deps "sglang==$sglang_version"
fi
# Import-time needs of sglang.srt.mem_cache / managers.schedule_batch, all pure Python.
"${pip[@]}" --no-deps \
  ipython==9.18.1 ipython_pygments_lexers==1.1.1 decorator jedi==0.20.1 parso==0.8.7 \
  matplotlib-inline==0.2.2 pexpect==4.9.0 ptyprocess==0.7.0 prompt_toolkit==3.0.53 \
  wcwidth==0.9.4 stack_data==0.6.3 asttokens==3.0.2 executing==2.3.0 pure_eval==0.2.4 \
  traitlets==5.16.1 pygments gguf==0.19.0

mkdir -p build/engine-check/accounting
HF_HUB_OFFLINE=1 "$venv/bin/python" tools/engine-check/engine_accounting.py \
  --out build/engine-check/accounting "$@"

# kvtk's own modes against these counts, when kvtk is built (scripts/test builds it).
if [ -x build/release/sim/kvtk ]; then
  python3 tools/engine-check/compare_accounting.py build/release/sim/kvtk \
    build/engine-check/accounting/summary.json
fi
