#!/usr/bin/env bash
# Whole-command benchmark: what a user's clock sees (wall time, CPU time, peak RSS) for
# `kvtk replay` and `kvtk trace stats`, with kvtk's own phase breakdown (--timings: read,
# next_use, ideal, replay incl. the optimum, output), beside libCacheSim's cachesim on the same
# files in the same run.
#
# Usage: bench/end_to_end.sh [--sizes "1e5 1e6 1e7"] [--out DIR] [--runs N] [--no-peer-trace]
#   --sizes    block references of the generated traces (kvtk trace gen, mixed profile, 64-token
#              blocks; each size written as mooncake JSONL, kvtb and flat oracle-general). 1e8
#              needs about 4 GB of disk and a few minutes.
#   --out      where traces and results go (default build/e2e; reused between runs)
#   --runs     repetitions of every command; the table reports the fastest (default 3)
#   --no-peer-trace  skip the 11.54 M-reference oracleGeneral file (conversation trace x40)
# Environment: KVTK (default build/release/sim/kvtk); CACHESIM = path to libCacheSim's cachesim
# binary (built outside this tree, bench/RESULTS.md says how); the comparison is skipped when it
# is unset.
# Output: a markdown table on stdout and every measurement as TSV in OUT/results.tsv.
set -euo pipefail
cd "$(dirname "$0")/.."

sizes="1e5 1e6 1e7"
out=build/e2e
runs=3
peer_trace=1
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) sizes="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --no-peer-trace) peer_trace=0; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "end_to_end.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
kvtk=${KVTK:-build/release/sim/kvtk}
[ -x "$kvtk" ] || { echo "end_to_end.sh: $kvtk is not built (cmake --build --preset release)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "end_to_end.sh: needs GNU time (apt-get install time)" >&2; exit 2; }
mkdir -p "$out"
tsv="$out/results.tsv"
printf 'label\tcommand\twall_s\tcpu_s\tpeak_rss_mib\ttimings\n' >"$tsv"

# measure LABEL CMD...: runs CMD $runs times; keeps the fastest run's wall/CPU/RSS and the
# --timings line it printed on stderr (if any).
measure() {
  local label="$1"; shift
  local best="" line timing
  for _ in $(seq "$runs"); do
    /usr/bin/time -f 'E2E %e %U %S %M' -o "$out/time.txt" "$@" >/dev/null 2>"$out/stderr.txt" ||
      { echo "end_to_end.sh: failed: $*" >&2; cat "$out/stderr.txt" >&2; exit 1; }
    line=$(grep '^E2E' "$out/time.txt")
    timing=$(grep '^timings:' "$out/stderr.txt" | sed 's/^timings: //' || true)
    read -r _ wall user sys rss <<<"$line"
    local cpu
    cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN{printf "%.2f", u+s}')
    if [ -z "$best" ] || awk -v a="$wall" -v b="${best%% *}" 'BEGIN{exit !(a<b)}'; then
      best="$wall $cpu $(awk -v k="$rss" 'BEGIN{printf "%.0f", k/1024}')|$timing"
    fi
  done
  local nums="${best%%|*}" t="${best#*|}"
  read -r wall cpu rss <<<"$nums"
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$*" "$wall" "$cpu" "$rss" "$t" >>"$tsv"
  printf '| %s | %s | %s | %s | %s |\n' "$label" "$wall" "$cpu" "$rss" "${t:-}"
}

echo "| run | wall s | cpu s | peak RSS MiB | kvtk phases (--timings) |"
echo "|---|---|---|---|---|"

# Generated traces at each size, in every input format.
for n in $sizes; do
  refs=$(awk -v x="$n" 'BEGIN{printf "%d", x}')
  requests=$((refs / 60 + 1))  # the mixed profile averages about 60 blocks a request
  base="$out/gen_$n"
  if [ ! -f "$base.ids" ]; then
    "$kvtk" trace gen --requests "$requests" --to mooncake -o "$base.jsonl" --force >/dev/null 2>&1
    "$kvtk" trace convert "$base.jsonl" --block-tokens 64 -o "$base.kvtb" --force >/dev/null 2>&1
    "$kvtk" trace convert "$base.jsonl" --block-tokens 64 --to oracle-general \
      -o "$base.oracleGeneral" --force >/dev/null 2>&1
    "$kvtk" trace convert "$base.jsonl" --block-tokens 64 --to ids -o "$base.ids" --force \
      >/dev/null 2>&1
  fi
  for f in jsonl kvtb; do
    measure "gen $n $f radix lru 10k --no-opt" "$kvtk" replay --trace "$base.$f" --block-tokens 64 \
      --index radix --policy lru --capacity 10000 --no-opt --timings
  done
  measure "gen $n jsonl radix lru 10k, 2 threads" "$kvtk" replay --trace "$base.jsonl" \
    --block-tokens 64 --index radix --policy lru --capacity 10000 --no-opt --timings --threads 2
  measure "gen $n kvtb radix lru 10k +opt" "$kvtk" replay --trace "$base.kvtb" --index radix \
    --policy lru --capacity 10000 --timings
  measure "gen $n oracleGeneral flat lru 10k --no-opt" "$kvtk" replay \
    --trace "$base.oracleGeneral" --format oracle-general --index flat --policy lru \
    --capacity 10000 --no-opt --timings
  measure "gen $n ids flat lru 10k --no-opt" "$kvtk" replay --trace "$base.ids" --format ids \
    --index flat --policy lru --capacity 10000 --no-opt --timings
  measure "gen $n kvtb trace stats" "$kvtk" trace stats "$base.kvtb" --timings
  if [ -n "${CACHESIM:-}" ]; then
    (cd "$out" && measure "gen $n oracleGeneral cachesim lru 10k" "$CACHESIM" \
      "gen_$n.oracleGeneral" oracleGeneral lru 10000 --ignore-obj-size 1 --num-thread 1)
  fi
done

# The peer comparison file: the conversation trace flattened (every hash id one single-block
# request) and repeated 40 times with disjoint ids (id | copy << 40): 11.54 M references.
if [ "$peer_trace" = 1 ]; then
  x40="$out/conversation_x40.oracleGeneral"
  if [ ! -f "$x40" ]; then
    "$kvtk" trace convert traces/mooncake_fast25_conversation_trace.jsonl --to oracle-general \
      -o "$out/conversation.oracleGeneral" --force >/dev/null
    python3 - "$out/conversation.oracleGeneral" "$x40.tmp" <<'EOF'
import sys
base = bytearray(open(sys.argv[1], 'rb').read())
assert len(base) % 24 == 0
# Ids must be below 2^40 for the copies to be disjoint: bytes 5..7 of every id are zero.
assert all(b == 0 for k in (9, 10, 11) for b in base[k::24])
with open(sys.argv[2], 'wb') as f:
    for copy in range(40):
        base[9::24] = bytes([copy]) * (len(base) // 24)  # id bits 40..47: the copy number
        f.write(base)
EOF
    "$kvtk" trace convert "$x40.tmp" --format oracle-general -o "$out/conversation_x40.kvtb" \
      --force >/dev/null 2>&1
    mv "$x40.tmp" "$x40"  # last: a file under the final name is a complete one
  fi
  for p in lru arc s3fifo; do
    if [ -n "${CACHESIM:-}" ]; then
      (cd "$out" && measure "x40 cachesim $p 10k" "$CACHESIM" conversation_x40.oracleGeneral \
        oracleGeneral "$p" 10000 --ignore-obj-size 1 --num-thread 1)
    fi
    measure "x40 oracleGeneral kvtk $p 10k --no-opt" "$kvtk" replay --trace "$x40" \
      --format oracle-general --index flat --policy "$p" --capacity 10000 --no-opt --timings
    measure "x40 oracleGeneral kvtk $p 10k --no-opt --no-ideal" "$kvtk" replay --trace "$x40" \
      --format oracle-general --index flat --policy "$p" --capacity 10000 --no-opt --no-ideal \
      --timings
    measure "x40 oracleGeneral kvtk $p 10k --no-opt --threads 2" "$kvtk" replay --trace "$x40" \
      --format oracle-general --index flat --policy "$p" --capacity 10000 --no-opt --threads 2 \
      --timings
  done
  measure "x40 oracleGeneral kvtk lru 10k +opt" "$kvtk" replay --trace "$x40" \
    --format oracle-general --index flat --policy lru --capacity 10000 --timings
  measure "x40 kvtb kvtk lru 10k --no-opt" "$kvtk" replay --trace "$out/conversation_x40.kvtb" \
    --index flat --policy lru --capacity 10000 --no-opt --timings
  measure "x40 kvtb kvtk lru 10k +opt" "$kvtk" replay --trace "$out/conversation_x40.kvtb" \
    --index flat --policy lru --capacity 10000 --timings
  measure "x40 kvtb cat (read once from the page cache)" cat "$out/conversation_x40.kvtb"
  measure "x40 oracleGeneral kvtk trace stats" "$kvtk" trace stats "$x40" \
    --format oracle-general --timings
fi
