// sim/cli/sweep_help.hpp — `kvtk sweep --help` when no Python with the kvtk package is at hand:
// the argparse help of python/kvtk/_sweep/__main__.py, as Python 3.11 prints it at 80 columns.
// Regenerate after changing that parser (tests/cli_sweep.cmake fails until then):
//   COLUMNS=80 python3 -I -S tests/sweep_help.py python/kvtk/_sweep/__main__.py
#pragma once

namespace kvtk::sim {

inline constexpr const char* kSweepHelp = R"KVTK_HELP(usage: kvtk sweep [-h] --spec SPEC [--out OUT] [--backend {local,ray}]
                  [--address ADDRESS] [--workers WORKERS]
                  [--pool {process,thread}] [--retries RETRIES] [--resume]
                  [--force] [--dry-run] [--quiet]

Run a grid of kvtk replay / mrc / simulate / cost cells locally or on a Ray cluster.

options:
  -h, --help            show this help message and exit
  --spec SPEC           the sweep spec (.json, .yaml or .yml)
  --out OUT             output file: .jsonl or .parquet (required unless
                        --dry-run)
  --backend {local,ray}
                        local: a pool of processes here (default); ray: Ray
                        tasks
  --address ADDRESS     ray: the cluster to join (auto = this node's; default:
                        start a single-node Ray here)
  --workers WORKERS     local: worker processes; ray without --address: CPUs
                        (default: this machine's cores)
  --pool {process,thread}
                        local: worker processes (default) or threads
  --retries RETRIES     attempts after the first for a cell whose worker died
                        or raised (default: the spec's retries, else 2)
  --resume              continue the sweep in OUT: keep its finished cells,
                        run the rest
  --force               replace an existing OUT
  --dry-run             check the spec and list its cells (id, command, trace,
                        axes); run nothing
  --quiet               no per-cell progress lines on stderr

The spec (JSON, or YAML with PyYAML) lists traces and runs; each run's grid is expanded into
cells (command x trace x grid point), and every cell's result rows go to OUT (.jsonl or .parquet)
as they finish. docs/sweeps.md has the schema, the columns and the cluster setup.

exit status: 0 all cells ok, 1 some cells error or failed, 2 bad spec/usage, 130 interrupted
)KVTK_HELP";

}  // namespace kvtk::sim
