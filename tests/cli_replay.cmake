# kvtk replay: golden numbers through the executable, thread invariance, output files, bad input.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/cli_expect.cmake)

set(T ${TRACE})
expect(0 "--partial-block" replay --help)
# The prefix issue's numbers, through the CLI (flat and radix LRU, every hash_id a block); the
# exact counts equal an independent brute-force Python replay of the same semantics.
expect(0 "flat,lru,10000,12031,288500,60921,144793823,31174981,"
       replay --trace ${T} --index flat --policy lru --capacity 10000 --partial-block cache --csv - --no-opt)
expect(0 "radix,lru,10000,12031,288500,61046,144793823,31238981,"
       replay --trace ${T} --index radix --policy lru --capacity 10000 --partial-block cache --csv - --no-opt)
# Units: 5120000 tokens = 10000 blocks of 512; 64 GiB of deepseek-v3 KV (70,272 B/token).
expect(0 "radix,lru,10000," replay --trace ${T} --capacity 5120000tok --csv - --no-opt)
expect(0 "radix,lru,1909," replay --trace ${T} --capacity 64GiB --model deepseek-v3 --csv - --no-opt)

# Thread-count invariance: identical results apart from the timing columns.
foreach(n 1 2 3)
  execute_process(COMMAND ${KVTK} replay --trace ${T} --index radix,flat,hashchain
                          --policy lru,fifo,lfu --capacity 500,3000,20000 --threads ${n}
                          --csv ${WORK_DIR}/threads${n}.csv RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "replay --threads ${n} failed")
  endif()
  file(READ ${WORK_DIR}/threads${n}.csv text)
  string(REGEX REPLACE ",[^,\n]*,[^,\n]*\n" "\n" text "${text}")
  set(csv${n} "${text}")
endforeach()
if(NOT csv1 STREQUAL csv2 OR NOT csv1 STREQUAL csv3)
  message(FATAL_ERROR "results differ with the thread count:\n${csv1}\n---\n${csv2}\n---\n${csv3}")
endif()
# The next-use sidecar (.kvtn): the same results with next uses in memory, from a sidecar being
# built, and from one reused; exactly one sidecar file is written.
execute_process(COMMAND ${KVTK} trace convert ${T} -o ${WORK_DIR}/nu.kvtb RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "trace convert to kvtb failed")
endif()
file(MAKE_DIRECTORY ${WORK_DIR}/nucache)
set(i 0)
foreach(mode off ${WORK_DIR}/nucache ${WORK_DIR}/nucache)
  math(EXPR i "${i}+1")
  execute_process(COMMAND ${KVTK} replay --trace ${WORK_DIR}/nu.kvtb --index radix,flat
                  --policy lru,belady --capacity 1000,10000 --next-use-cache ${mode}
                  --csv ${WORK_DIR}/nu${i}.csv RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "replay --next-use-cache ${mode} failed")
  endif()
  file(READ ${WORK_DIR}/nu${i}.csv text)
  string(REGEX REPLACE ",[^,\n]*,[^,\n]*\n" "\n" text "${text}")
  set(nu${i} "${text}")
endforeach()
if(NOT nu1 STREQUAL nu2 OR NOT nu1 STREQUAL nu3)
  message(FATAL_ERROR "--next-use-cache changed results:\n${nu1}\n---\n${nu2}\n---\n${nu3}")
endif()
file(GLOB side ${WORK_DIR}/nucache/*-skip.kvtn)
list(LENGTH side n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "expected one sidecar, got: ${side}")
endif()
expect(2 "--next-use-cache: '.*' is not an existing directory"
       replay --trace ${T} --next-use-cache ${WORK_DIR}/missing)

string(REGEX MATCHALL "\n" lines "${csv1}")
list(LENGTH lines n_lines)
if(NOT n_lines EQUAL 22)  # header + (3 radix + 3 flat) policies x 3 capacities + 3 hashchain
  message(FATAL_ERROR "expected 22 CSV lines, got ${n_lines}")
endif()

# JSON output has the documented fields.
execute_process(COMMAND ${KVTK} replay --trace ${T} --capacity 1000 --json ${WORK_DIR}/r.json
                RESULT_VARIABLE rc)
file(READ ${WORK_DIR}/r.json json)
foreach(field ideal_block_hit_ratio unique_blocks block_refs_per_second opt_fraction bound_fraction
              bound_block_hits candidates evictions)
  if(NOT json MATCHES "\"${field}\"")
    message(FATAL_ERROR "JSON lacks ${field}:\n${json}")
  endif()
endforeach()

# Engine accounting modes (include/kvtk/prefix/engine_index.hpp): the counts kvtk's vllm and
# sglang modes give on the conversation trace, pinned (docs/prefix.md "Engine accounting" has the
# engines' own counts from tools/engine-check). Without ideal in --engine the grid does not run.
expect(0 "vllm,hashchain,vllm,1000,12031,276491,12988,144793823,6649856,.*sglang,radix,lru,1000,12031,276491,12933,"
       replay --trace ${T} --engine vllm,sglang --capacity 1000 --no-opt --csv -)
execute_process(COMMAND ${KVTK} replay --trace ${T} --engine sglang --capacity 1000 --no-opt --csv -
                OUTPUT_VARIABLE only)
if(only MATCHES "ideal,")
  message(FATAL_ERROR "--engine sglang also ran the ideal grid:\n${only}")
endif()
expect(0 "\"engine_state\": {[^}]*\"version\": \"vLLM 0.33.0\""
       replay --trace ${T} --engine vllm --capacity 1000 --json -)
expect(0 "vllm +sglang" mrc --trace ${T} --capacity 1000 --engine vllm,sglang)
expect(2 "--engine: unknown engine 'trtllm'" replay --trace ${T} --engine trtllm)
expect(2 "--engine vllm: the engine caches full blocks only" replay --trace ${T} --engine vllm --partial-block cache)
expect(2 "--engine: unknown engine 'trtllm'" mrc --trace ${T} --engine trtllm)

# Bad input: a clear message and exit 2 (usage) or 1 (runtime).
expect(2 "unknown index 'tree'" replay --trace ${T} --index tree)
expect(2 "unknown policy 'arc' \\(known per index: radix: lru" replay --trace ${T} --policy arc)
expect(2 "unknown policy 'slru' \\(known per index: flat: lru" replay --trace ${T} --index flat --policy slru)
# Indexes x policies: every valid pair runs (arc is flat-only, sieve is flat-only, lru both).
expect(0 "radix,lru,1000,.*flat,lru,1000,.*flat,arc,1000," replay --trace ${T} --index radix,flat
       --policy lru,arc --capacity 1000 --no-opt --csv -)
execute_process(COMMAND ${KVTK} replay --trace ${T} --index radix,flat --policy lru,arc
                        --capacity 1000 --no-opt --csv - OUTPUT_VARIABLE pairs)
if(pairs MATCHES "radix,arc")
  message(FATAL_ERROR "radix ran arc, which is not one of its leaf orders:\n${pairs}")
endif()
# --policy all: every policy of every index.
execute_process(COMMAND ${KVTK} replay --trace ${T} --index radix,flat --policy all
                        --capacity 1000 --no-opt --csv - OUTPUT_VARIABLE every RESULT_VARIABLE rc)
string(REGEX MATCHALL "\nideal,(radix|flat)," rows "${every}")
list(LENGTH rows n)
if(rc OR n LESS 15)
  message(FATAL_ERROR "--policy all ran ${n} jobs:\n${every}")
endif()
expect(2 "give --model" replay --trace ${T} --capacity 64GiB)
expect(2 "unknown model 'gpt-5'" replay --trace ${T} --capacity 64GiB --model gpt-5)
expect(2 "unknown unit in '10parsecs'" replay --trace ${T} --capacity 10parsecs)
expect(2 "less than one block" replay --trace ${T} --capacity 100tok)
expect(2 "not a whole number of blocks" replay --trace ${T} --capacity 10.5)
expect(2 "--format: unknown format 'csv'" replay --trace ${T} --format csv)
expect(2 "--threads: must be in" replay --trace ${T} --threads 0)
expect(2 "--partial-block: unknown partial-block rule 'half' \\(known: skip cache\\)" replay --trace ${T} --partial-block half)
expect(1 "nope.jsonl:0: cannot open file" replay --trace ${WORK_DIR}/nope.jsonl)
file(WRITE ${WORK_DIR}/bad.jsonl "{\"input_length\": 5, \"hash_ids\": [1]}\n{\"hash_ids\": [2]}\n")
expect(1 "bad.jsonl:2: missing field 'input_length'" replay --trace ${WORK_DIR}/bad.jsonl)
expect(2 "--json: cannot write .*no/such/dir/r.json.: directory .* does not exist" replay --trace ${T} --capacity 1000 --json ${WORK_DIR}/no/such/dir/r.json)

# Bailian traces are detected from their fields and their content ids chained (16-token blocks):
# two chats with equal content ids under different first blocks share only what they should.
file(WRITE ${WORK_DIR}/bailian.jsonl
  "{\"chat_id\": 1, \"parent_chat_id\": -1, \"timestamp\": 0.5, \"input_length\": 48, \"output_length\": 5, \"type\": \"text\", \"turn\": 1, \"hash_ids\": [1, 2, 3]}\n"
  "{\"chat_id\": 2, \"parent_chat_id\": -1, \"timestamp\": 1.0, \"input_length\": 48, \"output_length\": 5, \"type\": \"text\", \"turn\": 1, \"hash_ids\": [9, 2, 3]}\n"
  "{\"chat_id\": 3, \"parent_chat_id\": 1, \"timestamp\": 1.5, \"input_length\": 64, \"output_length\": 5, \"type\": \"text\", \"turn\": 2, \"hash_ids\": [1, 2, 3, 4]}\n")
expect(0 "\"format\": \"bailian\"" replay --trace ${WORK_DIR}/bailian.jsonl --capacity 100 --json -)
# Only request 3 hits (its first three blocks): 3 of 10 block refs.
expect(0 "radix,lru,100,3,10,3," replay --trace ${WORK_DIR}/bailian.jsonl --capacity 100 --csv - --no-opt)
file(WRITE ${WORK_DIR}/neither.jsonl "{\"prompt\": \"hi\"}\n")
expect(1 "neither.jsonl:1: cannot detect the format" replay --trace ${WORK_DIR}/neither.jsonl)

# --skip-invalid counts and reports bad lines instead of stopping.
file(WRITE ${WORK_DIR}/mixed.jsonl
  "{\"timestamp\": 0, \"input_length\": 600, \"hash_ids\": [1, 2]}\n"
  "{\"timestamp\": 1, \"input_length\": 600, \"hash_ids\": [1, -2]}\n"
  "not json\n"
  "{\"timestamp\": 2, \"input_length\": 600, \"hash_ids\": [1, 2]}\n")
expect(1 "mixed.jsonl:2: 'hash_ids'\\[1\\] is negative" replay --trace ${WORK_DIR}/mixed.jsonl --format mooncake)
expect(0 "skipped 2 invalid line\\(s\\); the first: .*mixed.jsonl:2: 'hash_ids'\\[1\\] is negative"
       replay --trace ${WORK_DIR}/mixed.jsonl --format mooncake --skip-invalid --capacity 10)
expect(0 "\"skipped_lines\": 2" replay --trace ${WORK_DIR}/mixed.jsonl --format mooncake --skip-invalid --capacity 10 --json -)

# A JSON model file gives bytes per token from the attention shape; the shapes of two presets
# reproduce the presets' capacities (MLA: 61 * (512 + 64) * 2 = 70,272 B/token).
set(M ${CMAKE_CURRENT_LIST_DIR}/data/models)
expect(0 "radix,lru,1909," replay --trace ${T} --capacity 64GiB --model ${M}/deepseek-v3-mla.json --csv - --no-opt)
expect(0 "radix,lru,409," replay --trace ${T} --capacity 64GiB --model ${M}/llama-3-70b.json --csv - --no-opt)
expect(0 "radix,lru,409," replay --trace ${T} --capacity 64GiB --model llama-3-70b --csv - --no-opt)
expect(2 "incomplete.json' lacks 'head_dim'" replay --trace ${T} --capacity 64GiB --model ${M}/incomplete.json)
expect(2 "cannot open '.*/none.json'" replay --trace ${T} --capacity 64GiB --model ${M}/none.json)

# --timings: the phase breakdown in the JSON and on stderr; --no-ideal: the ideal fields null,
# the table says so; results unchanged by either.
expect(0 "\"read_s\": [0-9.e-]+.*\"replay_s\"" replay --trace ${T} --capacity 1000 --json - --timings --no-opt)
expect(0 "timings: read [0-9.]+ s, next_use [0-9.]+ s, ideal [0-9.]+ s, replay .*peak RSS"
       replay --trace ${T} --capacity 1000 --timings --no-opt)
expect(0 "\"ideal_block_hit_ratio\": null" replay --trace ${T} --capacity 1000 --json - --no-ideal --no-opt)
expect(0 "ideal \\(infinite cache\\): not computed \\(--no-ideal\\)" replay --trace ${T} --capacity 1000 --no-ideal --no-opt)
expect(0 "radix,lru,1000,12031,276491,12990,144793823,6650880," replay --trace ${T} --capacity 1000 --csv - --no-ideal --no-opt --timings)
expect(0 "radix,lru,1000,12031,276491,12990,144793823,6650880," replay --trace ${T} --capacity 1000 --csv - --no-opt --threads 3)
# With the optimum, the ideal comes from the next uses: the same figures as the set's.
expect(0 "\"ideal_block_hit_ratio\": 0.3819" replay --trace ${T} --capacity 1000 --json -)
expect(0 "\"ideal_block_hit_ratio\": 0.3819" replay --trace ${T} --capacity 1000 --json - --no-opt)
expect(0 "timings: read [0-9.]+ s, pass" trace stats ${T} --timings)

# Capacities are echoed as given (and in blocks): 64 GiB of deepseek-v3 KV = 1,909 blocks of 512.
expect(0 "\"capacity\": \"64GiB\",[ \n]*\"capacity_blocks\": 1909"
       replay --trace ${T} --capacity 64GiB,3Mtok --model deepseek-v3 --no-opt --json -)
expect(0 "radix +lru +64GiB +1909 .*radix +lru +3Mtok +5859 "
       replay --trace ${T} --capacity 64GiB,3Mtok --model deepseek-v3 --no-opt)
