"""The ``shell`` handler: run a program, stream its output, stop its whole process group."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import errno
import logging
import os
import signal
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tickwork.limits import MAX_SECONDS

from ._base import HandlerResult, InvalidParams, JobContext, JobFailed, normalize_timeout_s
from ._guard import forget_group, guard_group
from ._output import JobLines
from .python import exit_error, job_environment

__all__ = ["ShellHandler"]

logger = logging.getLogger(__name__)

_PARAMS = ("argv", "env", "cwd", "timeout_seconds")
_STREAMS = {1: "stdout", 2: "stderr"}
_MAX_LINE_CHARS = 64 * 1024
"""A longer line is passed on in pieces of this many characters."""
_PIPE_DRAIN_S = 2.0
"""After the process group is gone, how long to wait for the output pipes to reach EOF."""
_REAP_S = 5.0
"""After SIGKILL, how long to wait for the main process to be reaped before giving up."""
_GROUP_POLL_S = 0.05


@dataclass(frozen=True)
class _ShellParams:
    argv: tuple[str, ...]
    env: Mapping[str, str] | None
    cwd: str | None
    timeout_s: float | None  # None: not given (use ctx.timeout_s); 0: no timeout


class ShellHandler:
    """Run a program (no shell involved) and keep the tail of its output.

    Params (a JSON object):

    - ``argv`` (list[str], required, non-empty): the program and its arguments. The program
      is looked up on ``PATH`` (of the merged environment) unless it contains a slash. To use
      shell syntax, run a shell: ``["sh", "-c", "..."]``.
    - ``env`` (dict[str, str], optional): variables merged over the worker's environment;
      the job's ``TICKWORK_*`` variables are set over both.
    - ``cwd`` (str, optional): working directory; default the worker's.
    - ``timeout_seconds`` (number from 0 to ten years, optional): longest run time in
      seconds, overriding ``ctx.timeout_s``; ``0`` means no timeout.

    The program runs in a new session, hence its own process group, with stdin from
    ``/dev/null`` and the task's limits (``ulimit -v`` for ``memory_limit_bytes``, ``-t``
    for ``cpu_limit_seconds``). Its stdout and stderr are read in chunks of at most 256 KiB,
    decoded as UTF-8 (undecodable bytes replaced), split into lines and passed to
    ``ctx.log`` as they arrive; lines longer than 65536 characters (or output without
    newlines) are passed on in pieces. The result keeps the last 4096 characters of both
    streams interleaved in arrival order.

    The job is over when the program exits. Whatever it left running in its process group is
    then SIGKILLed; a process meant to outlive the job must start its own session. On timeout
    or cancellation (abort) the group gets SIGTERM, then SIGKILL once ``ctx.abort_grace_s``
    seconds have passed with any member left, and the handler returns or re-raises only after
    the program was reaped. If the worker process dies while the program runs (SIGKILL, a
    crash), a guard process SIGKILLs the group (see ``_guard``), so a job never outlives
    the lease the server recovers it by. The program only starts once its group is
    registered with the guard: ``/bin/sh`` waits for the worker's go-ahead on a pipe, then
    execs it (same pid, ``argv[0]`` as given), so a worker killed in between leaves
    nothing running (a program whose name starts with ``-`` is spawned directly).
    """

    name: str = "shell"
    runs_in_worker: bool = True
    """It runs on the worker's event loop (and starts the job's processes itself)."""

    def validate(self, params: dict[str, Any]) -> None:
        """Check the params' shape without any I/O (the program and cwd are not looked up).

        Args:
            params (dict[str, Any]): the Task's params.

        Raises:
            InvalidParams: a param is missing, of the wrong type, or unknown; the message names it.
        """
        _parse(params)

    async def run(self, params: dict[str, Any], ctx: JobContext) -> HandlerResult:
        """Run the program to completion.

        Args:
            params (dict[str, Any]): the Task's params (see the class docstring).
            ctx (JobContext): the job; ``ctx.log`` receives each output line.

        Returns:
            HandlerResult: the output tail, when the program exited with code 0.

        Raises:
            InvalidParams: the params do not fit.
            JobFailed: the program could not be started (the message names the executable or
                the working directory), exited with a non-zero code or was killed by a signal
                (``"exit code N: <last stderr lines>"``), or ran longer than the timeout
                (``"timed out after N s"``).
            asyncio.CancelledError: the job was aborted; the process group was stopped first.
        """
        spec = _parse(params)
        timeout_s = normalize_timeout_s(ctx.timeout_s if spec.timeout_s is None else spec.timeout_s)
        output = JobLines(ctx)
        env = job_environment(ctx, spec.env)
        loop = asyncio.get_running_loop()
        gated = _gateable(spec.argv[0])
        limits = ctx.limits
        problem = limits.problem() or (
            "" if gated or not limits.shell_prefix() else "a program named '-...' runs ungated"
        )
        if problem:
            raise JobFailed(f"cannot apply the task's limits on this worker: {problem}")
        gate = (_GATE_ARGV[0], _GATE_ARGV[1], limits.shell_prefix() + _GATE_ARGV[2])
        try:
            if gated:
                _check_program(spec.argv[0], env, spec.cwd)
            transport, proto = await loop.subprocess_exec(
                lambda: _LineProtocol(output.line),
                *(gate + spec.argv if gated else spec.argv),
                stdin=subprocess.PIPE if gated else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=spec.cwd,
                start_new_session=True,
            )
        except (OSError, ValueError) as exc:
            raise JobFailed(_start_error(spec, exc)) from exc

        pgid = transport.get_pid()
        guard_group(pgid)  # killed with the worker if the worker dies first
        if gated:
            _open_gate(transport)
        logger.info(
            "job %d: started %r as pid %d",
            ctx.job_id,
            spec.argv[0],
            pgid,
            extra={"job_id": ctx.job_id, "task_id": ctx.task_id, "pid": pgid},
        )
        try:
            try:
                async with asyncio.timeout(timeout_s):
                    await proto.exited.wait()
            except TimeoutError:
                logger.info(
                    "job %d: timed out after %g s, stopping pid %d",
                    ctx.job_id,
                    timeout_s,
                    pgid,
                    extra={"job_id": ctx.job_id, "task_id": ctx.task_id, "pid": pgid},
                )
                await _stop_group(pgid, proto, ctx.abort_grace_s)
                await _drain(proto, ctx)
                raise JobFailed(f"timed out after {timeout_s:g} s", output.tail.text()) from None
            _signal_group(pgid, signal.SIGKILL)  # whatever the program left behind
            await _drain(proto, ctx)
        except asyncio.CancelledError:
            logger.info(
                "job %d: aborted, stopping pid %d",
                ctx.job_id,
                pgid,
                extra={"job_id": ctx.job_id, "task_id": ctx.task_id, "pid": pgid},
            )
            await _stop_group(pgid, proto, ctx.abort_grace_s)  # cancelled again: see finally
            raise
        finally:
            if not proto.exited.is_set():  # cancelled during the grace period, or a bug
                _signal_group(pgid, signal.SIGKILL)
                await _reaped_despite_cancellation(proto, pgid)
            transport.close()
            forget_group(pgid)

        returncode = transport.get_returncode()
        if returncode != 0:
            error = exit_error(returncode, output.stderr.text())
            reached = limits.reached(returncode, output.tail.text())
            raise JobFailed(f"{reached}: {error}" if reached else error, output.tail.text())
        return HandlerResult(output_tail=output.tail.text())


class _LineProtocol(asyncio.SubprocessProtocol):
    """Splits stdout and stderr into lines and tracks the process and its pipes."""

    def __init__(self, on_line: Callable[[str, str], None]) -> None:
        self._on_line = on_line
        self._decoders = {
            fd: codecs.getincrementaldecoder("utf-8")(errors="replace") for fd in _STREAMS
        }
        self._partial = dict.fromkeys(_STREAMS, "")
        self.exited = asyncio.Event()
        """Set when the main process has exited and been reaped."""
        self.closed = asyncio.Event()
        """Set when, in addition, both output pipes have reached EOF."""

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self._feed(fd, self._decoders[fd].decode(data), eof=False)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd in _STREAMS:  # not the gate (stdin)
            self._feed(fd, self._decoders[fd].decode(b"", final=True), eof=True)

    def process_exited(self) -> None:
        self.exited.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set()

    def _feed(self, fd: int, text: str, *, eof: bool) -> None:
        stream = _STREAMS[fd]
        *lines, rest = (self._partial[fd] + text).split("\n")
        for line in lines:
            self._on_line(stream, line.removesuffix("\r"))
        while len(rest) > _MAX_LINE_CHARS:
            self._on_line(stream, rest[:_MAX_LINE_CHARS])
            rest = rest[_MAX_LINE_CHARS:]
        if eof and rest:
            self._on_line(stream, rest.removesuffix("\r"))
            rest = ""
        self._partial[fd] = rest


_GATE_ARGV = ("/bin/sh", "-c", 'read -r _ || exit 125; exec "$0" "$@" </dev/null')
"""The program starts behind a gate: /bin/sh waits for a line on its stdin (a pipe from
the worker), then execs the program in its place (same pid, so the same process group),
with stdin from /dev/null. The worker writes that line only once the group is registered
with the guard. A worker killed between the spawn and the registration closes the pipe
without a line: the shell exits and the program never starts, so it cannot outlive the
worker unguarded (and overlap its own retry)."""


def _gateable(program: str) -> bool:
    """Whether ``program`` can go through the gate: a name starting with ``-`` would read as
    an option to some shells' ``exec``; such a program is spawned directly, ungated."""
    return not program.startswith("-") and os.path.exists(_GATE_ARGV[0])


def _check_program(program: str, env: Mapping[str, str] | None, cwd: str | None) -> None:
    """Raise what spawning ``program`` directly would raise when it cannot be run (the
    gate's shell would report it as exit code 127 instead).

    Raises:
        FileNotFoundError: the working directory ``cwd`` (filename=cwd), or the program
            (filename=program), does not exist; the program is looked up on ``PATH`` of
            ``env`` (default: this process's) unless it contains a slash.
        PermissionError: the program exists but is not an executable file.
    """
    if cwd is not None and not os.path.isdir(cwd):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), cwd)
    base = cwd or os.getcwd()
    if "/" in program:
        candidates = [os.path.join(base, program)]
    else:
        search = os.get_exec_path(env)
        candidates = [os.path.join(base, directory, program) for directory in search]
    files = [c for c in candidates if os.path.isfile(c)]
    if any(os.access(c, os.X_OK) for c in files):
        return
    if files or ("/" in program and os.path.isdir(candidates[0])):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


def _open_gate(transport: asyncio.SubprocessTransport) -> None:
    """Let the gated program start (see :data:`_GATE_ARGV`)."""
    gate = transport.get_pipe_transport(0)
    if not isinstance(gate, asyncio.WriteTransport):
        return
    with contextlib.suppress(OSError):  # the shell is already gone (killed): nothing to open
        gate.write(b"go\n")
    gate.close()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    """Send ``sig`` to process group ``pgid``; a group that is already gone is fine."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def _group_exists(pgid: int) -> bool:
    """Whether process group ``pgid`` still has a member (zombies included)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def _stop_group(pgid: int, proto: _LineProtocol, grace_s: float) -> None:
    """SIGTERM the group; SIGKILL it after ``grace_s`` seconds unless all of it is gone.

    Returns once the main process was reaped (or, if even SIGKILL did not end it within
    ``_REAP_S`` seconds, after logging that).
    """
    _signal_group(pgid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(max(grace_s, 0.0)):
            await proto.exited.wait()
            # Children may outlive the main process; nothing signals when a process group
            # empties, so poll it (bounded by the grace period).
            while _group_exists(pgid):  # noqa: ASYNC110
                await asyncio.sleep(_GROUP_POLL_S)
    _signal_group(pgid, signal.SIGKILL)
    await _wait_exited(proto, pgid)


async def _wait_exited(proto: _LineProtocol, pgid: int) -> None:
    """Wait up to ``_REAP_S`` seconds for the main process to be reaped (after a SIGKILL)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_REAP_S):
            await proto.exited.wait()
    if not proto.exited.is_set():
        logger.error("pid %d did not exit within %g s of SIGKILL", pgid, _REAP_S)


async def _reaped_despite_cancellation(proto: _LineProtocol, pgid: int) -> None:
    """Like ``_wait_exited``, but further cancellations do not cut the wait short.

    The process was just SIGKILLed, so this takes milliseconds; returning before it is reaped
    would leave it to be reaped by nobody (and its Popen to warn) once the loop closes.

    Raises:
        asyncio.CancelledError: after the wait, if the task was cancelled during it.
    """
    waiter = asyncio.ensure_future(_wait_exited(proto, pgid))
    cancelled = False
    while not waiter.done():
        try:
            await asyncio.shield(waiter)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError


async def _drain(proto: _LineProtocol, ctx: JobContext) -> None:
    """Wait (bounded) for the output pipes to reach EOF so that no output line is lost."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_PIPE_DRAIN_S):
            await proto.closed.wait()
    if not proto.closed.is_set():
        logger.warning(
            "job %d: output pipes still open %g s after exit "
            "(held by a process outside the job's process group); closing them",
            ctx.job_id,
            _PIPE_DRAIN_S,
            extra={"job_id": ctx.job_id, "task_id": ctx.task_id},
        )


def _start_error(spec: _ShellParams, exc: OSError | ValueError) -> str:
    """The JobFailed message for a program that could not be started."""
    program = spec.argv[0]
    if isinstance(exc, OSError):
        if spec.cwd is not None and exc.filename == spec.cwd:
            return f"cannot use working directory {spec.cwd!r}: {exc.strerror}"
        if isinstance(exc, FileNotFoundError):
            return f"executable not found: {program!r}"
        if isinstance(exc, PermissionError):
            return f"executable not runnable: {program!r}: {exc.strerror}"
    return f"cannot start {program!r}: {exc}"


def _parse(params: dict[str, Any]) -> _ShellParams:
    """Validate ``params`` and return them typed.

    Raises:
        InvalidParams: naming the param at fault.
    """
    if not isinstance(params, dict):
        raise InvalidParams(f"params must be a JSON object, got {type(params).__name__}")
    unknown = sorted(set(params) - set(_PARAMS))
    if unknown:
        raise InvalidParams(f"unknown param {unknown[0]!r} (shell accepts: {', '.join(_PARAMS)})")

    argv = params.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise InvalidParams("param 'argv' must be a non-empty list of strings")
    if not argv[0]:
        raise InvalidParams("param 'argv' must start with a program name, got ''")
    if any("\0" in a for a in argv):
        raise InvalidParams("param 'argv' must not contain NUL characters")

    env = params.get("env")
    if env is not None:
        if not isinstance(env, dict):
            raise InvalidParams("param 'env' must be an object of string values")
        for key, value in env.items():
            if not isinstance(key, str) or not key or "=" in key or "\0" in key:
                raise InvalidParams(f"param 'env' has an invalid variable name {key!r}")
            if not isinstance(value, str) or "\0" in value:
                raise InvalidParams(f"param 'env.{key}' must be a string without NUL characters")

    cwd = params.get("cwd")
    if cwd is not None and (not isinstance(cwd, str) or not cwd or "\0" in cwd):
        raise InvalidParams("param 'cwd' must be a non-empty string")

    timeout = params.get("timeout_seconds")
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 <= timeout <= MAX_SECONDS
    ):
        raise InvalidParams(
            f"param 'timeout_seconds' must be a number of seconds from 0 to {MAX_SECONDS} "
            "(ten years, as a task's timeout_seconds)"
        )

    return _ShellParams(
        argv=tuple(argv),
        env=None if env is None else dict(env),
        cwd=cwd,
        timeout_s=None if timeout is None else float(timeout),
    )
