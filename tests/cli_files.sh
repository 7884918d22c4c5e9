#!/usr/bin/env bash
# Output safety (README "Output files"): no command writes over an input, replaces a device or a
# FIFO, overwrites a file without --force, follows a planted temporary name, leaves a partial
# file after an error or a signal, or exits 0 when a write fails.
# Usage: cli_files.sh KVTK TRACE WORK_DIR
set -u
kvtk=$1 trace=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail=0 total=0
# expect CODE PATTERN ARGS...: exit code and a stderr/stdout pattern.
expect() {
  local want=$1 pattern=$2
  shift 2
  total=$((total + 1))
  timeout 60 "$kvtk" "$@" >out.txt 2>err.txt </dev/null
  local code=$?
  if [ "$code" != "$want" ] || { [ -n "$pattern" ] && ! grep -Eq -- "$pattern" err.txt out.txt; }; then
    echo "FAIL kvtk $*: exit $code (want $want), pattern '$pattern'"; head -c 600 err.txt
    fail=$((fail + 1))
  else
    echo "  ok kvtk $*"
  fi
}
# check DESCRIPTION COMMAND...: a shell condition that must hold.
check() {
  local what=$1
  shift
  total=$((total + 1))
  if "$@"; then echo "  ok $what"; else echo "FAIL $what"; fail=$((fail + 1)); fi
}
no_temporaries() { ! ls -a | grep -Eq '^\..*\.kvtk-[0-9]+-[0-9a-f]{8}$'; }
has_temporary() { ! no_temporaries; }

cp "$trace" in.jsonl
sum=$(cksum <in.jsonl)
same_input() { [ "$(cksum <in.jsonl)" = "$sum" ]; }
ln -s in.jsonl link.jsonl
ln in.jsonl hard.jsonl

# --- an output naming an input: refused with or without --force, the input untouched ---
for out in in.jsonl link.jsonl hard.jsonl; do
  expect 2 "--json: cannot write .*input of this run" replay --trace in.jsonl --capacity 100 --json $out --force
  expect 2 "--csv: cannot write .*input of this run" replay --trace in.jsonl --capacity 100 --csv $out
done
expect 2 "input of this run" mrc --trace in.jsonl --capacity 100 --json hard.jsonl --force
expect 2 "input of this run" trace stats in.jsonl --json link.jsonl --force
expect 2 "input of this run" simulate --trace in.jsonl --csv in.jsonl --force
expect 2 "input of this run" trace convert in.jsonl -o hard.jsonl --to kvtk --force
expect 0 "" replay --trace in.jsonl --capacity 100 --json r.json
expect 2 "input of this run" cost --from r.json --pricing deepseek-v3 --json r.json --force
check "the input is unchanged" same_input

# --- existing files need --force; --force replaces them whole ---
echo keep >exists.json
expect 2 "--json: cannot write 'exists.json': it exists; pass --force" replay --trace in.jsonl --capacity 100 --json exists.json
check "an existing file is untouched without --force" grep -qx keep exists.json
expect 0 "" replay --trace in.jsonl --capacity 100 --json exists.json --force
check "--force replaced it with the result" grep -q '"results"' exists.json
expect 2 "-o: cannot write 'exists.json': it exists" trace gen --requests 10 -o exists.json
chmod 640 exists.json
expect 0 "" trace gen --requests 10 -o exists.json --force
check "a replaced file keeps its mode" [ "$(stat -c %a exists.json)" = 640 ]

# --- devices and FIFOs are written directly, never replaced ---
expect 0 "" replay --trace in.jsonl --capacity 100 --json /dev/null --force
expect 0 "" replay --trace in.jsonl --capacity 100 --json /dev/null
check "/dev/null is still a character device" [ -c /dev/null ]
mkfifo pipe
cat pipe >from_pipe.json &
reader=$!
expect 0 "" replay --trace in.jsonl --capacity 100 --json pipe --force
wait $reader
check "the FIFO is still a FIFO" [ -p pipe ]
check "the FIFO's reader got the JSON" grep -q '"results"' from_pipe.json

# --- write errors: the file and the reason, a non-zero exit ---
expect 1 "cannot write '/dev/full': No space left on device" replay --trace in.jsonl --capacity 100 --json /dev/full
expect 1 "cannot write '/dev/full': No space left on device" trace gen --requests 2000 -o /dev/full
expect 1 "cannot write '/dev/full': No space left on device" trace convert in.jsonl -o /dev/full --to kvtb
total=$((total + 1))
if "$kvtk" replay --trace in.jsonl --capacity 100 >/dev/full 2>err.txt; then
  echo "FAIL a table printed to a full stdout exits 0"; fail=$((fail + 1))
elif grep -q "cannot write standard output" err.txt; then echo "  ok table to a full stdout"
else echo "FAIL table to a full stdout: $(cat err.txt)"; fail=$((fail + 1)); fi
mkdir ro && chmod 555 ro
if [ "$(id -u)" != 0 ]; then
  expect 1 "cannot write 'ro/x.json': cannot create a file in 'ro'" replay --trace in.jsonl --capacity 100 --json ro/x.json
fi
mkdir adir
expect 2 "--json: cannot write 'adir': it is a directory" replay --trace in.jsonl --capacity 100 --json adir --force
ln -s nowhere/x dangling
expect 2 "a symbolic link to nothing" replay --trace in.jsonl --capacity 100 --json dangling --force
check "no temporaries are left after the errors" no_temporaries

# --- the old fixed temporary name is not followed ---
echo victim >victim.txt
ln -s victim.txt out.kvtb.kvtk-partial
expect 0 "" trace convert in.jsonl -o out.kvtb
check "a planted symlink's target is untouched" grep -qx victim victim.txt
check "the kvtb output is complete" "$kvtk" trace stats out.kvtb --json /dev/null

# --- '-' is stdout everywhere ---
expect 0 "" trace convert in.jsonl -o - --to kvtk
check "-o - wrote to stdout" grep -q '"kvtk_trace"' out.txt
check "-o - created no file named '-'" [ ! -e ./- ]
expect 0 "" trace gen --requests 5 -o - --to kvtb
check "kvtb to stdout starts with its magic" grep -q "KVTB" <(head -c 8 out.txt)
expect 0 '"results"' replay --trace in.jsonl --capacity 100 --json -

# --- an interrupted write leaves neither the output nor a temporary ---
# The signal is sent once the temporary exists (a fixed one-second sleep could land while the
# process was still starting, under the load of a parallel or sanitizer run): it always
# interrupts a write in progress, since 10^8 requests take minutes.
for sig in INT TERM; do
  "$kvtk" trace gen --requests 100000000 -o big_$sig.jsonl >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 3000); do no_temporaries || break; sleep 0.01; done
  check "SIG$sig: trace gen's temporary appeared" has_temporary
  kill -$sig $pid
  wait $pid
  code=$?
  total=$((total + 1))
  if [ "$code" -lt 128 ]; then echo "FAIL SIG$sig: trace gen exited $code (not killed by the signal)"; fail=$((fail + 1))
  else echo "  ok SIG$sig stops trace gen (exit $code)"; fi
  check "SIG$sig left no output" [ ! -e big_$sig.jsonl ]
  check "SIG$sig left no temporary" no_temporaries
done
# Interrupted as soon as its temporary appears (a fixed sleep raced a fast machine: the
# conversion of 200,000 requests can finish in under half a second).
"$kvtk" trace gen --requests 200000 -o conv_in.jsonl >/dev/null 2>&1
"$kvtk" trace convert conv_in.jsonl --block-tokens 64 -o conv.bin --to oracle-general >/dev/null 2>&1 &
pid=$!
for _ in $(seq 3000); do no_temporaries || break; sleep 0.01; done
check "trace convert's temporary appeared" has_temporary
kill -INT $pid
wait $pid
code=$?
check "SIGINT stops trace convert (exit $code)" [ "$code" -ge 128 ]
check "an interrupted conversion left no output" [ ! -e conv.bin ]
check "an interrupted conversion left no temporary" no_temporaries

echo "$((total - fail)) of $total file-safety checks passed"
[ "$fail" = 0 ]
