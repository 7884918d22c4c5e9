# kvtk mrc: the exact curve through the executable agrees with kvtk replay (flat LRU), the optimum
# column, sampling, output formats and bad input.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/cli_expect.cmake)

set(T ${TRACE})
expect(0 "--sample" mrc --help)
# 60921 / 288500 block hits and 31174981 / 144793823 token hits, as flat LRU replay gives; the
# optimum and the bound (the last column) at 10000 blocks equal the infinite-cache hits (105710).
expect(0 "10000,0\\.211165,0\\.215306,0\\.366412,[0-9.]+,,,,,0\\.366412"
       mrc --trace ${T} --partial-block cache --capacity 10000 --opt --csv -)
expect(0 "\"saturation_blocks\"" mrc --trace ${T} --points 5 --json -)
expect(0 "\"unit\": \"block keys\"" mrc --trace ${T} --sample 0.1 --json -)
# The sampled curve of a generated trace (the case that used to print 0.0000 everywhere) stays
# within 0.03 of the exact one at 10 % and reports its error estimate.
expect(0 "" trace gen --requests 20000 -o ${WORK_DIR}/gen.jsonl)
execute_process(COMMAND ${KVTK} mrc --trace ${WORK_DIR}/gen.jsonl --capacity 600,5000,40000 --csv -
                OUTPUT_VARIABLE exact_csv)
execute_process(COMMAND ${KVTK} mrc --trace ${WORK_DIR}/gen.jsonl --capacity 600,5000,40000
                        --sample 0.1 --json - OUTPUT_VARIABLE sampled_json)
string(REGEX MATCHALL "\n[0-9]+,[0-9.]+,([0-9.]+)" rows "${exact_csv}")
set(i 0)
foreach(row ${rows})
  string(REGEX REPLACE ".*,([0-9.]+)$" "\\1" exact "${row}")
  string(JSON got GET "${sampled_json}" curve ${i} token_hit_ratio)
  string(JSON err GET "${sampled_json}" curve ${i} token_hit_ratio_error)
  math(EXPR i "${i} + 1")
  if(exact LESS 0.05)
    message(FATAL_ERROR "exact token hit ratio ${exact} at point ${i}: expected a real curve")
  endif()
  # |got - exact| < 0.03 without floating-point math in CMake: compare both bounds.
  execute_process(COMMAND awk "BEGIN{d=${got}-${exact}; exit !(d < 0.03 && d > -0.03)}"
                  RESULT_VARIABLE far)
  if(far)
    message(FATAL_ERROR "sampled ${got} vs exact ${exact} at point ${i} (estimate ${err})")
  endif()
endforeach()
if(NOT i EQUAL 3)
  message(FATAL_ERROR "expected 3 curve points:\n${exact_csv}")
endif()
expect(2 "--sample: must be in" mrc --trace ${T} --sample 0)
expect(2 "--points: must be in" mrc --trace ${T} --points 1)
expect(2 "--format: unknown format 'csv'" mrc --trace ${T} --format csv)
expect(2 "give --model" mrc --trace ${T} --capacity 1TB)
expect(1 "missing.jsonl:0: cannot open file" mrc --trace ${WORK_DIR}/missing.jsonl)

# The optimum's next uses from a sidecar (.kvtn) give the same curve as from memory.
execute_process(COMMAND ${KVTK} trace convert ${T} -o ${WORK_DIR}/nu.kvtb RESULT_VARIABLE rc)
file(MAKE_DIRECTORY ${WORK_DIR}/nucache)
foreach(mode off ${WORK_DIR}/nucache)
  execute_process(COMMAND ${KVTK} mrc --trace ${WORK_DIR}/nu.kvtb --opt --capacity 100,1000,10000
                  --csv - --next-use-cache ${mode} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "mrc --next-use-cache ${mode} failed")
  endif()
  list(APPEND curves "${out}")
endforeach()
list(GET curves 0 a)
list(GET curves 1 b)
if(NOT a STREQUAL b)
  message(FATAL_ERROR "mrc --next-use-cache changed the curve:\n${a}\n---\n${b}")
endif()
