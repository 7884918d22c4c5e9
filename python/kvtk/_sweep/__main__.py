"""python -m kvtk._sweep: the `kvtk sweep` command (the kvtk executable execs this module).

Exit status: 0 every cell ok; 1 some cell has an error or failed row; 2 a bad spec, bad
arguments or an unusable output; 130 interrupted (Ctrl-C), after closing the output as a valid
file that --resume continues.
"""
from __future__ import annotations

import argparse
import sys

USAGE_EPILOG = """\
The spec (JSON, or YAML with PyYAML) lists traces and runs; each run's grid is expanded into
cells (command x trace x grid point), and every cell's result rows go to OUT (.jsonl or .parquet)
as they finish. docs/sweeps.md has the schema, the columns and the cluster setup.

exit status: 0 all cells ok, 1 some cells error or failed, 2 bad spec/usage, 130 interrupted
"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kvtk sweep", description="Run a grid of kvtk replay / mrc / "
                                "simulate / cost cells locally or on a Ray cluster.",
                                epilog=USAGE_EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--spec", required=True, help="the sweep spec (.json, .yaml or .yml)")
    p.add_argument("--out", help="output file: .jsonl or .parquet (required unless --dry-run)")
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="local: a pool of processes here (default); ray: Ray tasks")
    p.add_argument("--address", help="ray: the cluster to join (auto = this node's; default: "
                   "start a single-node Ray here)")
    p.add_argument("--workers", type=int, default=0,
                   help="local: worker processes; ray without --address: CPUs (default: this "
                   "machine's cores)")
    p.add_argument("--pool", choices=("process", "thread"), default="process",
                   help="local: worker processes (default) or threads")
    p.add_argument("--retries", type=int, help="attempts after the first for a cell whose worker "
                   "died or raised (default: the spec's retries, else 2)")
    p.add_argument("--resume", action="store_true",
                   help="continue the sweep in OUT: keep its finished cells, run the rest")
    p.add_argument("--force", action="store_true", help="replace an existing OUT")
    p.add_argument("--dry-run", action="store_true",
                   help="check the spec and list its cells (id, command, trace, axes); run nothing")
    p.add_argument("--quiet", action="store_true", help="no per-cell progress lines on stderr")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    from .cells import expand
    from .driver import run_sweep, stderr_log
    from .output import OutputError
    from .spec import SpecError, load_spec

    def fail(message: str) -> int:
        print(f"kvtk sweep: {message}", file=sys.stderr)
        return 2

    if args.workers < 0:
        return fail("--workers: a number >= 0")
    if args.retries is not None and args.retries < 0:
        return fail("--retries: a number >= 0")
    if args.address and args.backend != "ray":
        return fail("--address goes with --backend ray")
    try:
        spec = load_spec(args.spec, retries=args.retries)
        if args.dry_run:
            cells = expand(spec)
            for c in cells:
                print(f"{c.id}  {c.label()}")
            print(f"{len(cells)} cells", file=sys.stderr)
            return 0
        if not args.out:
            return fail("--out is required (a .jsonl or .parquet file)")
        summary = run_sweep(spec, backend=args.backend, out=args.out, workers=args.workers,
                            address=args.address, resume=args.resume, force=args.force,
                            pool=args.pool, log=None if args.quiet else stderr_log)
    except (SpecError, OutputError) as e:
        return fail(str(e))
    except KeyboardInterrupt:
        print("kvtk sweep: interrupted; the output holds every finished cell (--resume "
              "continues)", file=sys.stderr)
        return 130
    except (RuntimeError, ConnectionError) as e:  # no Ray installed, no cluster at --address
        return fail(f"{type(e).__name__}: {e}" if isinstance(e, ConnectionError) else str(e))
    except OSError as e:  # the output or a trace cannot be read or written: named by the error
        return fail(str(e))
    return 0 if summary.complete else 1


if __name__ == "__main__":
    sys.exit(main())
