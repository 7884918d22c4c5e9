# The sources of the sim/ libraries, one list per library (paths relative to sim/). Also read by
# the fuzz targets (tests/fuzz), which compile them again instrumented for coverage.
#   kvtk_util      output files, memory budget               (depends on nothing of sim/)
#   kvtk_formats   trace readers and writers                 (util)
#   kvtk_des       the discrete-event cluster simulator      (util)
#   kvtk_move      real block movement and calibration        (util)
#   kvtk_commands  every command as a library call (api/) and its command line (cli/) (all above)
set(KVTK_UTIL_SOURCES
  util/memory_budget.cpp
  util/output_file.cpp)
set(KVTK_FORMATS_SOURCES
  formats/mooncake_flat.cpp
  formats/flat_traces.cpp
  formats/requests.cpp
  formats/requests_load.cpp
  formats/parallel_jsonl.cpp
  formats/kvtb.cpp
  formats/next_use_file.cpp
  formats/writers.cpp
  formats/decode_records.cpp)
set(KVTK_DES_SOURCES
  des/profiles.cpp
  des/simulator.cpp
  des/cluster_events.cpp
  des/cluster_route.cpp
  des/cluster_timing.cpp
  des/timing.cpp
  des/timing_table.cpp
  des/cluster_caches.cpp
  des/cluster_report.cpp
  des/sparse_decode.cpp
  des/engine_sched.cpp
  des/engine_config.cpp)
set(KVTK_MOVE_SOURCES
  move/host_move.cpp
  move/executor.cpp
  move/calibration.cpp
  move/io_pool.cpp)
set(KVTK_COMMANDS_SOURCES
  api/replay.cpp
  api/next_uses.cpp
  api/replay_plan.cpp
  api/move.cpp
  api/mrc.cpp
  api/tune.cpp
  api/compare.cpp
  api/cost.cpp
  api/sparse.cpp
  api/sparse_plan.cpp
  api/trace_convert.cpp
  api/trace_gen.cpp
  api/trace_stats.cpp
  api/simulate.cpp
  api/simulate_config.cpp
  cli/progress.cpp
  cli/common.cpp
  cli/phase_clock.cpp
  cli/compare.cpp
  cli/replay.cpp
  cli/mrc.cpp
  cli/tune.cpp
  cli/trace_stats.cpp
  cli/trace_gen.cpp
  cli/trace_convert.cpp
  cli/tiers.cpp
  cli/simulate.cpp
  cli/cost.cpp
  cli/move.cpp
  cli/sparse.cpp)
