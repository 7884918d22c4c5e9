"""The Ray backend: one Ray task per cell, on a running cluster or a Ray started here.

``address`` given: ``ray.init(address=...)`` joins that cluster ("auto" = the one this node
belongs to); otherwise a single-node Ray is started with ``num_cpus=workers`` and no dashboard,
and shut down at the end. Each task asks for one CPU. The driver keeps at most two tasks per
cluster CPU in flight and writes each cell's rows when its task returns (ray.wait), so the
output grows as the sweep runs.

Retries are the driver's, not Ray's (``max_retries=0``): a task that raises inside the library,
or whose worker or node dies, costs the cell an attempt and the driver submits it again until
``retries`` is spent, so the output can say how many attempts each cell took; bad options or a
bad trace (ValueError) give an error row at once, as on the local backend.

Traces: every path is absolute, because a worker's working directory is not the driver's. A
trace marked ``ship: true`` is put in the object store once by the driver; each node writes it
once to <ship dir>/<checksum>/<name> (under flock, through a temporary renamed into place) and
its tasks read that copy. The ship dir is ``$KVTK_SWEEP_SHIP_DIR`` when the driver sets it (the
driver passes it with every task, so the workers use it too), else the worker's own
``$KVTK_SWEEP_SHIP_DIR``, else its ``$TMPDIR/kvtk-sweep-traces-<uid>`` (``ship_dir()``); it and
the trace's folder in it must be this user's and writable by no one else. Without ship, every node must see the trace
at the driver's path (a shared filesystem).
"""
from __future__ import annotations

import os
import stat
import sys
import tempfile
from typing import Optional

from .cells import execute
from .output import _write_atomic as write_atomic

SHIP_DIR_ENV = "KVTK_SWEEP_SHIP_DIR"
TEST_ENV = ("KVTK_SWEEP_TEST_KILL_ONCE", "KVTK_SWEEP_TEST_CELL_DELAY")


def _import_ray():
    try:
        import ray  # optional dependency (pip install ./python[sweep])
    except ImportError:
        raise RuntimeError("the ray backend needs Ray (pip install ray, or pip install "
                           "./python[sweep]); or use --backend local") from None
    return ray


def ship_dir(configured: Optional[str] = None) -> str:
    """Where this process keeps shipped traces: ``configured`` (the driver's setting), else
    ``$KVTK_SWEEP_SHIP_DIR``, else ``<tempdir>/kvtk-sweep-traces-<uid>``. Per user by default:
    another user's directory is not writable, and must not be trusted."""
    chosen = configured or os.environ.get(SHIP_DIR_ENV)
    if chosen:
        return os.path.abspath(chosen)
    return os.path.join(tempfile.gettempdir(), f"kvtk-sweep-traces-{os.getuid()}")


def _check_private(directory: str) -> None:
    """Refuses a directory that another user could have written into: a shipped copy found there
    is read as the trace."""
    st = os.lstat(directory)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise OSError(f"{directory}: not a directory of this user that only this user can write "
                      "to; cannot keep shipped traces there (set KVTK_SWEEP_SHIP_DIR)")


def _materialise(checksum: str, name: str, box: list, configured: Optional[str] = None) -> str:
    """The node's copy of a shipped trace, written once per node."""
    import fcntl

    import ray

    root = ship_dir(configured)
    folder = os.path.join(root, checksum.replace(":", "-"))
    path = os.path.join(folder, name)
    os.makedirs(root, mode=0o700, exist_ok=True)
    _check_private(root)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    _check_private(folder)
    if os.path.isfile(path) and not os.path.islink(path):
        return path  # written by an earlier task on this node (only this user can write here)
    with open(os.path.join(folder, ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(path):
            data = ray.get(box[0])

            def write(tmp: str) -> None:
                with open(tmp, "wb") as f:
                    f.write(memoryview(data))

            write_atomic(path, write)  # tmp + fsync + replace; the tmp is removed on failure
    return path


def _ray_cell(task: dict, box: Optional[list]) -> dict:
    """The remote function: runs one cell on a Ray worker."""
    import ray

    ctx = ray.get_runtime_context()
    worker = f"ray:{ctx.get_node_id()[:8]}:{os.getpid()}"
    trace_path = None
    if task.get("ship") and box:
        trace_path = _materialise(task["ship"], os.path.basename(task["trace_path"]), box,
                                  task.get("ship_dir"))
    return execute(task, trace_path=trace_path, worker=worker)


def _test_env() -> dict:
    return {k: os.environ[k] for k in TEST_ENV if os.environ.get(k)}


def run(tasks: list, retries: int, report, workers: int = 0, address: Optional[str] = None,
        ship: Optional[dict] = None) -> None:
    """ship: checksum -> trace path, for the traces sent through the object store."""
    ray = _import_ray()
    import numpy as np
    from ray.exceptions import RayError

    started = False
    env = _test_env()
    if not ray.is_initialized():
        kwargs = dict(include_dashboard=False, logging_level="WARNING")
        if env:
            kwargs["runtime_env"] = {"env_vars": env}
        if address:
            ray.init(address=address, **kwargs)
        else:
            from .local import default_workers

            shipped = sum(os.path.getsize(p) for p in (ship or {}).values())
            ray.init(num_cpus=workers or default_workers(),
                     object_store_memory=max(128 << 20, 2 * shipped + (64 << 20)), **kwargs)
        started = True
    remote = ray.remote(num_cpus=1, max_retries=0)(_ray_cell)
    if env and not started:
        remote = remote.options(runtime_env={"env_vars": env})

    boxes = {c: [ray.put(np.fromfile(p, dtype=np.uint8))] for c, p in (ship or {}).items()}
    # The driver's ship dir, when set, travels with each task: a worker's environment is not
    # the driver's (a joined cluster's workers started elsewhere, and SHIP_DIR_ENV may be set
    # after Ray started).
    configured = os.environ.get(SHIP_DIR_ENV)
    if configured:
        configured = os.path.abspath(configured)
    cpus = int(ray.cluster_resources().get("CPU", 1)) or 1
    limit = max(2, 2 * cpus)
    queue = list(reversed(tasks))  # pop() takes them in spec order
    inflight: dict = {}
    attempts: dict = {}
    clean = False
    try:
        while queue or inflight:
            while queue and len(inflight) < limit:
                task = queue.pop()
                if configured and task.get("ship"):
                    task = dict(task, ship_dir=configured)
                ref = remote.remote(task, boxes.get(task.get("ship")))
                inflight[ref] = task
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=1.0)
            for ref in ready:
                task = inflight.pop(ref)
                cid = task["cell_id"]
                attempts[cid] = attempts.get(cid, 0) + 1
                try:
                    out = ray.get(ref)
                except RayError as e:  # the worker or node died, or the task could not run
                    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
                    out = {"cell_id": cid, "status": "exception",
                           "error": f"{type(e).__name__}: {first}"[:2000]}
                if out["status"] == "exception" and attempts[cid] <= retries:
                    queue.append(task)
                    continue
                if out["status"] == "exception":
                    out = dict(out, status="failed")
                report(task, out, attempts[cid])
        clean = True
    finally:
        if not clean:
            for ref in inflight:
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001 - best effort while stopping
                    pass
        if started:
            try:
                ray.shutdown()
            except Exception as e:  # noqa: BLE001
                print(f"kvtk sweep: ray.shutdown: {e}", file=sys.stderr)
