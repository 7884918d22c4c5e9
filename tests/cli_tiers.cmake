# kvtk replay --tiers / --tier-config: equivalences, per-tier JSON, config files, bad input.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/cli_expect.cmake)
set(T ${TRACE})
set(D ${CMAKE_CURRENT_LIST_DIR}/data/tiers)

# One tier = the flat index; exclusive LRU over LRU = one LRU of the summed capacity (60,921 hits
# on the conversation trace at 10,000 blocks, partial blocks cached).
expect(0 "tiers,hbm:lru:10000,10000,12031,288500,60921,144793823,31174981,"
       replay --trace ${T} --tiers hbm:10000:lru --partial-block cache --csv -)
expect(0 "tiers,hbm:lru:2500>dram:lru:7500,10000,12031,288500,60921,144793823,31174981,"
       replay --trace ${T} --tiers hbm:2500:lru,dram:7500:lru --partial-block cache --csv -)
# With --capacity the grid runs beside the hierarchies; repeated --tiers compare hierarchies.
expect(0 "tiers,hbm:lru:10000,.*tiers,hbm:arc:3000>dram:s3fifo:7000,.*radix,lru,10000,"
       replay --trace ${T} --tiers hbm:10000:lru --tiers hbm:3000:arc,dram:7000:s3fifo
       --capacity 10000 --csv - --no-opt)

# Per-tier JSON with bytes (deepseek-v3: 70,272 B/token x 512 = 35,979,264 B/block) and the
# default link figures for dram.
execute_process(COMMAND ${KVTK} replay --trace ${T} --tiers hbm:2GiB:lru,dram:16GiB:lru
                --model deepseek-v3 --json ${WORK_DIR}/t.json RESULT_VARIABLE rc)
file(READ ${WORK_DIR}/t.json json)
foreach(field "\"block_bytes\": 35979264" "\"read_bytes_per_s\": 50000000000" "\"promotions\""
        "\"cumulative_block_hit_ratio\"" "\"bytes_up\"" "\"load_time\"" "\"mean_s\"" "\"demotions\""
        "\"hierarchy\": \"hbm:lru:59>dram:lru:477\"")
  if(rc OR NOT json MATCHES "${field}")
    message(FATAL_ERROR "tier JSON lacks ${field}:\n${json}")
  endif()
endforeach()
# The table names every tier.
expect(0 "tiers hbm:lru:59>dram:lru:477 \\(exclusive, write-back\\).*\n  hbm .*\n  dram "
       replay --trace ${T} --tiers hbm:2GiB:lru,dram:16GiB:lru --model deepseek-v3)

# A config file equals the flags that say the same; endurance appears for the ssd tier.
execute_process(COMMAND ${KVTK} replay --trace ${T} --tier-config ${D}/three.json --csv -
                OUTPUT_VARIABLE a RESULT_VARIABLE rc1)
execute_process(COMMAND ${KVTK} replay --trace ${T} --tiers hbm:1000:lru,dram:4000:arc,ssd:20000:s3fifo
                --inclusive --write-policy write-through --admission frequency:2 --csv -
                OUTPUT_VARIABLE b RESULT_VARIABLE rc2)
string(REGEX REPLACE ",[^,\n]*,[^,\n]*\n" "\n" a "${a}")
string(REGEX REPLACE ",[^,\n]*,[^,\n]*\n" "\n" b "${b}")
if(rc1 OR rc2 OR NOT a STREQUAL b)
  message(FATAL_ERROR "config file and flags differ:\n${a}\n---\n${b}")
endif()
expect(0 "\"endurance_used\"" replay --trace ${T} --tier-config ${D}/three.json --model deepseek-v3 --json -)
# dram: 4,000 blocks x 35,979,264 B = 143.9 GB at $3/GB-month.
expect(0 "\"usd_per_month\": 431\\.75" replay --trace ${T} --tier-config ${D}/three.json --model deepseek-v3 --json -)

# A radix top tier (--tier-top radix, or --index radix alone): one tier = radix replay, counts
# equal to the radix grid's at the same capacity; the JSON says which top it was.
foreach(top "--tier-top;radix" "--index;radix")
  execute_process(COMMAND ${KVTK} replay --trace ${T} ${top} --tiers hbm:10000:lru --partial-block cache
                  --csv - OUTPUT_VARIABLE a RESULT_VARIABLE rc1)
  execute_process(COMMAND ${KVTK} replay --trace ${T} --index radix --policy lru --capacity 10000
                  --partial-block cache --no-opt --csv - OUTPUT_VARIABLE b RESULT_VARIABLE rc2)
  string(REGEX MATCH "tiers,hbm:lru:10000,10000,([0-9]+,[0-9]+,[0-9]+,[0-9]+,[0-9]+)," ma "${a}")
  set(ca "${CMAKE_MATCH_1}")
  string(REGEX MATCH "radix,lru,10000,([0-9]+,[0-9]+,[0-9]+,[0-9]+,[0-9]+)," mb "${b}")
  set(cb "${CMAKE_MATCH_1}")
  if(rc1 OR rc2 OR ca STREQUAL "" OR NOT ca STREQUAL cb)
    message(FATAL_ERROR "one-tier radix hierarchy (${top}) != radix replay:\n${a}\n---\n${b}")
  endif()
endforeach()
expect(0 "\"top_tier\": \"radix\"" replay --trace ${T} --index radix
       --tiers hbm:1000:reuse,dram:4000:lru,ssd:20000:s3fifo --json -)
expect(0 "tiers hbm:reuse:1000>dram:lru:4000 \\(radix top tier, exclusive, write-back\\)"
       replay --trace ${T} --tier-top radix --tiers hbm:1000:reuse,dram:4000:lru)
expect(0 "\"top_tier\": \"flat\"" replay --trace ${T} --index flat,radix --tiers hbm:1000:lru --json -)
expect(2 "radix top tier; --tier-top flat for a flat one.*radix leaf policy 'arc'"
       replay --trace ${T} --index radix --tiers hbm:1000:arc)
expect(2 "radix top tier.*inclusive" replay --trace ${T} --tier-top radix
       --tiers hbm:1000:lru,dram:4000:lru --inclusive)
expect(2 "radix top tier.*belady" replay --trace ${T} --tier-top radix --tiers hbm:1000:belady)
expect(2 "--tier-top: unknown top tier 'tree'" replay --trace ${T} --tier-top tree --tiers hbm:1000:lru)
# An engine's GPU cache on top (--tier-top vllm|sglang): one tier counts as --engine at the same
# capacity; refused: another policy on top, --partial-block cache, inclusive tiers.
foreach(engine vllm sglang)
  execute_process(COMMAND ${KVTK} replay --trace ${T} --tier-top ${engine} --tiers hbm:3000:${engine}
                  --csv - OUTPUT_VARIABLE a RESULT_VARIABLE rc1)
  execute_process(COMMAND ${KVTK} replay --trace ${T} --engine ${engine} --capacity 3000
                  --no-opt --csv - OUTPUT_VARIABLE b RESULT_VARIABLE rc2)
  string(REGEX MATCH "tiers,hbm:${engine}:3000,3000,([0-9]+,[0-9]+,[0-9]+,[0-9]+,[0-9]+)," ma "${a}")
  set(ca "${CMAKE_MATCH_1}")
  string(REGEX MATCH ",3000,([0-9]+,[0-9]+,[0-9]+,[0-9]+,[0-9]+)," mb "${b}")
  set(cb "${CMAKE_MATCH_1}")
  if(rc1 OR rc2 OR ca STREQUAL "" OR NOT ca STREQUAL cb)
    message(FATAL_ERROR "one-tier ${engine} hierarchy != --engine ${engine}:\n${a}\n---\n${b}")
  endif()
endforeach()
expect(0 "tiers hbm:vllm:1000>dram:lru:4000 \\(vllm top tier, exclusive, write-back\\)"
       replay --trace ${T} --tier-top vllm --tiers hbm:1000:vllm,dram:4000:lru)
expect(0 "\"engine\": \"sglang\",.*\"unscheduled_requests\".*\"top_tier\": \"sglang\""
       replay --trace ${T} --tier-top sglang --tiers hbm:1000:sglang,dram:4000:lru --json -)
expect(2 "the vllm engine's GPU cache on top.*the engine tier's policy 'lru' is not its engine 'vllm'"
       replay --trace ${T} --tier-top vllm --tiers hbm:1000:lru,dram:4000:lru)
expect(2 "--tier-top sglang: the engine caches full blocks only"
       replay --trace ${T} --tier-top sglang --tiers hbm:1000:sglang --partial-block cache)
expect(2 "only exclusive write-back" replay --trace ${T} --tier-top vllm
       --tiers hbm:1000:vllm,dram:4000:lru --inclusive)
# vLLM's own CPU offloading under its pool (--engine vllm --offload): the per-tier table, the GPU
# tier hitting as --engine alone does, the flags for the best row, and refusals by name.
expect(0 "offload cpu:4000:lru under vllm GPU 1000 blocks.*\n  gpu +vllm +1000 +([0-9]+) .*\n  cpu +lru +4000 .*vLLM flags for the best offload row.*OffloadingConnector.*KvtkS3FIFO"
       replay --trace ${T} --engine vllm --capacity 1000 --offload cpu:4000:lru
       --offload cpu:4000:kvtk-s3fifo --no-opt)
expect(0 "cpu_bytes_to_use[^0-9]+143917056000"
       replay --trace ${T} --engine vllm --capacity 1000 --offload cpu:4000:lru --model deepseek-v3
       --no-opt --json -)
expect(2 "--offload 'cpu:4000:lru': .*add[ \n]+--engine[ \n]+vllm" replay --trace ${T} --offload cpu:4000:lru)
expect(2 "unknown knob 'chunk_size'" replay --trace ${T} --engine vllm --offload cpu:4000:lru,chunk_size=256)
expect(2 "below one offloaded block" replay --trace ${T} --engine vllm --offload cpu:1:lru,block_size=1024)
expect(2 "unknown medium 'disk'" replay --trace ${T} --engine vllm --offload disk:4000:lru)
expect(2 "not a positive multiple of the GPU block" replay --trace ${T} --engine vllm
       --offload cpu:4000:lru,block_size=100)
expect(2 "unknown policy 'nosuch'" replay --trace ${T} --engine vllm --offload cpu:4000:nosuch)
# SGLang 0.5.23's HiCache under its radix cache (--engine sglang --offload host:...): counts pinned
# on the conversation trace, device 300 pages, host 601 (--hicache-ratio 2), each write policy;
# tools/engine-check/sglang_hicache.sh gets the same from SGLang's own code (docs/tiers.md).
expect(0 "host_evicted_blocks.: 263874,.*host_hit_blocks.: 113,.*host_stored_blocks.: 264287"
       replay --trace ${T} --engine sglang --capacity 300 --offload host:2x --no-opt --json -)
expect(0 "host_evicted_blocks.: 0,.*host_hit_blocks.: 859,.*host_stored_blocks.: 62"
       replay --trace ${T} --engine sglang --capacity 300 --no-opt --json -
       --offload host:601,write_policy=write_through_selective)
expect(0 "device  *sglang  *300  *12091 .*\n  host  *lru  *601  *484  *484  *264103  *263519.*SGLang flags for the best HiCache row.*--hicache-write-policy write_back --hicache-ratio 2"
       replay --trace ${T} --engine sglang --capacity 300 --no-opt
       --offload host:601,write_policy=write_back)
expect(2 "--offload 'host:2x': .*add[ \n]+--engine[ \n]+sglang" replay --trace ${T} --engine vllm --offload host:2x)
expect(2 "unknown[ \n]+write_policy[ \n]+'write_around'" replay --trace ${T} --engine sglang
       --offload host:2x,write_policy=write_around)
expect(2 "unknown[ \n]+knob[ \n]+'hicache_io_backend'" replay --trace ${T} --engine sglang
       --offload host:2x,hicache_io_backend=direct)
expect(2 "unknown[ \n]+policy[ \n]+'lfu'.*lru" replay --trace ${T} --engine sglang --offload host:2x:lfu)
expect(2 "not[ \n]+a[ \n]+ratio[ \n]+of[ \n]+the[ \n]+device[ \n]+pool" replay --trace ${T} --engine sglang --offload host:-2x)
# LMCache 0.5.6's local CPU backend under vLLM's pool (--engine vllm --offload lmcache-cpu:...):
# counts pinned on the conversation trace (chunks of one and two 512-token blocks). These are
# kvtk's own figures, pinned against regressions; tools/engine-check/lmcache_connector.sh checks
# the same rules against vLLM + LMCache's own code on other configurations (docs/tiers.md).
expect(0 "lmcache-cpu +lru +4000 +12875 +12875 +250628 +246628.*lmcache-cpu +lfu +4000 +11429 +5966 +128583 +126583.*LMCacheConnectorV1.*lmcache.cache_policy.:.LRU"
       replay --trace ${T} --engine vllm --capacity 1000 --no-opt
       --offload lmcache-cpu:4000:lru,chunk_size=512 --offload lmcache-cpu:4000:lfu,chunk_size=1024)
expect(2 "chunk_size=256[ \n]+is[ \n]+not[ \n]+a[ \n]+positive[ \n]+multiple" replay --trace ${T} --engine vllm
       --offload lmcache-cpu:4000)
expect(2 "unknown[ \n]+policy[ \n]+'arc'.*lru[ \n]+mru[ \n]+fifo[ \n]+lfu" replay --trace ${T} --engine vllm
       --offload lmcache-cpu:4000:arc,chunk_size=512)
expect(2 "unknown[ \n]+knob[ \n]+'local_disk'.*disk" replay --trace ${T} --engine vllm
       --offload lmcache-cpu:4000:lru,chunk_size=512,local_disk=1)
expect(2 "below[ \n]+one[ \n]+chunk" replay --trace ${T} --engine vllm
       --offload lmcache-cpu:1:lru,chunk_size=1024)
# With the local disk (disk=SIZE): a disk row, its hits promoted into the CPU's stores, the
# disk flags; the same rules checked against LMCache's own disk backend by lmcache_connector.sh.
expect(0 "lmcache-cpu +lru +400 +14 +14 +260550 +263934.*disk +lru +2000 +3784 +3784 +260550 +258550.*lmcache.local_disk.*lmcache.max_local_disk_size.:54.6875"
       replay --trace ${T} --engine vllm --capacity 300 --no-opt --model qwen2.5-7b
       --offload lmcache-cpu:400:lru,chunk_size=512,disk=2000)
expect(2 "the[ \n]+disk[ \n]+size[ \n]+1[ \n]+.1[ \n]+GPU[ \n]+blocks.[ \n]+is[ \n]+below[ \n]+one[ \n]+chunk" replay --trace ${T} --engine vllm
       --offload lmcache-cpu:400:lru,chunk_size=1024,disk=1)
expect(2 "the[ \n]+disk[ \n]+size:" replay --trace ${T} --engine vllm
       --offload lmcache-cpu:400:lru,chunk_size=512,disk=lots)
# Where LMCache itself would not go on, the text says so (its retrieve's busy loop; its disk
# LFU's KeyError), as the engine check saw on these sizes.
expect(0 "warning:[ \n]+[0-9]+[ \n]+loads[ \n]+need[ \n]+CPU[ \n]+staging" replay --trace ${T} --engine vllm
       --capacity 300 --no-opt --offload lmcache-cpu:5:lru,chunk_size=512,disk=400)
execute_process(COMMAND ${KVTK} trace gen --profile chat --requests 600 --block-tokens 16 --to mooncake
                -o ${WORK_DIR}/chat16.jsonl --force RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
# LFU on a small disk meets a chunk still being written: LMCache's KeyError, at this request
# (the engine check saw the same stop on a longer trace); the flags then come from the other row.
expect(0 "lmcache-cpu:640:lfu.*warning:[ \n]+7[ \n]+stores.*KeyError.*first[ \n]+at[ \n]+request[ \n]+172.*best[ \n]+offload[ \n]+row[ \n]+.lmcache-cpu:640:lru"
       replay --trace ${WORK_DIR}/chat16.jsonl --block-tokens 16 --engine vllm --capacity 300 --no-opt
       --offload lmcache-cpu:640:lfu,chunk_size=256,disk=1920 --offload lmcache-cpu:640:lru,chunk_size=256)
expect(0 "\"name\": \"disk\",[^}]*\"usd_per_month\": 93.95" replay --trace ${T} --engine vllm --capacity 2000
       --no-opt --model qwen2.5-7b --offload kvbm:16000,disk=64000,disk_usd=0.05 --json -)
expect(2 "disk_usd[ \n]+prices[ \n]+the[ \n]+disk[ \n]+tier" replay --trace ${T} --engine vllm
       --offload kvbm:16000,disk_usd=0)
expect(2 "disk_usd[ \n]+prices[ \n]+the[ \n]+disk[ \n]+tier" replay --trace ${T} --engine vllm
       --offload lmcache-cpu:400:lru,chunk_size=512,disk_usd=0.1)
expect(0 "\"name\": \"disk\",[^}]*\"usd_per_month\": 5.87" replay --trace ${T} --engine vllm --capacity 300
       --no-opt --model qwen2.5-7b --offload lmcache-cpu:400:lru,chunk_size=512,disk=2000,disk_usd=0.1 --json -)
# Dynamo KVBM 1.6.1 under vLLM's pool (--offload kvbm:HOST[,disk=N][,disk_filter=on|off]):
# kvtk's own counts on the conversation trace, pinned against regressions (the rules are written
# from KVBM's code, not run against it: docs/tiers.md), the env and flags, refusals by name.
expect(0 "host +lru +16000 +59720 +59720 +194895 +178895.*disk +lru +64000 +5707 +5707 +6261 +0.*disk +lru +64000 +87833 +87833 +172716 +108716.*DYN_KVBM_DISK_CACHE_OVERRIDE_NUM_BLOCKS=64000 vllm serve MODEL.*DynamoConnector"
       replay --trace ${T} --engine vllm --capacity 2000 --no-opt
       --offload kvbm:16000,disk=64000 --offload kvbm:0,disk=64000)
expect(2 "unknown[ \n]+knob[ \n]+'min_lfu_count'" replay --trace ${T} --engine vllm
       --offload kvbm:1000,min_lfu_count=8)
expect(2 "disk_filter='maybe'[ \n]+is[ \n]+not[ \n]+on[ \n]+or[ \n]+off" replay --trace ${T} --engine vllm
       --offload kvbm:1000,disk=10,disk_filter=maybe)
expect(2 "give[ \n]+a[ \n]+host[ \n]+size" replay --trace ${T} --engine vllm --offload kvbm:0)
expect(2 "the[ \n]+disk[ \n]+size" replay --trace ${T} --engine vllm --offload kvbm:100,disk=)
expect(2 "disk_filter[ \n]+is[ \n]+the[ \n]+host[ \n]+->[ \n]+disk[ \n]+filter" replay --trace ${T} --engine vllm
       --offload kvbm:1000,disk_filter=off)
expect(2 "unknown[ \n]+policy[ \n]+'arc'" replay --trace ${T} --engine vllm --offload kvbm:1000:arc)
# belady needs next uses, which a flat hierarchy does not have: refused, not LRU in disguise.
expect(2 "belady is offline" replay --trace ${T} --tiers hbm:1000:belady)

# Bad hierarchies: usage errors naming the tier and the reason.
expect(2 "'hbm:10' is not name:capacity:policy.:usd_per_gb_month." replay --trace ${T} --tiers hbm:10)
expect(2 "tier dram: unknown policy 'mru'" replay --trace ${T} --tiers hbm:10:lru,dram:20:mru)
expect(2 "tier dram: an inclusive tier must be at least as large" replay --trace ${T}
       --tiers hbm:100:lru,dram:20:lru --inclusive)
expect(2 "write-through needs --inclusive" replay --trace ${T} --tiers hbm:10:lru,dram:20:lru
       --write-policy write-through)
expect(2 "--inclusive and --exclusive contradict" replay --trace ${T} --tiers hbm:10:lru
       --inclusive --exclusive)
expect(2 "--admission: 'sometimes'" replay --trace ${T} --tiers hbm:10:lru,dram:20:lru
       --admission sometimes)
expect(2 "--write-policy: write-through-selective:N needs a whole N >= 1" replay --trace ${T}
       --tiers hbm:10:lru --inclusive --write-policy write-through-selective:0)
expect(2 "give --model" replay --trace ${T} --tiers hbm:1GiB:lru)
expect(2 "tier hbm lacks 'capacity'" replay --trace ${T} --tier-config ${D}/no_capacity.json)
expect(2 "cannot open '.*/none.json'" replay --trace ${T} --tier-config ${D}/none.json)

# A per-tier price in --tiers reaches the per-tier report and kvtk cost; --usd-per-gb-month does
# not silently apply to tier results.
# 20,000 blocks x 512 tokens x 70,272 B = 719.585 GB at 0.0697 USD/GB-month = 50.155 USD/month.
expect(0 "\"usd_per_month\": 50\\.1550940" replay --trace ${T} --model deepseek-v3
       --tiers hbm:1000:lru,dram:20000:arc:0.0697 --json -)
expect(0 "" replay --trace ${T} --model deepseek-v3
       --tiers hbm:1000:lru,dram:20000:arc:0.0697 --json ${WORK_DIR}/priced.json)
expect(2 "the price 'x' is not a number" replay --trace ${T} --tiers hbm:10:lru,dram:20:arc:x)
expect(2 "--usd-per-gb-month prices the capacity of a kvtk mrc curve" cost --from ${WORK_DIR}/priced.json
       --usd-per-gb-month 3)
# vLLM 0.33's fs secondary tier (--offload cpu:SIZE:lru,secondary=fs): pinned counts of the
# conversation trace, the TieringOffloadingSpec flags, and what it refuses by name.
expect(0 "\"fs_promoted_chunks\": 93435,[^}]*\"fs_written_chunks\": 170900,"
       replay --trace ${T} --engine vllm --capacity 300 --no-opt --offload cpu:400:lru,secondary=fs --json -)
expect(0 "TieringOffloadingSpec" replay --trace ${T} --engine vllm --capacity 300 --no-opt
       --offload cpu:400:lru,secondary=fs)
expect(2 "secondary='obj'.*fs[ \n]+secondary[ \n]+tier" replay --trace ${T} --engine vllm --capacity 300
       --offload cpu:400:lru,secondary=obj)
expect(2 "secondary=fs[ \n]+is[ \n]+modelled[ \n]+with[ \n]+vLLM's[ \n]+lru[ \n]+only" replay --trace ${T} --engine vllm
       --capacity 300 --offload cpu:400:arc,secondary=fs)
expect(2 "fs[ \n]+secondary[ \n]+tier[ \n]+\\(secondary=fs\\),[ \n]+which[ \n]+runs[ \n]+in[ \n]+kvtk[ \n]+replay[ \n]+only"
       simulate --trace ${T} --set model=qwen2.5-7b --set gpu=h100 --engine vllm --set offload=cpu:400:lru,secondary=fs)
# A radix tier hierarchy hears the session signals (radix_tier_hierarchy::process): its JSON
# does not report them missing for a session order.
expect(0 "\"given\": \\[[^]]*\"session\"[^]]*\\],[^}]*\"missing\": \\[\\]"
       replay --trace ${CMAKE_CURRENT_LIST_DIR}/../traces/kvtk_gen_mixed_1k.jsonl --tier-top radix
       --tiers hbm:200:session-ttl,dram:800:lru --json -)
