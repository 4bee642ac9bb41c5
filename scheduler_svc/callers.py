"""Who makes the current call: the label of its access token, for the jobs, pauses and
disables that record it, and its role, for the calls whose answer or rule depends on it.

The access-control interceptor (:mod:`scheduler_svc.auth`) runs each call that records its
caller (:data:`RECORDED`) or depends on its role (:data:`ROLE_AWARE`) with the token's
label and role set; a servicer reads them with :func:`caller_label`,
:func:`may_override_any_param` and :func:`sees_secrets`. Without access control every
caller is :data:`ANONYMOUS` and unrestricted, as is the service's own (internal) caller.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

import grpc

from tickwork.tokens import ROLES

ADMIN, OPERATOR, VIEWER, WORKER = ROLES

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

#: The RPCs whose answer or rule depends on the caller's role: a viewer gets the values of
#: params' ``env`` masked; an operator's params_override is checked against the task.
ROLE_AWARE = frozenset(
    {
        "/tickwork.v1.TaskService/GetTask",
        "/tickwork.v1.TaskService/ListTasks",
        "/tickwork.v1.TaskService/RunTasks",
        "/tickwork.v1.JobService/GetJob",
        "/tickwork.v1.JobService/ListJobs",
        "/tickwork.v1.JobService/WatchJob",
    }
)

#: The role of a call without access control, or the service's own: unrestricted.
UNRESTRICTED = ""
#: Roles that may override any param of a task (RunTasks params_override).
_OVERRIDE_ANY = frozenset({UNRESTRICTED, ADMIN, "internal"})
#: Roles that see params' ``env`` values in clear.
_SEE_SECRETS = frozenset({UNRESTRICTED, ADMIN, OPERATOR, WORKER, "internal"})

_caller: ContextVar[str] = ContextVar("tickwork_caller", default=ANONYMOUS)
_role: ContextVar[str] = ContextVar("tickwork_role", default=UNRESTRICTED)


def caller_label() -> str:
    """The current call's token label; :data:`ANONYMOUS` without access control."""
    return _caller.get()


def caller_role() -> str:
    """The current call's role (``admin``, ``operator``, ``viewer``, ``worker``,
    ``internal``); :data:`UNRESTRICTED` without access control."""
    return _role.get()


def may_override_any_param() -> bool:
    """Whether the current caller may override every param of a task (admin, internal, or
    no access control); an operator may set only what the task declares overridable."""
    return _role.get() in _OVERRIDE_ANY


def sees_secrets() -> bool:
    """Whether the current caller sees the values of params' ``env`` (everyone but a
    viewer, for whom they are masked)."""
    return _role.get() in _SEE_SECRETS


def as_caller(
    label: str, behaviour: Callable[[Any, Any], Awaitable[Any]], role: str = UNRESTRICTED
) -> Callable[[Any, Any], Awaitable[Any]]:
    """The unary ``behaviour`` run with :func:`caller_label` answering ``label`` and
    :func:`caller_role` answering ``role``."""

    async def run(request: Any, context: Any) -> Any:
        token, role_token = _caller.set(label), _role.set(role)
        try:
            return await behaviour(request, context)
        finally:
            _role.reset(role_token)
            _caller.reset(token)

    return run


def with_caller(
    handler: grpc.RpcMethodHandler[Any, Any], label: str, role: str
) -> grpc.RpcMethodHandler[Any, Any]:
    """``handler`` (unary-unary or unary-stream) run as the caller ``label`` with ``role``;
    a handler of another kind is returned as it is."""
    ser = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None:
        behaviour: Any = as_caller(label, handler.unary_unary, role)
        return grpc.unary_unary_rpc_method_handler(behaviour, **ser)
    if handler.unary_stream is not None:
        inner: Any = handler.unary_stream

        async def stream(request: Any, context: Any) -> Any:
            # The call's task runs the whole stream in a context of its own.
            _caller.set(label)
            _role.set(role)
            async for item in inner(request, context):
                yield item

        return grpc.unary_stream_rpc_method_handler(stream, **ser)
    return handler
