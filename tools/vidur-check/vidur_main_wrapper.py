#!/usr/bin/env python3
"""Drop-in for `python -m vidur.main` (same CLI) that also records what Vidur does not
write out: the KV-cache block count and max batch size each replica scheduler computed,
and wall-clock times of set-up (execution-time-predictor training / cache load) and of
the event loop. Writes <output_dir>/vidur_check_extra.json. Must run with cwd = Vidur's
source root (Vidur resolves ./data/profiling/... relative to the cwd)."""
import json
import time

from vidur.config import SimulationConfig
from vidur.simulator import Simulator
from vidur.utils.random import set_seeds


def main() -> None:
    t0 = time.time()
    config: SimulationConfig = SimulationConfig.create_from_cli_args()
    set_seeds(config.seed)
    simulator = Simulator(config)  # trains / loads the random-forest models here
    t1 = time.time()
    simulator.run()
    t2 = time.time()

    gs = simulator.scheduler
    replicas = {}
    for rid, rs in gs._replica_schedulers.items():
        replicas[str(rid)] = {
            "num_blocks": rs._config.num_blocks,
            "block_size": rs._config.block_size,
            "watermark_blocks": getattr(rs, "_watermark_blocks", None),
            "max_batch_size_from_memory_planner_capped": rs._max_batch_size,
            "max_blocks_per_sequence": rs._max_blocks_per_sequence,
        }
    extra = {
        "output_dir": config.metrics_config.output_dir,
        "setup_wall_s": t1 - t0,
        "simulate_wall_s": t2 - t1,
        "simulated_end_time_s": simulator._time,
        "replicas": replicas,
    }
    with open(f"{config.metrics_config.output_dir}/vidur_check_extra.json", "w") as f:
        json.dump(extra, f, indent=2)
    print("VIDUR_CHECK_EXTRA " + json.dumps(extra))


if __name__ == "__main__":
    main()
