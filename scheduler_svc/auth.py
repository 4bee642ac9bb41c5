"""Access control: bearer tokens with roles, checked for every RPC by one interceptor.

Roles: ``admin`` (create, update, delete and enable tasks and schedules, and everything an
operator may do), ``operator`` (run and abort tasks, cancel jobs, and everything a viewer
may do), ``viewer`` (read and watch), ``worker`` (only WorkerService: the worker stream and
the calls a running built-in job makes). The service's own scheduler loop and embedded worker
use an ``internal`` token made at start and never written anywhere.

Tokens are configured as SHA-256 hashes, never in clear (the format is
:mod:`tickwork.tokens`'s): entries ``ROLE:SHA256HEX[:LABEL]`` separated by whitespace, commas
or newlines, from TICKWORK_TOKENS and/or the file named by TICKWORK_TOKENS_FILE (``#``
starts a comment). Access control is on when at least one token is configured. A call
without a token is UNAUTHENTICATED; a token whose role may not make the call is
PERMISSION_DENIED. An RPC missing from :data:`RPC_ROLES` is denied to everyone but the
service itself. Health checks and reflection stay open. Tokens are never logged: denials
log the method, the role and the token's label. The calls whose caller is recorded (a job's,
a pause's, a disable's) run with the token's label as
:func:`scheduler_svc.callers.caller_label`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from scheduler_svc import callers
from scheduler_svc.servicers._errors import Failure, abort
from tickwork import tokens
from tickwork.reasons import Reason
from tickwork.tokens import hash_token

log = logging.getLogger(__name__)

ADMIN, OPERATOR, VIEWER, WORKER = tokens.ROLES
INTERNAL = "internal"
#: Roles a configured token may have (``internal`` is the service's own).
ROLES = tokens.ROLES

_VIEW = frozenset({VIEWER, OPERATOR, ADMIN, INTERNAL})
_OPERATE = frozenset({OPERATOR, ADMIN, INTERNAL})
_ADMINISTER = frozenset({ADMIN, INTERNAL})
_WORK = frozenset({WORKER, INTERNAL})
_SELF = frozenset({INTERNAL})

#: Every RPC and the roles that may call it: the one place access is decided.
RPC_ROLES: Mapping[str, frozenset[str]] = {
    "/tickwork.v1.TaskService/CreateTask": _ADMINISTER,
    "/tickwork.v1.TaskService/GetTask": _VIEW,
    "/tickwork.v1.TaskService/ListTasks": _VIEW,
    "/tickwork.v1.TaskService/UpdateTask": _ADMINISTER,
    "/tickwork.v1.TaskService/DeleteTask": _ADMINISTER,
    "/tickwork.v1.TaskService/RunTasks": _OPERATE,
    "/tickwork.v1.TaskService/AbortTasks": _OPERATE,
    "/tickwork.v1.TaskService/DisableTask": _OPERATE,
    "/tickwork.v1.TaskService/EnableTask": _OPERATE,
    "/tickwork.v1.ScheduleService/CreateSchedule": _ADMINISTER,
    "/tickwork.v1.ScheduleService/BatchCreateSchedules": _ADMINISTER,
    "/tickwork.v1.ScheduleService/GetSchedule": _VIEW,
    "/tickwork.v1.ScheduleService/ListSchedules": _VIEW,
    "/tickwork.v1.ScheduleService/UpdateSchedule": _ADMINISTER,
    "/tickwork.v1.ScheduleService/DeleteSchedule": _ADMINISTER,
    "/tickwork.v1.ScheduleService/DescribeCron": _VIEW,
    "/tickwork.v1.ScheduleService/ListFires": _VIEW,
    "/tickwork.v1.ScheduleService/TriggerSchedule": _OPERATE,
    "/tickwork.v1.ScheduleService/BackfillSchedule": _OPERATE,
    "/tickwork.v1.ScheduleService/PauseSchedule": _OPERATE,
    "/tickwork.v1.ScheduleService/ResumeSchedule": _OPERATE,
    "/tickwork.v1.ConfigService/ApplyConfig": _ADMINISTER,
    "/tickwork.v1.JobService/GetJob": _VIEW,
    "/tickwork.v1.JobService/ListJobs": _VIEW,
    "/tickwork.v1.JobService/WatchJob": _VIEW,
    "/tickwork.v1.JobService/CancelJob": _OPERATE,
    "/tickwork.v1.SystemService/GetStatus": _VIEW,
    "/tickwork.v1.NotifierService/PutNotifier": _ADMINISTER,
    "/tickwork.v1.NotifierService/ListNotifiers": _VIEW,
    "/tickwork.v1.NotifierService/DeleteNotifier": _ADMINISTER,
    "/tickwork.v1.NotifierService/TestNotifier": _OPERATE,
    "/tickwork.v1.NotifierService/ListNotifications": _VIEW,
    "/tickwork.v1.QueueService/Enqueue": _SELF,
    "/tickwork.v1.QueueService/EnqueueFires": _SELF,
    "/tickwork.v1.WorkerService/Connect": _WORK,
    "/tickwork.v1.WorkerService/PurgeHistory": _WORK,
}

#: RPCs an operator may call to switch a task or schedule on or off, and for nothing else:
#: the request's ``update_mask.paths`` must be exactly ``["enabled"]`` (every other field of
#: a task or schedule is the admin's). Re-enabling a task resets its failure count.
OPERATOR_TOGGLES = frozenset(
    {"/tickwork.v1.TaskService/UpdateTask", "/tickwork.v1.ScheduleService/UpdateSchedule"}
)
_TOGGLE_PATHS = ["enabled"]

#: Services anyone may call: load balancers and grpcurl need no token.
OPEN_SERVICES = (
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1alpha.ServerReflection/",
    "/grpc.reflection.v1.ServerReflection/",
)

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class TokenConfigError(ValueError):
    """A token entry cannot be used; the message names the source and entry number."""


@dataclass(frozen=True)
class Principal:
    """Who a token speaks for: its role and label (never the token itself)."""

    role: str
    label: str


def parse_tokens(text: str, source: str) -> dict[str, Principal]:
    """Parse ``ROLE:SHA256HEX[:LABEL]`` entries into {hash: Principal}.

    Raises TokenConfigError naming ``source`` and the entry, never echoing a hash.
    """
    out: dict[str, Principal] = {}
    lines = [line.split("#", 1)[0] for line in text.splitlines()]
    entries = [e for e in re.split(r"[\s,]+", " ".join(lines)) if e]
    for number, entry in enumerate(entries, 1):
        parts = entry.split(":", 2)
        if len(parts) < 2:
            raise TokenConfigError(f"{source}: entry {number}: expected ROLE:SHA256HEX[:LABEL]")
        role, digest = parts[0].lower(), parts[1].lower()
        label = parts[2] if len(parts) == 3 else f"{role}-{number}"
        if role not in ROLES:
            raise TokenConfigError(
                f"{source}: entry {number}: unknown role {role!r} (one of {', '.join(ROLES)})"
            )
        if not _HEX64.match(digest):
            raise TokenConfigError(
                f"{source}: entry {number}: expected the token's SHA-256 as 64 hex digits "
                "(`tickwork token new ROLE` prints an entry), not the token itself"
            )
        out[digest] = Principal(role, label)
    return out


def _bearer(metadata: Sequence[tuple[str, Any]] | None) -> str | None:
    for key, value in metadata or ():
        if key == "authorization" and isinstance(value, str):
            scheme, _, token = value.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


def _deny(
    handler: grpc.RpcMethodHandler[Any, Any], code: grpc.StatusCode, message: str, reason: Reason
) -> Any:
    """A handler of the same kind as ``handler`` that fails the call with ``code``."""
    failure = Failure(code, message, reason)

    async def unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await abort(context, failure)

    async def streaming(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await abort(context, failure)
        yield  # pragma: no cover - abort raises

    ser = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(unary, **ser)
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(streaming, **ser)
    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(unary, **ser)
    return grpc.stream_stream_rpc_method_handler(streaming, **ser)


def _toggle_only(handler: grpc.RpcMethodHandler[Any, Any], method: str, label: str) -> Any:
    """``handler`` (unary) for an operator: served when the update mask is exactly
    ``enabled`` (run as caller ``label``: who paused or disabled), else PERMISSION_DENIED
    naming ``update_mask.paths``."""
    assert handler.unary_unary is not None  # OPERATOR_TOGGLES are unary RPCs
    inner: Any = callers.as_caller(label, handler.unary_unary, OPERATOR)

    async def guarded(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        mask = getattr(request, "update_mask", None)
        if mask is None or list(mask.paths) != _TOGGLE_PATHS:
            log.warning(
                "call refused: operator may only switch enabled",
                extra={"method": method, "role": OPERATOR},
            )
            await abort(
                context,
                Failure(
                    grpc.StatusCode.PERMISSION_DENIED,
                    f"update_mask.paths: role 'operator' may only change ['enabled'] with {method}",
                    Reason.ROLE_NOT_ALLOWED,
                    field="update_mask.paths",
                ),
            )
        return await inner(request, context)

    return grpc.unary_unary_rpc_method_handler(
        guarded,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )


class AuthInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    """Checks every call's bearer token against :data:`RPC_ROLES`.

    Without tokens (access control off) every public RPC is open, and the internal
    services (:data:`RPC_ROLES` ``_SELF``: QueueService) still answer only the service's
    own calls, which carry the internal token: a fire sent from outside (off its
    schedule's grid, for tasks not in it, in the future) is UNAUTHENTICATED, never
    recorded."""

    def __init__(self, tokens: Mapping[str, Principal], internal_token: str) -> None:
        self._open = not tokens
        self._tokens = dict(tokens)
        self._tokens[hash_token(internal_token)] = Principal(INTERNAL, "tickwork-internal")

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(OPEN_SERVICES):
            return handler
        if self._open and RPC_ROLES.get(method) != _SELF:
            return handler
        token = _bearer(handler_call_details.invocation_metadata)
        principal = self._tokens.get(hash_token(token)) if token else None
        if principal is None and self._open:
            log.warning(
                "call refused: an internal method without the internal token",
                extra={"method": method},
            )
            return _deny(  # type: ignore[no-any-return]
                handler,
                grpc.StatusCode.UNAUTHENTICATED,
                f"{method} is internal: only the service itself may call it",
                Reason.TOKEN_REQUIRED,
            )
        if principal is None:
            log.warning(
                "call refused: %s token",
                "unknown" if token else "no",
                extra={"method": method},
            )
            text = "unknown token" if token else "a bearer token is required"
            why = Reason.TOKEN_UNKNOWN if token else Reason.TOKEN_REQUIRED
            return _deny(handler, grpc.StatusCode.UNAUTHENTICATED, text, why)  # type: ignore[no-any-return]
        if principal.role == OPERATOR and method in OPERATOR_TOGGLES:
            return _toggle_only(handler, method, principal.label)  # type: ignore[no-any-return]
        if principal.role not in RPC_ROLES.get(method, _SELF):
            log.warning(
                "call refused: role may not call this method",
                extra={"method": method, "role": principal.role, "token_label": principal.label},
            )
            message = f"role {principal.role!r} may not call {method}"
            return _deny(  # type: ignore[no-any-return]
                handler, grpc.StatusCode.PERMISSION_DENIED, message, Reason.ROLE_NOT_ALLOWED
            )
        if method in callers.RECORDED or method in callers.ROLE_AWARE:
            return callers.with_caller(handler, principal.label, principal.role)
        return handler
