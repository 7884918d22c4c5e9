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

# expect_builtin_help(command main_py): `kvtk <command> --help` without the Python package prints
# the help built into the executable (sim/cli/<command>_help.hpp); it must be the argparse help
# of main_py byte for byte, where python3 prints argparse help as 3.10-3.12 do (ROOT: the
# repository).
function(expect_builtin_help command main_py)
  find_program(PY3 python3)
  if(NOT PY3)
    return()
  endif()
  execute_process(COMMAND ${PY3} -I -S -c "import sys; print(int((3, 10) <= sys.version_info[:2] <= (3, 12)))"
                  OUTPUT_VARIABLE same_format OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT same_format STREQUAL "1")
    return()
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -E env COLUMNS=80 ${PY3} -I -S ${ROOT}/tests/sweep_help.py
                          ${main_py} OUTPUT_VARIABLE want)
  execute_process(COMMAND ${KVTK} ${command} --help OUTPUT_VARIABLE got ERROR_QUIET)
  if(NOT want STREQUAL got)
    message(FATAL_ERROR "kvtk ${command} --help differs from the parser's help: regenerate "
                        "sim/cli/${command}_help.hpp (its header says how)\n--- parser:\n${want}\n--- kvtk:\n${got}")
  endif()
endfunction()
