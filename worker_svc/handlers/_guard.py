"""Job processes do not outlive their worker.

A job's program runs in a process group of its own (so that abort can stop all of it). If
the worker is SIGKILLed, or crashes, nobody stops that group: the program would go on
running while the server recovers the job ("lease lost") and hands its retry to another
worker, so two runs of the task would overlap. A small guard process, started with the
first job, holds the read end of a pipe whose write end only the worker holds; the worker
registers each job's process group on it. When the pipe reaches end-of-file (the worker
exited, however it exited), the guard SIGKILLs every group still registered, then exits.
"""

from __future__ import annotations

import atexit
import logging
import os
import subprocess
import sys
import threading

__all__ = ["forget_group", "guard_group"]

logger = logging.getLogger(__name__)

_GUARD_SOURCE = """
import os, signal, sys
groups = set()
for line in sys.stdin:
    sign, pgid = line[0], int(line[1:])
    if sign == "+":
        groups.add(pgid)
    else:
        groups.discard(pgid)
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
"""

_lock = threading.Lock()
_guard: subprocess.Popen[bytes] | None = None


def _started() -> subprocess.Popen[bytes]:
    """The guard process of this worker process, started on first use (call with _lock)."""
    global _guard
    if _guard is None or _guard.poll() is not None:
        _guard = subprocess.Popen(
            [sys.executable, "-S", "-c", _GUARD_SOURCE],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a terminal's Ctrl-C must not stop it first
            close_fds=True,
        )
    return _guard


def _tell(line: str) -> None:
    """Send one line to the guard; a guard that is gone is restarted once, then ignored."""
    with _lock:
        for _ in range(2):
            guard = _started()
            assert guard.stdin is not None
            try:
                os.write(guard.stdin.fileno(), line.encode())
                return
            except OSError:
                guard.stdin.close()
                guard.wait()
        logger.warning(
            "the process-group guard is not available; job processes may outlive a crash"
        )


def guard_group(pgid: int) -> None:
    """Have process group ``pgid`` SIGKILLed if this worker process dies before
    :func:`forget_group`. Never raises."""
    try:
        _tell(f"+{pgid}\n")
    except Exception:
        logger.exception("could not register process group %d with the guard", pgid)


def forget_group(pgid: int) -> None:
    """The group ``pgid`` has been stopped: no longer kill it when the worker dies."""
    try:
        _tell(f"-{pgid}\n")
    except Exception:
        logger.exception("could not unregister process group %d from the guard", pgid)


@atexit.register
def _stop_guard() -> None:
    """At a normal exit close the pipe, so the guard exits too (every group is forgotten)."""
    global _guard
    with _lock:
        guard, _guard = _guard, None
    if guard is not None and guard.stdin is not None:
        guard.stdin.close()
        try:
            guard.wait(5)
        except subprocess.TimeoutExpired:
            guard.kill()
            guard.wait()
