#!/usr/bin/env bash
# Reference hit counts from the real prefix caches of vLLM 0.33.0 and SGLang 0.5.23 for kvtk's
# engine accounting modes (engine_accounting.py says how each engine is driven):
#   1.-2. the cached venv build/engine-venv with vLLM 0.33.0 and SGLang 0.5.23 without its
#      dependencies (tools/engine-check/sglang_venv.sh; 3 minutes and ~9.4 GB the first time);
#   3. engine_accounting.py over the three bundled traces x capacities 1000,10000,30000,100000.
# Writes build/engine-check/accounting/{summary.json,<trace>.<engine>.<capacity>.txt}.
# Extra arguments go to engine_accounting.py (e.g. --engines sglang --capacities 1000).
# About 5 minutes on 2 cores for everything; CPU only, no model weights, no network at run time.
set -euo pipefail
cd "$(dirname "$0")/../.."

source tools/engine-check/sglang_venv.sh

mkdir -p build/engine-check/accounting
HF_HUB_OFFLINE=1 "$venv/bin/python" tools/engine-check/engine_accounting.py \
  --out build/engine-check/accounting "$@"

# kvtk's own modes against these counts, when kvtk is built (scripts/test builds it).
if [ -x build/release/sim/kvtk ]; then
  python3 tools/engine-check/compare_accounting.py build/release/sim/kvtk \
    build/engine-check/accounting/summary.json
fi
