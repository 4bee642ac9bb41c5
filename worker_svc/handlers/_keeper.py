"""Every process of a job is tracked and stopped: the keeper of one job.

**The rule.** Everything a job starts is the job's, and nothing of it outlives the job:
not its end, not an abort or timeout, not its worker's death. Stopping a job is one rule,
whatever the cause: SIGTERM to every process of the job, then, once the grace
(WORKER_ABORT_GRACE_SECONDS) has passed with any of them left, SIGKILL to every one left.
The job is over, and its outcome reported, only once no process of it is left.

**How a job's processes are known.** A process group is not enough: ``setsid``, a
daemon's double fork or ``nohup cmd &`` in a new session leave it. So every job, shell and
python alike, runs below a *keeper*: a process forked by the job process server
(:mod:`worker_svc.handlers._zygote`), a child subreaper (PR_SET_CHILD_SUBREAPER), that
starts the job's process (forks a python job's, spawns a shell job's program). An orphan
below a subreaper is reparented to it, not to init; so while the keeper keeps a job, every
process the job started, however it detached, is below the keeper, and only the job's
processes are (a keeper keeps one job at a time). The job lasts until that tree is empty,
the keeper reaping what is reparented to it:

- The job's process exits: when the keeper then has no child left (one ``waitpid``, no
  ``/proc`` read: anything still running below it would be its child or below one), the
  job is over. Otherwise what the job left behind gets the stop rule.
- The worker stops the job (abort, timeout, shutdown): it asks the server, which signals
  the keeper (the server is the keeper's parent, so the pid it signals is still that
  keeper): :data:`STOP_SIGNAL` applies the stop rule to the whole tree, :data:`KILL_SIGNAL`
  SIGKILLs it at once (the grace is over, or the worker is cancelled again).
- The keeper reports how the job's process ended (wait status, CPU seconds) to the server
  only when nothing of the tree is left; the server passes it to the worker. So the job's
  output pipes, which only its processes hold, are at end of file by then: a daemon the
  job left cannot hold the job's end open.

A keeper keeps one job at a time and then the next: the server keeps one per job slot (a
python job's keeper with the next job's process forked ahead), so a job costs no more forks
than its own process. Signals the server sent for a job that ended meanwhile are dropped
before the next job starts;
that happens as the keeper takes its go, and it then says ``{"armed": true}``: the server
holds back a stop asked for the new job until it heard that, so no stop is taken for the
last job's and dropped.

**When the worker dies.** The server dies with the worker (PR_SET_PDEATHSIG), and each
keeper gets :data:`KILL_SIGNAL` when the server dies: it SIGKILLs its tree, reaps it and
exits. The worker's guard (:mod:`worker_svc.handlers._guard`) knows each running job's
keeper (and a python job's process group) and, when the worker exits or stops feeding it
(frozen), sends the keeper :data:`KILL_SIGNAL` and SIGKILLs the group itself, so neither a
frozen worker nor a lost signal leaves the job running. A keeper that is itself killed
(its job killed it, an operator) takes a python job's process with it (PR_SET_PDEATHSIG);
whatever of the job is left is reparented to the server, also a subreaper, which SIGKILLs
every process below it that is no keeper's.

**What is read when.** The tree is read from ``/proc`` (:mod:`worker_svc.handlers._tree`)
only to signal it: on a stop, and when a job's process ended with something left. A job
that ends with nothing left costs the keeper one ``waitpid`` more than its process's own.
Elsewhere than Linux there is neither a subreaper nor ``/proc``: the keeper then signals
the job's process group, which holds what did not start a session of its own.

A cgroup per job would also hold what a dead keeper lets go; it needs privileges or a
delegated hierarchy a worker cannot count on, and the keeper holds the tree without one.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import NoReturn

from . import _tree
from ._program import NOT_STARTED, spawn

__all__ = ["KILL_SIGNAL", "STOP_SIGNAL", "start_keeper"]

STOP_SIGNAL = signal.SIGTERM
"""Sent to a keeper: stop the job by the stop rule (SIGTERM to all, grace, SIGKILL)."""
KILL_SIGNAL = signal.SIGUSR1
"""Sent to a keeper (and sent by the kernel when the job process server dies): SIGKILL
every process of the job now."""
_SIGNALS = {signal.SIGCHLD, STOP_SIGNAL, KILL_SIGNAL}
"""What a keeper waits for (blocked, taken with sigwaitinfo: no handler runs)."""
_PENDING_POLL_S = 0.01


def start_keeper(
    server: socket.socket, become_job: Callable[[socket.socket], NoReturn] | None
) -> NoReturn:
    """In a process just forked by the job process server: become a keeper, and keep one
    job after another until the server closes ``server`` (or dies).

    A keeper of python jobs (``become_job`` given) forks each job's process ahead
    (``become_job`` runs in it, with the socket it gets its descriptors on) and tells the
    server ``{"job": PID}`` with the other end of that socket; the go, ``{"grace_s": G}``,
    comes when the job's descriptors are given to that process. A keeper of programs
    (``become_job`` None) says ``{"job": 0}``; its go comes with the job's descriptors,
    and it starts the program itself once the worker writes the spec (see
    :mod:`worker_svc.handlers._program`). Either then keeps the job until nothing of it
    is left and reports ``{"status": WAIT_STATUS, "cpu_s": SECONDS}``.

    Args:
        server (socket.socket): this keeper's channel to the server.
        become_job (Callable[[socket.socket], NoReturn] | None): what a job's process runs.
    """
    try:
        signal.set_wakeup_fd(-1)
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)  # not in the job's group: a signal to that group spares it
        server_pid = os.getppid()
        _tree.become_subreaper()
        _tree.die_with_parent(KILL_SIGNAL)
        if os.getppid() != server_pid:
            os._exit(0)  # the server died before the line above
        while _keep_one(server, become_job):
            pass
    except BaseException:
        with contextlib.suppress(BaseException):
            import traceback

            traceback.print_exc()
    finally:
        os._exit(0)


def _keep_one(
    server: socket.socket, become_job: Callable[[socket.socket], NoReturn] | None
) -> bool:
    """Keep the next job, and report its end; whether to go on (the server is still there
    and wants this keeper)."""
    job = 0
    try:
        if become_job is None:
            server.send(json.dumps({"job": 0}).encode())
        else:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            job = os.fork()
            if job == 0:
                server.close()
                ours.close()
                become_job(theirs)
            theirs.close()
            socket.send_fds(server, [json.dumps({"job": job}).encode()], [ours.fileno()])
            ours.close()
        go, fds, _flags, _addr = socket.recv_fds(server, 4096, _MAX_FDS)
    except OSError:  # the server is gone
        go, fds = b"", []
    if not go:  # no job for this one: the server is gone or let this keeper go
        for fd in fds:
            os.close(fd)
        _kill_everything(job)
        _reap_all()
        return False
    _forget_signals()
    # Signals from here on are this job's: the server holds back a stop asked before. When
    # the server is gone, this keeper is killed with it, and the job too.
    with contextlib.suppress(OSError):
        server.send(json.dumps({"armed": True}).encode())
    grace_s = float(json.loads(go)["grace_s"])
    if become_job is None:
        program, status = spawn(fds) if len(fds) == _MAX_FDS else (None, NOT_STARTED)
        if program is None:
            return _report(server, status, 0.0)
        job = program
    return _report(server, *_Keeper(job, grace_s).keep())


def _report(server: socket.socket, status: int | None, cpu_s: float) -> bool:
    """Tell the server how the job's process ended; whether it heard it."""
    try:
        server.send(json.dumps({"status": status, "cpu_s": cpu_s}).encode())
    except OSError:
        return False
    return True


def _forget_signals() -> None:
    """Take the stop and kill signals still pending for this keeper's last job (the server
    sent them before it read that job's end): they are not the next job's."""
    while _next_signal({STOP_SIGNAL, KILL_SIGNAL}, 0) is not None:
        pass


def _next_signal(signals: set[signal.Signals], timeout_s: float | None) -> int | None:
    """Take the next of ``signals`` (blocked in this process) that is or becomes pending,
    waiting at most ``timeout_s`` seconds (None: as long as it takes); None when none came.
    Where there is no sigtimedwait (macOS), what is pending is looked at every 10 ms."""
    if hasattr(signal, "sigtimedwait"):
        if timeout_s is None:
            return signal.sigwaitinfo(signals).si_signo
        info = signal.sigtimedwait(signals, max(0.0, timeout_s))
        return None if info is None else info.si_signo
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        pending = signal.sigpending() & signals
        if pending:
            return signal.sigwait({min(pending)})
        if deadline is not None and time.monotonic() >= deadline:
            return None
        time.sleep(_PENDING_POLL_S)


class _Keeper:
    """The keeper's loop over one job; see the module docstring."""

    def __init__(self, job: int, grace_s: float) -> None:
        self.job = job
        self.grace_s = max(0.0, grace_s)
        self.status: int | None = None
        self.cpu_s = 0.0
        self.deadline: float | None = None
        """When what is left gets SIGKILL (monotonic), once the stop rule began."""
        self.killing = False

    def keep(self) -> tuple[int | None, float]:
        """Wait until nothing of the job is left, applying stops as they come; return
        the job process's wait status (None when it was not seen to end) and CPU seconds."""
        while True:
            if not self._reap():
                return self.status, self.cpu_s
            if self.killing:
                _kill_everything(self.job)
            elif self.status is not None and self.deadline is None:
                self._stop()  # the job's process ended and left something behind
            left_s = None
            if not self.killing and self.deadline is not None:
                left_s = self.deadline - time.monotonic()
                if left_s <= 0:
                    self.killing = True
                    continue
            sig = _next_signal(_SIGNALS, left_s)
            if sig == STOP_SIGNAL and self.deadline is None:
                self._stop()
            elif sig == KILL_SIGNAL:
                self.killing = True

    def _reap(self) -> bool:
        """Reap every child that ended, noting the job process's end; whether any child
        is left (none: nothing of the job is left)."""
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.job:
                self.status = status
                self.cpu_s = usage.ru_utime + usage.ru_stime

    def _stop(self) -> None:
        """Begin the stop rule: SIGTERM to every process of the job; SIGKILL to what is
        left once the grace has passed."""
        self.deadline = time.monotonic() + self.grace_s
        _signal_everything(self.job, signal.SIGTERM)


_MAX_FDS = 5
"""A job's descriptors: stdout, stderr, result, spec and log pipes."""


def _signal_everything(job: int, sig: int) -> None:
    """Send ``sig`` to every process below this keeper (its group, where there is no
    ``/proc`` to read the tree from)."""
    if sys.platform.startswith("linux"):
        for process in _tree.descendants(os.getpid()):
            _tree.send(process, sig)
    elif job > 0:
        with contextlib.suppress(OSError):
            os.killpg(job, sig)


def _kill_everything(job: int) -> None:
    """SIGKILL every process below this keeper until none is left alive."""
    if sys.platform.startswith("linux"):
        _tree.kill_all(os.getpid())
    else:
        _signal_everything(job, signal.SIGKILL)


def _reap_all() -> None:
    """Wait for every child (after they were killed)."""
    with contextlib.suppress(ChildProcessError):
        while True:
            os.wait4(-1, 0)
