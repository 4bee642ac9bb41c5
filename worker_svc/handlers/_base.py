"""The handler contract: what a handler receives, returns and raises."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._limits import ProcessLimits

if TYPE_CHECKING:
    from tickwork.v1 import worker_pb2

__all__ = ["Handler", "HandlerResult", "InvalidParams", "JobContext", "JobFailed", "ServiceCalls"]


class ServiceCalls(Protocol):
    """The scheduler service calls a built-in handler may make for its running job, over
    the worker's own connection (the worker never touches the database)."""

    async def purge_history(self) -> worker_pb2.PurgeHistoryResponse:
        """WorkerService.PurgeHistory for this job (retention task only)."""
        ...


@dataclass(frozen=True)
class JobContext:
    """What a handler knows about the job it runs.

    Attributes:
        job_id (int): id of the Job being executed.
        task_id (int): id of the Task the Job belongs to.
        task_name (str): name of that Task, for messages.
        attempt (int): 1 for the first run, 2 for the first retry, and so on.
        timeout_s (float | None): longest run time in seconds; ``None`` or ``0`` means no
            timeout. A handler's own timeout parameter, if it has one, overrides it.
        log (Callable[[str, str], None]): ``log(stream, line)`` with stream ``"stdout"`` or
            ``"stderr"`` and one line of output without its line ending. Handlers call it
            for each line as it arrives, from the event loop thread, in order; the worker
            forwards the lines to the server. It must not block.
        abort_grace_s (float): seconds between SIGTERM and SIGKILL when a job's process is
            stopped on abort or timeout.
        service (ServiceCalls | None): calls to the scheduler service on behalf of this job
            (built-in maintenance handlers); None outside a connected worker.
        env (Mapping[str, str]): the job's ``TICKWORK_*`` variables
            (:meth:`tickwork.JobContext.to_env`), for every process the job runs.
        limits (ProcessLimits): the task's limits for every process the job runs.
        base_env (Mapping[str, str] | None): the worker's variables every process of the
            job starts with (``_environment.base_environment``: an allow-list and
            WORKER_PASS_ENV); None: the allow-list of this process's environment.
    """

    job_id: int
    task_id: int
    task_name: str
    attempt: int
    timeout_s: float | None
    log: Callable[[str, str], None]
    abort_grace_s: float = 5.0
    service: ServiceCalls | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    limits: ProcessLimits = field(default_factory=ProcessLimits)
    base_env: Mapping[str, str] | None = None


def normalize_timeout_s(timeout_s: float | None) -> float | None:
    """Return ``timeout_s`` (seconds) as a positive float, or ``None`` for "no timeout".

    Args:
        timeout_s (float | None): a timeout in seconds; ``None`` and values <= 0 mean none.

    Returns:
        float | None: the timeout in seconds, or ``None``.
    """
    if timeout_s is None or timeout_s <= 0:
        return None
    return float(timeout_s)


@dataclass(frozen=True)
class HandlerResult:
    """The outcome of a successful run.

    Attributes:
        output_tail (str): the last (at most 4096) characters of the job's combined output.
    """

    output_tail: str


class JobFailed(Exception):
    """The job failed; the worker reports it as a failed Job (and it may be retried).

    Attributes:
        error (str): a one-line summary, optionally followed by detail lines
            (for example ``"exit code 2: <last stderr lines>"``).
        output_tail (str): the last (at most 4096) characters of the job's output.
    """

    def __init__(self, error: str, output_tail: str = "") -> None:
        """Create the error.

        Args:
            error (str): one-line summary, then optional detail lines.
            output_tail (str): the tail of the job's output, ``""`` if none.
        """
        super().__init__(error)
        self.error = error
        self.output_tail = output_tail

    def __str__(self) -> str:
        """Return the error text."""
        return self.error


class InvalidParams(JobFailed):
    """A Task's params do not fit its handler. The message names the offending param.

    Raised by ``Handler.validate`` (the server rejects the Task with INVALID_ARGUMENT) and by
    ``Handler.run`` (the job fails without retry being of any use).
    """


@runtime_checkable
class Handler(Protocol):
    """A kind of work a Task can do, looked up by ``name`` in the registry.

    A handler that breaks the contract of ``run`` fails the job, never the worker: the
    job ends FAILED with an error saying what the handler did (``"handler 'NAME' returned
    bytes, expected HandlerResult"``) and the worker runs the next one. That is when
    ``run`` returns anything but a HandlerResult (an object with a str ``output_tail``:
    a plain str, bytes or None too), raises JobFailed whose ``error`` or ``output_tail``
    is not a str, or raises any exception, ``SystemExit`` and other BaseExceptions
    included. Only ``asyncio.CancelledError`` (how an abort ends ``run``) and
    ``KeyboardInterrupt`` (Ctrl-C stops the worker) go through.

    A handler registered by a package runs in a job process of its own (a fork of the
    worker's job process server), so whatever it does fails only its job; its ``ctx.log``
    lines, stdout and stderr are the job's output, and an abort or ``ctx.timeout_s`` stops
    the process. The built-in handlers set ``runs_in_worker = True``: they run on the
    worker's event loop and start the job's processes themselves.

    Attributes:
        name (str): the handler name a Task refers to (``"shell"``, ``"python"``, ...).
    """

    name: str

    def validate(self, params: dict[str, Any]) -> None:
        """Check ``params`` without doing any I/O; the server calls it when a Task is saved.

        Args:
            params (dict[str, Any]): the Task's params, decoded from JSON.

        Raises:
            InvalidParams: a param is missing, has the wrong type or is unknown; the message
                names it.
        """
        ...

    async def run(self, params: dict[str, Any], ctx: JobContext) -> HandlerResult:
        """Do the work of one Job.

        On cancellation of the calling task (an abort) the handler stops the work promptly
        and re-raises ``asyncio.CancelledError``.

        Args:
            params (dict[str, Any]): the Task's params.
            ctx (JobContext): the job's identity, timeout and output sink.

        Returns:
            HandlerResult: the tail of the output (a str). Anything else fails the job.

        Raises:
            JobFailed: the work failed (``InvalidParams`` if the params do not fit); its
                ``error`` and ``output_tail`` are str.
            asyncio.CancelledError: the job was aborted.
        """
        ...
