"""A process's descendants on Linux, and signalling them without hitting a reused pid.

A process marked a *child subreaper* (:func:`become_subreaper`) adopts every orphan below
it: a descendant whose parent dies is reparented to the nearest living subreaper above it,
not to init. So while a subreaper lives, no process it started, however it detaches
(``setsid``, a double fork, ``nohup ... &``), leaves the tree below it, and that tree is
what :func:`descendants` reads from ``/proc`` (every process's parent, state and start
time). A pid read from ``/proc`` may name another process by the time it is signalled (the
first one exited, was reaped by its parent and its pid given to a new process): each
signal goes through a pidfd opened on the pid and checked against the start time read with
it (:func:`send`), so only the process that was seen is signalled.

Stdlib only, and no imports of this package: a job's keeper and the job process server use
it after a fork. Elsewhere than Linux there is no ``/proc`` and no subreaper:
:func:`descendants` finds nothing and the callers fall back to process groups.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time

__all__ = [
    "Process",
    "become_subreaper",
    "descendants",
    "die_with_parent",
    "kill_all",
    "send",
    "start_time",
]

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_KILL_ROUND_PAUSE_S = 0.002
"""Between two rounds of :func:`kill_all`: time for the killed processes to exit."""

Process = tuple[int, int]
"""A process as seen in ``/proc``: (pid, start time in clock ticks after boot)."""

_libc: ctypes.CDLL | None = None


def _prctl(option: int, value: int) -> bool:
    """Linux's prctl(option, value); whether it worked (False elsewhere)."""
    global _libc
    if not sys.platform.startswith("linux"):
        return False
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        return bool(_libc.prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def become_subreaper() -> bool:
    """Mark this process a child subreaper (Linux's PR_SET_CHILD_SUBREAPER): orphans
    below it are reparented to it. Returns whether that worked (False elsewhere)."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def die_with_parent(sig: int = signal.SIGKILL) -> bool:
    """Have the kernel send ``sig`` to this process when its parent (thread) dies
    (PR_SET_PDEATHSIG; Linux only). Returns whether that worked. A caller checks
    ``os.getppid()`` afterwards: a parent that died before this call sends nothing."""
    return _prctl(_PR_SET_PDEATHSIG, sig)


def _stat(pid: int | str) -> tuple[int, int, str] | None:
    """(parent pid, start time, state) of process ``pid``; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold anything: split after it.
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return int(fields[1]), int(fields[19]), fields[0].decode()
    except (IndexError, ValueError):
        return None


def start_time(pid: int) -> int | None:
    """Process ``pid``'s start time (clock ticks after boot); None when it is gone."""
    found = _stat(pid)
    return None if found is None else found[1]


def descendants(root: int, skip: frozenset[int] = frozenset()) -> list[Process]:
    """Every living process below ``root`` (children, their children...), zombies left
    out, nor the trees below a pid in ``skip``; parents before their children. Empty
    where there is no ``/proc``.

    Args:
        root (int): the process whose tree is read (itself not included).
        skip (frozenset[int]): processes whose trees are not included (nor themselves).
    """
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    children: dict[int, list[tuple[int, int, str]]] = {}
    for name in names:
        if not name.isdigit():
            continue
        found = _stat(name)
        if found is not None:
            children.setdefault(found[0], []).append((int(name), found[1], found[2]))
    tree: list[Process] = []
    below = [root]
    while below:
        parent = below.pop()
        for pid, started, state in children.get(parent, ()):
            if pid in skip:
                continue
            if state != "Z":  # a zombie has no children and cannot be signalled
                tree.append((pid, started))
            below.append(pid)
    return tree


def send(process: Process, sig: int) -> bool:
    """Send ``sig`` to ``process`` if it is still the process that was seen (same pid and
    start time). Returns whether it was sent."""
    pid, started = process
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except (OSError, AttributeError):  # no pidfds here: the start time checked just before
        if start_time(pid) != started:
            return False
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
            return True
        return False
    try:
        # The pidfd names one process for good; the start time tells it is the one seen.
        if start_time(pid) != started:
            return False
        signal.pidfd_send_signal(pidfd, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False
    finally:
        os.close(pidfd)


def kill_all(root: int, skip: frozenset[int] = frozenset(), within_s: float = 5.0) -> int:
    """SIGKILL every process below ``root`` (but the trees below ``skip``), again and
    again until none is left alive, or ``within_s`` seconds passed (a process stuck in
    the kernel). A killed process's children are reparented to the subreaper above it
    and are found in the next round; SIGKILLed processes fork no more, so rounds end.
    Returns how many processes were killed."""
    deadline = time.monotonic() + within_s
    killed: set[Process] = set()
    while True:
        found = descendants(root, skip)
        if not found:
            return len(killed)
        killed.update(process for process in found if send(process, signal.SIGKILL))
        if time.monotonic() > deadline:
            return len(killed)
        time.sleep(_KILL_ROUND_PAUSE_S)
