# kvtk report: the executable runs the Python package's kvtk._report (docs/report.md). Without a
# Python that has the package `--help` still prints the parser's help (built in) and says what a
# report needs, and a report says how to get the package and exits 2; with the project's venv
# (scripts/python installs it there before ctest runs) the parser answers and bad arguments exit
# 2 before any work. The page itself is built and checked by pytest (python/tests/test_report.py,
# through this executable too).
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/cli_expect.cmake)
get_filename_component(ROOT ${DATA}/../../.. ABSOLUTE)

set(ENV{KVTK_SWEEP_PYTHON} ${WORK_DIR}/no-such-python)
expect(2 "kvtk report: cannot run .*no-such-python .*pip install \"./python\\[report\\]\""
       report --trace ${TRACE} -o ${WORK_DIR}/r.html)

# A Python without the kvtk package (isolated from site-packages).
file(WRITE ${WORK_DIR}/bare-python "#!/bin/sh\nexec python3 -I -S \"$@\"\n")
file(CHMOD ${WORK_DIR}/bare-python PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
set(ENV{KVTK_SWEEP_PYTHON} ${WORK_DIR}/bare-python)
expect(2 "kvtk report: the kvtk Python package is not importable.*python\\[report\\]"
       report --trace ${TRACE} -o ${WORK_DIR}/r.html)
expect(0 "usage: kvtk report .*--gpu-blocks.*kvtk report: note: running it needs the kvtk Python package"
       report --help)
if(EXISTS ${WORK_DIR}/r.html)
  message(FATAL_ERROR "a report that could not run wrote ${WORK_DIR}/r.html")
endif()
# The built-in help is the parser's (sim/cli/report_help.hpp).
expect_builtin_help(report ${ROOT}/python/kvtk/_report/__main__.py)

# With matplotlib in the venv (the report extra), the module answers.
set(venv ${ROOT}/build/nbvenv/bin/python)
if(EXISTS ${venv})
  set(ENV{KVTK_SWEEP_PYTHON} ${venv})
  expect(0 "usage: kvtk report" report --help)
  expect(2 "invalid choice: 'tgi'" report --trace ${TRACE} -o ${WORK_DIR}/r.html --engine tgi)
  expect(2 "the following arguments are required: -o/--out" report --trace ${TRACE})
  file(WRITE ${WORK_DIR}/taken.html "keep me")
  expect(2 "taken.html exists; pass --force to replace it" report --trace ${TRACE} -o ${WORK_DIR}/taken.html)
  file(READ ${WORK_DIR}/taken.html kept)
  if(NOT kept STREQUAL "keep me")
    message(FATAL_ERROR "kvtk report changed an existing output without --force")
  endif()
  # A copy: were the guard ever to fail, the bundled trace stays intact.
  file(COPY_FILE ${TRACE} ${WORK_DIR}/input.jsonl)
  expect(2 "this is the input trace" report --trace ${WORK_DIR}/input.jsonl -o ${WORK_DIR}/input.jsonl --force)
  file(SHA256 ${WORK_DIR}/input.jsonl after)
  file(SHA256 ${TRACE} before)
  if(NOT after STREQUAL before)
    message(FATAL_ERROR "kvtk report changed its input trace")
  endif()
  expect(2 "no such directory" report --trace ${TRACE} -o ${WORK_DIR}/no/such/dir/r.html)
  expect(2 "--gpus 0: a number >= 1" report --trace ${TRACE} -o ${WORK_DIR}/r.html --gpus 0)
endif()
