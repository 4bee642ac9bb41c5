"""The job process server: a pre-started interpreter that forks the keepers of jobs.

The worker starts it once (``python -m worker_svc.handlers._zygote FD``, FD one end of a
``SOCK_SEQPACKET`` socket pair) and asks it for a job by sending one small message,
``{"req": N, "grace_s": G, "exec": BOOL}``, with five file descriptors: the job's stdout,
stderr, result and log pipes (write ends) and its spec pipe (read end). Every job runs
below a keeper (:mod:`worker_svc.handlers._keeper`: a child subreaper that tracks and
stops every process of the job), and the server forks keepers of two kinds:

- a keeper of python jobs forks each job's process ahead of its job: a process group of
  its own that dies with its keeper (PR_SET_PDEATHSIG) and waits for its job's descriptors
  on a socket of its own. The server hands it the five descriptors (and its keeper the
  go). The job process takes the pipes as its stdout, stderr and result fds (only stdout
  and stderr inheritable: a program the job starts gets none of the other pipes, nor any
  other job's), reads the job's spec (JSON) from the spec pipe, runs the job
  (:mod:`worker_svc.handlers._runner`) and exits;
- a keeper of programs (``"exec": true``, a shell job) gets the descriptors itself, reads
  the spec and spawns the program (``posix_spawn``: the job costs no copy of this
  interpreter).

Either way the spec is the go-ahead: the worker writes it only once the job is registered
with the guard (``_guard``), so a worker that dies before that leaves nothing running. A
keeper serves one job after another. The server keeps as many keepers of each kind free as
the worker asks for (one per slot, at most :data:`MAX_SPARES`; of programs only once one
was asked for), so no fork is on a job's path; it forks a new keeper only while no request
waits and too few are free, and a keeper whose job ended is ready again at once, so keepers
are forked only while the jobs running at once grow.

The server answers each request with ``{"req": N, "pid": PID, "keeper": KEEPER}`` (``PID``
the job process, 0 for a program, which its keeper names on the result pipe once started)
and, once nothing of that job is left, ``{"end": N, "status": WAIT_STATUS, "cpu_s":
CPU_SECONDS}`` (``status`` null when its keeper died without saying). ``{"stop": N}``
(``"kill": true``: at once) stops request N's job: the server signals its keeper, whose
pid it alone reaps and so never names another process, and only while that keeper keeps
that job (a stop asked before the keeper said it took the job's go is sent once it did).
It never runs a job itself: each job process starts from the state the server had before
any job ran (the imports below, done once, then frozen out of the garbage
collector's reach so that a child's collections do not copy their pages), and nothing of
one job reaches the next. The server is a child subreaper too: what a keeper that was
killed leaves is reparented to it, and it SIGKILLs every process below it that is no
keeper's. It dies with the worker (PR_SET_PDEATHSIG), its keepers then SIGKILL their jobs,
and it exits when the worker closes its socket.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import selectors
import signal
import socket
import sys
from typing import Any

from worker_svc.handlers import _runner

from . import _tree
from ._keeper import KILL_SIGNAL, STOP_SIGNAL, start_keeper

MAX_SPARES = 4
"""The most spare jobs kept forked ahead: enough for the jobs of several slots that start
together; each costs two processes' own pages."""
_MAX_FDS = 5


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.send(json.dumps(message).encode())


class _Keeper:
    """A keeper process of this server (see :mod:`worker_svc.handlers._keeper`): of
    python jobs, announcing each job process it forks ahead (``job``, with ``job_channel``
    to give it its descriptors on), or of programs (``execs``: it starts each itself);
    it keeps a job once handed, reports its end, and so on."""

    def __init__(self, closing: list[int], *, execs: bool) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            try:
                ours.close()
                for fd in closing:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            finally:
                start_keeper(theirs, None if execs else _runner.job_process)
        theirs.close()
        self.pid = pid
        self.execs = execs
        self.channel = ours
        self.ready = False
        """Whether it said it is ready for a job (a job process forked ahead, for python)."""
        self.req = 0
        """The request whose job it keeps, while ``busy``."""
        self.job = 0
        """Its job process: forked ahead (``job_channel`` set) or running (``busy``); 0
        between a job's end and the next announcement."""
        self.job_channel: socket.socket | None = None
        self.busy = False
        self.armed = False
        """Whether the keeper said it took its current job's go: signals sent to it from
        then on are that job's (it drops those pending before)."""
        self.held: signal.Signals | None = None
        """A stop asked for its current job before it was armed: sent once it is."""

    @property
    def idle(self) -> bool:
        """Whether it is ready for the next job."""
        return not self.busy and self.ready

    def heard(self, sock: socket.socket) -> bool:
        """Take one message of the keeper: a job process forked ahead, or the end of its
        job (passed on to the worker on ``sock``); False when the keeper is gone."""
        try:
            said, fds, _flags, _addr = socket.recv_fds(self.channel, 4096, 1)
        except OSError:
            said, fds = b"", []
        if not said:
            for fd in fds:
                os.close(fd)
            return False
        message = json.loads(said)
        if "armed" in message:
            self.armed = True
            if self.busy and self.held is not None:
                self.signal(self.held)
            self.held = None
            return True
        if "job" in message:
            self.job = int(message["job"])
            if not self.execs:
                if not fds:
                    return False
                self.job_channel = socket.socket(fileno=fds[0])
            self.ready = True
            return True
        _send(sock, {"end": self.req, "status": message["status"], "cpu_s": message["cpu_s"]})
        self.busy = False
        self.job = 0
        return True

    def hand(self, req: int, fds: list[int], grace_s: float) -> None:
        """Give request ``req``'s job to this keeper: its descriptors to the job process
        ready (it then waits for the spec), or to a keeper of programs with the go; the go
        carries the grace of the stop rule.

        Raises:
            OSError: the job process or the keeper died.
        """
        go = json.dumps({"grace_s": grace_s}).encode()
        self.ready = False
        if self.execs:
            socket.send_fds(self.channel, [go], fds)
        else:
            assert self.job_channel is not None
            try:
                socket.send_fds(self.job_channel, [b"job"], fds)
            finally:
                self.job_channel.close()
                self.job_channel = None
            self.channel.send(go)
        self.busy = True
        self.armed = False
        self.held = None
        self.req = req

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to this keeper (unreaped: still that keeper), or hold it until the
        keeper is armed for its job; a kill is never held back by a held stop."""
        if not self.armed:
            if self.held is None or sig == KILL_SIGNAL:
                self.held = sig
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)

    def lost(self, sock: socket.socket) -> None:
        """The keeper is gone: a job it kept ended unknown to it (said so on ``sock``)."""
        if self.busy:
            _send(sock, {"end": self.req, "status": None, "cpu_s": None})
            self.busy = False
        self.close()

    def close(self) -> None:
        """Let the keeper go (it exits when it reads end of file) and forget it."""
        self.channel.close()
        if self.job_channel is not None:
            self.job_channel.close()
            self.job_channel = None


class _Server:
    """The server's state: its keepers, busy or with a job process forked ahead."""

    def __init__(self, sock: socket.socket, spares_wanted: int) -> None:
        self.sock = sock
        self.spares_wanted = spares_wanted
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(sock, selectors.EVENT_READ)
        self.selector.register(self.wake_r, selectors.EVENT_READ)
        self.keepers: dict[int, _Keeper] = {}
        self.gone: set[int] = set()
        """Keepers forgotten (let go, or their channel closed) and not reaped yet."""
        self.execs_wanted = 0
        """Keepers of programs kept free: none until the first program is asked for."""

    def serve(self) -> None:
        """Answer the worker until it closes its socket, keeping ``spares_wanted`` keepers
        free of each kind (a new one is forked only while no request waits). A keeper whose
        job ended takes a later one, so keepers are forked only while the jobs running at
        once grow; one that gets ready while twice that many are is let go."""
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        while True:
            short = self._short()
            ready = self.selector.select(0 if short is not None else None)
            if not ready:
                assert short is not None
                self._fork_keeper(execs=short)
                continue
            for key, _ in ready:
                if key.fileobj is self.sock:
                    message, fds, _flags, _addr = socket.recv_fds(self.sock, 4096, _MAX_FDS)
                    if not message:
                        return  # the worker is gone
                    request = json.loads(message)
                    if "stop" in request:
                        self._stop(request)
                    else:
                        self._answer(request, fds)
                elif isinstance(key.data, _Keeper):
                    keeper = key.data
                    if keeper.pid not in self.keepers:
                        continue
                    if not keeper.heard(self.sock):
                        self._forget(keeper, lost=True)
                    elif keeper.idle and self._idle(keeper.execs) > 2 * self._wanted(keeper.execs):
                        self._forget(keeper)  # after a burst of jobs: more than slots need
                else:
                    with contextlib.suppress(BlockingIOError):
                        while os.read(self.wake_r, 4096):
                            pass
            self._reap()

    def _wanted(self, execs: bool) -> int:
        """How many keepers of that kind to keep free."""
        return self.execs_wanted if execs else self.spares_wanted

    def _idle(self, execs: bool) -> int:
        """How many keepers of that kind are ready for a job."""
        return sum(k.idle for k in self.keepers.values() if k.execs == execs)

    def _short(self) -> bool | None:
        """Which kind of keeper too few are free of (True: of programs); None: neither."""
        free = [keeper.execs for keeper in self.keepers.values() if not keeper.busy]
        if free.count(False) < self.spares_wanted:
            return False
        if free.count(True) < self.execs_wanted:
            return True
        return None

    def _closing(self, fds: list[int]) -> list[int]:
        """What a keeper forked now closes first: the server's own descriptors, those of
        the request being answered (its job process gets its own copies through its
        channel) and the other keepers' channels, so a job holds only its own pipes."""
        mine = [self.sock.fileno(), self.wake_r, self.wake_w, self.selector.fileno()]
        for keeper in self.keepers.values():
            mine.append(keeper.channel.fileno())
            if keeper.job_channel is not None:
                mine.append(keeper.job_channel.fileno())
        return [*mine, *fds]

    def _fork_keeper(self, fds: list[int] | None = None, *, execs: bool) -> _Keeper:
        keeper = _Keeper(self._closing(fds or []), execs=execs)
        self.keepers[keeper.pid] = keeper
        self.selector.register(keeper.channel, selectors.EVENT_READ, keeper)
        return keeper

    def _forget(self, keeper: _Keeper, *, lost: bool = False) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(keeper.channel)
        if lost:
            keeper.lost(self.sock)
        else:
            keeper.close()
        self.keepers.pop(keeper.pid, None)
        self.gone.add(keeper.pid)

    def _stop(self, request: dict[str, Any]) -> None:
        """Signal the keeper of the job of request ``request["stop"]``: stop the job, or
        kill it at once; nothing when that job is over."""
        for keeper in self.keepers.values():
            if keeper.busy and keeper.req == request["stop"]:
                keeper.signal(KILL_SIGNAL if request.get("kill") else STOP_SIGNAL)
                return

    def _answer(self, request: dict[str, Any], fds: list[int]) -> None:
        """Hand a request's descriptors to a keeper's job process forked ahead (a new
        keeper's when none is ready) and answer with its pids, or with the error."""
        try:
            if len(fds) != _MAX_FDS:
                _send(self.sock, {"req": request["req"], "error": "expected 5 descriptors"})
                return
            grace_s = float(request.get("grace_s", 0.0))
            execs = bool(request.get("exec"))
            if execs:
                self.execs_wanted = self.spares_wanted
            error: OSError | None = None
            for _ in range(len(self.keepers) + 1):  # each spare that died, then a new one
                keeper: _Keeper | None = None
                try:
                    keeper = self._ready_keeper(fds, execs)
                    keeper.hand(request["req"], fds, grace_s)
                    break
                except OSError as exc:  # it died unreaped: another one takes the job
                    error = exc
                    if keeper is not None and keeper.pid in self.keepers:
                        self._forget(keeper)
            else:
                _send(self.sock, {"req": request["req"], "error": f"no job process: {error}"})
                return
            assert keeper is not None
            message = {"req": request["req"], "pid": keeper.job, "keeper": keeper.pid}
            _send(self.sock, message)
        finally:
            for fd in fds:
                os.close(fd)

    def _ready_keeper(self, fds: list[int], execs: bool) -> _Keeper:
        """A keeper of the kind asked for that is ready: one that is, else one whose job
        just ended (it gets ready at once), else a new one; waited for.

        Raises:
            OSError: the keeper waited for died before it was ready.
        """
        free = [k for k in self.keepers.values() if not k.busy and k.execs == execs]
        for keeper in free:
            if keeper.idle:
                return keeper
        keeper = free[0] if free else self._fork_keeper(fds, execs=execs)
        while not keeper.idle:
            if not keeper.heard(self.sock):
                self._forget(keeper, lost=True)
                raise ConnectionResetError("a keeper exited before its job process was ready")
        return keeper

    def _reap(self) -> None:
        """Reap every child that exited: a keeper let go (expected), a keeper that died
        (its job, if any, ended unknown), or a process reparented here from a keeper that
        was killed (ignored). When a keeper died, whatever it kept is SIGKILLed."""
        died = False
        while True:
            try:
                pid, status, _usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in self.keepers:
                self._forget(self.keepers[pid], lost=True)
                died = True
            elif pid in self.gone:
                self.gone.discard(pid)
                died = died or not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0
        if died:
            _tree.kill_all(os.getpid(), skip=frozenset(self.keepers))


def serve(sock: socket.socket, spares_wanted: int = 1) -> None:
    """Run jobs for the worker on ``sock`` until it closes it, keeping ``spares_wanted``
    keepers with a job process forked ahead (see the module docstring)."""
    _Server(sock, spares_wanted).serve()


def _preload() -> None:
    """Import and set up what every job process needs, once, before any fork, then keep
    those objects out of the garbage collector's passes (a pass in a child would write to,
    and so copy, every page they live on)."""
    import asyncio  # noqa: F401
    import inspect  # noqa: F401
    import logging  # noqa: F401

    import tickwork  # noqa: F401

    _runner.prepare()
    gc.collect()
    gc.freeze()


def main(argv: list[str]) -> int:
    """``python -m worker_svc.handlers._zygote FD WORKER_PID [SPARES]``."""
    _tree.die_with_parent(signal.SIGKILL)
    if os.getppid() != int(argv[2]):  # the worker died before the line above
        return 1
    _tree.become_subreaper()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=int(argv[1]))
    _preload()
    try:
        serve(sock, min(max(int(argv[3]), 1), MAX_SPARES) if len(argv) > 3 else 1)
    except (BrokenPipeError, ConnectionResetError):
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
