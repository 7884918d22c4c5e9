# kvtk trace stats against the statistics traces/SOURCES.md gives for the conversation trace
# (computed independently when the traces were collected).
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/cli_expect.cmake)
set(T ${TRACE})
expect(0 "stats" trace --help)
expect(2 "unknown subcommand 'frob'" trace frob)
execute_process(COMMAND ${KVTK} trace stats ${T} --partial-block cache --json ${WORK_DIR}/s.json
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "trace stats failed")
endif()
file(READ ${WORK_DIR}/s.json s)
foreach(want
    "\"requests\": 12031" "\"block_refs\": 288500" "\"unique_blocks\": 182790"
    "\"ideal_block_hit_ratio\": 0\\.3664" "\"ideal_token_hit_ratio\": 0\\.3736"
    "\"span_s\": 3536\\.99" "\"mean\": 12035\\.06" "\"p50\": 6909\\.0" "\"max\": 126195\\.0"
    "\"mean\": 342\\.6" "\"p50\": 350\\.0" "\"max\": 2000\\.0")
  if(NOT s MATCHES "${want}")
    message(FATAL_ERROR "trace stats JSON lacks ${want}:\n${s}")
  endif()
endforeach()
expect(1 "nope.jsonl:0: cannot open file" trace stats ${WORK_DIR}/nope.jsonl)

# trace gen: deterministic for a seed, different across seeds, refuses to overwrite, and the
# mixed profile lands near DeepSeek's published 56.3 % ideal input-token hit ratio.
expect(0 "--profile" trace gen --help)
expect(0 "" trace gen --requests 3000 --seed 7 -o ${WORK_DIR}/a.jsonl --force)
expect(0 "" trace gen --requests 3000 --seed 7 -o ${WORK_DIR}/b.jsonl --force)
expect(0 "" trace gen --requests 3000 --seed 8 -o ${WORK_DIR}/c.jsonl --force)
file(READ ${WORK_DIR}/a.jsonl a)
file(READ ${WORK_DIR}/b.jsonl b)
file(READ ${WORK_DIR}/c.jsonl c)
if(NOT a STREQUAL b OR a STREQUAL c)
  message(FATAL_ERROR "trace gen is not deterministic per seed (or ignores the seed)")
endif()
expect(2 "exists; pass --force" trace gen --requests 10 -o ${WORK_DIR}/a.jsonl)
expect(2 "unknown profile 'batch'" trace gen --profile batch -o -)
expect(2 "--requests: must be in \\[1, 10\\^9\\]" trace gen --requests 0 -o -)
expect(0 "" trace gen --requests 20000 --seed 1 -o ${WORK_DIR}/mixed.jsonl --force)
execute_process(COMMAND ${KVTK} trace stats ${WORK_DIR}/mixed.jsonl --block-tokens 64
                        --partial-block cache --json - OUTPUT_VARIABLE s RESULT_VARIABLE rc)
string(REGEX MATCH "\"ideal_token_hit_ratio\": ([0-9.]+)" _ "${s}")
set(ratio ${CMAKE_MATCH_1})
if(rc OR NOT ratio OR ratio LESS 0.53 OR ratio GREATER 0.60)
  message(FATAL_ERROR "mixed profile ideal token hit ratio ${ratio} outside [0.53, 0.60]\n${s}")
endif()
foreach(profile chat agent api)
  expect(0 "" trace gen --profile ${profile} --requests 5000 -o ${WORK_DIR}/${profile}.jsonl --force)
  expect(0 "\"requests\": 5000" trace stats ${WORK_DIR}/${profile}.jsonl --block-tokens 64 --json -)
endforeach()

# A generated trace reads back in every command with default flags (the kvtk header carries the
# 64-token block size); --to mooncake warns how to read it.
expect(0 "" trace gen --requests 1500 -o ${WORK_DIR}/plain.jsonl)
expect(0 "64-token blocks" replay --trace ${WORK_DIR}/plain.jsonl --capacity 100)
expect(0 "" mrc --trace ${WORK_DIR}/plain.jsonl --capacity 100,1000)
expect(0 "\"block_tokens\": 64" trace stats ${WORK_DIR}/plain.jsonl --json -)
expect(0 "" simulate --trace ${WORK_DIR}/plain.jsonl)
expect(0 "" move replay --trace ${WORK_DIR}/plain.jsonl --tiers hbm:100:lru,dram:1000:lru)
expect(0 "" compare --trace ${WORK_DIR}/plain.jsonl --capacity 100)
expect(0 "read this one with --block-tokens 64"
       trace gen --requests 10 --to mooncake -o ${WORK_DIR}/plain.mooncake.jsonl)

# One partial-block rule: with default flags every command counts the same block references
# (only full blocks) and records the rule it used.
set(T2 ${TRACE})
execute_process(COMMAND ${KVTK} replay --trace ${T2} --capacity 100 --no-opt --json - OUTPUT_VARIABLE a)
execute_process(COMMAND ${KVTK} mrc --trace ${T2} --capacity 100 --json - OUTPUT_VARIABLE b)
execute_process(COMMAND ${KVTK} trace stats ${T2} --json - OUTPUT_VARIABLE c)
execute_process(COMMAND ${KVTK} simulate --trace ${T2} --json - OUTPUT_VARIABLE d)
execute_process(COMMAND ${KVTK} move replay --trace ${T2} --tiers hbm:100:lru --block-bytes 1KiB
                        --json - OUTPUT_VARIABLE e)
string(JSON ra GET "${a}" trace block_refs)
string(JSON rb GET "${b}" trace block_refs)
string(JSON rc GET "${c}" block_refs)
string(JSON rd GET "${d}" result block_refs)
string(JSON re GET "${e}" block_refs)
string(JSON pa GET "${a}" trace partial_block)
string(JSON pb GET "${b}" trace partial_block)
string(JSON pc GET "${c}" trace partial_block)
string(JSON pd GET "${d}" trace partial_block)
string(JSON pe GET "${e}" partial_block)
if(NOT "${ra};${rb};${rc};${rd};${re}" STREQUAL "${ra};${ra};${ra};${ra};${ra}"
   OR NOT "${pa};${pb};${pc};${pd};${pe}" STREQUAL "skip;skip;skip;skip;skip")
  message(FATAL_ERROR "block refs by command: replay ${ra}, mrc ${rb}, stats ${rc}, simulate ${rd}, "
                      "move replay ${re}; rules ${pa} ${pb} ${pc} ${pd} ${pe}")
endif()
# trace import --format token-ids (docs/formats.md "Importing your traffic"): the committed
# example log imports to vLLM's keys; its replay under --engine vllm is pinned; bad options and
# bad lines are refused by name.
set(ILOG ${CMAKE_CURRENT_LIST_DIR}/data/import/token_ids_example.jsonl)
expect(0 "wrote 40 requests \\(14835 tokens, 912 full vllm blocks of 16 tokens\\)"
       trace import ${ILOG} -o ${WORK_DIR}/imported.kvtb)
expect(0 "\"block_hits\": 639," replay --trace ${WORK_DIR}/imported.kvtb --engine vllm --capacity 100 --no-opt --json -)
expect(2 "it exists; pass" trace import ${ILOG} -o ${WORK_DIR}/imported.kvtb)
expect(0 "\"full_blocks\": 211," trace import ${ILOG} -o ${WORK_DIR}/imported64.jsonl --to kvtk --engine sglang
       --block-tokens 64 --json -)
expect(2 "--format: 'openai' cannot be imported" trace import ${ILOG} --format openai -o ${WORK_DIR}/x.kvtb)
expect(2 "--hash-algo xxhash: without PYTHONHASHSEED" trace import ${ILOG} --hash-algo xxhash -o ${WORK_DIR}/x.kvtb)
file(WRITE ${WORK_DIR}/bad-log.jsonl "{\"timestamp\": 1, \"token_ids\": [1, 2]}\n{\"timestamp\": 0.5, \"token_ids\": [3]}\n")
expect(1 "bad-log.jsonl:2: timestamp goes backwards" trace import ${WORK_DIR}/bad-log.jsonl -o ${WORK_DIR}/x.kvtb)
# The same log as CSV (tests/data/import/make_examples.py writes both): the same trace.
expect(0 "wrote 40 requests \\(14835 tokens, 912 full vllm blocks of 16 tokens\\)"
       trace import ${CMAKE_CURRENT_LIST_DIR}/data/import/token_ids_example.csv -o ${WORK_DIR}/imported-csv.kvtb)
expect(0 "\"block_hits\": 639," replay --trace ${WORK_DIR}/imported-csv.kvtb --engine vllm --capacity 100 --no-opt --json -)

# trace anonymize (docs/formats.md "Sharing a trace"): the anonymized import replays alike;
# a short salt, a shift below zero and an unknown subcommand option are refused.
file(WRITE ${WORK_DIR}/secret.salt "0123456789abcdef-kvtk-test")
expect(0 "wrote 40 requests \\([0-9]+ block keys re-keyed, 4 sessions"
       trace anonymize ${WORK_DIR}/imported.kvtb -o ${WORK_DIR}/shared.kvtb --salt-file ${WORK_DIR}/secret.salt)
expect(0 "\"block_hits\": 639," replay --trace ${WORK_DIR}/shared.kvtb --engine vllm --capacity 100 --no-opt --json -)
expect(0 "the salt was random and is not kept" trace anonymize ${WORK_DIR}/imported.kvtb -o ${WORK_DIR}/once.kvtb)
file(WRITE ${WORK_DIR}/short.salt "short")
expect(2 "--salt-file: .*short.salt' holds 5 bytes" trace anonymize ${WORK_DIR}/imported.kvtb -o ${WORK_DIR}/x.kvtb
       --salt-file ${WORK_DIR}/short.salt)
expect(1 "outside \\[0, 1e12\\] s" trace anonymize ${WORK_DIR}/imported.kvtb -o ${WORK_DIR}/x.kvtb --time-shift -1e6)
expect(2 "it exists; pass" trace anonymize ${WORK_DIR}/imported.kvtb -o ${WORK_DIR}/shared.kvtb)

# KV-event recordings (docs/formats.md "KV-event recordings"): vLLM 0.33.0's own recording of the
# example log imports as its miss stream, and check-engine finds kvtk's model equal to it (exit 0)
# with the engine's block count, and a divergence (exit 1) with one block fewer.
set(EVENTS ${CMAKE_CURRENT_LIST_DIR}/data/import/vllm_events_example.jsonl)
expect(0 "40 event batches: 481 blocks stored \\(the engine's misses\\), 419 removed"
       trace import ${EVENTS} --format vllm-events --to ids -o ${WORK_DIR}/misses.ids)
expect(2 "not its requests" trace import ${EVENTS} --format vllm-events -o ${WORK_DIR}/x.kvtb)
expect(0 "wrote 40 requests" trace import ${ILOG} -o ${WORK_DIR}/nolora.kvtb --field-lora no_lora
       --field-lora-path no_lora_path)
expect(0 "no divergence" check-engine --events ${EVENTS} --trace ${WORK_DIR}/nolora.kvtb --gpu-blocks 64)
expect(3 "first divergence: stored block #" check-engine --events ${EVENTS} --trace ${WORK_DIR}/nolora.kvtb
       --gpu-blocks 65)
expect(2 "--gpu-blocks: give the engine's logged number" check-engine --events ${EVENTS}
       --trace ${WORK_DIR}/nolora.kvtb --gpu-blocks 1)
# vLLM with kv_cache_report_mode="full": the requests rebuilt, the hits compared.
set(FULL_EVENTS ${CMAKE_CURRENT_LIST_DIR}/data/import/vllm_events_full_example.jsonl)
expect(0 "rebuilt 40 requests \\(912 blocks, 431 of them reported reused\\)" trace import ${FULL_EVENTS}
       --format vllm-events --report-mode full -o ${WORK_DIR}/rebuilt.kvtb)
expect(0 "reused: 431 recorded, 431 predicted" check-engine --events ${FULL_EVENTS} --trace ${WORK_DIR}/nolora.kvtb
       --gpu-blocks 64 --report-mode full)
expect(3 "give --report-mode full" check-engine --events ${FULL_EVENTS} --trace ${WORK_DIR}/nolora.kvtb --gpu-blocks 64)
# Dynamo's sink may write .jsonl.gz: read through zlib, the same trace; a file cut short is named.
expect(0 "wrote 39 requests \\(14706 tokens, blocks of 64 tokens\\) from a Dynamo request trace"
       trace import ${CMAKE_CURRENT_LIST_DIR}/data/import/dynamo_request_trace_example.jsonl.gz --format dynamo
       -o ${WORK_DIR}/dynamo_gz.kvtb)
expect(1 "dynamo_request_trace_truncated.jsonl.gz:20: not valid gzip .*unexpected end of file"
       trace import ${CMAKE_CURRENT_LIST_DIR}/data/import/dynamo_request_trace_truncated.jsonl.gz --format dynamo
       -o ${WORK_DIR}/x.kvtb)
# Sessions inferred from prefixes (a trace without session fields), written and read back.
expect(0 "inferred sessions: 5057 requests continue an earlier one, 6974 start a session"
       trace convert ${TRACE} --infer-sessions -o ${WORK_DIR}/sessions.kvtb)
expect(0 "\"requests_with_a_parent\": 5057" trace stats --trace ${WORK_DIR}/sessions.kvtb --json -)
expect(1 "has session fields already" trace convert ${WORK_DIR}/sessions.kvtb --infer-sessions
       -o ${WORK_DIR}/again.kvtb)
expect(2 "--infer-sessions: 'mooncake' has no session fields" trace convert ${TRACE} --infer-sessions
       --to mooncake -o ${WORK_DIR}/x.jsonl)
# trace gen --session-fields: ids, parents (with sub-agents' fan-in), turns, kinds and tool_s,
# through kvtb and back
# unchanged; the requests' keys are the same without them for chat (agents run timed with them).
expect(0 "" trace gen --profile agent --requests 400 --seed 3 --session-fields -o ${WORK_DIR}/ag.jsonl --force)
file(READ ${WORK_DIR}/ag.jsonl ag)
foreach(want "\"kind\": \"tool\"" "\"tool_s\": [0-9]" "\"parent\": [0-9]" "\"kind\": \"agent\""
             "\"kind\": \"sub-agent\"" "\"parent\": \\[[0-9]+, [0-9]+")
  if(NOT ag MATCHES "${want}")
    message(FATAL_ERROR "trace gen --session-fields lacks ${want}")
  endif()
endforeach()
expect(0 "" trace convert ${WORK_DIR}/ag.jsonl -o ${WORK_DIR}/ag.kvtb)
expect(0 "" trace convert ${WORK_DIR}/ag.kvtb --to kvtk -o ${WORK_DIR}/ag2.jsonl)
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK_DIR}/ag.jsonl ${WORK_DIR}/ag2.jsonl
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "session fields changed through kvtb")
endif()
expect(0 "\"session_signals\": \"trace\"" replay --trace ${WORK_DIR}/ag.kvtb --index radix
       --policy session-ttl --capacity 200 --json -)
expect(2 "--session-fields: a Mooncake trace cannot hold them" trace gen --session-fields --to mooncake
       -o ${WORK_DIR}/x.jsonl)
# Fan-in: "parent" as an array of ids (the first is the one it continues), through kvtb and
# back unchanged; trace stats counts it; malformed lists are errors naming the element.
file(WRITE ${WORK_DIR}/fan.jsonl
"{\"arrival_s\": 0, \"input_length\": 10, \"session\": 1, \"id\": 7, \"hash_ids\": [1]}
{\"arrival_s\": 1, \"input_length\": 10, \"session\": 2, \"id\": 8, \"kind\": \"sub-agent\", \"hash_ids\": [2]}
{\"arrival_s\": 2, \"input_length\": 100, \"session\": 1, \"id\": 9, \"parent\": [ 7 , 8 ], \"hash_ids\": [1, 3]}
")
expect(0 "" trace convert ${WORK_DIR}/fan.jsonl --to kvtk -o ${WORK_DIR}/fan1.jsonl)
file(READ ${WORK_DIR}/fan1.jsonl fan1)
if(NOT fan1 MATCHES "\"parent\": \\[7, 8\\]")
  message(FATAL_ERROR "fan-in parents not written as a list:\n${fan1}")
endif()
expect(0 "" trace convert ${WORK_DIR}/fan1.jsonl -o ${WORK_DIR}/fan.kvtb)
expect(0 "" trace convert ${WORK_DIR}/fan.kvtb --to kvtk -o ${WORK_DIR}/fan2.jsonl)
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK_DIR}/fan1.jsonl ${WORK_DIR}/fan2.jsonl
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "fan-in parents changed through kvtb")
endif()
expect(0 "\"requests_with_several_parents\": 1" trace stats ${WORK_DIR}/fan.kvtb --json -)
function(bad_fan value why)
  file(WRITE ${WORK_DIR}/badfan.jsonl "{\"arrival_s\": 0, \"input_length\": 10, \"parent\": ${value}, \"hash_ids\": [1]}\n")
  expect(1 "badfan.jsonl:1: ${why}" trace stats ${WORK_DIR}/badfan.jsonl)
endfunction()
bad_fan("[]" "'parent' is an empty array")
bad_fan("[7, 7]" "'parent'\\[1\\] repeats request 7")
bad_fan("[7, -8]" "'parent'\\[1\\] must be a non-negative integer")
bad_fan("[7, 8.5]" "'parent'\\[1\\] must be an integer")
bad_fan("[7, \"8\"]" "'parent'\\[1\\] must be a non-negative integer")
bad_fan("[7, 18446744073709551615]" "'parent'\\[1\\] 2\\^64-1 is reserved")
file(WRITE ${WORK_DIR}/badtool.jsonl "{\"arrival_s\": 0, \"input_length\": 10, \"tool_s\": -1, \"hash_ids\": [1]}\n")
expect(1 "badtool.jsonl:1: 'tool_s' must be in \\[0, 1e9\\] seconds" trace stats ${WORK_DIR}/badtool.jsonl)
# SGLang 0.5.23's own recording of the same log (64 pages of 16 tokens): the same checks.
set(SGL_EVENTS ${CMAKE_CURRENT_LIST_DIR}/data/import/sglang_events_example.jsonl)
expect(0 "40 event batches: 550 blocks stored \\(the engine's misses\\), 507 removed"
       trace import ${SGL_EVENTS} --format sglang-events --to ids -o ${WORK_DIR}/sglang_misses.ids)
expect(2 "--format sglang-events: --engine must be sglang" trace import ${SGL_EVENTS} --format sglang-events
       --engine vllm --to ids -o ${WORK_DIR}/x.ids)
expect(0 "wrote 40 requests" trace import ${ILOG} -o ${WORK_DIR}/sglang_nolora.kvtb --engine sglang
       --field-lora no_lora --field-lora-path no_lora_path)
expect(0 "no divergence" check-engine --engine sglang --events ${SGL_EVENTS} --trace ${WORK_DIR}/sglang_nolora.kvtb
       --gpu-blocks 64)
expect(3 "first divergence: stored block #66" check-engine --engine sglang --events ${SGL_EVENTS}
       --trace ${WORK_DIR}/sglang_nolora.kvtb --gpu-blocks 60)
# Dynamo 1.6.1 relaying that vLLM recording as RouterEvents: the engine's keys only.
set(DYN_EVENTS ${CMAKE_CURRENT_LIST_DIR}/data/import/dynamo_events_example.jsonl)
expect(0 "40 event batches: 481 blocks stored" trace import ${DYN_EVENTS} --format dynamo-events --to ids
       -o ${WORK_DIR}/dynamo_misses.ids)
expect(2 "carry no token ids" trace import ${DYN_EVENTS} --format dynamo-events --keys derived --to ids
       -o ${WORK_DIR}/x.ids)
expect(0 "no divergence" check-engine --events ${DYN_EVENTS} --trace ${WORK_DIR}/nolora.kvtb --gpu-blocks 64
       --keys engine)
# A Dynamo request trace (DYN_REQUEST_TRACE records, tests/data/import/make_examples.py).
expect(0 "wrote 39 requests \\(14706 tokens, blocks of 64 tokens\\) from a Dynamo request trace"
       trace import ${CMAKE_CURRENT_LIST_DIR}/data/import/dynamo_request_trace_example.jsonl --format dynamo
       -o ${WORK_DIR}/dynamo.kvtb)
