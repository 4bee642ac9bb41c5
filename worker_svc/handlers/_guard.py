"""Job processes do not outlive their worker.

A job's program runs in a process group of its own (so that abort can stop all of it). If
the worker is SIGKILLed, or crashes, nobody stops that group: the program would go on
running while the server recovers the job ("lease lost") and hands its retry to another
worker, so two runs of the task would overlap. A small guard process, started with the
first job, holds the read end of a pipe whose write end only the worker holds; the worker
registers each job's process group on it. When the pipe reaches end-of-file (the worker
exited, however it exited), the guard SIGKILLs every group still registered, then exits.
The worker keeps the registered groups too: when the guard itself dies, a new one is
started at once and told all of them.

A worker that is alive but frozen (SIGSTOP, a VM or container pause, a debugger) keeps the
pipe open and can kill nothing itself. So the guard is also a watchdog: the worker feeds it
(:func:`feed`) with every heartbeat it sends for a job, and a group registered with a
watchdog timeout (:func:`watch`) is SIGKILLed by the guard once no feed and no registration
came for that many seconds. The worker sets the timeout to the lease TTL minus one heartbeat
interval, so a frozen worker's job processes are dead by the time the service can recover
the job's lease (see docs/guide/jobs.md, "Leases and lost workers").
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import subprocess
import sys
import threading
import time

__all__ = ["feed", "forget_group", "guard_group", "watch"]

logger = logging.getLogger(__name__)

_GUARD_SOURCE = """
import os, select, signal, sys, time
fd = sys.stdin.fileno()
groups = {}
clock = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)
fed = time.clock_gettime(clock)
rest = b""
def kill(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
while True:
    now = time.clock_gettime(clock)
    for pgid, limit in list(groups.items()):
        if limit > 0 and now - fed > limit:
            kill(pgid)
            del groups[pgid]
    timeout = 0.1 if any(limit > 0 for limit in groups.values()) else None
    if not select.select([fd], [], [], timeout)[0]:
        continue
    data = os.read(fd, 65536)
    if not data:
        break
    *lines, rest = (rest + data).split(b"\\n")
    for line in lines:
        sign = line[:1]
        if sign == b".":
            fed = time.clock_gettime(clock)
        elif sign == b"+":
            pgid, limit = line[1:].split()
            groups[int(pgid)] = float(limit)
            fed = time.clock_gettime(clock)
        elif sign == b"-":
            groups.pop(int(line[1:]), None)
for pgid in groups:
    kill(pgid)
"""
"""The guard's program. Lines: ``+PGID SECONDS`` registers a group (``SECONDS`` 0: no
watchdog), ``-PGID`` forgets it, ``.`` feeds the watchdog; a registration feeds it too. It
checks the watchdog every 0.1 s while a watched group is registered, on the boot-time
clock (which counts a suspended machine's time too)."""

_lock = threading.Lock()
_guard: subprocess.Popen[bytes] | None = None
_watchdog_s = 0.0
"""The watchdog timeout given to groups registered from now on, seconds (0: none)."""
_groups: dict[int, float] = {}
"""The groups registered and not forgotten, with their watchdog timeouts: what a guard
started again (the last one died) is told first."""
_RESTART_GAP_S = 1.0
"""A guard that dies is started again at once (its groups registered again), unless the
last such restart is less than this long ago: then the next registration starts it (no
loop of restarts when guards cannot run)."""
_last_restart = -_RESTART_GAP_S


def _started() -> subprocess.Popen[bytes]:
    """The guard process of this worker process, started on first use and again when it
    died, told every group still registered (call with _lock)."""
    global _guard
    if _guard is None or _guard.poll() is not None:
        guard = subprocess.Popen(
            [sys.executable, "-S", "-c", _GUARD_SOURCE],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a terminal's Ctrl-C must not stop it first
            close_fds=True,
        )
        assert guard.stdin is not None
        if _groups:
            lines = "".join(f"+{pgid} {limit:.3f}\n" for pgid, limit in _groups.items())
            os.write(guard.stdin.fileno(), lines.encode())  # a pipe takes this many at once
        _guard = guard
        threading.Thread(
            target=_restart_when_dead, args=(guard,), name="tickwork-guard", daemon=True
        ).start()
    return _guard


def _restart_when_dead(guard: subprocess.Popen[bytes]) -> None:
    """Wait for ``guard`` to exit; when it died while it was this worker's guard (not at
    exit), start the next one at once, so that the running jobs' groups are guarded
    again without waiting for the next registration."""
    global _last_restart
    guard.wait()
    with _lock:
        if _guard is not guard:
            return  # stopped at exit, or already replaced
        now = time.monotonic()
        if now - _last_restart < _RESTART_GAP_S:
            logger.warning("the process-group guard (pid %d) exited again", guard.pid)
            return
        _last_restart = now
        try:
            _started()
        except OSError as exc:
            logger.warning("the process-group guard died and could not be restarted: %s", exc)
            return
    logger.warning(
        "the process-group guard (pid %d) died; a new one guards %d job process group(s)",
        guard.pid,
        len(_groups),
    )


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


def watch(timeout_s: float) -> None:
    """Give every process group registered from now on a watchdog: the guard SIGKILLs it
    once neither :func:`feed` nor a registration came for ``timeout_s`` seconds (<= 0: no
    watchdog). The worker calls it with each Welcome (lease TTL minus heartbeat interval)."""
    global _watchdog_s
    _watchdog_s = max(0.0, timeout_s)


def feed() -> None:
    """Tell the guard this worker is alive (every heartbeat a job sends). Does nothing
    while no guard runs (no job has started yet). Never raises."""
    with _lock:
        guard = _guard
        if guard is None or guard.stdin is None or guard.poll() is not None:
            return
        with contextlib.suppress(OSError):  # gone: the next registration restarts it
            os.write(guard.stdin.fileno(), b".\n")


def guard_group(pgid: int) -> None:
    """Have process group ``pgid`` SIGKILLed if this worker process dies before
    :func:`forget_group`, or stops feeding the guard for the :func:`watch` timeout.
    Never raises."""
    try:
        with _lock:
            _groups[pgid] = _watchdog_s
        _tell(f"+{pgid} {_watchdog_s:.3f}\n")
    except Exception:
        logger.exception("could not register process group %d with the guard", pgid)


def forget_group(pgid: int) -> None:
    """The group ``pgid`` has been stopped: no longer kill it when the worker dies."""
    try:
        with _lock:
            _groups.pop(pgid, None)
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
