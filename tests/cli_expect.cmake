# expect(code pattern args...): runs ${KVTK} args, checks the exit code and that stdout+stderr
# match the regular expression. Included by the cli_*.cmake test scripts.
function(expect code_want pattern)
  execute_process(COMMAND ${KVTK} ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT code EQUAL code_want)
    message(FATAL_ERROR "kvtk ${ARGN}: exit ${code}, want ${code_want}\n${out}\n${err}")
  endif()
  if(NOT "${out}${err}" MATCHES "${pattern}")
    message(FATAL_ERROR "kvtk ${ARGN}: output does not match '${pattern}':\n${out}\n${err}")
  endif()
endfunction()
