"""The job process server: a pre-started interpreter that forks one job process per job.

The worker starts it once (``python -m worker_svc.handlers._zygote FD``, FD one end of a
``SOCK_SEQPACKET`` socket pair) and asks it for a job process by sending one small message
with five file descriptors: the job's stdout, stderr, result and log pipes (write ends)
and its spec pipe (read end). The server keeps *spare* children forked ahead (as many as
the worker asks for: one per slot, at most :data:`MAX_SPARES`), so no fork is on a job's
path: a spare already is a process group of its own, dies with the server
(PR_SET_PDEATHSIG) and waits for its job's descriptors on a socket of its own. The server
hands the oldest spare the five descriptors, answers, and forks the next spare only while
no request waits. The child takes
the pipes as its stdout, stderr and result fds (only stdout and stderr inheritable: a program
the job starts gets none of the other pipes, nor any other job's), and reads the job's spec
(JSON) from the spec pipe: the worker writes it only once the group is registered with the guard
(``_guard``), so a worker that dies before that leaves a child that reads end-of-file and
exits without running anything. The child then runs the job
(:mod:`worker_svc.handlers._runner`) and exits.

The server answers each request with ``{"req": N, "pid": PID}`` and, when that child has
exited, ``{"pid": PID, "status": WAIT_STATUS, "cpu_s": CPU_SECONDS}``. It never runs a
job itself: each child starts from the state the server had before any job ran (the
imports below, done once, then frozen out of the garbage collector's reach so that a
child's collections do not copy their pages), and nothing of one job reaches the next. A
spare that never got a job exits without telling. The server dies with the worker
(PR_SET_PDEATHSIG) and exits when the worker closes its socket.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import selectors
import signal
import socket
import sys
import traceback
from typing import Any

from worker_svc.handlers import _runner

_PR_SET_PDEATHSIG = 1
MAX_SPARES = 4
"""The most spare children kept forked ahead: enough for the jobs of several slots that
start together; each costs a process's own pages."""
_MAX_FDS = 5
_SPEC_LIMIT_BYTES = 64 * 1024 * 1024
"""A spec longer than this is refused (params are at most 1 MiB)."""


_libc: ctypes.CDLL | None = None


def die_with_parent() -> None:
    """Have the kernel SIGKILL this process when its parent (thread) dies; Linux only."""
    global _libc
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
        size += len(chunk)
        if size > _SPEC_LIMIT_BYTES:
            break
    return b"".join(chunks)


def _child(channel: socket.socket, closing: list[int]) -> None:
    """In the forked spare: become a job process, wait for a job, run it, exit. Never
    returns."""
    code = 1
    try:
        for fd in closing:
            with contextlib.suppress(OSError):
                os.close(fd)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
        die_with_parent()
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
    """A child forked ahead of its job, waiting on ``channel`` for its descriptors."""

    def __init__(self, closing: list[int]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            ours.close()
            _child(theirs, closing)
        theirs.close()
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # also done by the child: whichever comes first
        self.pid = pid
        self.channel = ours

    def hand(self, fds: list[int]) -> None:
        """Give the spare its job's descriptors (it then waits for the spec)."""
        try:
            socket.send_fds(self.channel, [b"job"], fds)
        finally:
            self.channel.close()


def serve(sock: socket.socket, spares_wanted: int = 1) -> None:
    """Fork a job process per request until the worker closes ``sock``, keeping up to
    ``spares_wanted`` spare children forked ahead: a spare is forked only while no request
    waits, so a request never waits behind a spare's fork."""
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
    while True:
        ready = selector.select(0 if len(spares) < spares_wanted else None)
        if not ready:
            spare = _Spare(_unshared(closing, [], spares))
            spares[spare.pid] = spare
            continue
        for key, _ in ready:
            if key.fileobj is sock:
                message, fds, _flags, _addr = socket.recv_fds(sock, 4096, _MAX_FDS)
                if not message:
                    return  # the worker is gone
                _answer(sock, json.loads(message), fds, spares, closing)
            else:
                with contextlib.suppress(BlockingIOError):
                    while os.read(wake_r, 4096):
                        pass
        for pid in _reap(sock, spares):
            del spares[pid]


def _answer(
    sock: socket.socket,
    request: dict[str, Any],
    fds: list[int],
    spares: dict[int, _Spare],
    closing: list[int],
) -> None:
    """Hand a request's descriptors to a spare (the oldest; a fresh fork when none is
    left) and answer with its pid, or with the error."""
    if len(fds) != _MAX_FDS:
        for fd in fds:
            os.close(fd)
        _send(sock, {"req": request["req"], "error": "expected 5 descriptors"})
        return
    child = spares.pop(next(iter(spares))) if spares else _Spare(_unshared(closing, fds, spares))
    try:
        try:
            child.hand(fds)
        except OSError:  # the spare died unreaped: a fresh child takes the job
            child = _Spare(_unshared(closing, fds, spares))
            child.hand(fds)
    except OSError as exc:
        _send(sock, {"req": request["req"], "error": f"no job process: {exc}"})
        return
    finally:
        for fd in fds:
            os.close(fd)
    _send(sock, {"req": request["req"], "pid": child.pid})


def _unshared(closing: list[int], fds: list[int], spares: dict[int, _Spare]) -> list[int]:
    """What a child forked now closes first: the server's own descriptors, those of the
    request being answered (the child gets its own copies through its channel) and the
    other spares' channels, so a job process holds only its own pipes."""
    return [*closing, *fds, *(spare.channel.fileno() for spare in spares.values())]


def _reap(sock: socket.socket, spares: dict[int, _Spare]) -> list[int]:
    """Report every child that has exited; return the spares among them (they are not
    reported: they never had a job)."""
    spares_died: list[int] = []
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return spares_died
        if pid == 0:
            return spares_died
        if pid in spares:
            spares[pid].channel.close()
            spares_died.append(pid)
            continue
        cpu_s = usage.ru_utime + usage.ru_stime
        _send(sock, {"pid": pid, "status": status, "cpu_s": cpu_s})


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
    die_with_parent()
    if os.getppid() != int(argv[2]):  # the worker died before the line above
        return 1
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
