"""Calling a job's handler, and reading what it gave back as a JobResult.

A handler that breaks its contract (see :class:`worker_svc.handlers.Handler`) fails its
job, never the worker. Handlers registered by packages run in a job process of their own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import sys
from typing import Any

from google.protobuf import struct_pb2

from tickwork.structs import struct_to_dict
from tickwork.v1 import job_pb2, worker_pb2, worker_pb2_grpc
from worker_svc._job_output import JobOutput, as_text, exception_text, type_name
from worker_svc._outcome import JobResult
from worker_svc.handlers import Handler, JobContext, JobFailed, get_handler
from worker_svc.handlers._base import normalize_timeout_s
from worker_svc.handlers._jobproc import UNKNOWN_END, run_job_process
from worker_svc.handlers._output import OutputTail
from worker_svc.handlers.python import exit_error, job_environment

__all__ = ["JobCalls", "call_handler", "execute", "run_in_job_process"]

logger = logging.getLogger(__name__)


class JobCalls:
    """The ServiceCalls of one running job: WorkerService calls naming its lease."""

    def __init__(
        self,
        stub: worker_pb2_grpc.WorkerServiceAsyncStub,
        job_id: int,
        lease_token: str,
        metadata: tuple[tuple[str, str], ...],
    ) -> None:
        self._stub = stub
        self._job_id = job_id
        self._lease_token = lease_token
        self._metadata = metadata

    async def purge_history(self) -> worker_pb2.PurgeHistoryResponse:
        """WorkerService.PurgeHistory for this job.

        Raises:
            grpc.RpcError: the call failed.
        """
        request = worker_pb2.PurgeHistoryRequest(job_id=self._job_id, lease_token=self._lease_token)
        response: worker_pb2.PurgeHistoryResponse = await self._stub.PurgeHistory(
            request, metadata=self._metadata
        )
        return response


def _attribute(value: object, name: str) -> tuple[bool, object]:
    """Read ``value.name`` without raising.

    Returns:
        tuple[bool, object]: (True, the value), or (False, None) when reading it raised.
    """
    try:
        return True, getattr(value, name)
    except Exception:
        return False, None


def _succeeded(handler_name: str, result: object, output: JobOutput) -> JobResult:
    """The outcome of a handler's ``run`` that returned ``result``: SUCCEEDED with its
    ``output_tail`` when that is a str (a HandlerResult, or any object that has one);
    otherwise FAILED, the error naming what the handler returned.

    Args:
        handler_name (str): the handler, for the error.
        result (object): what ``run`` returned.
        output (JobOutput): the job's output, for the tail of a failure.

    Returns:
        JobResult: the outcome.
    """
    has_tail, tail = _attribute(result, "output_tail")
    if not has_tail:
        error = f"handler {handler_name!r} returned {type_name(result)}, expected HandlerResult"
        return JobResult(job_pb2.JOB_STATUS_FAILED, error, output.tail())
    if not isinstance(tail, str):
        error = (
            f"handler {handler_name!r} returned a {type_name(result)} whose output_tail is "
            f"{type_name(tail)}, expected str"
        )
        return JobResult(job_pb2.JOB_STATUS_FAILED, error, as_text(tail))
    return JobResult(job_pb2.JOB_STATUS_SUCCEEDED, "", tail)


def _failed(handler_name: str, exc: JobFailed) -> JobResult:
    """The FAILED outcome of a handler's ``run`` that raised ``exc``: its ``error`` and
    ``output_tail``; where either is not a str, the error says so.

    Args:
        handler_name (str): the handler, for the error.
        exc (JobFailed): what ``run`` raised.

    Returns:
        JobResult: the outcome.
    """
    raised = f"handler {handler_name!r} raised {type_name(exc)}"
    has_error, error = _attribute(exc, "error")
    has_tail, tail = _attribute(exc, "output_tail")
    if isinstance(error, str):
        text = error
    else:
        what = type_name(error) if has_error else "missing"
        text = f"{raised} whose error is {what}, expected str"
        if as_text(error):
            text += f": {as_text(error)}"
    if has_tail and not isinstance(tail, str):
        text += f"\n{raised} whose output_tail is {type_name(tail)}, expected str"
    return JobResult(job_pb2.JOB_STATUS_FAILED, text, as_text(tail))


def _log_crash(handler_name: str, ctx: JobContext) -> None:
    """Log the exception being handled, with its traceback, as a handler crash."""
    logger.exception(
        "handler %r crashed on job %d",
        handler_name,
        ctx.job_id,
        extra={"job_id": ctx.job_id, "task_id": ctx.task_id},
    )


async def execute(
    handler_name: str,
    params: struct_pb2.Struct,
    ctx: JobContext,
    output: JobOutput,
    allowed: tuple[str, ...],
) -> JobResult:
    """Run the job's handler; turn its result or error into a JobResult.

    The built-in handlers (``shell``, ``python``, ``tickwork.retention``: those whose
    ``runs_in_worker`` is true) run here, on the worker's event loop, and start the job's
    processes themselves. Every other handler (registered by a package) runs in a job
    process of its own (:func:`run_in_job_process`), where :func:`call_handler` reads what
    it gave back.

    Args:
        handler_name (str): the handler to look up.
        params (struct_pb2.Struct): its parameters.
        ctx (JobContext): the job.
        output (JobOutput): the job's output, for the tail when the handler gives none.
        allowed (tuple[str, ...]): the handlers this worker runs; empty: all.

    Returns:
        JobResult: SUCCEEDED, or FAILED with the error (``"UnknownHandler: ..."``,
        ``JobFailed.error``, ``"<ExceptionType>: ..."`` for a handler bug, ``"handler
        'NAME' ..."`` naming how the handler broke its contract, or the exit code of a job
        process that died).

    Raises:
        asyncio.CancelledError: the job was aborted.
    """
    if allowed and handler_name not in allowed:
        return JobResult(
            job_pb2.JOB_STATUS_FAILED,
            f"handler {handler_name!r} is not allowed on this worker (WORKER_HANDLERS: "
            f"{', '.join(allowed)})",
            "",
        )
    try:
        handler = get_handler(handler_name)
    except LookupError as exc:
        return JobResult(job_pb2.JOB_STATUS_FAILED, exception_text(exc), "")
    if not getattr(handler, "runs_in_worker", False):
        return await run_in_job_process(handler_name, struct_to_dict(params), ctx, output)
    return await call_handler(handler, handler_name, struct_to_dict(params), ctx, output)


async def run_in_job_process(
    handler_name: str, params: dict[str, Any], ctx: JobContext, output: JobOutput
) -> JobResult:
    """Run handler ``handler_name`` in a job process (see ``worker_svc.handlers._runner``):
    its ``ctx.log`` lines and the process's stdout and stderr are the job's output; an
    abort or ``ctx.timeout_s`` stops the process group.

    Raises:
        asyncio.CancelledError: the job was aborted; its process group was stopped.
    """
    problem = ctx.limits.problem()
    if problem:
        error = f"cannot apply the task's limits on this worker: {problem}"
        return JobResult(job_pb2.JOB_STATUS_FAILED, error, "")
    spec = {
        "kind": "handler",
        "handler": handler_name,
        "params": params,
        "timeout_s": ctx.timeout_s,
        "abort_grace_s": ctx.abort_grace_s,
        "env": job_environment(ctx),
        "cwd": os.getcwd(),
        "sys_path": list(sys.path),
        "limits": dataclasses.asdict(ctx.limits),
    }
    stderr = OutputTail(1000, 10)

    def on_line(stream: str, line: str) -> None:
        if stream == "stderr":
            stderr.add(line)
        ctx.log(stream, line)

    try:
        end = await run_job_process(
            spec,
            job_id=ctx.job_id,
            on_line=on_line,
            timeout_s=normalize_timeout_s(ctx.timeout_s),
            grace_s=ctx.abort_grace_s,
        )
    except (OSError, RuntimeError) as exc:
        return JobResult(job_pb2.JOB_STATUS_FAILED, f"cannot start a job process: {exc}", "")
    if end.timed_out:
        error = f"timed out after {normalize_timeout_s(ctx.timeout_s):g} s"
        return JobResult(job_pb2.JOB_STATUS_FAILED, error, output.tail())
    result = end.result
    if end.returncode == 0 and result is not None:
        status = result.get("status")
        if status in (job_pb2.JOB_STATUS_SUCCEEDED, job_pb2.JOB_STATUS_FAILED):
            tail = result.get("output_tail")
            return JobResult(
                status,
                as_text(result.get("error", "")),
                as_text(tail) if tail else output.tail(),
            )
    if end.returncode is None:
        error = UNKNOWN_END
    else:
        error = exit_error(end.returncode, stderr.text())
        reached = ctx.limits.reached(end.returncode, output.tail(), end.cpu_s)
        error = f"{reached}: {error}" if reached else error
    return JobResult(job_pb2.JOB_STATUS_FAILED, error, output.tail())


async def call_handler(
    handler: Handler,
    handler_name: str,
    params: dict[str, Any],
    ctx: JobContext,
    output: JobOutput,
) -> JobResult:
    """Await ``handler.run``; turn its result or error into a JobResult.

    A handler that breaks its contract fails its job: when it returned something else
    than a HandlerResult with a str ``output_tail``, raised JobFailed whose ``error`` or
    ``output_tail`` is not a str, or raised any other exception, ``SystemExit`` and
    ``GeneratorExit`` included. Only ``asyncio.CancelledError`` of an abort (this task was
    cancelled) and ``KeyboardInterrupt`` go through; a CancelledError the handler lets out
    of something it awaited, with no abort asked, fails the job.

    Raises:
        asyncio.CancelledError: the job was aborted.
        KeyboardInterrupt: raised in the handler.
    """
    try:
        result = await handler.run(params, ctx)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is None or task.cancelling():
            raise  # an abort: the supervisor cancelled this task
        # The handler let out the CancelledError of something it awaited (a task someone
        # else cancelled): a failure of the job, which may be retried, not an abort.
        _log_crash(handler_name, ctx)
        error = f"handler {handler_name!r} raised CancelledError, but no abort was asked"
        return JobResult(job_pb2.JOB_STATUS_FAILED, error, output.tail())
    except KeyboardInterrupt:
        raise
    except JobFailed as exc:
        return _failed(handler_name, exc)
    except Exception as exc:
        _log_crash(handler_name, ctx)
        return JobResult(job_pb2.JOB_STATUS_FAILED, exception_text(exc), output.tail())
    except BaseException as exc:  # SystemExit, GeneratorExit, a library's own
        _log_crash(handler_name, ctx)
        error = f"handler {handler_name!r} raised {exception_text(exc)}"
        return JobResult(job_pb2.JOB_STATUS_FAILED, error, output.tail())
    return _succeeded(handler_name, result, output)
