"""The ``python`` handler: call a function named ``package.module:function`` in a job process."""

from __future__ import annotations

import keyword
import logging
import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ._base import HandlerResult, InvalidParams, JobContext, JobFailed, normalize_timeout_s
from ._environment import job_environment
from ._jobproc import UNKNOWN_END, ProcessEnd, run_job_process
from ._output import JobLines

__all__ = ["PythonHandler", "exit_error", "job_environment"]

logger = logging.getLogger(__name__)

_PARAMS = ("callable", "kwargs")


@dataclass(frozen=True)
class _PythonParams:
    module: str
    qualname: str
    kwargs: Mapping[str, Any]

    @property
    def target(self) -> str:
        return f"{self.module}:{self.qualname}"


class PythonHandler:
    """Call a Python function in a job process of its own.

    Params (a JSON object):

    - ``callable`` (str, required): ``"package.module:function"``; the part after the colon
      may be dotted (``"module:Class.method"``).
    - ``kwargs`` (dict, optional): keyword arguments for the function.

    Each job runs in a fresh process forked from the worker's job process server (see
    ``_zygote``): it imports the module (resolved against the worker's ``sys.path`` and
    working directory, as with ``python -m``), calls the function (``async def``
    functions run in an event loop of their own) and exits; nothing of one job is left
    for the next. The process has the environment a job gets (``_environment``: a few of
    the worker's variables, never its settings) plus the job's ``TICKWORK_*``
    variables, and the task's limits (``memory_limit_bytes``, ``cpu_limit_seconds``). If
    the function has a parameter named ``ctx`` (positional-or-keyword, keyword-only, or
    positional-only as its first parameter;
    ``**kwargs`` does not count), it receives the job's :class:`tickwork.JobContext`.

    Its stdout and stderr are the job's output: ``print``, ``logging`` (INFO and above, to
    stderr), ``ctx.log``, and the traceback when it raises. A return value other than
    ``None`` is appended to the output tail (``str`` as is, other values as ``repr``).

    Abort and timeout (``ctx.timeout_s``) stop the process group, synchronous functions
    included: SIGTERM, then SIGKILL after ``ctx.abort_grace_s``. A process that dies
    (``sys.exit``, ``os._exit``, KeyboardInterrupt, MemoryError, a signal, a crash in C)
    fails its job with the exit code or signal and the end of its stderr.
    """

    name: str = "python"
    runs_in_worker: bool = True
    """It runs on the worker's event loop (and starts the job's processes itself)."""

    def validate(self, params: dict[str, Any]) -> None:
        """Check the params' shape only: ``"module:function"`` syntax; nothing is imported.

        Args:
            params (dict[str, Any]): the Task's params.

        Raises:
            InvalidParams: a param is missing, malformed or unknown; the message names it.
        """
        _parse(params)

    async def run(self, params: dict[str, Any], ctx: JobContext) -> HandlerResult:
        """Call the function in a job process and wait for its end.

        Args:
            params (dict[str, Any]): the Task's params (see the class docstring).
            ctx (JobContext): the job; ``ctx.log`` receives each output line.

        Returns:
            HandlerResult: the last 4096 characters of the output.

        Raises:
            InvalidParams: the params do not fit, or ``kwargs`` do not fit the function's
                signature.
            JobFailed: the module cannot be imported or has no such function, the function
                raised (``"<ExcType>: message"``, the traceback in the output), its process
                died (``"exit code N: <stderr tail>"``, with the limit it reached when it
                reached one), or it ran longer than ``ctx.timeout_s`` (``"timed out after N
                s"``).
            asyncio.CancelledError: the job was aborted; its process group was stopped.
        """
        spec = _parse(params)
        timeout_s = normalize_timeout_s(ctx.timeout_s)
        problem = ctx.limits.problem()
        if problem:
            raise JobFailed(f"cannot apply the task's limits on this worker: {problem}")
        output = JobLines(ctx)
        cwd = os.getcwd()
        sys_path = list(sys.path)
        if cwd not in sys_path and "" not in sys_path:
            sys_path.append(cwd)
        job_spec = {
            "kind": "python",
            "callable": spec.target,
            "kwargs": dict(spec.kwargs),
            "env": job_environment(ctx),
            "cwd": cwd,
            "sys_path": sys_path,
            "limits": asdict(ctx.limits),
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
            raise JobFailed(f"cannot start a job process: {exc}") from exc
        tail = output.tail.text()
        if end.timed_out:
            raise JobFailed(f"timed out after {timeout_s:g} s", tail)
        result = end.result
        if end.returncode == 0 and result is None:
            raise JobFailed("exit code 0 before the function returned (sys.exit(0)?)", tail)
        if result is not None and end.returncode == 0:
            if result.get("status") == "SUCCEEDED":
                returned = result.get("returned")
                if isinstance(returned, str):
                    output.tail.add(returned)
                return HandlerResult(output_tail=output.tail.text())
            error = str(result.get("error", "failed"))
            if result.get("invalid_params"):
                raise InvalidParams(error, tail)
            reached = ctx.limits.reached(end.returncode, f"{error}\n{tail}", end.cpu_s)
            raise JobFailed(f"{reached}: {error}" if reached else error, tail)
        raise JobFailed(self._death(end, ctx, output), tail)

    def _death(self, end: ProcessEnd, ctx: JobContext, output: JobLines) -> str:
        """The error of a job process that ended without a result."""
        if end.returncode is None:
            return UNKNOWN_END
        error = exit_error(end.returncode, output.stderr.text())
        reached = ctx.limits.reached(end.returncode, output.tail.text(), end.cpu_s)
        return f"{reached}: {error}" if reached else error


def exit_error(returncode: int | None, stderr_tail: str) -> str:
    """The error of a job process that exited with ``returncode``: ``"exit code N"`` or
    ``"exit code -N (killed by SIGNAME)"``, then ``": "`` and the last stderr lines."""
    if returncode is None:
        summary = "exit status unknown"
    elif returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        summary = f"exit code {returncode} (killed by {name})"
    else:
        summary = f"exit code {returncode}"
    return f"{summary}: {stderr_tail}" if stderr_tail else summary


def _parse(params: dict[str, Any]) -> _PythonParams:
    """Validate ``params`` and return them typed.

    Raises:
        InvalidParams: naming the param at fault.
    """
    if not isinstance(params, dict):
        raise InvalidParams(f"params must be a JSON object, got {type(params).__name__}")
    unknown = sorted(set(params) - set(_PARAMS))
    if unknown:
        raise InvalidParams(f"unknown param {unknown[0]!r} (python accepts: {', '.join(_PARAMS)})")

    target = params.get("callable")
    if not isinstance(target, str):
        raise InvalidParams("param 'callable' must be a string 'package.module:function'")
    module, sep, qualname = target.partition(":")
    if not sep or not _is_dotted_name(module) or not _is_dotted_name(qualname):
        raise InvalidParams(
            f"param 'callable' must look like 'package.module:function', got {target!r}"
        )

    kwargs = params.get("kwargs", {})
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise InvalidParams("param 'kwargs' must be an object")
    bad = [k for k in kwargs if not k.isidentifier()]
    if bad:
        raise InvalidParams(f"param 'kwargs' has a key that is not a Python name: {bad[0]!r}")

    return _PythonParams(module=module, qualname=qualname, kwargs=dict(kwargs))


def _is_dotted_name(text: str) -> bool:
    """Whether ``text`` is ``name(.name)*`` with Python identifiers that are not keywords."""
    parts = text.split(".")
    return all(p.isidentifier() and not keyword.iskeyword(p) for p in parts)
