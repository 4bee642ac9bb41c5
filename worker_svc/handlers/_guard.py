"""Job processes do not outlive their worker.

A job runs below a keeper of its own (``_keeper``), its process in a process group of its
own. If the worker is SIGKILLed, or crashes, the job would go on running while the server
recovers the job ("lease lost") and hands its retry to another worker, so two runs of the
task would overlap. Its keeper kills it when the job process server dies with the worker;
a small guard process makes sure of it. Started with the first job, it holds the read end
of a pipe whose write end only the worker holds; the worker registers each job on it (its
process group, its keeper's pid and start time). When the pipe reaches end-of-file (the
worker exited, however it exited), the guard SIGKILLs every group still registered and
tells each keeper (still the process that started then) to SIGKILL every process of its
job, then exits. The worker keeps the registered jobs too: when the guard itself dies, a
new one is started at once and told all of them.

A worker that is alive but frozen (SIGSTOP, a VM or container pause, a debugger) keeps the
pipe open and can kill nothing itself. So the guard is also a watchdog: the worker feeds it
(:func:`feed`) with every heartbeat it sends for a job, and a group registered with a
watchdog timeout (:func:`watch`) is SIGKILLed by the guard once no feed and no registration
came for that many seconds (and its keeper told to kill the job). The worker sets the
timeout to the lease TTL minus one heartbeat
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

from . import _tree
from ._keeper import KILL_SIGNAL

__all__ = ["feed", "forget_job", "guard_job", "watch"]

logger = logging.getLogger(__name__)

_GUARD_SOURCE = """
import os, select, signal, sys, time
fd = sys.stdin.fileno()
groups = {}
clock = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)
fed = time.clock_gettime(clock)
rest = b""
def started(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
        return int(stat[stat.rfind(b")") + 2:].split()[19])
    except (OSError, IndexError, ValueError):
        return -1
def kill(keeper, start, pgid):
    if keeper > 0 and started(keeper) == start:
        try:
            os.kill(keeper, KILL_SIGNAL)
        except OSError:
            pass
    if pgid > 0:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
while True:
    now = time.clock_gettime(clock)
    for key, (limit, keeper, start, pgid) in list(groups.items()):
        if limit > 0 and now - fed > limit:
            kill(keeper, start, pgid)
            del groups[key]
    timeout = 0.1 if any(entry[0] > 0 for entry in groups.values()) else None
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
            key, limit, keeper, start, pgid = line[1:].split()
            groups[int(key)] = (float(limit), int(keeper), int(start), int(pgid))
            fed = time.clock_gettime(clock)
        elif sign == b"-":
            groups.pop(int(line[1:]), None)
for limit, keeper, start, pgid in groups.values():
    kill(keeper, start, pgid)
""".replace("KILL_SIGNAL", str(int(KILL_SIGNAL)))
"""The guard's program. Lines: ``+KEY SECONDS KEEPER START PGID`` registers a job: a key
of the worker's, its watchdog timeout (``SECONDS`` 0: none), its keeper's pid (0: none) and
start time (``/proc/PID/stat``'s, so that a pid given to another process since is not
signalled) and its process group (0: none known); ``-KEY`` forgets it, ``.`` feeds the
watchdog; a registration feeds it too. It checks the watchdog every 0.1 s while a watched
job is registered, on the boot-time clock (which counts a suspended machine's time too)."""

_lock = threading.Lock()
_guard: subprocess.Popen[bytes] | None = None
_watchdog_s = 0.0
"""The watchdog timeout given to groups registered from now on, seconds (0: none)."""
_groups: dict[int, str] = {}
"""The jobs registered and not forgotten, by key, with the rest of their registration
line (watchdog timeout, keeper, its start time, process group): what a guard started again
(the last one died) is told first."""
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
            lines = "".join(f"+{key} {entry}\n" for key, entry in _groups.items())
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


def guard_job(key: int, pgid: int, keeper: int) -> None:
    """Have a job killed if this worker process dies before :func:`forget_job` of ``key``
    (a number of the worker's, unique among its running jobs), or stops feeding the guard
    for the :func:`watch` timeout: its keeper ``keeper`` told to SIGKILL every process of
    the job, its process group ``pgid`` (0: none known) SIGKILLed. Never raises."""
    try:
        start = _tree.start_time(keeper) if keeper else None
        known = keeper if start is not None else 0
        entry = f"{_watchdog_s:.3f} {known} {start or 0} {pgid}"
        with _lock:
            _groups[key] = entry
        _tell(f"+{key} {entry}\n")
    except Exception:
        logger.exception("could not register job %d (keeper %d) with the guard", key, keeper)


def forget_job(key: int) -> None:
    """The job registered as ``key`` is over: no longer kill it when the worker dies."""
    try:
        with _lock:
            _groups.pop(key, None)
        _tell(f"-{key}\n")
    except Exception:
        logger.exception("could not unregister job %d from the guard", key)


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
