# kvtk simulate through the executable: example configs, overrides, outputs, bad input.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/cli_expect.cmake)
set(T ${TRACE})
set(C ${CMAKE_CURRENT_LIST_DIR}/../sim/configs)
expect(0 "--config" simulate --help)
foreach(cfg fig10_local fig10_global disaggregated colocated)
  expect(0 "\"block_hit_ratio\"" simulate --trace ${T} --config ${C}/${cfg}.json --json -)
endforeach()
expect(0 "\"router\": \"cache-aware\"" simulate --trace ${T} --config ${C}/fig10_local.json
       --set router=cache-aware --json -)
execute_process(COMMAND ${KVTK} simulate --trace ${T} --config ${C}/disaggregated.json
                --csv ${WORK_DIR}/r.csv RESULT_VARIABLE rc)
file(STRINGS ${WORK_DIR}/r.csv rows)
list(LENGTH rows n)
if(rc OR NOT n EQUAL 12032)
  message(FATAL_ERROR "expected 12,032 CSV rows (header + one per request), got ${n}")
endif()
# Same seed and config: identical JSON.
foreach(i 1 2)
  execute_process(COMMAND ${KVTK} simulate --trace ${T} --config ${C}/fig10_local.json
                  --set router=random --json ${WORK_DIR}/d${i}.json)
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK_DIR}/d1.json ${WORK_DIR}/d2.json
                RESULT_VARIABLE diff)
if(diff)
  message(FATAL_ERROR "simulate is not deterministic")
endif()
# Sparse attention with KV offload and recall (outputs capped to keep the Debug run short).
expect(0 "\"sparse\": {[^}]*\"recalls\": [1-9][0-9]*,[^}]*\"resident_pages\""
       simulate --trace ${T} --config ${C}/sparse_dsa.json --set max_output_tokens=16 --json -)
execute_process(COMMAND ${KVTK} simulate --trace ${T} --config ${C}/sparse_dsa.json
                --set max_output_tokens=4 --set sparse.prefetch=next-step --csv ${WORK_DIR}/s.csv
                RESULT_VARIABLE rc)
file(STRINGS ${WORK_DIR}/s.csv srows LIMIT_COUNT 1)
if(rc OR NOT srows MATCHES ",mean_tbt_s,recalls,stall_s$")
  message(FATAL_ERROR "sparse CSV: exit ${rc}, header '${srows}'")
endif()
expect(2 "config: 'sparse.scorer': unknown scorer 'lfu'" simulate --trace ${T}
       --config ${C}/sparse_dsa.json --set sparse.scorer=lfu)
expect(2 "config: 'sparse.pattern': unknown pattern 'nsa'" simulate --trace ${T}
       --set sparse.pattern=nsa)
expect(2 "config: 'sparse.prefetch': unknown mode 'always'" simulate --trace ${T}
       --set sparse.prefetch=always)
expect(2 "config: 'sparse.budget' must be" simulate --trace ${T} --set sparse.budget=0)
expect(2 "config: 'sparse.budget' must be" simulate --trace ${T} --set sparse.budget=150%)
expect(2 "config: 'sparse.budget' must be" simulate --trace ${T} --set sparse.budget=411111111111111111111111111111111111111111111111111111096tok)
# A custom model's or GPU's name must be a string (a number once escaped as a JSON type error).
expect(2 "config: the model's 'name' must be a string" simulate --trace ${T}
       "--set" "model={\"name\": 5, \"layers\": 28, \"hidden\": 3584, \"active_params\": 7e9, \"kv_bytes_per_token\": 57344}")
expect(2 "config: 'sparse.drift' must be a number in \\[0, 1\\]" simulate --trace ${T}
       --set sparse.drift=2)
expect(2 "config: 'sparse.page_tokens' must be >= 1" simulate --trace ${T}
       --set sparse.page_tokens=0)
expect(2 "config: unknown key 'sparse.pages'" simulate --trace ${T} --set sparse.pages=3)
expect(2 "config: unknown key 'routr'" simulate --trace ${T} --set routr=random)
expect(2 "unknown router 'nearest'" simulate --trace ${T} --set router=nearest)
expect(2 "unknown gpu 'b300'" simulate --trace ${T} --set gpu=b300)
expect(2 "cannot open '.*/none.json'" simulate --trace ${T} --config ${WORK_DIR}/none.json)
file(WRITE ${WORK_DIR}/ids.txt "1\n2\n3\n")
expect(2 "no arrival times" simulate --trace ${WORK_DIR}/ids.txt)
# Recorded decode-step selections drive their request's residency (the others are generated):
# tests/data/sparse/recorded.jsonl, budget 3 pages with 1 sink + 2 recent protected, request 0
# (5 pages) selects {0,2,4}, then {1} (recalled; 2 evicted), then {1,2} (2 recalled): 2 recalls.
expect(0 "\n0,0,0,[^\n]*,4,[0-9.e-]+,2,[0-9.e-]+\n1,[^\n]*,0,0\n"
       simulate --trace ${DATA}/../sparse/recorded.jsonl --set sparse={"budget":3} --csv -)
expect(0 "\"recorded_requests\": 1"
       simulate --trace ${DATA}/../sparse/recorded.jsonl --set sparse={"budget":3} --json -)
expect(2 "decode records of request 'a': simulate needs the 0-based index of a request line"
       simulate --trace ${DATA}/../sparse/decode.jsonl --set sparse={})
# Iteration timing (docs/simulate.md "Timing"): the formula's numbers in the summary; a measured
# table, relative to its config file, with --timing-table over the config's; bad tables and
# values are usage errors naming file:line and the reason.
expect(0 "\"timing\": {[^}]*\"compute_efficiency\": 0.67,[^}]*\"iteration_overhead_s\": 0.002,[^}]*\"memory_efficiency\": 0.8,[^}]*\"source\": \"formula\""
       simulate --trace ${T} --config ${C}/fig10_local.json --set iteration_overhead_s=0.002 --json -)
expect(0 "\"compute_efficiency\": 0.5,[^}]*\"memory_efficiency\": 0.5,"
       simulate --trace ${T} --config ${C}/fig10_local.json --set efficiency=0.5 --json -)
file(MAKE_DIRECTORY ${WORK_DIR}/cfg)
file(COPY_FILE ${C}/timing_example.csv ${WORK_DIR}/cfg/table.csv)
file(WRITE ${WORK_DIR}/cfg/table.json "{\"timing_table\": \"table.csv\", \"max_output_tokens\": 4}")
expect(0 "\"timing\": {.*\"file\": \"[^\"]*/cfg/table.csv\",.*\"prefill_rows\": 36,.*\"source\": \"table\""
       simulate --trace ${T} --config ${WORK_DIR}/cfg/table.json --json -)
file(WRITE ${WORK_DIR}/cfg/missing.json "{\"timing_table\": \"none.csv\", \"max_output_tokens\": 2}")
expect(2 "kvtk simulate: timing table [^\n]*/cfg/none.csv:0: cannot open the timing table"
       simulate --trace ${T} --config ${WORK_DIR}/cfg/missing.json)
expect(0 "\"file\": \"[^\"]*timing_example.csv\"" simulate --trace ${T}
       --config ${WORK_DIR}/cfg/missing.json --timing-table ${C}/timing_example.csv --json -)
file(WRITE ${WORK_DIR}/bad.csv "kind,batch,tokens_per_request,context_tokens,ms\nprefill,1,128,0,5\nprefill,1,256,0,-1\n")
expect(2 "timing table [^\n]*/bad.csv:3: 'ms' is negative: -1" simulate --trace ${T}
       --timing-table ${WORK_DIR}/bad.csv)
file(WRITE ${WORK_DIR}/header.csv "kind,batch,tokens,context,ms\n")
expect(2 "header.csv:1: the header must be exactly" simulate --trace ${T}
       --timing-table ${WORK_DIR}/header.csv)
file(WRITE ${WORK_DIR}/prefill_only.csv "kind,batch,tokens_per_request,context_tokens,ms\nprefill,1,128,0,5\n")
expect(2 "prefill_only.csv has no decode rows, and request [0-9]+ \\(0-based\\) decodes"
       simulate --trace ${T} --timing-table ${WORK_DIR}/prefill_only.csv)
expect(0 "\"source\": \"table\"" simulate --trace ${T} --timing-table ${WORK_DIR}/prefill_only.csv
       --set max_output_tokens=1 --json -)
# The engine schedulers check the table's kinds too (a missing kind was read out of bounds).
expect(2 "prefill_only.csv has no decode rows, and request [0-9]+ \\(0-based\\) decodes"
       simulate --trace ${T} --engine vllm --set model=qwen2.5-7b --set gpu=h100
       --timing-table ${WORK_DIR}/prefill_only.csv)
# Estimates of a whole prompt (conductor router, closed-loop think time) cost it in the chunks the
# engine runs: a table measured within an 8,192-token budget covers 23,141-token prompts.
file(WRITE ${WORK_DIR}/budget.csv "kind,batch,tokens_per_request,context_tokens,ms
prefill,1,512,0,10\nprefill,1,8192,0,100\nprefill,1,8192,65536,400\nprefill,1,512,65536,40
decode,1,1,1024,10\ndecode,256,1,1024,30\ndecode,1,1,131072,20\ndecode,256,1,131072,60\n")
expect(0 "\"ttft_s\"" simulate --trace ${T} --engine vllm --set model=qwen2.5-7b --set gpu=h100
       --set router=conductor --set prefill_instances=2 --set max_num_batched_tokens=8192
       --timing-table ${WORK_DIR}/budget.csv --json -)
expect(2 "num_gpu_blocks_override and the \\*_reserve_gib keys size an[ \n]+engine's KV cache"
       simulate --trace ${T} --set num_gpu_blocks_override=5000)
expect(2 "'compute_efficiency' must be a number in \\(0, 1\\]" simulate --trace ${T}
       --set compute_efficiency=2)
expect(2 "'iteration_overhead_s' must be in \\[0, 10\\]" simulate --trace ${T}
       --set iteration_overhead_s=1e300)

# Engine schedulers (docs/simulate.md "Engine schedulers"): --engine picks the accounting and the
# scheduler; the result records both, with the preemptions; bad pairs and impossible memory are
# usage errors naming the reason.
set(Q --set model=qwen2.5-7b --set gpu=h100 --set max_output_tokens=16)
expect(0 "\"preemptions\": [0-9]+,.*\"scheduler\": {[^}]*\"engine\": \"vllm\",[^}]*\"scheduler\": \"vllm-v1\""
       simulate --trace ${T} --engine vllm ${Q} --json -)
expect(0 "\"scheduler\": {[^}]*\"schedule_policy\": \"fcfs\",[^}]*\"scheduler\": \"sglang\""
       simulate --trace ${T} --engine sglang ${Q} --set schedule_policy=fcfs --json -)
expect(0 "\"scheduler\": \"vllm-v0\"" simulate --trace ${T} ${Q} --set scheduler=vllm-v0 --json -)
expect(0 "\"scheduler\": {[^}]*\"engine\": \"ideal\",[^}]*\"scheduler\": \"kvtk\"" simulate --trace ${T} ${Q} --json -)
expect(2 "unknown engine 'trtllm'" simulate --trace ${T} --engine trtllm)
expect(2 "engine vllm does not go with scheduler sglang" simulate --trace ${T} ${Q}
       --set scheduler=sglang --engine vllm)
expect(2 "unknown scheduler 'orca'" simulate --trace ${T} --set scheduler=orca)
expect(2 "has no KV blocks: 1 x h800 at gpu_memory_utilization 0.9 leave -[0-9.]+ GiB after the weights of deepseek-v3" simulate --trace ${T} --engine vllm)
expect(2 "does not combine with reject_over_slo" simulate --trace ${T} ${Q} --engine vllm --set reject_over_slo=true)
# The engine schedulers have DRAM tiers and disaggregation (docs/simulate.md).
expect(0 "\"dram_block_hits\": [1-9][0-9]*," simulate --trace ${T} ${Q} --engine vllm --set local_cache=1000 --set dram=20000 --json -)
expect(0 "\"prefill_to_decode\": [1-9]" simulate --trace ${T} ${Q} --engine sglang --set decode_instances=1 --json -)
# vLLM's own CPU offloading under vllm-v1 (docs/simulate.md "vLLM's own CPU offloading"): pinned
# counts of the conversation trace (deterministic), and specs simulate cannot run refused by name.
expect(0 "\"offload\": {[^}]*\"chunks_stored\": 191835,[^}]*\"cpu_hit_blocks\": 71729,[^}]*\"loads\": 3685,"
       simulate --trace ${T} ${Q} --engine vllm --set local_cache=1000 --set offload=cpu:20000:lru --json -)
expect(2 "'host:2x'[ \n]+\\(SGLang's[ \n]+HiCache\\)[ \n]+needs[ \n]+scheduler[ \n]+sglang" simulate --trace ${T} ${Q} --engine vllm --set offload=host:2x)
# LMCache under vllm-v1: pinned counts with and without its local disk; other schedulers refused.
expect(0 "\"offload\": {[^}]*\"chunks_stored\": 191844,[^}]*\"cpu_hit_blocks\": 71732,"
       simulate --trace ${T} ${Q} --engine vllm --set local_cache=1000 --set offload=lmcache-cpu:20000,chunk_size=512 --json -)
expect(0 "\"disk\": {[^}]*\"chunks_stored\": 191926,[^}]*\"hit_blocks\": 58595,"
       simulate --trace ${T} ${Q} --engine vllm --set local_cache=1000 --set offload=lmcache-cpu:4000,chunk_size=512,disk=20000 --json -)
# Dynamo KVBM under vllm-v1: pinned counts of G2 and G3; the disk rate refused without a disk,
# and by replay (it has no clock).
expect(0 "\"disk\": {[^}]*\"hit_blocks\": 33176,[^}]*\"stored_blocks\": 26190[^}]*}[^}]*\"host\": {[^}]*\"hit_blocks\": 12482,"
       simulate --trace ${T} ${Q} --engine vllm --set local_cache=1000 --set offload=kvbm:4000,disk=20000 --json -)
expect(2 "time[ \n]+the[ \n]+disk[ \n]+tier:[ \n]+give[ \n]+disk=SIZE" simulate --trace ${T} ${Q} --engine vllm
       --set offload=kvbm:4000,disk_gb_per_s=5)
expect(2 "replay[ \n]+counts[ \n]+blocks,[ \n]+not[ \n]+time" replay --trace ${T} --engine vllm --capacity 300
       --offload kvbm:4000,disk=2000,disk_latency_us=50)
expect(2 "\\(Dynamo[ \n]+KVBM\\)[ \n]+needs[ \n]+scheduler[ \n]+vllm-v1" simulate --trace ${T} ${Q} --engine sglang
       --set offload=kvbm:100)
expect(2 "\\(LMCache\\)[ \n]+needs[ \n]+scheduler[ \n]+vllm-v1" simulate --trace ${T} ${Q} --engine sglang
       --set offload=lmcache-cpu:100,chunk_size=512)
# SGLang's HiCache under the sglang scheduler (docs/simulate.md "SGLang's HiCache"): pinned counts.
expect(0 "\"offload\": {[^}]*\"host_hit_blocks\": 63848,[^}]*\"host_stored_blocks\": 192343,"
       simulate --trace ${T} ${Q} --engine sglang --set local_cache=1000 --set offload=host:20000 --json -)
# Its L3 storage (storage=file) and prefetch: pinned counts, and what only simulate runs.
expect(0 "\"l3\": {[^}]*\"inserted_host_pages\": 48137,[^}]*\"pages_written\": 171228,"
       simulate --trace ${T} ${Q} --engine sglang --set local_cache=1000 --set offload=host:4000,storage=file --json -)
expect(2 "runs[ \n]+in[ \n]+kvtk[ \n]+simulate[ \n]+only" replay --trace ${T} --engine sglang --capacity 300
       --offload host:2x,storage=file)
expect(2 "the[ \n]+L3[ \n]+knobs[ \n]+need[ \n]+storage=file" simulate --trace ${T} ${Q} --engine sglang
       --set offload=host:100,prefetch_policy=timeout)
expect(2 "unknown[ \n]+prefetch_policy[ \n]+'fast'" simulate --trace ${T} ${Q} --engine sglang
       --set offload=host:100,storage=file,prefetch_policy=fast)
expect(2 "only[ \n]+SGLang's[ \n]+`file`[ \n]+backend" simulate --trace ${T} ${Q} --engine sglang
       --set offload=host:100,storage=s3)
expect(2 "needs[ \n]+scheduler[ \n]+vllm-v1" simulate --trace ${T} ${Q} --engine sglang --set offload=cpu:100)
expect(2 "unknown[ \n]+knob[ \n]+'sync_load_budget_bytes'" simulate --trace ${T} ${Q} --engine vllm
       --set offload=cpu:100,sync_load_budget_bytes=5)
expect(2 "does[ \n]+not[ \n]+combine[ \n]+with[ \n]+dram" simulate --trace ${T} ${Q} --engine vllm
       --set offload=cpu:100 --set dram=1000)
# A trace may leave requests untimed (NaN in kvtb, no timestamp in JSONL); simulate cannot place
# them and names the first one.
file(WRITE ${WORK_DIR}/untimed.jsonl "{\"timestamp\": 0, \"input_length\": 16, \"hash_ids\": [1], \"output_length\": 2}\n{\"input_length\": 16, \"hash_ids\": [2], \"output_length\": 2}\n")
expect(2 "request[ \n]+1[ \n]+of[ \n]+the[ \n]+trace[ \n]+\\(counting[ \n]+from[ \n]+0\\)[ \n]+has[ \n]+no[ \n]+arrival[ \n]+time" simulate --trace ${WORK_DIR}/untimed.jsonl --block-tokens 16)
expect(2 "request[ \n]+1[ \n]+of[ \n]+the[ \n]+trace[ \n]+\\(counting[ \n]+from[ \n]+0\\)[ \n]+has[ \n]+no[ \n]+arrival[ \n]+time" simulate --trace ${WORK_DIR}/untimed.jsonl --block-tokens 16 --engine vllm)
# Engine memory (docs/simulate.md "Engine memory and pages"): the capacity and its derivation
# in the summary; a timing table query far outside its points is a usage error naming it.
expect(0 "\"kv_capacity\": {[^}]*\"block_tokens\": 16,[^}]*\"source\": \"num_gpu_blocks_override\""
       simulate --trace ${T} --engine vllm --set num_gpu_blocks_override=20000 --set page_tokens=16
       --set max_output_tokens=1 --json -)
expect(2 "'page_tokens' \\(100\\) must divide the trace's block size \\(512" simulate --trace ${T}
       --engine vllm --set page_tokens=100)
file(WRITE ${WORK_DIR}/short.csv "kind,batch,tokens_per_request,context_tokens,ms\nprefill,1,128,0,5\nprefill,1,256,0,9\n")
expect(2 "timing table [^\n]*short.csv: a prefill iteration of batch 1, [0-9]+ tokens per request at context 0 is far outside the measured points"
       simulate --trace ${T} --timing-table ${WORK_DIR}/short.csv --set max_output_tokens=1)
# A JSONL trace streams through a temporary kvtb; where the temporary directory cannot be used,
# it is read into memory instead, with a warning, and the run goes on.
set(saved_tmpdir "$ENV{TMPDIR}")
set(ENV{TMPDIR} ${WORK_DIR}/no-such-dir)
expect(0 "\"ttft_s\".*could not stream the trace through a temporary file"
       simulate --trace ${T} --set max_output_tokens=4 --json -)
set(ENV{TMPDIR} "${saved_tmpdir}")
