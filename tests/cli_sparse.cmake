# kvtk sparse: decode-step records and generated patterns through the residency managers.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/cli_expect.cmake)
set(SP ${DATA}/../sparse)
expect(0 "--prefetch" sparse --help)
# tests/data/sparse/decode.jsonl, budget 3 pages, 1 sink, 1 recent, selection LRU, by hand:
#  a: step 0 selects {0,2,5} (all resident; 1,3,4 evicted); step 1 = layer groups {0,3} u {5,3}:
#     3 recalled, 2 evicted; step 2 selects {0,1,2,5}: 1 and 2 recalled, 3 evicted, 4 resident >
#     budget 3 with all of them selected or protected -> one over-budget step.
#  7: step 0 selects {0,3} (1 evicted, never selected, lowest position); step 4 selects {0,1,3}:
#     1 recalled, 2 evicted.  Recalls 3 + 1 = 4, hits 11, evictions 7, selections 15.
expect(0 "\"evictions\": 7,.*\"hits\": 11,.*\"over_budget_steps\": 1,.*\"recalls\": 4,.*\"selections\": 15,.*\"steps\": 5"
       sparse --trace ${SP}/decode.jsonl --budget 3 --sinks 1 --recent 1 --json -)
# The same file is a request trace to replay (decode records are passed over, and said so).
expect(0 "6 decode-step record\\(s\\) not used here" replay --trace ${SP}/decode.jsonl --capacity 10)
# Generated DSA pattern: the table and the JSON, lossy and offload, a grid over drift.
expect(0 "offload +selection-lru +256 +0.100" sparse --steps 300 --drift 0.1 --budget 256)
expect(0 "\"dropped_mass_fraction\": 0\\.[0-9]" sparse --steps 300 --manager lossy --scorer h2o
       --budget 64 --json -)
expect(0 "\"prefetch_hit_ratio\": 1\\.0" sparse --steps 300 --prefetch next-step --json -)
expect(0 "\"prefetch_hit_ratio\": 0\\.[0-9]" sparse --steps 300 --prefetch next-step:0.5 --json -)
expect(0 "job,request,step,context_blocks" sparse --steps 20 --csv -)
# Bad input: file:line and the reason (exit 1), bad options (exit 2).
expect(1 "bad_order.jsonl:3: step 2 of request a comes after step 3" sparse --trace ${SP}/bad_order.jsonl)
expect(1 "bad_index.jsonl:1: selected block 6 is not below context_blocks 6" sparse --trace ${SP}/bad_index.jsonl)
expect(1 "bad_weights.jsonl:1: 'weights' must be an array as long as 'selected'" sparse --trace ${SP}/bad_weights.jsonl)
expect(1 "no_request.jsonl:1: missing field 'request'" sparse --trace ${SP}/no_request.jsonl)
expect(1 "duplicate.jsonl:1: block 0 is selected twice" sparse --trace ${SP}/duplicate.jsonl)
expect(1 "no decode record" sparse --trace ${DATA}/small.kvtk.jsonl)
expect(1 "bad_type.jsonl:2: 'type' must be \"request\" or \"decode\"" replay --trace ${SP}/bad_type.jsonl)
expect(2 "--budget: '12parsecs': unit must be" sparse --budget 12parsecs)
expect(2 "--budget: '120%' is over 100%" sparse --budget 120%)
expect(2 "--scorer: unknown 'belady'" sparse --scorer belady)
expect(2 "--scorer quest ranks by a query" sparse --scorer quest)
expect(2 "--manager: 'magic'" sparse --manager magic)
expect(2 "--drift: '1.5' must be in \\[0, 1\\]" sparse --drift 1.5)
expect(2 "--prefetch: accuracy must be in \\[0, 1\\]" sparse --prefetch next-step:2)
expect(2 "--drift applies to generated patterns" sparse --trace ${SP}/decode.jsonl --drift 0.1)
expect(2 "no dram->hbm \\(h2d\\) fit" sparse --calibration ${DATA}/../calibration/host_only.json)
expect(0 "\"bytes_per_s\": 25000000000" sparse --steps 10 --calibration ${DATA}/../calibration/h2d.json --json -)
# --prefetch is a grid dimension of offload jobs (a lossy job runs once).
expect(0 "offload +selection-lru +256 +0.020 +none .*offload +selection-lru +256 +0.020 +next-step:0.5 .*lossy +selection-lru +256 +0.020 +- "
       sparse --steps 50 --manager offload,lossy --prefetch none,next-step:0.5)
expect(2 "--prefetch: 'later'" sparse --prefetch none,later)
# Review fixes: Quest selects exactly K pages per step (sinks and recent count within K); a trace's
# pages are its header's block size; its CSV shows the recorded steps; a huge token budget is
# unlimited (not wrapped); repeated steps and unknown record types are errors.
expect(0 "\"selections\": 320," sparse --pattern quest --steps 10 --context-blocks 500 --json -)
expect(0 "\"selections\": 320," sparse --pattern quest --steps 10 --context-blocks 500 --recent 3 --json -)
expect(0 "\"page_tokens\": 16" sparse --trace ${SP}/pages16.jsonl --json -)
expect(0 ",a,10,6,2," sparse --trace ${SP}/pages16.jsonl --csv -)
expect(2 "--page-tokens 64: the trace's pages are 16 tokens" sparse --trace ${SP}/pages16.jsonl --page-tokens 64)
expect(0 "\"evictions\": 0," sparse --steps 20 --budget 1e30tok --json -)
expect(1 "repeated_step.jsonl:2: step 0 of request a appears again without a new layer_group"
       sparse --trace ${SP}/repeated_step.jsonl)
expect(1 "bad_decode_type.jsonl:2: 'type' must be \"request\" or \"decode\"" sparse --trace ${SP}/bad_decode_type.jsonl)
expect(2 "more than the 4 GiB of patterns" sparse --steps 10000000 --requests 1000)
# Layer-ahead: the same recalls, less stall (each layer's share hides behind the previous layer).
execute_process(COMMAND ${KVTK} sparse --steps 200 --prefetch none,layer-ahead --json -
                RESULT_VARIABLE code OUTPUT_VARIABLE out)
string(JSON r0 GET "${out}" results 0 recalls)
string(JSON r1 GET "${out}" results 1 recalls)
string(JSON s0 GET "${out}" results 0 stall_s)
string(JSON s1 GET "${out}" results 1 stall_s)
string(JSON p1 GET "${out}" results 1 prefetch)
if(NOT code EQUAL 0 OR NOT p1 STREQUAL "layer-ahead" OR NOT r0 EQUAL r1 OR NOT r0 GREATER 0
   OR NOT s1 LESS s0)
  message(FATAL_ERROR "layer-ahead: want the same recalls and less stall: ${r0}/${s0} vs ${r1}/${s1}")
endif()
expect(2 "--prefetch layer-ahead needs --layers" sparse --steps 10 --prefetch layer-ahead
       --model ${DATA}/../models/deepseek-v3-mla.json)
