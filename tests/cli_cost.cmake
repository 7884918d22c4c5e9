# kvtk cost and --pricing through the executable.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/cli_expect.cmake)
set(T ${TRACE})
expect(0 "--pricing" cost --help)
# DeepSeek's day-6 disclosure at R1 prices: $562,100 (stated: $562,027 from unrounded counts).
expect(0 "bill with cache +562100.00 USD.*bill without cache +702320.00 USD.*saving +140220.00"
       cost --hit-tokens 342e9 --miss-tokens 266e9 --output-tokens 168e9 --pricing deepseek-r1)
expect(0 "\"bill_usd\": 562100" cost --hit-tokens 342e9 --input-tokens 608e9 --output-tokens 168e9
       --pricing deepseek-r1 --json -)
expect(0 "self-hosted: .* GPU-hours saved" cost --hit-tokens 1e9 --miss-tokens 1e9
       --model deepseek-v3 --gpu h800)
# Replay and simulate attach costs; cost reads their JSON back.
execute_process(COMMAND ${KVTK} replay --trace ${T} --capacity 1000,10000 --pricing deepseek-v3
                --json ${WORK_DIR}/r.json RESULT_VARIABLE rc)
file(READ ${WORK_DIR}/r.json json)
if(rc OR NOT json MATCHES "\"cost\": {" OR NOT json MATCHES "\"output_tokens\": 4")
  message(FATAL_ERROR "replay --pricing lacks cost or output tokens:\n${json}")
endif()
expect(0 "radix lru @ 10000 blocks:.*saving" cost --from ${WORK_DIR}/r.json --pricing deepseek-v3)
expect(0 "\"estimates\"" cost --from ${WORK_DIR}/r.json --per-day --json -)
# A tiered replay with a priced DRAM tier: its rent over the trace's span is subtracted.
execute_process(COMMAND ${KVTK} replay --trace ${T} --tier-config ${CMAKE_CURRENT_LIST_DIR}/data/tiers/three.json
                --model deepseek-v3 --json ${WORK_DIR}/t.json RESULT_VARIABLE rc)
expect(0 "\"tier_rent_usd\": [0-9.]+[1-9]" cost --from ${WORK_DIR}/t.json --model deepseek-v3 --gpu h800 --json -)
# An engine offload tier priced in its spec (vLLM's CPU tier at 2.5 USD/GB-month): its rent too.
execute_process(COMMAND ${KVTK} replay --trace ${T} --engine vllm --capacity 2000 --no-opt
                --offload cpu:8000:lru:2.5 --model deepseek-v3 --json ${WORK_DIR}/o.json
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "replay --offload failed")
endif()
expect(0 "\"tier_rent_usd\": [0-9.]+[1-9]" cost --from ${WORK_DIR}/o.json --model deepseek-v3 --gpu h800 --json -)
execute_process(COMMAND ${KVTK} simulate --trace ${T} --set local_cache=3Mtok --pricing deepseek-v3.2
                --json ${WORK_DIR}/s.json RESULT_VARIABLE rc)
expect(0 "\"flops_exact\": true" cost --from ${WORK_DIR}/s.json --model deepseek-v3 --gpu h800 --json -)
execute_process(COMMAND ${KVTK} mrc --trace ${T} --json ${WORK_DIR}/m.json RESULT_VARIABLE rc)
expect(0 "\"break_even_capacity_blocks\"" cost --from ${WORK_DIR}/m.json --model deepseek-v3
       --gpu h800 --usd-per-gb-month 5 --json -)
# A price table from a file.
file(WRITE ${WORK_DIR}/p.json "{\"name\": \"mine\", \"hit\": 0.1, \"miss\": 1.0, \"output\": 2.0, \"valid_from\": \"2026-01-01\"}")
expect(0 "\"bill_usd\": 3.1" cost --hit-tokens 1e6 --miss-tokens 1e6 --output-tokens 1e6
       --pricing ${WORK_DIR}/p.json --json -)
# Bad input.
expect(2 "unknown price table 'gpt-5'" cost --hit-tokens 1 --miss-tokens 1 --pricing gpt-5)
expect(2 "exceeds --input-tokens" cost --hit-tokens 10 --input-tokens 5)
expect(2 "token counts must be in \\[0, 1e18\\], got -5" cost --hit-tokens=-5 --miss-tokens 1)
expect(2 "give either" cost)
expect(2 "unknown price table 'nope'" replay --trace ${T} --pricing nope)
file(WRITE ${WORK_DIR}/bad.json "{\"hit\": 2, \"miss\": 1, \"output\": 1}")
expect(2 "a cache hit costs more than a miss" cost --hit-tokens 1 --miss-tokens 1 --pricing ${WORK_DIR}/bad.json)
# The off-peak window's ends are "HH:MM" strings; a number is refused by name (a fuzz crash once).
file(WRITE ${WORK_DIR}/offpeak.json "{\"hit\": 0.1, \"miss\": 1, \"output\": 1, \"offpeak_discount\": 0.5, \"offpeak_start_utc\": 0.27}")
expect(2 "'offpeak_start_utc' must be a string" cost --hit-tokens 1 --miss-tokens 1 --pricing ${WORK_DIR}/offpeak.json)
file(WRITE ${WORK_DIR}/offpeak.json "{\"hit\": 0.1, \"miss\": 1, \"output\": 1, \"offpeak_discount\": 0.5, \"offpeak_end_utc\": \"25:00\"}")
expect(2 "offpeak_end_utc: '25:00' is not HH:MM" cost --hit-tokens 1 --miss-tokens 1 --pricing ${WORK_DIR}/offpeak.json)

# --hit-ratio R with --input-tokens N: the same day-6 bill (342/608 = 0.5625).
expect(0 "\"bill_usd\": 562100" cost --hit-ratio 0.5625 --input-tokens 608e9 --output-tokens 168e9
       --pricing deepseek-r1 --json -)
expect(2 "--hit-tokens: 0.56 is not a whole number of tokens .*--hit-ratio" cost --hit-tokens 0.56 --input-tokens 100)
expect(2 "--hit-ratio: must be in \\[0, 1\\]" cost --hit-ratio 1.5 --input-tokens 100)
expect(2 "--hit-ratio goes with --input-tokens alone" cost --hit-ratio 0.5 --hit-tokens 1 --input-tokens 100)
# A simulate result has a span: --per-day works with it, and GPU-seconds = instance-seconds x GPUs.
expect(0 "" simulate --trace ${TRACE} --set gpus_per_instance=2 --set local_cache=20000 --json ${WORK_DIR}/sim.json)
expect(0 "\"days\": 1" cost --from ${WORK_DIR}/sim.json --per-day --model deepseek-v3 --gpu h800 --json -)
file(READ ${WORK_DIR}/sim.json sim)
string(JSON inst GET "${sim}" result prefill_instance_s_saved)
string(JSON gpus GET "${sim}" result prefill_gpu_s_saved)
if(NOT inst GREATER 0 OR NOT gpus GREATER inst)
  message(FATAL_ERROR "prefill_gpu_s_saved ${gpus} should be 2 x prefill_instance_s_saved ${inst}")
endif()
