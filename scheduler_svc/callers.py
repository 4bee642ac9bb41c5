"""Who makes the current call: the label of its access token, for the jobs, pauses and
disables that record it.

The access-control interceptor (:mod:`scheduler_svc.auth`) runs each call that records its
caller (:data:`RECORDED`) with the token's label set; a servicer reads it with
:func:`caller_label`. Without access control every caller is :data:`ANONYMOUS`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

#: The caller's label when access control is off (no tokens configured).
ANONYMOUS = "anonymous"

#: The RPCs whose caller is recorded: by a job (Job.requested_by, Job.stopped_by), or as
#: who paused a schedule or disabled a task (Schedule.paused_by, Task.disabled_by).
RECORDED = frozenset(
    {
        "/tickwork.v1.TaskService/RunTasks",
        "/tickwork.v1.TaskService/AbortTasks",
        "/tickwork.v1.JobService/CancelJob",
        "/tickwork.v1.TaskService/DisableTask",
        "/tickwork.v1.TaskService/UpdateTask",
        "/tickwork.v1.ScheduleService/PauseSchedule",
        "/tickwork.v1.ScheduleService/UpdateSchedule",
        "/tickwork.v1.ConfigService/ApplyConfig",
    }
)

_caller: ContextVar[str] = ContextVar("tickwork_caller", default=ANONYMOUS)


def caller_label() -> str:
    """The current call's token label; :data:`ANONYMOUS` without access control."""
    return _caller.get()


def as_caller(
    label: str, behaviour: Callable[[Any, Any], Awaitable[Any]]
) -> Callable[[Any, Any], Awaitable[Any]]:
    """The unary ``behaviour`` run with :func:`caller_label` answering ``label``."""

    async def run(request: Any, context: Any) -> Any:
        token = _caller.set(label)
        try:
            return await behaviour(request, context)
        finally:
            _caller.reset(token)

    return run
