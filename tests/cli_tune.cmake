# kvtk tune: the choice made on the first half is reported on the second, beside LRU and the
# optimum; the recommendation is a command to paste; bad input is refused by name.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/cli_expect.cmake)

set(T ${TRACE})
expect(0 "--holdout" tune --help)
expect(0 "use: kvtk replay --trace .* --capacity 5859 --partial-block cache"
       tune --trace ${T} --capacity 5859 --partial-block cache)
execute_process(COMMAND ${KVTK} tune --trace ${T} --capacity 1000,5859 --partial-block cache
                        --threads 2 --json - OUTPUT_VARIABLE j RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tune --json failed: ${rc}")
endif()
string(JSON tuned GET "${j}" trace tune_requests)
string(JSON held GET "${j}" trace holdout_requests)
if(NOT tuned EQUAL 6015 OR NOT held EQUAL 6016)
  message(FATAL_ERROR "split ${tuned} + ${held}, expected 6015 + 6016 of 12031")
endif()
foreach(i 0 1)
  string(JSON chosen GET "${j}" results ${i} chosen opt_fraction)
  string(JSON lru GET "${j}" results ${i} lru opt_fraction)
  string(JSON opt GET "${j}" results ${i} optimum opt_fraction)
  string(JSON n LENGTH "${j}" results ${i} holdout)
  string(JSON cmd GET "${j}" results ${i} recommendation command)
  # The pick on the first half beats radix LRU on the second half, and nothing passes the optimum.
  execute_process(COMMAND awk "BEGIN{exit !(${chosen} > ${lru} && ${chosen} <= 1 && ${opt} == 1)}"
                  RESULT_VARIABLE bad)
  if(bad)
    message(FATAL_ERROR "result ${i}: chosen ${chosen}, lru ${lru}, optimum ${opt}")
  endif()
  # 9 online radix leaf orders, each also with 4 admission rules, and 11 flat policies: every
  # online one.
  if(NOT n EQUAL 56)
    message(FATAL_ERROR "result ${i}: ${n} candidates, expected 56")
  endif()
  if(NOT cmd MATCHES "^kvtk replay --trace ")
    message(FATAL_ERROR "result ${i}: recommendation '${cmd}'")
  endif()
endforeach()
# The recommendation runs as it is.
string(JSON cmd GET "${j}" results 1 recommendation command)
string(REPLACE "kvtk replay " "" cmd "${cmd}")
separate_arguments(args UNIX_COMMAND "${cmd}")
expect(0 "opt" replay ${args})

expect(2 "--holdout: must be in \\(0, 1\\)" tune --trace ${T} --capacity 100 --holdout 1)
expect(2 "'belady' needs the future" tune --trace ${T} --capacity 100 --policy belady)
expect(2 "unknown policy 'nope'" tune --trace ${T} --capacity 100 --policy lru,nope)
expect(2 "--index: unknown index 'hashchain'" tune --trace ${T} --capacity 100 --index hashchain)
expect(2 "'--capacity' is required" tune --trace ${T})
expect(2 "--capacity" tune --trace ${T} --capacity 12parsecs)
expect(1 "missing.jsonl" tune --trace ${WORK_DIR}/missing.jsonl --capacity 100)
file(WRITE ${WORK_DIR}/one.jsonl
     "{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 1, \"hash_ids\": [1, 2]}\n")
expect(2 "empty tune or holdout part" tune --trace ${WORK_DIR}/one.jsonl --capacity 10)
file(WRITE ${WORK_DIR}/out.json "keep me")
expect(2 "exists" tune --trace ${T} --capacity 100 --json ${WORK_DIR}/out.json)
file(READ ${WORK_DIR}/out.json kept)
if(NOT kept STREQUAL "keep me")
  message(FATAL_ERROR "tune overwrote an existing file without --force")
endif()
