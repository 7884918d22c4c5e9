#!/usr/bin/env python3
"""Execute the kvtk notebooks headless and report the wall time of each.

usage: run.py [NOTEBOOK ...] [--timeout S] [--max-seconds S]
       run.py --check-stripped     # committed notebooks carry no outputs
       run.py --strip              # remove outputs and execution counts in place

Runs every notebooks/NN_*.ipynb (or the named ones: "01", "01_policies_and_mrc" or a file
name) top to bottom in a Python kernel of the interpreter running this script (so run it
with build/nbvenv/bin/python), writes the executed copies to $KVTK_NB_OUT/executed/
(default build/notebooks/executed/) and exits non-zero if any cell fails.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def notebooks(names: list[str]) -> list[Path]:
    all_nb = sorted(HERE.glob("[0-9][0-9]_*.ipynb"))
    if not names:
        return all_nb
    picked = []
    for n in names:
        stem = Path(n).name.removesuffix(".ipynb")
        match = [p for p in all_nb if p.stem == stem or p.stem.split("_", 1)[0] == stem]
        if not match:
            sys.exit(f"run.py: no notebook named {n!r} (have: {', '.join(p.name for p in all_nb)})")
        picked += match
    return picked


def is_stripped(nb) -> bool:
    return all(
        c.cell_type != "code" or (not c.get("outputs") and c.get("execution_count") is None)
        for c in nb.cells
    )


def strip(nb) -> None:
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs = []
            c.execution_count = None


def kernel_spec_dir(base: Path) -> str:
    """A kernelspec 'kvtk-nb' that runs ipykernel on this interpreter (the venv's)."""
    kdir = base / "kernels" / "kvtk-nb"
    kdir.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (kvtk notebooks)",
        "language": "python",
    }
    (kdir / "kernel.json").write_text(json.dumps(spec, indent=1))
    return str(base)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="notebooks to run (default: all)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per cell (default 300)")
    ap.add_argument("--max-seconds", type=float, default=0,
                    help="fail a notebook that takes longer than this (default: no limit)")
    ap.add_argument("--check-stripped", action="store_true",
                    help="only check that the notebooks have no outputs; exit 1 if one has")
    ap.add_argument("--strip", action="store_true", help="only strip outputs in place")
    args = ap.parse_args()

    import nbformat

    paths = notebooks(args.names)
    if args.check_stripped or args.strip:
        bad = 0
        for p in paths:
            nb = nbformat.read(p, as_version=4)
            if args.strip:
                if not is_stripped(nb):
                    strip(nb)
                    nbformat.write(nb, p)
                    print(f"stripped {p.name}")
            elif not is_stripped(nb):
                print(f"{p.name}: has outputs or execution counts (run notebooks/run.py --strip)")
                bad += 1
        if args.check_stripped:
            print(f"{len(paths) - bad} passed, {bad} failed")
        return 1 if bad else 0

    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    out = Path(os.environ.get("KVTK_NB_OUT") or REPO / "build" / "notebooks")
    out = out.expanduser().resolve()
    os.environ["KVTK_NB_OUT"] = str(out)  # the kernel inherits absolute paths
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")  # no notebooks/__pycache__
    if os.environ.get("KVTK_BIN"):
        os.environ["KVTK_BIN"] = str(Path(os.environ["KVTK_BIN"]).expanduser().resolve())
    executed = out / "executed"
    executed.mkdir(parents=True, exist_ok=True)

    sys.dont_write_bytecode = True
    sys.path.insert(0, str(HERE))
    import kvtk_nb

    try:
        print(kvtk_nb.version_line(), flush=True)
    except kvtk_nb.KvtkError as e:
        print(f"run.py: {e}", file=sys.stderr)
        return 1

    jupyter_dir = Path(tempfile.mkdtemp(prefix="kvtk-nb-kernel-"))
    os.environ["JUPYTER_PATH"] = kernel_spec_dir(jupyter_dir) + os.pathsep + os.environ.get("JUPYTER_PATH", "")

    failed, passed = [], 0
    for p in paths:
        nb = nbformat.read(p, as_version=4)
        client = NotebookClient(
            nb, timeout=args.timeout, kernel_name="kvtk-nb",
            resources={"metadata": {"path": str(HERE)}},
        )
        t0 = time.perf_counter()
        error = None
        try:
            client.execute()
        except CellExecutionError as e:
            error = str(e)
        except Exception as e:  # kernel death, timeout
            error = f"{type(e).__name__}: {e}"
        wall = time.perf_counter() - t0
        nb.metadata.get("kernelspec", {})["name"] = "python3"
        nbformat.write(nb, executed / p.name)
        if error is None and args.max_seconds and wall > args.max_seconds:
            error = f"took {wall:.1f} s, over --max-seconds {args.max_seconds:g}"
        status = "ok" if error is None else "FAILED"
        print(f"{p.name:36s} {wall:7.1f} s  {status}", flush=True)
        if error is None:
            passed += 1
        else:
            failed.append(p.name)
            print(error[-4000:], file=sys.stderr)
    print(f"executed copies: {executed}")
    print(f"{passed} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
