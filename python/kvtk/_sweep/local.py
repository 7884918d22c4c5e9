"""The local backend: a pool of worker processes (or threads) on this machine.

Each worker is a fresh interpreter (``python -c``, started like multiprocessing's *spawn*: no
fork of the driver, so no copied locks or threads) with its own socket pair wrapped as a
multiprocessing Connection; the driver waits on every connection and every process's pidfd at
once (multiprocessing.connection.wait). A worker that dies (killed, out of memory, a crash in the
library) loses only the cell it was running: that cell costs an attempt and goes back in the
queue, and a new worker takes the dead one's place. Not ProcessPoolExecutor: one death there
breaks every pending future without saying which cell killed it. Not multiprocessing.Process
either: its spawn re-imports the caller's ``__main__`` in every worker, so a script calling
kvtk.sweep() without ``if __name__ == "__main__":`` would start sweeps recursively; these
workers import nothing but kvtk (the driver's copy).

Workers ignore SIGINT (Ctrl-C reaches the whole process group): the driver alone handles it,
terminating the workers and closing the output. ``pool="thread"`` runs cells on threads of this
process instead (the library releases the GIL): no process start-up, suits notebooks, but a crash
takes the whole process and Ctrl-C lets running cells finish in the background.
"""
from __future__ import annotations

import collections
import os
import signal
import socket
import subprocess
import sys
import threading
from concurrent import futures
from multiprocessing.connection import Connection, wait

from .cells import execute, worker_name

_WORKER = ("import sys; sys.path.insert(0, sys.argv[2]); "
           "from kvtk._sweep.local import worker_main; worker_main(int(sys.argv[1]))")


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def worker_main(fd: int) -> None:
    """A worker process: runs the tasks that arrive on `fd` until None or EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(fd)
    name = worker_name("local")
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        conn.send(execute(task, worker=name))


class _Slot:
    def __init__(self):
        import kvtk

        ours, theirs = socket.socketpair()
        site = os.path.dirname(os.path.dirname(os.path.abspath(kvtk.__file__)))
        main = threading.current_thread() is threading.main_thread()
        # Started with SIGINT ignored: the new interpreter inherits the disposition (and keeps it),
        # so a Ctrl-C during its start-up cannot kill it either.
        old = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
        try:
            self.proc = subprocess.Popen([sys.executable, "-c", _WORKER, str(theirs.fileno()), site],
                                         pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL)
        finally:
            if main:
                signal.signal(signal.SIGINT, old if old is not None else signal.default_int_handler)
            theirs.close()
        self.conn = Connection(ours.detach())
        # Readable when the process exits (Linux >= 5.3); elsewhere its connection's EOF says so.
        try:
            self.sentinel = os.pidfd_open(self.proc.pid)
        except (AttributeError, OSError):
            self.sentinel = None
        self.task = None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, now: bool) -> None:
        if not now and self.alive():
            try:
                self.conn.send(None)
            except OSError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        for end in (self.proc.terminate, self.proc.kill):
            if self.alive():
                end()
                try:
                    self.proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    pass
        self.conn.close()
        if self.sentinel is not None:
            os.close(self.sentinel)
            self.sentinel = None


def _exit_text(code) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def run_processes(tasks: list, retries: int, report, workers: int) -> None:
    """Runs `tasks` (task dicts) on `workers` worker processes. report(task, outcome, attempts)
    is called in this thread for each cell's last outcome (ok, error, or failed after retries)."""
    queue = collections.deque(tasks)
    attempts: dict = collections.Counter()
    slots = [_Slot() for _ in range(max(1, min(workers, len(tasks))))]
    clean = False

    def lost(slot, why: str) -> None:
        task = slot.task
        slot.task = None
        if task is not None:
            attempts[task["cell_id"]] += 1
            if attempts[task["cell_id"]] <= retries:
                queue.appendleft(task)
            else:
                report(task, {"cell_id": task["cell_id"], "status": "failed", "error": why,
                              "worker": f"local:{slot.proc.pid}"},
                       attempts[task["cell_id"]])

    def finished(slot, out) -> None:
        task, slot.task = slot.task, None
        cid = task["cell_id"]
        attempts[cid] += 1
        if out["status"] == "exception" and attempts[cid] <= retries:
            queue.appendleft(task)
            return
        if out["status"] == "exception":
            out = dict(out, status="failed")
        report(task, out, attempts[cid])

    try:
        while queue or any(s is not None and s.task is not None for s in slots):
            for i, s in enumerate(slots):
                if queue and (s is None or s.task is None):
                    if s is None:  # a dead worker is replaced when there is work for it
                        s = slots[i] = _Slot()
                    s.task = queue.popleft()
                    try:
                        s.conn.send(s.task)
                    except OSError:
                        pass  # it died; its sentinel says so below
            owner = {}
            for i, s in enumerate(slots):
                if s is not None:
                    if s.sentinel is not None:
                        owner[s.sentinel] = i
                    if s.task is not None or s.sentinel is None:
                        owner[s.conn] = i
            for obj in wait(list(owner)):
                i = owner[obj]
                s = slots[i]
                if s is None:
                    continue  # already found dead in this round
                # A result in the pipe counts even if the worker died right after sending it.
                out = None
                if s.task is not None and (obj is s.conn or s.conn.poll()):
                    try:
                        out = s.conn.recv()
                    except (EOFError, OSError):
                        out = None  # died mid-cell
                if out is not None:
                    finished(s, out)
                    if s.alive():
                        continue
                try:  # dead (EOF or pidfd): reap it
                    s.proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    pass
                s.stop(now=True)
                lost(s, f"worker process died ({_exit_text(s.proc.returncode)})")
                slots[i] = None
        clean = True
    finally:
        for s in slots:
            if s is not None:
                s.stop(now=not clean)


def run_threads(tasks: list, retries: int, report, workers: int) -> None:
    """The same on a thread pool of this process (pool="thread")."""
    queue = collections.deque(tasks)
    attempts: dict = collections.Counter()
    pool = futures.ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="kvtk-sweep")
    running: dict = {}
    name = worker_name("thread")
    try:
        while queue or running:
            while queue and len(running) < max(1, workers):
                task = queue.popleft()
                running[pool.submit(execute, task, None, False, name)] = task
            done, _ = futures.wait(list(running), timeout=0.5, return_when=futures.FIRST_COMPLETED)
            for f in done:
                task = running.pop(f)
                cid = task["cell_id"]
                attempts[cid] += 1
                out = f.result()
                if out["status"] == "exception" and attempts[cid] <= retries:
                    queue.appendleft(task)
                    continue
                if out["status"] == "exception":
                    out = dict(out, status="failed")
                report(task, out, attempts[cid])
    finally:
        pool.shutdown(wait=not running, cancel_futures=True)


def run(tasks: list, retries: int, report, workers: int = 0, pool: str = "process") -> None:
    workers = workers or default_workers()
    if pool == "thread":
        run_threads(tasks, retries, report, workers)
    elif pool == "process":
        run_processes(tasks, retries, report, workers)
    else:
        raise ValueError(f"pool: process or thread, not {pool!r}")

