# Bad input, one file per case: every malformed trace stops the run with exit 1 and
# "file:line: reason" (line 0 = the file as a whole), and --skip-invalid counts instead.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/cli_expect.cmake)
set(ok "{\"timestamp\": 0, \"input_length\": 600, \"hash_ids\": [1, 2]}\n")
set(i 0)
# bad(format line reason text): writes `text` after one good line and expects the error.
function(bad format line reason text)
  math(EXPR n "${i} + 1")
  set(i ${n} PARENT_SCOPE)
  set(f ${WORK_DIR}/case${n}.trace)
  file(WRITE ${f} "${text}")
  expect(1 "case${n}.trace:${line}: ${reason}" replay --trace ${f} --format ${format} --capacity 10)
endfunction()

bad(mooncake 2 "invalid JSON: .* at column" "${ok}{\"input_length\": 600, \"hash_ids\": [1, 2}\n")
bad(mooncake 2 "missing field 'input_length'" "${ok}{\"hash_ids\": [1]}\n")
bad(mooncake 2 "'input_length' must be an integer, got string" "${ok}{\"input_length\": \"600\", \"hash_ids\": [1, 2]}\n")
bad(mooncake 2 "'input_length' is negative" "${ok}{\"input_length\": -5, \"hash_ids\": []}\n")
bad(mooncake 2 "'hash_ids' has 3 ids but input_length 600 makes 2 blocks of 512 tokens" "${ok}{\"input_length\": 600, \"hash_ids\": [1, 2, 3]}\n")
bad(mooncake 2 "timestamp goes backwards" "{\"timestamp\": 5, \"input_length\": 600, \"hash_ids\": [1, 2]}\n${ok}")
bad(mooncake 2 "'hash_ids'\\[1\\] is negative" "${ok}{\"input_length\": 600, \"hash_ids\": [1, -2]}\n")
bad(mooncake 2 "'hash_ids'\\[0\\] must be an integer, got number" "${ok}{\"input_length\": 600, \"hash_ids\": [1.5, 2]}\n")
bad(mooncake 2 "'hash_ids' must be an array" "${ok}{\"input_length\": 600, \"hash_ids\": 7}\n")
bad(mooncake 2 "empty line" "${ok}\n${ok}")
bad(mooncake 2 "'output_length' is negative" "${ok}{\"input_length\": 600, \"output_length\": -1, \"hash_ids\": [1, 2]}\n")
bad(mooncake 2 "invalid JSON: trailing characters" "${ok}{\"input_length\": 600, \"hash_ids\": [1, 2]} x\n")
bad(mooncake 2 "expected a JSON object" "${ok}[1, 2]\n")
bad(mooncake 2 "'timestamp' must be a number, got string" "${ok}{\"timestamp\": \"noon\", \"input_length\": 600, \"hash_ids\": [1, 2]}\n")
bad(bailian 2 "missing field 'chat_id'" "{\"chat_id\": 1, \"input_length\": 16, \"hash_ids\": [1]}\n{\"input_length\": 16, \"hash_ids\": [1]}\n")
bad(kvtk 2 "both 'hash_ids' and 'content_ids'" "{\"input_length\": 64, \"hash_ids\": [1]}\n{\"input_length\": 64, \"hash_ids\": [1], \"content_ids\": [1]}\n")
bad(kvtk 1 "kvtk_trace version 2" "{\"kvtk_trace\": 2}\n")
bad(kvtk 2 "'tenant' must be a string, got number" "{\"input_length\": 64, \"hash_ids\": [1]}\n{\"input_length\": 64, \"hash_ids\": [1], \"tenant\": 3}\n")
bad(kvtk 2 "'block_tokens' must be in \\[1, 2\\^20\\]" "{\"input_length\": 64, \"hash_ids\": [1]}\n{\"input_length\": 64, \"hash_ids\": [1], \"block_tokens\": 0}\n")
bad(kvtk 2 "'priority' is over 2\\^32-1" "{\"input_length\": 64, \"hash_ids\": [1]}\n{\"input_length\": 64, \"hash_ids\": [1], \"priority\": 4294967296}\n")
bad(kvtk 2 "'session' must be a non-negative integer or a string" "{\"input_length\": 64, \"hash_ids\": [1]}\n{\"input_length\": 64, \"hash_ids\": [1], \"session\": true}\n")
bad(kvtk 2 "'arrival_s' is negative" "{\"input_length\": 64, \"hash_ids\": [1]}\n{\"arrival_s\": -1, \"input_length\": 64, \"hash_ids\": [1]}\n")
bad(ids 3 "expected one non-negative integer id, got 'abc'" "1\n2\nabc\n")
bad(ids 2 "negative id" "1\n-2\n")
bad(oracle-general 0 "size 28 bytes is not a whole number of 24-byte oracleGeneral records" "0123456789012345678901234567")

# kvtb: truncation, a flipped byte, a foreign file, a block size that would misread it.
file(READ ${DATA}/small.kvtb hex HEX)
string(LENGTH "${hex}" len)
math(EXPR cut "${len} - 16")
string(SUBSTRING "${hex}" 0 ${cut} truncated)
string(SUBSTRING "${hex}" 0 2000 head)
math(EXPR rest "${len} - 2002")
string(SUBSTRING "${hex}" 2002 ${rest} tail)
string(SUBSTRING "${hex}" 2000 2 byte)
if(byte STREQUAL "00")
  set(byte "01")
else()
  set(byte "00")
endif()
# file(WRITE) cannot write binary: write hex, then turn it into bytes with xxd or python3.
foreach(case "truncated;${truncated}" "flipped;${head}${byte}${tail}")
  list(GET case 0 name)
  list(GET case 1 data)
  file(WRITE ${WORK_DIR}/${name}.hex "${data}")
endforeach()
find_program(XXD xxd)
find_program(PYTHON3 python3)
foreach(name truncated flipped)
  if(XXD)
    execute_process(COMMAND ${XXD} -r -p ${WORK_DIR}/${name}.hex ${WORK_DIR}/${name}.kvtb)
  elseif(PYTHON3)
    execute_process(COMMAND ${PYTHON3} -c "import sys;open(sys.argv[2],'wb').write(bytes.fromhex(open(sys.argv[1]).read()))"
                            ${WORK_DIR}/${name}.hex ${WORK_DIR}/${name}.kvtb)
  else()
    message(FATAL_ERROR "need xxd or python3 to write the corrupt kvtb cases")
  endif()
endforeach()
expect(1 "truncated.kvtb:0: kvtb: header says [0-9]+ bytes but the file has [0-9]+ \\(truncated"
       replay --trace ${WORK_DIR}/truncated.kvtb --capacity 10)
expect(1 "flipped.kvtb:0: kvtb: payload checksum mismatch" replay --trace ${WORK_DIR}/flipped.kvtb --capacity 10)
expect(1 "case1.trace:0: kvtb: bad magic" replay --trace ${WORK_DIR}/case1.trace --format kvtb --capacity 10)
expect(1 "small.kvtb:0: kvtb file was written with 512-token blocks; --block-tokens 16"
       replay --trace ${DATA}/small.kvtb --block-tokens 16 --capacity 10)
expect(1 "missing.kvtb:0: cannot open file" replay --trace ${WORK_DIR}/missing.kvtb --format kvtb --capacity 10)

# --skip-invalid: the good lines replay, the bad ones are counted and the first is named.
file(WRITE ${WORK_DIR}/mixed.jsonl "${ok}{\"input_length\": -5, \"hash_ids\": []}\n${ok}not json\n")
expect(0 "skipped 2 invalid line\\(s\\); the first: .*mixed.jsonl:2: 'input_length' is negative"
       replay --trace ${WORK_DIR}/mixed.jsonl --format mooncake --skip-invalid --capacity 10)
expect(0 "skipped 2 invalid line" trace convert ${WORK_DIR}/mixed.jsonl -o ${WORK_DIR}/m.kvtb --skip-invalid)
expect(0 "radix,lru,10,2,2,1," replay --trace ${WORK_DIR}/m.kvtb --capacity 10 --csv - --no-opt)
message(STATUS "${i} malformed-trace cases checked")

# Range rules every reader shares (sim/formats/trace_limits.hpp; issue 17): overflowing counts,
# non-finite times and a zero block size in a header are errors, not wrapped or default values.
bad(mooncake 2 "'input_length' 18446744073709551615 is not below 2\\^32 tokens"
    "${ok}{\"timestamp\": 1, \"input_length\": 18446744073709551615, \"hash_ids\": []}\n")
bad(mooncake 2 "'output_length' 18446744073709551615 is not below 2\\^32 tokens"
    "${ok}{\"timestamp\": 1, \"input_length\": 600, \"output_length\": 18446744073709551615, \"hash_ids\": [1, 2]}\n")
bad(mooncake 2 "'timestamp' is beyond 1e12 s \\(or not finite\\)"
    "${ok}{\"timestamp\": 1e400, \"input_length\": 600, \"hash_ids\": [1, 2]}\n")
bad(kvtk 1 "'block_tokens' must be in \\[1, 2\\^20\\]"
    "{\"kvtk_trace\": 1, \"block_tokens\": 0}\n{\"arrival_s\": 0, \"input_length\": 10, \"hash_ids\": [1]}\n")

# Files that cannot be read twice, or are not files at all.
expect(1 "is a directory, not a trace file" replay --trace ${WORK_DIR})
expect(1 "not a regular file \\(a FIFO, socket or device\\)" replay --trace /dev/zero)
expect(1 "not a regular file" compare --trace /dev/zero)
expect(1 "cannot open file: No such file or directory" replay --trace ${WORK_DIR}/none.jsonl)

# Options: a sign on an unsigned option, hexadecimal or empty list items are usage errors (2).
expect(2 "--block-tokens: must be a non-negative whole number, got '-1'"
       replay --trace ${TRACE} --block-tokens -1)
expect(2 "--requests: must be a non-negative whole number, got '-1'"
       trace gen --requests -1 -o ${WORK_DIR}/never.jsonl)
expect(2 "--capacity: '0x10' is not a decimal number" replay --trace ${TRACE} --capacity 0x10)
expect(2 "--capacity: empty item in '10,,20'" replay --trace ${TRACE} --capacity 10,,20)
expect(2 "--block-tokens: must be in \\[0, 2\\^20\\]" replay --trace ${TRACE} --block-tokens 4000000)
# A capacity far beyond the trace allocates what the trace can fill (2 requests, 27 blocks).
file(STRINGS ${TRACE} two LIMIT_COUNT 2)
string(REPLACE ";" "\n" two "${two}")
file(WRITE ${WORK_DIR}/two.jsonl "${two}\n")
expect(0 "radix,lru,2147483647,2,27,1," replay --trace ${WORK_DIR}/two.jsonl
       --capacity 2147483647 --csv - --no-opt)
expect(0 "flat,lru,100000000,2,27,1," replay --trace ${WORK_DIR}/two.jsonl --index flat
       --capacity 100000000 --csv - --no-opt)

# Names must be valid UTF-8 (they end up in JSON output); a trace whose every line is skipped is
# an error, not an empty result; config files are regular files of sane size; model shapes
# whose product overflows are refused.
# {"arrival_s": 0, "input_length": 10, "tenant": "caf<0xE9>", "hash_ids": [1]}: Latin-1, not UTF-8.
string(HEX "{\"arrival_s\": 0, \"input_length\": 10, \"tenant\": \"caf" utf_head)
string(HEX "\", \"hash_ids\": [1]}\n" utf_tail)
file(WRITE ${WORK_DIR}/latin1.hex "${utf_head}e9${utf_tail}")
if(XXD)
  execute_process(COMMAND ${XXD} -r -p ${WORK_DIR}/latin1.hex ${WORK_DIR}/latin1.jsonl)
else()
  execute_process(COMMAND ${PYTHON3} -c "import sys;open(sys.argv[2],'wb').write(bytes.fromhex(open(sys.argv[1]).read()))"
                          ${WORK_DIR}/latin1.hex ${WORK_DIR}/latin1.jsonl)
endif()
expect(1 "latin1.jsonl:1: 'tenant' is not valid UTF-8" replay --trace ${WORK_DIR}/latin1.jsonl --format kvtk)
file(WRITE ${WORK_DIR}/allbad.jsonl "{\"a\": 1}\n{\"b\": 2}\n")
expect(1 "every request line is invalid \\(2 skipped\\); the first: .*allbad.jsonl:1: missing field 'input_length'"
       replay --trace ${WORK_DIR}/allbad.jsonl --format mooncake --skip-invalid)
expect(2 "--config: '.*' is a directory" simulate --trace ${TRACE} --config ${WORK_DIR})
# An empty or broken config says where and why, without the JSON library's error id.
file(WRITE ${WORK_DIR}/empty-config.json "")
expect(2 "--config: '.*empty-config.json' is empty \\(a JSON object expected\\)" simulate --trace ${TRACE} --config ${WORK_DIR}/empty-config.json)
file(WRITE ${WORK_DIR}/broken-config.json "{\"router\": }")
expect(2 "--config: '.*broken-config.json' is not valid JSON: parse error at line 1, column 12"
       simulate --trace ${TRACE} --config ${WORK_DIR}/broken-config.json)
file(WRITE ${WORK_DIR}/huge-model.json
     "{\"layers\": 4294967295, \"kv_heads\": 4294967295, \"head_dim\": 4294967295}")
expect(2 "the shape makes 2\\^32 or more KV bytes per token"
       replay --trace ${TRACE} --capacity 64GiB --model ${WORK_DIR}/huge-model.json)
file(WRITE ${WORK_DIR}/big-kv.json "{\"kv_bytes_per_token\": 4294967296}")
expect(2 "'kv_bytes_per_token' must be a positive integer below 2\\^32"
       replay --trace ${TRACE} --capacity 64GiB --model ${WORK_DIR}/big-kv.json)
file(WRITE ${WORK_DIR}/empty-results.json "{\"results\": []}")
expect(2 "has no results to price" cost --from ${WORK_DIR}/empty-results.json)
file(WRITE ${WORK_DIR}/partial-results.json "{\"results\": [{}]}")
expect(1 "is not a complete kvtk replay, simulate or mrc result: .*token_hits"
       cost --from ${WORK_DIR}/partial-results.json)
expect(2 "token counts must be in \\[0, 1e18\\], got 1e\\+308"
       cost --hit-tokens 1e308 --miss-tokens 1 --pricing deepseek-v3)

# Work and output bounded by the data, not by a runaway value: simulated decode steps per
# request, the simulator's time scale, the sampled curve's sample, the bench's size cap.
file(WRITE ${WORK_DIR}/long-output.jsonl
     "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 33554432, \"hash_ids\": [1, 2]}\n")
expect(1 "request 0 \\(0-based\\) has 33554432 output tokens; simulate decodes at most 2\\^24"
       simulate --trace ${WORK_DIR}/long-output.jsonl)
expect(0 "ttft" simulate --trace ${WORK_DIR}/long-output.jsonl --set max_output_tokens=100 --json -)
expect(2 "'time_scale' must be in \\[0, 1e6\\]" simulate --trace ${TRACE} --set time_scale=1e308)
expect(1 "--sample 1e-300 kept 0 of 276491 block references .fewer than 1000, too few for a curve." mrc --trace ${TRACE} --sample 1e-300)
expect(2 "--max-gib: must be a positive number of GiB" move bench --max-gib -1)
expect(0 "^kvtk [0-9]+\\.[0-9]+\\.[0-9]+\n$" --version)
