# Every trace format through the executable: the committed small files (one Mooncake excerpt in
# each format, tests/data/formats) replay to the same counts; convert round-trips byte for byte;
# auto-detection; kvtb header checks; kvtk extensions.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/cli_expect.cmake)
set(D ${DATA})

# Request formats: 200 requests, 5537 block refs, 199 flat-LRU hits at 300 blocks (partial last
# blocks cached, as the Mooncake excerpt's block count needs).
set(want "flat,lru,300,200,5537,199,2782179,101888,")
foreach(f small.mooncake.jsonl small.kvtk.jsonl small.kvtb)
  expect(0 "${want}" replay --trace ${D}/${f} --index flat --policy lru --capacity 300
         --partial-block cache --csv - --no-opt)
endforeach()
expect(0 "${want}" replay --trace ${D}/small.bailian.jsonl --block-tokens 512 --index flat
       --policy lru --capacity 300 --partial-block cache --csv - --no-opt)
# Flat formats: each id is one single-block request (1 token unless --block-tokens).
foreach(f small.ids small.oracleGeneral.bin)
  expect(0 "flat,lru,300,5537,5537,199,5537,199," replay --trace ${D}/${f} --index flat
         --policy lru --capacity 300 --csv - --no-opt)
endforeach()
# ... and agree with `kvtk compare` on the same ids (the flat-trace command): 199 hits.
expect(0 "lru +300 +199 " compare --trace ${D}/small.ids --policy lru --capacity 300)

# Auto-detection names the format.
foreach(pair "small.mooncake.jsonl;mooncake" "small.bailian.jsonl;bailian" "small.kvtk.jsonl;kvtk"
        "small.kvtb;kvtb" "small.ids;ids" "small.oracleGeneral.bin;oracle-general")
  list(GET pair 0 f)
  list(GET pair 1 name)
  expect(0 "\"format\": \"${name}\"" trace stats ${D}/${f} --block-tokens 512 --json -)
endforeach()

# Round trips: mooncake -> kvtb -> kvtk -> mooncake is byte-identical to the source, and the
# kvtk and kvtb files equal the committed ones (so the format does not drift silently).
function(convert in out to)
  execute_process(COMMAND ${KVTK} trace convert ${in} -o ${out} --to ${to} ${ARGN}
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(rc)
    message(FATAL_ERROR "convert ${in} -> ${to} failed: ${err}")
  endif()
endfunction()
function(same a b)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${a} ${b} RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "${a} and ${b} differ")
  endif()
endfunction()
convert(${D}/small.mooncake.jsonl ${WORK_DIR}/a.kvtb kvtb)
same(${WORK_DIR}/a.kvtb ${D}/small.kvtb)
convert(${WORK_DIR}/a.kvtb ${WORK_DIR}/b.jsonl kvtk)
same(${WORK_DIR}/b.jsonl ${D}/small.kvtk.jsonl)
convert(${WORK_DIR}/b.jsonl ${WORK_DIR}/c.jsonl mooncake)
same(${WORK_DIR}/c.jsonl ${D}/small.mooncake.jsonl)
convert(${D}/small.ids ${WORK_DIR}/d.kvtb kvtb)
convert(${WORK_DIR}/d.kvtb ${WORK_DIR}/e.ids ids)
same(${WORK_DIR}/e.ids ${D}/small.ids)
convert(${D}/small.mooncake.jsonl ${WORK_DIR}/f.bin oracle-general)
same(${WORK_DIR}/f.bin ${D}/small.oracleGeneral.bin)
# Bailian content ids arrive chained: its kvtb replays like the source.
convert(${D}/small.bailian.jsonl ${WORK_DIR}/g.kvtb kvtb --block-tokens 512)
expect(0 "${want}" replay --trace ${WORK_DIR}/g.kvtb --index flat --policy lru --capacity 300
       --partial-block cache --csv - --no-opt)

# Convert refuses to overwrite, to write Bailian, and to guess the output format.
expect(2 "exists; pass --force" trace convert ${D}/small.ids -o ${WORK_DIR}/a.kvtb)
expect(0 "wrote 200 requests" trace convert ${D}/small.mooncake.jsonl -o ${WORK_DIR}/a.kvtb --force)
expect(2 "it is an input of this run" trace convert ${WORK_DIR}/a.kvtb -o ${WORK_DIR}/a.kvtb --force)
expect(2 "cannot write 'bailian'" trace convert ${D}/small.ids -o ${WORK_DIR}/x.jsonl --to bailian)
expect(2 "--to: give the output format" trace convert ${D}/small.ids -o ${WORK_DIR}/x.jsonl)
expect(0 "--to" trace convert --help)

# kvtk extensions: content_ids chain like Bailian; a model namespace separates equal ids; a
# session and a tenant reach trace stats.
file(WRITE ${WORK_DIR}/ext.jsonl
  "{\"kvtk_trace\": 1, \"block_tokens\": 4}\n"
  "{\"arrival_s\": 0.5, \"input_length\": 8, \"content_ids\": [1, 2], \"session\": \"s1\", \"tenant\": \"acme\"}\n"
  "{\"arrival_s\": 1.0, \"input_length\": 8, \"content_ids\": [1, 2], \"session\": \"s1\", \"tenant\": \"acme\"}\n"
  "{\"arrival_s\": 1.5, \"input_length\": 8, \"content_ids\": [1, 2], \"model\": \"other\", \"tenant\": \"zeta\", \"session\": 7}\n"
  "{\"arrival_s\": 2.0, \"input_length\": 16, \"hash_ids\": [5, 6], \"block_tokens\": 8, \"priority\": 3, \"session\": 8}\n")
# Request 2 hits both blocks; request 3 (another model) none: 2 of 8 block refs.
expect(0 "radix,lru,100,4,8,2,40,8," replay --trace ${WORK_DIR}/ext.jsonl --capacity 100 --csv - --no-opt)
expect(0 "\"acme\": 2" trace stats ${WORK_DIR}/ext.jsonl --json -)
expect(0 "\"sessions\": 3" trace stats ${WORK_DIR}/ext.jsonl --json -)
convert(${WORK_DIR}/ext.jsonl ${WORK_DIR}/ext.kvtb kvtb)
expect(0 "radix,lru,100,4,8,2,40,8," replay --trace ${WORK_DIR}/ext.kvtb --capacity 100 --csv - --no-opt)
expect(0 "\"acme\": 2" trace stats ${WORK_DIR}/ext.kvtb --json -)

# The generator: bursty arrivals are burstier than Poisson; kvtk output carries sessions.
expect(0 "" trace gen --requests 4000 --arrivals bursty --burst-cv 3 --to kvtk -o ${WORK_DIR}/b.kvtk.jsonl)
expect(0 "\"inter_arrival_cv\": [2-3]\\." trace stats ${WORK_DIR}/b.kvtk.jsonl --json -)
expect(0 "" trace gen --requests 4000 -o ${WORK_DIR}/p.kvtb)
expect(0 "\"inter_arrival_cv\": (0\\.9|1\\.0)" trace stats ${WORK_DIR}/p.kvtb --json -)
expect(0 "\"sessions\": {" trace stats ${WORK_DIR}/p.kvtb --json -)

# The progress bar appears only when asked for (KVTK_PROGRESS=1 stands in for a terminal).
execute_process(COMMAND ${CMAKE_COMMAND} -E env KVTK_PROGRESS=1 ${KVTK} replay --trace
                ${D}/small.kvtb --capacity 100 --no-opt RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc OR NOT err MATCHES "kvtk replay \\[#+\\] 100.0%.*block refs/s  ETA")
  message(FATAL_ERROR "no progress bar with KVTK_PROGRESS=1: ${err}")
endif()
execute_process(COMMAND ${KVTK} replay --trace ${D}/small.kvtb --capacity 100 --no-opt
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc OR NOT err STREQUAL "")
  message(FATAL_ERROR "stderr not quiet without a terminal: '${err}'")
endif()
