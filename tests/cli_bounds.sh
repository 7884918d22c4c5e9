#!/usr/bin/env bash
# Adversarial inputs, one class at a time (issue 17): every case must end within a time bound and
# (in the Release build) a 1 GiB address-space limit, with the expected exit code (1 bad data,
# 2 bad usage, 0 a documented sane result) and a message matching a pattern. Never a signal, an
# uncaught exception (exit 70) or std::bad_alloc.
# Usage: cli_bounds.sh KVTK TRACE WORK_DIR [sanitized]
set -u
kvtk=$1 trace=$2 work=$3 sanitized=${4:-0}
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
limit_s=10 mem_kib=1048576
[ "$sanitized" = 1 ] && limit_s=60  # ASan reserves terabytes of address space: no ulimit -v there

fail=0 total=0
declare -A per_class
# expect CLASS CODE PATTERN ARGS...
expect() {
  local class=$1 want=$2 pattern=$3
  shift 3
  total=$((total + 1))
  per_class[$class]=$((${per_class[$class]:-0} + 1))
  local start end code
  start=$(date +%s.%N)
  if [ "$sanitized" = 1 ]; then
    timeout "$limit_s" "$kvtk" "$@" >out.txt 2>err.txt </dev/null
  else
    (ulimit -v "$mem_kib"; exec timeout "$limit_s" "$kvtk" "$@") >out.txt 2>err.txt </dev/null
  fi
  code=$?
  end=$(date +%s.%N)
  local msg
  msg=$(head -c 2000 err.txt; head -c 600 out.txt)
  if [ "$code" != "$want" ]; then
    echo "FAIL [$class] kvtk $*: exit $code, want $want (124 = over ${limit_s}s)"; echo "$msg"
    fail=$((fail + 1)); return
  fi
  if [ -n "$pattern" ] && ! grep -Eq -- "$pattern" err.txt out.txt; then
    echo "FAIL [$class] kvtk $*: output does not match '$pattern'"; echo "$msg"
    fail=$((fail + 1)); return
  fi
  if [ "$(wc -c <err.txt)" -gt 4096 ]; then
    echo "FAIL [$class] kvtk $*: stderr is $(wc -c <err.txt) bytes (a message must stay short)"
    fail=$((fail + 1)); return
  fi
  printf '  ok [%s] %.2fs kvtk %s\n' "$class" "$(awk -v a="$start" -v b="$end" 'BEGIN{print b-a}')" "$*"
}

ok='{"timestamp": 0, "input_length": 600, "output_length": 10, "hash_ids": [1, 2]}'
two=two.jsonl; printf '%s\n%s\n' "$ok" '{"timestamp": 1, "input_length": 600, "output_length": 10, "hash_ids": [1, 3]}' >$two
line() { printf '%s\n%s\n' "$ok" "$1" >"$2"; }

# --- integer overflow in trace values and options ---
line '{"timestamp":1,"input_length":18446744073709551615,"hash_ids":[]}' big_input.jsonl
expect overflow 1 "big_input.jsonl:2: .*input_length" replay --trace big_input.jsonl --format mooncake --capacity 10
line '{"timestamp":1,"input_length":600,"output_length":18446744073709551615,"hash_ids":[1,2]}' big_output.jsonl
expect overflow 1 "big_output.jsonl:2: .*output_length" simulate --trace big_output.jsonl
line '{"timestamp":1,"input_length":600,"output_length":100000000,"hash_ids":[1,2]}' long_output.jsonl
expect overflow 1 "output" simulate --trace long_output.jsonl
line '{"timestamp":1,"input_length":4294967296,"hash_ids":[1]}' input_2_32.jsonl
expect overflow 1 "input_2_32.jsonl:2: .*not below 2\^32" replay --trace input_2_32.jsonl --format mooncake --capacity 10
expect overflow 2 "--block-tokens" replay --trace $two --block-tokens -1 --capacity 10
expect overflow 2 "--block-tokens" replay --trace $two --block-tokens 4294967296 --capacity 10
echo '{"layers": 4000000000, "kv_heads": 4000000000, "head_dim": 4000000000}' >huge_model.json
expect overflow 2 "huge_model.json" replay --trace $two --model huge_model.json --capacity 1GiB
echo '{"kv_bytes_per_token": 4294967296}' >big_bpt.json
expect overflow 2 "big_bpt.json.*2\^32" replay --trace $two --model big_bpt.json --capacity 1GiB
expect overflow 2 "--requests" trace gen -o gen.jsonl --requests -1
expect overflow 2 "--requests" trace gen -o gen.jsonl --requests 18446744073709551616
expect overflow 2 "--capacity" replay --trace $two --capacity 99999999999999999999999
expect overflow 2 "--threads" replay --trace $two --capacity 10 --threads 4294967297

# --- non-finite and out-of-range numbers ---
line '{"timestamp":1e400,"input_length":600,"hash_ids":[1,2]}' inf_time.jsonl
expect range 1 "inf_time.jsonl:2: " replay --trace inf_time.jsonl --format mooncake --capacity 10
line '{"timestamp":9223372036854775808,"input_length":600,"hash_ids":[1,2]}' big_time.jsonl
expect range 1 "big_time.jsonl:2: .*1e12" replay --trace big_time.jsonl --format mooncake --capacity 10
line '{"timestamp":-5,"input_length":600,"hash_ids":[1,2]}' neg_time.jsonl
expect range 1 "neg_time.jsonl:2: " replay --trace neg_time.jsonl --format mooncake --capacity 10
expect range 2 "time_scale" simulate --trace $two --set time_scale=1e308
expect range 2 "time_scale" simulate --trace $two --set time_scale=nan
expect range 1 "--sample 1e-300 kept 0 of 2 block references" mrc --trace $two --sample 1e-300
expect range 2 "--sample" mrc --trace $two --sample 2
expect range 2 "tokens" cost --input-tokens 1e308 --hit-tokens 1 --pricing deepseek-v3
expect range 2 "--max-gib" move bench --max-gib -1
expect range 2 "--max-gib" move bench --max-gib inf

# --- encoding ---
printf '%s\n{"input_length": 64, "hash_ids": [1], "tenant": "\xff\xfe"}\n' '{"input_length": 64, "hash_ids": [1]}' >bad_utf8.jsonl
expect encoding 1 "bad_utf8.jsonl:2: .*UTF-8" replay --trace bad_utf8.jsonl --format kvtk --capacity 10
printf '%s\n{"input_length": 64, "hash_ids": [1], "tenant": "a\\ud800"}\n' '{"input_length": 64, "hash_ids": [1]}' >lone_surrogate.jsonl
expect encoding 1 "lone_surrogate.jsonl:2: " replay --trace lone_surrogate.jsonl --format kvtk --capacity 10
printf '\xef\xbb\xbf%s\n' "$ok" >bom.jsonl
expect encoding 1 "bom.jsonl:1: " replay --trace bom.jsonl --format mooncake --capacity 10

# --- memory sized by options rather than by the data ---
expect memory 0 "capacity" replay --trace $two --capacity 100000000
expect memory 0 "capacity" replay --trace $two --capacity 2147483647
expect memory 2 "2\^31" replay --trace $two --capacity 2147483648
expect memory 0 "" compare --trace $two --capacity 2147483647
expect memory 0 "" mrc --trace $two --capacity 2147483647
expect memory 0 "ttft" simulate --trace $two --set prefill_instances=100000 --set local_cache=100000
expect memory 2 "needs about .* GiB; this process may use" simulate --trace "$trace" --set prefill_instances=100000 --set local_cache=100000
expect memory 0 "hbm" replay --trace $two --tiers hbm:10:lru,ssd:2000000000:lru
expect memory 0 "verified" move replay --trace $two --tiers hbm:10:lru,ssd:2000000000:lru
expect memory 0 "verified" move replay --trace $two --tiers hbm:1GiB:lru
expect memory 2 "capacity" replay --trace $two --tiers hbm:10:lru,ssd:2147483648:lru
if [ "$sanitized" != 1 ]; then
  expect memory 2 "needs about .* GiB; this process may use" move replay --trace "$trace" --tiers hbm:2GiB:lru --block-bytes 64KiB
fi

# --- inputs that never end or cannot be rewound ---
expect input 1 "not a regular file" replay --trace /dev/zero --capacity 10
expect input 1 "not a regular file" replay --trace /dev/zero --format mooncake --capacity 10
mkfifo fifo.jsonl
expect input 1 "not a regular file" replay --trace fifo.jsonl --capacity 10
expect input 1 "not a regular file" trace stats fifo.jsonl
expect input 1 "not a regular file" replay --trace <(cat "$trace") --capacity 10
{ printf '{"input_length": 64, "hash_ids": [1'; head -c 70000000 /dev/zero | tr '\0' ' '; printf ']}\n'; } >long_line.jsonl
expect input 1 "long_line.jsonl:1: line is longer than 64 MiB" replay --trace long_line.jsonl --format mooncake --capacity 10
expect input 1 "long_line.jsonl:1: line is longer than 64 MiB" replay --trace long_line.jsonl --capacity 10
expect input 1 "long_line.jsonl:1: line is longer than 64 MiB" compare --trace long_line.jsonl --format mooncake --capacity 10
{ echo 1; head -c 70000000 /dev/zero | tr '\0' '7'; echo; } >long_line.ids
expect input 1 "long_line.ids:2: (line is longer than 64 MiB|id does not fit in 64 bits)" replay --trace long_line.ids --format ids --capacity 10
head -c 3000001 /dev/urandom >random.bin
expect input 1 "random.bin" replay --trace random.bin --capacity 10
: >empty.jsonl
expect input 1 "empty.jsonl" replay --trace empty.jsonl --capacity 10

# --- messages that name the file, the field and the problem ---
mkdir adir
expect message 1 "adir.*directory" replay --trace adir --capacity 10
expect message 2 "adir.*directory" simulate --trace $two --config adir
echo '{"results":[]}' >no_results.json
expect message 2 "no_results.json" cost --from no_results.json
{ head -c 38000000 /dev/zero | tr '\0' '9'; echo x; } >huge_id.ids
expect message 1 "huge_id.ids:1: " replay --trace huge_id.ids --format ids --capacity 10
ln -s loop2 loop1; ln -s loop1 loop2
expect message 1 "loop1.*(symbolic links|cannot open)" replay --trace loop1 --capacity 10
expect message 2 "unknown policy 'nope'.*lru" replay --trace $two --policy nope --capacity 10
expect message 2 "--capacity" replay --trace $two --capacity 0x10
expect message 2 "--capacity" replay --trace $two --capacity 10,,20
# Found by fuzz_options: Boost.Program_options loops forever formatting an error about an
# argument that contains one of its %placeholders%.
expect message 2 "contains '%canonical_option%'" replay --trace $two "--option '%canonical_option%'"
expect message 2 "contains '%option%'" trace gen -o x.jsonl --x%option%
expect message 2 "contains '%canonical_option%'" replay --trace $two "--x '%canonical_opti-ooption '%canonical_option%'n%'"
expect message 0 "" replay --trace $two --capacity 10 --no-opt --json budget%.json

# --- silently accepted nonsense ---
printf '%s\n' "{broken" "{broken" >all_bad.jsonl
expect nonsense 1 "every request line is invalid" replay --trace all_bad.jsonl --format mooncake --capacity 10 --skip-invalid
printf '{"kvtk_trace": 1, "block_tokens": 0}\n{"input_length": 64, "hash_ids": [1]}\n' >bt0.jsonl
expect nonsense 1 "bt0.jsonl:1: .*block_tokens" replay --trace bt0.jsonl --format kvtk --capacity 10
expect nonsense 2 "prefill_instances" simulate --trace $two --set prefill_instances=0
expect nonsense 2 "" simulate --trace $two --set max_batch=-1
expect nonsense 2 "--capacity" replay --trace $two --capacity -5
expect nonsense 2 "--capacity" replay --trace $two --capacity 0

echo
for c in "${!per_class[@]}"; do echo "class $c: ${per_class[$c]} cases"; done | sort
echo "$((total - fail)) of $total cases passed"
[ "$fail" = 0 ]
