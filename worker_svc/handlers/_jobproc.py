"""The worker's side of job processes: get one from the job process server, feed it its
spec, read its output in bounded chunks, stop the job, learn how it ended.

The server (:mod:`worker_svc.handlers._zygote`) is started on first use, one per worker
process, and again when it died. Each job process runs below a keeper of its own that
tracks every process the job starts (:mod:`worker_svc.handlers._keeper`). Stopping a job
(abort, timeout) asks the server to have the keeper SIGTERM every process of the job, and,
once the grace has passed with the job not over, to SIGKILL every one left; when the job
process exits by itself, its keeper applies the same rule to whatever it left behind. The
job's end is known once nothing of it is left. The job (its process group and keeper) is
registered with the guard (``_guard``) for as long as it runs, so a worker that dies kills
it.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from ._guard import forget_job, guard_job

__all__ = ["UNKNOWN_END", "ProcessEnd", "run_job_process", "start_job_process_server"]

logger = logging.getLogger(__name__)

MAX_LINE_CHARS = 64 * 1024
"""A longer line (or output without newlines) is passed on in pieces of this many characters."""
_READ_CHUNK_BYTES = 64 * 1024
"""A python job's output is read at most this much at a time."""
_PROGRAM_READ_CHUNK_BYTES = 256 * 1024
"""A shell job's program's output, at most this much at a time (programs may write much,
fast: fewer, larger reads)."""
_RESULT_LIMIT_BYTES = 1 << 20
"""More of a result than this is ignored."""
_PIPE_DRAIN_S = 2.0
"""After the job process exited, how long to wait for its output pipes to reach EOF."""
_REAP_S = 5.0
"""After SIGKILL, how long to wait for the job process to be reaped before giving up."""

UNKNOWN_END = (
    "how the job's process ended is unknown: its keeper or the job process server died first"
)
"""The error of a job whose end was not told (its :class:`ProcessEnd` ``returncode`` None)."""
_Exit = tuple[int | None, float | None]
"""How a job process ended: (its exit code, negative for a signal; the CPU seconds it
used); (None, None) when the job process server or the job's keeper died before telling."""


class _Pids(NamedTuple):
    """A job the server started: its request, its job process (0 for a program not
    started yet) and its keeper."""

    req: int
    pid: int
    keeper: int


class _ForkServer:
    """This worker process's job process server; see the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._next_request = 0
        self._spawning: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[_Pids]]] = {}
        self._exit_waiters: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[_Exit]]] = {}
        self._exited: dict[int, _Exit] = {}
        self._abandoned: set[int] = set()
        """Requests given up (the job timed out first): nobody waits for the end of the job
        the server started for them, which is dropped."""
        self.slots = 1
        """The job slots of this process's workers: the server keeps as many spare children
        forked ahead (at most ``_zygote.MAX_SPARES``)."""

    def _started(self) -> socket.socket:
        """The socket to a running server, starting one if needed (call with the lock)."""
        if self._sock is not None and self._proc is not None and self._proc.poll() is None:
            return self._sock
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "worker_svc.handlers._zygote",
                    str(theirs.fileno()),
                    str(os.getpid()),
                    str(self.slots),
                ],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,  # a terminal's Ctrl-C is the worker's to handle
            )
        finally:
            theirs.close()
        self._sock = ours
        threading.Thread(
            target=self._read, args=(ours,), name="tickwork-job-processes", daemon=True
        ).start()
        logger.info("started the job process server, pid %d", self._proc.pid)
        return ours

    def _read(self, sock: socket.socket) -> None:
        """Deliver the server's answers until it is gone (a thread of its own)."""
        while True:
            try:
                data = sock.recv(4096)
            except OSError:
                data = b""
            if not data:
                break
            message = json.loads(data)
            with self._lock:
                if "req" in message:
                    loop, spawned = self._spawning.pop(message["req"])
                    if "keeper" in message:
                        pids = _Pids(message["req"], message["pid"], message["keeper"])
                        _settle(loop, spawned, pids, self._abandon)
                    else:
                        _fail(loop, spawned, RuntimeError(message.get("error", "refused")))
                    continue
                req = message["end"]
                if req in self._abandoned:
                    self._abandoned.discard(req)
                    continue
                status = message["status"]
                end: _Exit = (None, None)
                if status is not None:
                    end = (os.waitstatus_to_exitcode(status), float(message["cpu_s"]))
                waiting = self._exit_waiters.pop(req, None)
                if waiting is None:
                    self._exited[req] = end
                else:
                    _settle(waiting[0], waiting[1], end)
        with self._lock:
            if self._sock is sock:
                self._sock = None
            gone = RuntimeError("the job process server exited")
            for loop, spawned in self._spawning.values():
                _fail(loop, spawned, gone)
            self._spawning.clear()
            for loop, waiter in self._exit_waiters.values():
                _settle(loop, waiter, (None, None))
            self._exit_waiters.clear()
        sock.close()

    def _abandon(self, pids: _Pids) -> None:
        """Forget the job started for a request that was given up (on the event loop)."""
        with self._lock:
            if self._exited.pop(pids.req, None) is None:
                self._abandoned.add(pids.req)

    def start(self, slots: int) -> None:
        """Start the server now, unless it runs (its imports take a while: the first job
        should not wait for them), for workers of ``slots`` slots. Never raises."""
        try:
            with self._lock:
                self.slots = max(self.slots, slots)
                self._started()
        except Exception:
            logger.exception("could not start the job process server; the first job will try")

    async def spawn(self, fds: list[int], grace_s: float, *, program: bool) -> _Pids:
        """A new job holding ``fds`` (stdout, stderr, result, spec, log) below a keeper
        that stops what it leaves behind with ``grace_s`` seconds between SIGTERM and
        SIGKILL: a job process ready to run a python job, or (``program``) a keeper that
        starts the program the spec names; the request's number, the job process's pid
        (0 for a program, not started yet) and the keeper's.

        Raises:
            OSError, RuntimeError: no job process could be had.
        """
        loop = asyncio.get_running_loop()
        spawned: asyncio.Future[_Pids] = loop.create_future()
        with self._lock:
            sock = self._started()
            self._next_request += 1
            request = self._next_request
            self._spawning[request] = (loop, spawned)
            message = json.dumps({"req": request, "grace_s": grace_s, "exec": program}).encode()
            try:
                socket.send_fds(sock, [message], fds)
            except OSError:
                del self._spawning[request]
                raise
        return await spawned

    def stop(self, req: int, *, kill: bool) -> None:
        """Have the keeper of request ``req``'s job stop it: SIGTERM to every process of
        it, SIGKILL to what is left after its grace; ``kill``: SIGKILL to all of it now.
        Does nothing once the server is gone (its keepers then kill their jobs)."""
        with self._lock:
            sock = self._sock
            if sock is None:
                return
            with contextlib.suppress(OSError):
                sock.send(json.dumps({"stop": req, "kill": kill}).encode())

    def exit_of(self, req: int) -> asyncio.Future[_Exit]:
        """A future of how request ``req``'s job ends (its process's end, once nothing of
        the job is left)."""
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[_Exit] = loop.create_future()
        with self._lock:
            if req in self._exited:
                ended.set_result(self._exited.pop(req))
            elif self._sock is None:
                ended.set_result((None, None))
            else:
                self._exit_waiters[req] = (loop, ended)
        return ended


def _settle(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    value: Any,
    unwanted: Callable[[Any], None] | None = None,
) -> None:
    """Set ``future`` to ``value`` on ``loop`` (from another thread); when nobody waits
    for it any more (cancelled), hand ``value`` to ``unwanted`` instead."""

    def settle() -> None:
        if not future.done():
            future.set_result(value)
        elif unwanted is not None:
            unwanted(value)

    with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits any more
        loop.call_soon_threadsafe(settle)


def _fail(loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], error: Exception) -> None:
    def fail() -> None:
        if not future.done():
            future.set_exception(error)

    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(fail)


_SERVER = _ForkServer()


def start_job_process_server(slots: int = 1) -> None:
    """Start this process's job process server ahead of the first job, for a worker of
    ``slots`` job slots (it keeps a spare job process forked ahead per slot, up to a few).
    Never raises."""
    _SERVER.start(slots)


class _Lines(asyncio.Protocol):
    """One output pipe, cut into lines of at most MAX_LINE_CHARS characters."""

    def __init__(self, stream: str, on_line: Callable[[str, str], None]) -> None:
        self._stream = stream
        self._on_line = on_line
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""
        self.closed = asyncio.Event()

    def data_received(self, data: bytes) -> None:
        self._feed(self._decoder.decode(data), eof=False)

    def eof_received(self) -> bool:
        self._feed(self._decoder.decode(b"", final=True), eof=True)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set()

    def _feed(self, text: str, *, eof: bool) -> None:
        *lines, rest = (self._partial + text).split("\n")
        for line in lines:
            self._on_line(self._stream, line.removesuffix("\r"))
        while len(rest) > MAX_LINE_CHARS:
            self._on_line(self._stream, rest[:MAX_LINE_CHARS])
            rest = rest[MAX_LINE_CHARS:]
        if eof and rest:
            self._on_line(self._stream, rest.removesuffix("\r"))
            rest = ""
        self._partial = rest


class _TaggedLines(_Lines):
    """The log pipe: lines of JSON ``[stream, line]`` (a handler's ``ctx.log``, in order)."""

    def __init__(self, on_line: Callable[[str, str], None]) -> None:
        super().__init__("log", self._tagged)
        self._on_tagged = on_line

    def _tagged(self, _: str, text: str) -> None:
        try:
            stream, line = json.loads(text)
        except ValueError:
            stream, line = "stderr", text
        self._on_tagged(str(stream), str(line))


class _Result(asyncio.Protocol):
    """The result pipe: at most _RESULT_LIMIT_BYTES of JSON. A program's keeper writes
    ``{"started": PID}`` there once it started it: ``on_started`` is called with the pid."""

    def __init__(self, on_started: Callable[[int], None] | None = None) -> None:
        self._chunks: list[bytes] = []
        self._size = 0
        self._on_started = on_started
        self.closed = asyncio.Event()

    def data_received(self, data: bytes) -> None:
        if self._size < _RESULT_LIMIT_BYTES:
            self._chunks.append(data)
            self._size += len(data)
        if self._on_started is not None:
            started = (self.value() or {}).get("started")
            if isinstance(started, int):
                self._on_started(started)
                self._on_started = None

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set()

    def value(self) -> dict[str, Any] | None:
        try:
            found = json.loads(b"".join(self._chunks))
        except ValueError:
            return None
        return found if isinstance(found, dict) else None


@dataclass(frozen=True)
class ProcessEnd:
    """How a job process ended.

    Attributes:
        returncode (int | None): its exit code, negative for the signal that killed it;
            None when unknown (the job process server died).
        cpu_s (float | None): the CPU time it used, seconds, when known.
        result (dict[str, Any] | None): what it wrote to its result fd, if anything.
        timed_out (bool): it was stopped because it ran longer than the timeout, or the
            timeout ran out before a job process could be had (then nothing ran and
            ``returncode`` is None).
    """

    returncode: int | None
    cpu_s: float | None
    result: dict[str, Any] | None
    timed_out: bool


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _stop(req: int, ended: asyncio.Future[_Exit], grace_s: float) -> None:
    """SIGTERM every process of request ``req``'s job; SIGKILL every one left after
    ``grace_s`` unless the job is over (nothing of it left) by then."""
    _SERVER.stop(req, kill=False)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(max(grace_s, 0.0)):
            await asyncio.shield(ended)
    if not ended.done():
        _SERVER.stop(req, kill=True)


async def _reaped(ended: asyncio.Future[_Exit], pid: int) -> None:
    """Wait (bounded, whatever cancellations come) for the SIGKILLed process's end."""
    waiter = asyncio.ensure_future(asyncio.wait([ended], timeout=_REAP_S))
    cancelled = False
    while not waiter.done():
        try:
            await asyncio.shield(waiter)
        except asyncio.CancelledError:
            cancelled = True
    if not ended.done():
        logger.error("job process %d did not end within %g s of SIGKILL", pid, _REAP_S)
    if cancelled:
        raise asyncio.CancelledError


async def run_job_process(
    spec: dict[str, Any],
    *,
    job_id: int,
    on_line: Callable[[str, str], None],
    timeout_s: float | None,
    grace_s: float,
) -> ProcessEnd:
    """Run one job in a job process and wait for its end.

    Args:
        spec (dict[str, Any]): the job, for :func:`worker_svc.handlers._runner.run`.
        job_id (int): the job, for the log.
        on_line (Callable[[str, str], None]): called with (stream, line) for each line of
            its output, on the event loop, in order per stream; must not block.
        timeout_s (float | None): stop it after this many seconds, counted from the call
            (the wait for a job process included); None: never.
        grace_s (float): seconds between SIGTERM and SIGKILL when it is stopped, or when
            its process ended and left others running.

    Returns:
        ProcessEnd: its exit code, result, and whether it timed out.

    Raises:
        OSError, RuntimeError: no job process could be started.
        asyncio.CancelledError: the job was aborted; every process of it was stopped
            first.
    """
    loop = asyncio.get_running_loop()
    # The timeout counts from here: a job process server that is slow to answer (frozen,
    # swapping) is time the job's timeout covers too.
    deadline = None if timeout_s is None else loop.time() + timeout_s
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    res_r, res_w = os.pipe()
    spec_r, spec_w = os.pipe()
    ours = [out_r, err_r, res_r, spec_w]
    # Only a handler's ctx.log lines use the log pipe; a function's process gets its
    # stderr there, which it never writes to as a log.
    tagged = spec.get("kind") == "handler"
    if tagged:
        log_r, log_w = os.pipe()
        ours.append(log_r)
    else:
        log_w = err_w
    theirs = [out_w, err_w, res_w, spec_r, log_w]
    try:
        async with asyncio.timeout_at(deadline):
            job = await _SERVER.spawn(theirs, grace_s, program=spec.get("kind") == "exec")
    except BaseException as exc:
        # A child handed these pipes later reads no spec (its pipe is closed: end of file)
        # and exits without running anything.
        for fd in ours:
            os.close(fd)
        if isinstance(exc, TimeoutError):
            logger.info("job %d: timed out after %g s waiting for a job process", job_id, timeout_s)
            return ProcessEnd(None, None, None, timed_out=True)
        raise
    finally:
        for fd in dict.fromkeys(theirs):  # each once: err_w may be there twice
            os.close(fd)
    files = [os.fdopen(fd, "rb" if fd != spec_w else "wb", buffering=0) for fd in ours]
    ended = _SERVER.exit_of(job.req)
    guard_job(job.req, job.pid, job.keeper)  # killed with the worker if the worker dies first
    pid = job.pid or job.keeper  # a program's own pid is known once it started
    extra = {"job_id": job_id, "pid": pid}

    def started(program: int) -> None:
        extra["pid"] = program
        logger.info("job %d: started %r as pid %d", job_id, spec["argv"][0], program, extra=extra)

    transports: list[asyncio.ReadTransport | asyncio.WriteTransport] = []
    readers: list[_Lines | _Result] = []
    program = spec.get("kind") == "exec"
    result = _Result(started if program else None)
    chunk_bytes = _PROGRAM_READ_CHUNK_BYTES if program else _READ_CHUNK_BYTES
    timed_out = False
    out, err, res, spec_pipe, *log = files
    go_ahead = False
    try:
        pipes: list[tuple[Any, _Lines | _Result]] = [
            (out, _Lines("stdout", on_line)),
            (err, _Lines("stderr", on_line)),
            (res, result),
        ]
        if log:
            pipes.append((log[0], _TaggedLines(on_line)))
        for pipe, protocol in pipes:
            transport, _ = await loop.connect_read_pipe(lambda p=protocol: p, pipe)  # type: ignore[misc]
            transport.max_size = chunk_bytes  # type: ignore[attr-defined]
            transports.append(transport)
            readers.append(protocol)
        # The go-ahead (the job is guarded): written at once when the pipe takes it all,
        # as a job's spec does unless its params are large.
        data = json.dumps(spec).encode()
        go_ahead = True
        os.set_blocking(spec_w, False)
        try:
            sent = os.write(spec_w, data)
        except BlockingIOError:
            sent = 0
        if sent == len(data):
            spec_pipe.close()
        else:
            writer: asyncio.WriteTransport
            writer, _ = await loop.connect_write_pipe(asyncio.Protocol, spec_pipe)
            transports.append(writer)
            writer.write(data[sent:])
            writer.close()
        if spec.get("kind") != "exec":
            logger.debug("job %d: started job process %d", job_id, pid, extra=extra)
        try:
            async with asyncio.timeout_at(deadline):
                await asyncio.shield(ended)
        except TimeoutError:
            timed_out = True
            logger.info("job %d: timed out after %g s, stopping it", job_id, timeout_s, extra=extra)
            await _stop(job.req, ended, grace_s)
    except asyncio.CancelledError:
        logger.info("job %d: aborted, stopping it", job_id, extra=extra)
        if not go_ahead:
            spec_pipe.close()  # its keeper reads end of file and starts nothing: ended at once
        await _stop(job.req, ended, grace_s)  # cancelled again: see finally
        raise
    finally:
        if not ended.done():  # cancelled during the grace, or a bug: kill all of it now
            _SERVER.stop(job.req, kill=True)
            if job.pid:
                _signal_group(job.pid, signal.SIGKILL)  # also when the server is not reached
            await _reaped(ended, pid)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_PIPE_DRAIN_S):
                for reader in readers:
                    await reader.closed.wait()
        for opened in transports:
            if isinstance(opened, asyncio.WriteTransport) and opened.get_write_buffer_size():
                # Nothing more can be read by the process (it is gone), and no write may
                # land on a descriptor number the files below free for reuse.
                opened.abort()
            elif not opened.is_closing():
                opened.close()
        for file in files:  # those no transport took (closing twice is harmless)
            file.close()
        forget_job(job.req)
    returncode, cpu_s = ended.result()
    return ProcessEnd(returncode, cpu_s, result.value(), timed_out)
