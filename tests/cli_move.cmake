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
expect(2 "the CUDA paths are measured by cuda/kv_move_bench" move bench --backend cuda)
expect(2 "--block-bytes: '7parsecs'" move bench --block-bytes 7parsecs)
expect(2 "unknown subcommand 'shuffle'" move shuffle)
# Real movement of every decision: the hit counts are kvtk replay's (exclusive LRU over LRU at
# 2,500 + 7,500 blocks = one LRU of 10,000: 60,921), and every arrival verifies.
expect(0 "\"block_hits\": 60921.*\"integrity_failures\": 0.*\"verified\": true"
       move replay --trace ${TRACE} --tiers hbm:2500:lru,dram:7500:lru --block-bytes 1KiB
       --partial-block cache --json -)
expect(0 "\"integrity_failures\": 0.*\"verified\": true" move replay --trace ${TRACE}
       --tiers hbm:1000:lru,dram:4000:arc,ssd:20000:s3fifo --inclusive --write-policy write-through
       --block-bytes 1KiB --json -)
expect(2 "limit 8 GiB" move replay --trace ${TRACE} --tiers hbm:1000000:lru --block-bytes 16MiB)
# A file tier (ssd) is a real file: exclusive LRU/LRU/LRU at 2,500 + 2,500 + 5,000 is still one
# LRU of 10,000 (60,921 hits), every arrival and every resident block verifies.
expect(0 "\"at_rest_corrupted\": 0.*\"block_hits\": 60921.*\"integrity_failures\": 0.*\"storage\": \"file\".*\"verified\": true"
       move replay --trace ${TRACE} --tiers hbm:2500:lru,dram:2500:lru,ssd:5000:lru --block-bytes 1KiB
       --partial-block cache --dir ${WORK_DIR} --json -)
expect(2 "--dir: '/nonexistent/kvtk' is not a directory" move replay --trace ${TRACE}
       --tiers hbm:10:lru,ssd:10:lru --dir /nonexistent/kvtk)
expect(2 "--backend cuda: the device executor is its own program, cuda/kv_move_replay" move replay --trace ${TRACE}
       --tiers hbm:10:lru --backend cuda)
# The calibration feed: the bench's fit becomes the link model of move replay and replay.
expect(0 ".*" move bench --block-bytes 16KiB,64KiB --blocks 1,8,64 --reps 1
       --dir ${WORK_DIR} --json ${WORK_DIR}/cal.json)
expect(0 "\"calibration\": \\[.*\"calibrated\": true.*\"mechanism\": \"per-piece\".*\"path\": \"dram->dram\""
       move replay --trace ${TRACE} --tiers hbm:1000:lru,dram:4000:lru --block-bytes 1KiB
       --calibration ${WORK_DIR}/cal.json --calibration-mechanism per-piece --json -)
# A host calibration has no dram->hbm path: that link keeps its figures and says so.
expect(0 "\"calibrated\": false,[^{]*hbm<->dram.*\"calibrated\": true,[^{]*dram<->ssd[^{]*\"read\": {[^}]*\"path\": \"file->dram\""
       replay --trace ${TRACE} --tiers hbm:1000:lru,dram:2000:lru,ssd:4000:lru
       --calibration ${WORK_DIR}/cal.json --json -)
expect(0 "\"calibrated\": false,[^{]*hbm<->remote" replay --trace ${TRACE}
       --tiers hbm:1000:lru,remote:4000:lru --calibration ${WORK_DIR}/cal.json --json -)
expect(2 "no fit for mechanism 'warp'" replay --trace ${TRACE} --tiers hbm:1000:lru,dram:4000:lru
       --calibration ${WORK_DIR}/cal.json --calibration-mechanism warp)
expect(2 "bad_field.json: calibration \"h2d memcpy\": 'beta_s' missing" replay --trace ${TRACE}
       --tiers hbm:1000:lru,dram:4000:lru --calibration ${DATA}/../calibration/bad_field.json)
expect(2 "--calibration needs --tiers" replay --trace ${TRACE} --calibration ${WORK_DIR}/cal.json)
expect(2 "no \"calibration\" object" replay --trace ${TRACE} --tiers hbm:10:lru,dram:10:lru
       --calibration ${DATA}/small.kvtk.jsonl)
# kvtk simulate takes the DRAM tier's host link from the dram->hbm (h2d) fit.
expect(0 "\"host_link_calibration\": \\{.*\"bytes_per_s\": 25000000000.*\"mechanism\": \"kernel\""
       simulate --trace ${TRACE} --set dram=20000 --set local_cache=2000
       --calibration ${DATA}/../calibration/h2d.json --json -)
expect(2 "no dram->hbm \\(h2d\\) fit" simulate --trace ${TRACE} --set dram=100
       --calibration ${WORK_DIR}/cal.json)
# The threads mechanism: shares over the io_pool, every block verified, on both paths.
expect(0 "dram->file +threads .* yes.*file->dram +threads .* yes|file->dram +threads .* yes.*dram->file +threads .* yes"
       move bench --block-bytes 64KiB --blocks 64 --mechanism threads --io-threads 3 --reps 1 --dir ${WORK_DIR})
expect(2 "--io-threads: must be in \\[1, 64\\]" move bench --io-threads 0)
