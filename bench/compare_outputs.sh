#!/usr/bin/env bash
# Before/after check for performance work: runs a fixed list of commands on the bundled traces
# with two kvtk binaries and compares their outputs, ignoring only what measures time (seconds,
# block_refs_per_second, the --timings object). Exit 0 when every output is identical.
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
EOF
)

strip='
import json, sys
timing = {"seconds", "block_refs_per_second", "timings", "wall_s", "simulated_requests_per_second"}
def clean(x):
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items() if k not in timing}
    if isinstance(x, list):
        return [clean(v) for v in x]
    return x
print(json.dumps(clean(json.load(open(sys.argv[1]))), indent=1, sort_keys=True))
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
    python3 -c "$strip" "$out" >"$out.clean"
  done
  if cmp -s "$work/$i.before.json.clean" "$work/$i.after.json.clean"; then
    echo "same      kvtk ${cmd//OUT/-}"
  else
    echo "DIFFERENT kvtk ${cmd//OUT/-}"
    diff "$work/$i.before.json.clean" "$work/$i.after.json.clean" | head -20
    fail=1
  fi
done <<<"$commands"
exit $fail
