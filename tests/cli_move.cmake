# kvtk move bench (host backend): every byte verified, a calibration fitted; bad input.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/cli_expect.cmake)
expect(0 "--mechanism" move bench --help)
expect(0 "\"verified\": true" move bench --block-bytes 16KiB,64KiB,256KiB --blocks 1,8,64
       --reps 1 --dir ${WORK_DIR} --json -)
expect(0 "\"dram->file coalesced\": {" move bench --block-bytes 16KiB,64KiB,256KiB --blocks 1,8,64
       --reps 1 --dir ${WORK_DIR} --json -)
expect(0 "dram->dram +per-piece .* yes" move bench --block-bytes 40KiB --blocks 4 --layout layer-first --to dram --reps 1)
expect(2 "only host is built" move bench --backend cuda)
expect(2 "--block-bytes: '7parsecs'" move bench --block-bytes 7parsecs)
expect(2 "unknown subcommand 'shuffle'" move shuffle)
# Real movement of every decision: the hit counts are kvtk replay's (exclusive LRU over LRU at
# 2,500 + 7,500 blocks = one LRU of 10,000: 60,921), and every arrival verifies.
expect(0 "\"block_hits\": 60921.*\"integrity_failures\": 0.*\"verified\": true"
       move replay --trace ${TRACE} --tiers hbm:2500:lru,dram:7500:lru --block-bytes 1KiB --json -)
expect(0 "\"integrity_failures\": 0.*\"verified\": true" move replay --trace ${TRACE}
       --tiers hbm:1000:lru,dram:4000:arc,ssd:20000:s3fifo --inclusive --write-policy write-through
       --block-bytes 1KiB --json -)
expect(2 "limit 8 GiB" move replay --trace ${TRACE} --tiers hbm:1000000:lru --block-bytes 16MiB)
