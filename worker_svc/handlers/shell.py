"""The ``shell`` handler: run a program in a job process, stream its output, stop all of it."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tickwork._context import ENV_NAMES
from tickwork.limits import MAX_SECONDS

from ._base import HandlerResult, InvalidParams, JobContext, JobFailed, normalize_timeout_s
from ._jobproc import UNKNOWN_END, run_job_process
from ._output import JobLines
from .python import exit_error, job_environment

__all__ = ["ShellHandler"]

logger = logging.getLogger(__name__)

_PARAMS = ("argv", "env", "cwd", "timeout_seconds")


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
    - ``env`` (dict[str, str], optional): the task's variables, set over the few of the
      worker's a job gets (see ``_environment``: PATH, HOME, LANG, ... and WORKER_PASS_ENV;
      never the worker's settings); the job's ``TICKWORK_*`` variables are set over both
      and may not be named here.
    - ``cwd`` (str, optional): working directory; default the worker's.
    - ``timeout_seconds`` (number from 0 to ten years, optional): longest run time in
      seconds, overriding ``ctx.timeout_s``; ``0`` means no timeout.

    The program is started by the job's keeper (see ``_keeper``), in a process group of
    its own, with stdin from ``/dev/null`` and the task's limits (``ulimit -v`` for
    ``memory_limit_bytes``, ``-t`` for ``cpu_limit_seconds``, by ``/bin/sh`` before it
    execs the program). A file without a ``#!`` line runs as a ``/bin/sh`` script. Its
    stdout and stderr are read in chunks of at most 256 KiB, decoded as UTF-8 (undecodable
    bytes replaced), split into lines and passed to ``ctx.log`` as they arrive; lines longer
    than 65536 characters (or output without newlines) are passed on in pieces. The result
    keeps the last 4096 characters of both streams interleaved in arrival order.

    Every process the program starts is the job's, whatever session or group it moves to
    (see ``_keeper``). The job is over when the program has exited and nothing it started
    is left: what it left running then gets SIGTERM, and SIGKILL once ``ctx.abort_grace_s``
    seconds have passed with any of it left. On timeout or cancellation (abort) every
    process of the job gets the same, and the handler returns or re-raises only once none
    is left. If the worker process dies while the job runs (SIGKILL, a crash), its keeper
    and the guard process (``_guard``) kill all of it, so a job never outlives the lease
    the server recovers it by. The program only starts once the job is registered with the
    guard: a worker killed before leaves nothing running.
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
            asyncio.CancelledError: the job was aborted; every process of it was stopped
                first.
        """
        spec = _parse(params)
        timeout_s = normalize_timeout_s(ctx.timeout_s if spec.timeout_s is None else spec.timeout_s)
        output = JobLines(ctx)
        env = job_environment(ctx, spec.env)
        limits = ctx.limits
        problem = limits.problem()
        if problem:
            raise JobFailed(f"cannot apply the task's limits on this worker: {problem}")
        try:
            _check_program(spec.argv[0], env, spec.cwd)
        except OSError as exc:
            raise JobFailed(_start_error(spec, exc)) from exc
        job_spec = {
            "kind": "exec",
            "argv": list(spec.argv),
            "env": env,
            "cwd": spec.cwd,
            "prefix": limits.shell_prefix(),
        }
        try:
            end = await run_job_process(
                job_spec,
                job_id=ctx.job_id,
                on_line=output.line,
                timeout_s=timeout_s,
                grace_s=ctx.abort_grace_s,
            )
        except (OSError, RuntimeError) as exc:
            raise JobFailed(f"cannot start {spec.argv[0]!r}: {exc}") from exc
        tail = output.tail.text()
        if end.timed_out:
            raise JobFailed(f"timed out after {timeout_s:g} s", tail)
        not_started = (end.result or {}).get("exec_error")
        if isinstance(not_started, list) and len(not_started) == 3:
            code, why, name = not_started
            error = _start_error(spec, OSError(code, why, name))
            reached = limits.reached(end.returncode, str(why))
            raise JobFailed(f"{reached}: {error}" if reached else error, tail)
        if end.returncode is None:
            raise JobFailed(UNKNOWN_END, tail)
        if end.returncode != 0:
            error = exit_error(end.returncode, output.stderr.text())
            reached = limits.reached(end.returncode, tail, end.cpu_s)
            raise JobFailed(f"{reached}: {error}" if reached else error, tail)
        return HandlerResult(output_tail=tail)


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
            if key in ENV_NAMES:
                raise InvalidParams(
                    f"param env.{key}: tickwork sets {key} for every job; a task may not set it"
                )

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
