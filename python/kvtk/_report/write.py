"""Writing the page: the checks every kvtk output gets (never over an input, never over a device
or FIFO, an existing file only with force), then a temporary beside it renamed into place, so an
interrupted or failed run leaves neither a half page nor a temporary behind."""
from __future__ import annotations

import os
import stat
import secrets
import time
from typing import Optional

from .build import Log, ReportError, Settings, build_report
from .page import render


def check_output(out: str, trace: str, force: bool) -> str:
    out = os.path.abspath(os.fspath(out))
    parent = os.path.dirname(out)
    if not os.path.isdir(parent):
        raise ReportError(f"{out}: no such directory {parent}")
    try:
        st = os.stat(out)
    except FileNotFoundError:
        return out
    except OSError as e:
        raise ReportError(f"{out}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ReportError(f"{out}: not a regular file (a directory, device or FIFO is never replaced)")
    try:
        if os.path.samefile(out, trace):
            raise ReportError(f"{out}: this is the input trace; name another output")
    except FileNotFoundError:
        pass
    if not force:
        raise ReportError(f"{out} exists; pass --force to replace it")
    return out


def write_report(trace, out, force: bool = False, log: Optional[Log] = None, **settings) -> str:
    """Builds the report of `trace` and writes it to `out` (an existing file only with force).
    Returns the absolute path written. Raises ReportError."""
    trace = os.fspath(trace)
    out = check_output(out, trace, force)
    rep = build_report(Settings(trace=trace, **settings), log)
    if log:
        log("drawing the page (matplotlib) ...")
    started = time.perf_counter()
    text = render(rep)
    if log:
        log(f"drew the page: {time.perf_counter() - started:.1f} s")
    fd, tmp = _create_temporary(out)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        check_output(out, trace, force)  # nothing appeared in its place meanwhile
        os.replace(tmp, out)
    except OSError as e:
        raise ReportError(f"{out}: cannot write: {e.strerror or e}") from None
    finally:
        if os.path.exists(tmp):  # ours: _create_temporary made it
            os.unlink(tmp)
    if log:
        log(f"wrote {out} ({len(text.encode()) / 1024:,.0f} KiB)")
    return out


def _create_temporary(out: str):
    """A new file beside `out` (O_EXCL: never one that exists), mode 0666 less the umask as any
    file the user writes; (descriptor, path)."""
    for _ in range(100):
        tmp = f"{out}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
                           0o666), tmp
        except FileExistsError:
            continue
        except OSError as e:
            raise ReportError(f"{out}: cannot write: {e.strerror or e}") from None
    raise ReportError(f"{out}: cannot write: no free temporary name beside it")
