# Runs the kvtk executable and checks exit codes, output and error messages.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/cli_expect.cmake)

expect(0 "commands:" --help)
expect(2 "unknown command 'frobnicate'" frobnicate)
expect(2 "usage:" )
expect(0 "--capacity" compare --help)
expect(2 "the option '--trace' is required" compare)
expect(2 "unknown policy 'nope'" compare --trace ${TRACE} --policy lru,nope)
expect(2 "--capacity: 'abc' is not a positive integer" compare --trace ${TRACE} --capacity abc)
expect(2 "--capacity: '0' is not a positive integer" compare --trace ${TRACE} --capacity 0)
expect(2 "--capacity: '-5' is not a positive integer" compare --trace ${TRACE} --capacity -5)
expect(1 "missing.jsonl:0: cannot open file" compare --trace ${WORK_DIR}/missing.jsonl)
file(WRITE ${WORK_DIR}/bad.jsonl "{\"hash_ids\": [1]}\n{\"hash_ids\": [1, \"x\"]}\n")
expect(1 "bad.jsonl:2: 'hash_ids'\\[1\\] must be an integer" compare --trace ${WORK_DIR}/bad.jsonl)
# The golden LRU count through the executable.
expect(0 "lru,10000,288500,227579,0\\.788835" compare --trace ${TRACE} --policy lru --capacity 10000 --csv -)

# Other flat formats: plain ids (detected), with errors naming the line.
file(WRITE ${WORK_DIR}/ids.txt "1\n2\n1\n3\n1\n")
expect(0 "lru,2,5,3,0\\.6" compare --trace ${WORK_DIR}/ids.txt --policy lru --capacity 2 --csv -)
file(WRITE ${WORK_DIR}/bad_ids.txt "1\n2\nx7\n")
expect(1 "bad_ids.txt:3: expected one non-negative integer id, got 'x7'" compare --trace ${WORK_DIR}/bad_ids.txt --format ids)
file(WRITE ${WORK_DIR}/neg_ids.txt "1\n-2\n")
expect(1 "neg_ids.txt:2: negative id" compare --trace ${WORK_DIR}/neg_ids.txt --format ids)
expect(2 "--format: 'parquet'" compare --trace ${WORK_DIR}/ids.txt --format parquet)
