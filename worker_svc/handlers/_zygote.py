"""The job process server: a pre-started interpreter that forks the processes of jobs.

The worker starts it once (``python -m worker_svc.handlers._zygote FD``, FD one end of a
``SOCK_SEQPACKET`` socket pair) and asks it for a job process by sending one small message,
``{"req": N, "grace_s": G}``, with five file descriptors: the job's stdout, stderr, result
and log pipes (write ends) and its spec pipe (read end). Every job runs below a keeper of
its own (:mod:`worker_svc.handlers._keeper`: a child subreaper that tracks and stops every
process of the job): the server forks the keeper, which forks the job's process. The
server keeps *spare* pairs forked ahead (as many as the worker asks for: one per slot, at
most :data:`MAX_SPARES`), so no fork is on a job's path: a spare job process already is a
process group of its own, dies with its keeper (PR_SET_PDEATHSIG) and waits for its job's
descriptors on a socket of its own. The server hands the oldest spare the five descriptors
(and its keeper the grace), answers, and forks the next spare only while no request waits.
The job process takes the pipes as its stdout, stderr and result fds (only stdout and
stderr inheritable: a program the job starts gets none of the other pipes, nor any other
job's), and reads the job's spec (JSON) from the spec pipe: the worker writes it only once
the job is registered with the guard (``_guard``), so a worker that dies before that leaves
a process that reads end-of-file and exits without running anything. The job process then
runs the job (:mod:`worker_svc.handlers._runner`: a function, a handler, or a program it
execs) and exits.

The server answers each request with ``{"req": N, "pid": PID, "keeper": KEEPER}`` and,
once nothing of that job is left, ``{"pid": PID, "status": WAIT_STATUS, "cpu_s":
CPU_SECONDS}`` (``status`` null when its keeper died without saying). ``{"stop": PID}``
(``"kill": true``: at once) stops a job: the server signals its keeper, whose pid it alone
reaps and so never names another process. It never runs a job itself: each job process
starts from the state the server had before any job ran (the imports below, done once,
then frozen out of the garbage collector's reach so that a child's collections do not
copy their pages), and nothing of one job reaches the next. A spare that never got a job
exits without telling. The server is a child subreaper too: what a keeper that was killed
leaves is reparented to it, and it SIGKILLs every process below it that is no keeper's. It
dies with the worker (PR_SET_PDEATHSIG), its keepers then SIGKILL their jobs, and it exits
when the worker closes its socket.
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
import traceback
from typing import Any, NoReturn

from worker_svc.handlers import _runner

from . import _tree
from ._keeper import KILL_SIGNAL, STOP_SIGNAL, start_keeper

MAX_SPARES = 4
"""The most spare jobs kept forked ahead: enough for the jobs of several slots that start
together; each costs two processes' own pages."""
_MAX_FDS = 5
_SPEC_LIMIT_BYTES = 64 * 1024 * 1024
"""A spec longer than this is refused (params are at most 1 MiB)."""


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
        size += len(chunk)
        if size > _SPEC_LIMIT_BYTES:
            break
    return b"".join(chunks)


def _job_process(channel: socket.socket) -> NoReturn:
    """In the job's process (forked by its keeper): wait for the job, run it, exit."""
    code = 1
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
        keeper = os.getppid()
        _tree.die_with_parent(signal.SIGKILL)
        if os.getppid() != keeper:
            os._exit(125)  # the keeper died before the line above
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        _message, fds, _flags, _addr = socket.recv_fds(channel, 16, _MAX_FDS)
        channel.close()
        if len(fds) != _MAX_FDS:
            os._exit(125)  # the server is gone: no job for this spare
        out, err, result, spec, log = fds
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.close(out)
        os.close(err)
        for fd in (result, spec, log):  # the job's own: not for the programs it starts
            os.set_inheritable(fd, False)
        data = _read_all(spec)
        os.close(spec)
        if not data:
            os._exit(125)  # the worker gave no go-ahead: run nothing
        code = _runner.run(json.loads(data), result, log)
    except BaseException:
        with contextlib.suppress(BaseException):
            traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.send(json.dumps(message).encode())


class _Spare:
    """A keeper forked ahead of its job, and the job process it forked, waiting: the
    keeper on ``channel`` for the go, the job process on ``job_channel`` for its
    descriptors."""

    def __init__(self, closing: list[int]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        job_ours, job_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            try:
                ours.close()
                job_ours.close()
                for fd in closing:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            finally:
                start_keeper(theirs, job_theirs, lambda: _job_process(job_theirs))
        theirs.close()
        job_theirs.close()
        self.keeper = pid
        self.channel = ours
        self.job_channel = job_ours
        self.job = 0
        """The job process's pid, once the keeper said it (:meth:`hand`)."""
        self.reported = False

    def hand(self, fds: list[int], grace_s: float) -> None:
        """Give the job process its job's descriptors (it then waits for the spec) and
        the keeper the grace of the stop rule; learn the job process's pid.

        Raises:
            OSError: the spare died.
        """
        try:
            socket.send_fds(self.job_channel, [b"job"], fds)
        finally:
            self.job_channel.close()
        self.channel.setblocking(True)
        said = self.channel.recv(4096)  # sent by the keeper as soon as it forked
        if not said:
            raise ConnectionResetError("the spare's keeper exited")
        self.job = int(json.loads(said)["job"])
        self.channel.send(json.dumps({"grace_s": grace_s}).encode())

    def close(self) -> None:
        self.channel.close()
        with contextlib.suppress(OSError):
            self.job_channel.close()


def serve(sock: socket.socket, spares_wanted: int = 1) -> None:
    """Fork a job per request until the worker closes ``sock``, keeping up to
    ``spares_wanted`` spares forked ahead: a spare is forked only while no request waits,
    so a request never waits behind a spare's fork."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    closing = [sock.fileno(), wake_r, wake_w, selector.fileno()]
    spares: dict[int, _Spare] = {}
    jobs: dict[int, _Spare] = {}
    """The keepers of jobs handed out and not yet reaped, by keeper pid."""
    while True:
        ready = selector.select(0 if len(spares) < spares_wanted else None)
        if not ready:
            spare = _Spare(_unshared(closing, [], spares, jobs))
            spares[spare.keeper] = spare
            continue
        for key, _ in ready:
            if key.fileobj is sock:
                message, fds, _flags, _addr = socket.recv_fds(sock, 4096, _MAX_FDS)
                if not message:
                    return  # the worker is gone
                request = json.loads(message)
                if "stop" in request:
                    _stop(request, jobs)
                    continue
                child = _answer(sock, request, fds, spares, jobs, closing)
                if child is not None:
                    jobs[child.keeper] = child
                    selector.register(child.channel, selectors.EVENT_READ, child)
            elif isinstance(key.data, _Spare):
                _report(sock, key.data)
                selector.unregister(key.fileobj)
            else:
                with contextlib.suppress(BlockingIOError):
                    while os.read(wake_r, 4096):
                        pass
        _reap(sock, spares, jobs, selector)


def _stop(request: dict[str, Any], jobs: dict[int, _Spare]) -> None:
    """Signal the keeper of job process ``request["stop"]``: stop it, or kill it at once."""
    for keeper in jobs.values():
        if keeper.job == request["stop"]:
            sig = KILL_SIGNAL if request.get("kill") else STOP_SIGNAL
            with contextlib.suppress(ProcessLookupError):
                os.kill(keeper.keeper, sig)  # unreaped: still that keeper
            return


def _report(sock: socket.socket, job: _Spare) -> None:
    """Pass on how the job's process ended, once its keeper said it (nothing of the job
    is left then); a keeper that died without saying: status unknown."""
    if job.reported:
        return
    job.reported = True
    try:
        job.channel.setblocking(False)
        said = job.channel.recv(4096)
    except OSError:
        said = b""
    end = json.loads(said) if said else {"status": None, "cpu_s": None}
    _send(sock, {"pid": job.job, "status": end["status"], "cpu_s": end["cpu_s"]})


def _answer(
    sock: socket.socket,
    request: dict[str, Any],
    fds: list[int],
    spares: dict[int, _Spare],
    jobs: dict[int, _Spare],
    closing: list[int],
) -> _Spare | None:
    """Hand a request's descriptors to a spare (the oldest; a fresh fork when none is
    left) and answer with its pids, or with the error; the spare that took the job."""
    if len(fds) != _MAX_FDS:
        for fd in fds:
            os.close(fd)
        _send(sock, {"req": request["req"], "error": "expected 5 descriptors"})
        return None
    grace_s = float(request.get("grace_s", 0.0))
    if spares:
        child = spares.pop(next(iter(spares)))
    else:
        child = _Spare(_unshared(closing, fds, spares, jobs))
    try:
        try:
            child.hand(fds, grace_s)
        except OSError:  # the spare died unreaped: a fresh one takes the job
            child.close()
            child = _Spare(_unshared(closing, fds, spares, jobs))
            child.hand(fds, grace_s)
    except OSError as exc:
        child.close()
        _send(sock, {"req": request["req"], "error": f"no job process: {exc}"})
        return None
    finally:
        for fd in fds:
            os.close(fd)
    _send(sock, {"req": request["req"], "pid": child.job, "keeper": child.keeper})
    return child


def _unshared(
    closing: list[int], fds: list[int], spares: dict[int, _Spare], jobs: dict[int, _Spare]
) -> list[int]:
    """What a keeper forked now closes first: the server's own descriptors, those of the
    request being answered (its job process gets its own copies through its channel) and
    the other keepers' and spares' channels, so a job holds only its own pipes."""
    return [
        *closing,
        *fds,
        *(spare.channel.fileno() for spare in spares.values()),
        *(spare.job_channel.fileno() for spare in spares.values()),
        *(job.channel.fileno() for job in jobs.values() if job.channel.fileno() >= 0),
    ]


def _reap(
    sock: socket.socket,
    spares: dict[int, _Spare],
    jobs: dict[int, _Spare],
    selector: selectors.BaseSelector,
) -> None:
    """Reap every child that exited: a keeper whose job ended (reported now if its report
    was not read yet), a spare that died (dropped), or a process reparented here from a
    keeper that was killed (ignored). When a keeper died without reporting, what it kept
    is SIGKILLed."""
    lost = False
    while True:
        try:
            pid, status, _usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        if pid in spares:
            spares.pop(pid).close()
        elif pid in jobs:
            job = jobs.pop(pid)
            if not job.reported:
                _report(sock, job)
                with contextlib.suppress(KeyError, ValueError):
                    selector.unregister(job.channel)
            job.close()
            lost = lost or not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0
    if lost:
        _tree.kill_all(os.getpid(), skip=frozenset([*spares, *jobs]))


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
