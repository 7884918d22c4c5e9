# kvtk sweep: the executable runs the Python package's kvtk._sweep (docs/sweeps.md). Without a
# Python that has the package `--help` still prints the parser's help (built in) and says what a
# sweep needs, and a sweep says how to get the package and exits 2; with the project's venv
# (scripts/python installs it there before ctest runs), a dry run of the example spec lists its
# cells and a real run's exit status comes back unchanged. The sweep itself is tested by pytest
# (python/tests/test_sweep.py).
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/cli_expect.cmake)
get_filename_component(ROOT ${DATA}/../../.. ABSOLUTE)

set(ENV{KVTK_SWEEP_PYTHON} ${WORK_DIR}/no-such-python)
expect(2 "kvtk sweep: cannot run .*no-such-python .*pip install \"./python\\[sweep\\]\""
       sweep --spec ${ROOT}/docs/examples/sweep.yaml)

# A Python without the kvtk package (a fresh venv's interpreter, isolated from site-packages).
file(WRITE ${WORK_DIR}/bare-python "#!/bin/sh\nexec python3 -I -S \"$@\"\n")
file(CHMOD ${WORK_DIR}/bare-python PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
set(ENV{KVTK_SWEEP_PYTHON} ${WORK_DIR}/bare-python)
expect(2 "kvtk sweep: the kvtk Python package is not importable" sweep --spec x.yaml)
expect(0 "usage: kvtk sweep .*--dry-run.*kvtk sweep: note: running it needs the kvtk Python package" sweep --help)
# The built-in help is the parser's (sim/cli/sweep_help.hpp).
expect_builtin_help(sweep ${ROOT}/python/kvtk/_sweep/__main__.py)

set(venv ${ROOT}/build/nbvenv/bin/python)
if(EXISTS ${venv})
  set(ENV{KVTK_SWEEP_PYTHON} ${venv})
  expect(0 "usage: kvtk sweep" sweep --help)
  expect(0 "cells" sweep --spec ${ROOT}/docs/examples/sweep.yaml --dry-run)
  expect(2 "sweep" sweep --spec ${WORK_DIR}/missing.yaml --out ${WORK_DIR}/o.jsonl)
  file(WRITE ${WORK_DIR}/bad.json "{\"runs\": [{\"command\": \"replay\", \"traces\": [\"t\"], \"grid\": {\"polcy\": [\"lru\"]}}], \"traces\": {\"t\": \"${ROOT}/traces/mooncake_fast25_conversation_trace.jsonl\"}}")
  expect(2 "polcy" sweep --spec ${WORK_DIR}/bad.json --out ${WORK_DIR}/o.jsonl)
endif()
