#!/usr/bin/env bash
# Before/after check: runs a fixed list of commands on the bundled traces with two kvtk binaries
# and compares their JSON, ignoring only what measures time (seconds, block_refs_per_second, the
# --timings object). Fields only the newer binary writes are listed as "added"; any changed or
# removed value makes the command DIFFERENT. Exit 0 when no value changed.
#
# Usage: bench/compare_outputs.sh BEFORE_KVTK AFTER_KVTK [WORK_DIR]
#   e.g. git stash; cmake --build --preset release; cp build/release/sim/kvtk /tmp/kvtk-before;
#        git stash pop; cmake --build --preset release;
#        bench/compare_outputs.sh /tmp/kvtk-before build/release/sim/kvtk
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,9p' "$0" >&2; exit 2; }
before="$1"; after="$2"; work="${3:-build/compare_outputs}"
mkdir -p "$work"
conv=traces/mooncake_fast25_conversation_trace.jsonl
syn=traces/mooncake_fast25_synthetic_trace.jsonl
gen=traces/kvtk_gen_mixed_1k.jsonl
data=tests/data/formats

# One command per line; OUT is replaced by the output file of each binary.
commands=$(cat <<EOF
replay --trace $conv --index radix,hashchain --policy lru,fifo,lfu,slru,s3fifo --capacity 1000,10000,100000 --json OUT
replay --trace $conv --partial-block cache --index flat --policy lru,arc,s3fifo,wtinylfu,belady,clock,sieve,2q --capacity 1000,5859,30000 --json OUT
replay --trace $syn --partial-block cache --index radix --policy lru,belady --capacity 1000,10000 --json OUT
replay --trace $gen --index radix,hashchain --policy lru --capacity 500,5000 --json OUT
replay --trace $data/small.ids --index flat,radix --policy lru --capacity 10,100 --json OUT
replay --trace $data/small.oracleGeneral.bin --index flat --policy lru,arc,belady --capacity 10,100 --json OUT
replay --trace $data/small.kvtb --index radix --policy lru --capacity 10,100 --json OUT
replay --trace $conv --tiers hbm:2000:lru,dram:8000:arc --json OUT
mrc --trace $conv --opt --points 12 --json OUT
mrc --trace $syn --partial-block cache --capacity 1000,10000 --opt --json OUT
mrc --trace $data/small.oracleGeneral.bin --opt --points 6 --json OUT
trace stats $conv --json OUT
trace stats $syn --partial-block cache --json OUT
trace stats $gen --json OUT
trace stats $data/small.ids --json OUT
trace stats $data/small.oracleGeneral.bin --json OUT
simulate --trace $conv --config sim/configs/fig10_global.json --json OUT
simulate --trace $conv --set local_cache=20000 --json OUT
mrc --trace $conv --sample 0.5 --capacity 1000,10000,100000 --json OUT
replay --trace $conv --capacity 64GiB,3Mtok --model deepseek-v3 --json OUT
replay --trace $conv --tiers hbm:1000:lru,dram:3000:arc,ssd:20000:lru:0.1 --model qwen2.5-7b --json OUT
simulate --trace $conv --config sim/configs/sparse_dsa.json --json OUT
simulate --trace $conv --config sim/configs/sparse_dsa.json --set sparse.prefetch=next-step --json OUT
simulate --trace $conv --config sim/configs/sparse_dsa.json --set sparse.prefetch=layer-ahead --json OUT
simulate --trace $conv --config sim/configs/disaggregated.json --set router=conductor --json OUT
simulate --trace $conv --engine vllm --set model=qwen2.5-7b --set gpu=h100 --set prefill_instances=2 --json OUT
simulate --trace $conv --engine sglang --set model=qwen2.5-7b --set gpu=h100 --set prefill_instances=2 --json OUT
simulate --trace $conv --set scheduler=vllm-v0 --set model=qwen2.5-7b --set gpu=h100 --set router=least-loaded --set prefill_instances=2 --json OUT
compare --trace $conv --policy all --capacity 1000,10000 --json OUT
cost --hit-ratio 0.563 --input-tokens 608e9 --output-tokens 168e9 --pricing deepseek-r1 --json OUT
cost --hit-tokens 342e9 --miss-tokens 266e9 --model deepseek-v3 --gpu h800 --json OUT
sparse --steps 500 --scorer selection-lru,h2o --manager offload,lossy --prefetch none,next-step:0.8,layer-ahead --json OUT
sparse --trace tests/data/sparse/decode.jsonl --manager offload,lossy --json OUT
move replay --trace $conv --tiers hbm:2500:lru,dram:7500:lru --block-bytes 1KiB --json OUT
EOF
)

# Compares two JSON outputs ignoring timing fields. Fields only the AFTER side has are listed as
# "added" (new output, not a changed number); any other difference fails.
compare='
import json, sys
timing = {"seconds", "block_refs_per_second", "timings", "wall_s", "simulated_requests_per_second",
          "wall_seconds"}
def is_timing(k):  # measured copy times and what is derived from them vary run to run
    return k in timing or k.startswith("measured_") or k.startswith("predicted_over_measured")
added, changed = [], []
def walk(a, b, path):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in b:
            if is_timing(k): continue
            if k not in a: added.append(path + "." + k)
            else: walk(a[k], b[k], path + "." + k)
        for k in a:
            if not is_timing(k) and k not in b: changed.append(path + "." + k + ": removed")
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b): changed.append(path + ": %d -> %d items" % (len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b)): walk(x, y, path + "[%d]" % i)
    elif a != b:
        changed.append("%s: %r -> %r" % (path, a, b))
walk(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), "")
generic = sorted({__import__("re").sub(r"\[\d+\]", "[]", p) for p in added})
if generic: print("  added: " + ", ".join(generic))
for c in changed[:12]: print("  changed " + c)
if len(changed) > 12: print("  ... %d changes in all" % len(changed))
sys.exit(1 if changed else 0)
'
fail=0
i=0
while IFS= read -r cmd; do
  i=$((i + 1))
  for side in before after; do
    bin=$before; [ "$side" = after ] && bin=$after
    out="$work/$i.$side.json"
    rm -f "$out"
    # shellcheck disable=SC2086  # the command line is split into words on purpose
    "$bin" ${cmd//OUT/$out} >/dev/null 2>"$work/$i.$side.err" ||
      { echo "FAILED ($side): kvtk $cmd"; cat "$work/$i.$side.err"; fail=1; continue 2; }
  done
  if report=$(python3 -c "$compare" "$work/$i.before.json" "$work/$i.after.json"); then
    echo "same      kvtk ${cmd//OUT/-}"
  else
    echo "DIFFERENT kvtk ${cmd//OUT/-}"
    fail=1
  fi
  [ -n "$report" ] && echo "$report"
done <<<"$commands"
exit $fail
