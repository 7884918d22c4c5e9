#!/usr/bin/env bash
# bench/optimum_cost.sh — what the optimum and the bound (include/kvtk/prefix/optimum.hpp) cost
# against the optimum kvtk computed before them (one replay of leaf-only Belady admitting every
# block, or flat Belady on traces of one block per request), on the same traces and capacities.
#
#   bench/optimum_cost.sh [--kvtk build/release/sim/kvtk] [--runs 3]
#
# "before" is that replay run as a policy (kvtk replay --policy belady --no-opt: the same index
# and slices the old optimum used); "now" is the optimum_in_replay phase of kvtk replay --timings
# (two radix replays and the bound's pass; on one-block traces the bound's pass alone). Each figure
# is the fastest of --runs. Traces are generated into a temporary folder, removed afterwards.
set -euo pipefail
kvtk=build/release/sim/kvtk
runs=3
while [ $# -gt 0 ]; do
  case "$1" in
    --kvtk) kvtk=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    *) echo "optimum_cost.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -x "$kvtk" ] || { echo "optimum_cost.sh: $kvtk is not an executable" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvtk-optimum-cost.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
here=$(cd "$(dirname "$0")/.." && pwd)
"$kvtk" trace gen --profile agent --requests 20000 --seed 91 -o "$tmp/agent.kvtb" >/dev/null
"$kvtk" trace gen --profile mixed --requests 20000 --seed 91 -o "$tmp/mixed.kvtb" >/dev/null
conv=$here/traces/mooncake_fast25_conversation_trace.jsonl
# The conversation trace flattened: every block reference its own one-block request (ids format).
python3 - "$conv" "$tmp/flat.ids" <<'PY'
import json, sys
with open(sys.argv[1]) as f, open(sys.argv[2], "w") as out:
    for _ in range(8):
        f.seek(0)
        for line in f:
            for h in json.loads(line)["hash_ids"]:
                out.write(f"{h}\n")
PY
fastest() {  # fastest of $runs values printed by "$@"
  local best=
  for _ in $(seq "$runs"); do
    v=$("$@")
    best=$(python3 -c "import sys; a=sys.argv[1]; b=float(sys.argv[2]); print(b if a=='' or b<float(a) else a)" "$best" "$v")
  done
  echo "$best"
}
before() {  # trace format index capacity
  "$kvtk" replay --trace "$1" --format "$2" --index "$3" --policy belady --capacity "$4" \
    --partial-block cache --no-opt --no-ideal --json - | python3 -c "import json,sys; print(json.load(sys.stdin)['results'][0]['seconds'])"
}
now() {  # trace format index capacity
  "$kvtk" replay --trace "$1" --format "$2" --index "$3" --policy lru --capacity "$4" \
    --partial-block cache --no-ideal --timings --json - 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['timings']['optimum_in_replay_s'])"
}
printf '| trace | capacity (blocks) | before s | now s | now / before |\n|---|---:|---:|---:|---:|\n'
for row in "agent.kvtb kvtb radix 250" "agent.kvtb kvtb radix 1000" "agent.kvtb kvtb radix 16000" \
           "mixed.kvtb kvtb radix 1000" "mixed.kvtb kvtb radix 16000" \
           "CONV auto radix 1000" "CONV auto radix 10000" \
           "flat.ids ids flat 1000" "flat.ids ids flat 10000"; do
  set -- $row
  f=$tmp/$1; [ "$1" = CONV ] && f=$conv
  b=$(fastest before "$f" "$2" "$3" "$4")
  n=$(fastest now "$f" "$2" "$3" "$4")
  printf '| %s | %s | %.3f | %.3f | %.2f |\n' "$1" "$4" "$b" "$n" "$(python3 -c "print($n/$b)")"
done
