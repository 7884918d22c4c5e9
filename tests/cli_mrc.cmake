# kvtk mrc: the exact curve through the executable agrees with kvtk replay (flat LRU), the optimum
# column, sampling, output formats and bad input.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/cli_expect.cmake)

set(T ${TRACE})
expect(0 "--sample" mrc --help)
# 60921 / 288500 block hits and 31174981 / 144793823 token hits, as flat LRU replay gives; the
# optimum at 10000 blocks equals the infinite-cache hits (105710).
expect(0 "10000,0\\.211165,0\\.215306,0\\.366412,"
       mrc --trace ${T} --partial-block cache --capacity 10000 --opt --csv -)
expect(0 "\"saturation_blocks\"" mrc --trace ${T} --points 5 --json -)
expect(0 "\"depth\": 1" mrc --trace ${T} --sample 0.1 --json -)
expect(2 "--sample: must be in" mrc --trace ${T} --sample 0)
expect(2 "--points: must be in" mrc --trace ${T} --points 1)
expect(2 "--format: unknown format 'csv'" mrc --trace ${T} --format csv)
expect(2 "give --model" mrc --trace ${T} --capacity 1TB)
expect(1 "missing.jsonl:0: cannot open file" mrc --trace ${WORK_DIR}/missing.jsonl)
