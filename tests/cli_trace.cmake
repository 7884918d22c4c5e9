# kvtk trace stats against the statistics traces/SOURCES.md gives for the conversation trace
# (computed independently when the traces were collected).
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
