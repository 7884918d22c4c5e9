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
expect(2 "unknown subcommand 'replay'" move replay)
