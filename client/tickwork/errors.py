"""The SDK's one error hierarchy: gRPC status codes turned back into typed exceptions.

Every public method of :class:`tickwork.Client` and :class:`tickwork.AsyncClient` raises a
:class:`TickworkError` (or a subclass) instead of a raw ``grpc.RpcError``; the translation
happens in one place, :func:`from_rpc_error`. Each error carries the status ``code``, the
server's ``details`` text (which names the field at fault for INVALID_ARGUMENT) and what the
server's ``google.rpc.Status`` details say: ``reason`` (a :class:`tickwork.reasons.Reason`
code), ``field_violations``, ``resource`` and ``retry_delay``.

Not-found errors are also :class:`LookupError` and invalid-argument errors also
:class:`ValueError`, so callers may catch the builtin kinds.

This is the client side's error root. The scheduler service has its own,
:class:`scheduler_svc.errors.ServiceError`, whose subclasses carry the same names
(``InvalidArgument``, ``NotFound``, ...) on purpose: the servicers send each as the status
code that :func:`from_rpc_error` turns back into its namesake here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from typing import Any, ClassVar

import grpc
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2

from tickwork.reasons import DOMAIN
from tickwork.v1.job_pb2 import Job

__all__ = [
    "AlreadyExists",
    "DatabaseUnavailable",
    "DeadlineExceeded",
    "FailedPrecondition",
    "FieldViolation",
    "InvalidArgument",
    "InvalidSetting",
    "JobTimeout",
    "NotFound",
    "PermissionDenied",
    "ResourceRef",
    "TickworkError",
    "Unauthenticated",
    "Unavailable",
    "from_rpc_error",
]


@dataclasses.dataclass(frozen=True)
class FieldViolation:
    """One bad request field (``google.rpc.BadRequest.FieldViolation``)."""

    field: str
    """The field's path in the request, e.g. ``"task.retry_policy.max_attempts"`` or
    ``"task_names[0]"``."""
    description: str
    """What is wrong with it."""


@dataclasses.dataclass(frozen=True)
class ResourceRef:
    """The object a NOT_FOUND or ALREADY_EXISTS error is about (``google.rpc.ResourceInfo``)."""

    type: str
    """Its message type, e.g. ``"tickwork.v1.Task"``."""
    name: str
    """Its id or name as the request gave it."""
    description: str = ""
    """``"by id"`` or ``"by name"``."""


class TickworkError(Exception):
    """Base of every error the SDK raises.

    Attributes:
        code (grpc.StatusCode): the gRPC status of the failed call (for errors raised by
            the SDK itself, the status the server would have used).
        details (str): the server's message, e.g. ``"cron_expression: day-of-month: 30 is
            never in month 2"``.
        reason (str): the server's stable reason code (``ErrorInfo.reason``, one of
            :class:`tickwork.reasons.Reason`, e.g. ``"TASK_NOT_FOUND"``); "" when the error
            did not come from a tickwork server.
        field (str): the request field at fault as the server named it (``ErrorInfo``
            metadata ``field``, e.g. ``"task_names[0]"``), on any status; "" if none.
        field_violations (tuple[FieldViolation, ...]): the bad fields (INVALID_ARGUMENT).
        resource (ResourceRef | None): the object at fault (NOT_FOUND, ALREADY_EXISTS).
        retry_delay (datetime.timedelta | None): how long to wait before retrying
            (UNAVAILABLE).
    """

    default_code: ClassVar[grpc.StatusCode] = grpc.StatusCode.UNKNOWN

    def __init__(
        self,
        details: str,
        code: grpc.StatusCode | None = None,
        *,
        reason: str = "",
        field: str = "",
        field_violations: Sequence[FieldViolation] = (),
        resource: ResourceRef | None = None,
        retry_delay: dt.timedelta | None = None,
    ) -> None:
        """Create the error.

        Args:
            details (str): human-readable message.
            code (grpc.StatusCode | None): the status; ``None`` means the class's default.
            reason (str): the reason code, if known.
            field (str): the request field at fault, if known.
            field_violations (Sequence[FieldViolation]): the bad fields, if any.
            resource (ResourceRef | None): the object at fault, if any.
            retry_delay (datetime.timedelta | None): the server's retry advice, if any.
        """
        super().__init__(details)
        self.code: grpc.StatusCode = code if code is not None else self.default_code
        self.details: str = details
        self.reason: str = reason
        self.field: str = field
        self.field_violations: tuple[FieldViolation, ...] = tuple(field_violations)
        self.resource: ResourceRef | None = resource
        self.retry_delay: dt.timedelta | None = retry_delay

    @property
    def status_name(self) -> str:
        """The status code's name, e.g. ``"NOT_FOUND"``."""
        return str(self.code.name)

    def __str__(self) -> str:
        """Return ``"<STATUS>: <details>"``."""
        return f"{self.status_name}: {self.details}"


class NotFound(TickworkError, LookupError):
    """No task, schedule or job with that id or name (NOT_FOUND)."""

    default_code = grpc.StatusCode.NOT_FOUND


class InvalidArgument(TickworkError, ValueError):
    """A field is missing or malformed; ``details`` names it (INVALID_ARGUMENT)."""

    default_code = grpc.StatusCode.INVALID_ARGUMENT


class InvalidSetting(InvalidArgument):
    """An environment variable or option of a tickwork process (the CLI, a worker, a log
    setup) has a value that cannot be used; ``details`` starts with its name, e.g.
    ``"WORKER_HANDLERS: unknown handler 'shel'; known handlers: python, shell"``."""


class AlreadyExists(TickworkError):
    """The name is taken (ALREADY_EXISTS)."""

    default_code = grpc.StatusCode.ALREADY_EXISTS


class FailedPrecondition(TickworkError):
    """The object is not in a state that allows the call, e.g. cancelling a running job
    (FAILED_PRECONDITION)."""

    default_code = grpc.StatusCode.FAILED_PRECONDITION


class PermissionDenied(TickworkError):
    """The caller may not do this (PERMISSION_DENIED)."""

    default_code = grpc.StatusCode.PERMISSION_DENIED


class Unauthenticated(TickworkError):
    """The caller did not authenticate (UNAUTHENTICATED)."""

    default_code = grpc.StatusCode.UNAUTHENTICATED


class Unavailable(TickworkError):
    """The server cannot be reached or is shutting down (UNAVAILABLE)."""

    default_code = grpc.StatusCode.UNAVAILABLE


class DatabaseUnavailable(Unavailable):
    """The service answers but its database fails (UNAVAILABLE, reason
    ``DATABASE_UNAVAILABLE``): a full disk, a read-only file, a database server down. Worth
    retrying after ``retry_delay``; the service's health checks say NOT_SERVING meanwhile.
    """

    def __str__(self) -> str:
        """Return ``"the service answers but its database fails: <cause>"``."""
        cause = self.details.removeprefix("the database fails: ")
        return f"the service answers but its database fails: {cause}"


class DeadlineExceeded(TickworkError):
    """The call did not finish within its deadline (DEADLINE_EXCEEDED)."""

    default_code = grpc.StatusCode.DEADLINE_EXCEEDED


class JobTimeout(TickworkError, TimeoutError):
    """``wait()`` gave up before the job finished; the job itself goes on.

    Attributes:
        job_id (int): the job waited for.
        timeout_s (float): how long ``wait()`` waited, seconds.
        last_seen (Job | None): the job's last state seen while waiting, if any.
    """

    default_code = grpc.StatusCode.DEADLINE_EXCEEDED

    def __init__(self, job_id: int, timeout_s: float, last_seen: Job | None = None) -> None:
        """Create the error.

        Args:
            job_id (int): the job waited for.
            timeout_s (float): how long the wait lasted, seconds.
            last_seen (Job | None): the last state seen, if any.
        """
        super().__init__(f"job {job_id} did not finish within {timeout_s:g} s")
        self.job_id = job_id
        self.timeout_s = timeout_s
        self.last_seen = last_seen


_BY_CODE: dict[grpc.StatusCode, type[TickworkError]] = {
    cls.default_code: cls
    for cls in (
        NotFound,
        InvalidArgument,
        AlreadyExists,
        FailedPrecondition,
        PermissionDenied,
        Unauthenticated,
        Unavailable,
        DeadlineExceeded,
    )
}
# OUT_OF_RANGE is the "bad value" cousin of INVALID_ARGUMENT.
_BY_CODE[grpc.StatusCode.OUT_OF_RANGE] = InvalidArgument


def _rich_status(err: grpc.RpcError) -> status_pb2.Status | None:
    """The ``google.rpc.Status`` in the call's ``grpc-status-details-bin`` trailer, if any."""
    trailers_fn = getattr(err, "trailing_metadata", None)
    trailers: Any = trailers_fn() if callable(trailers_fn) else None
    for key, value in trailers or ():
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            try:
                return status_pb2.Status.FromString(value)
            except DecodeError:
                return None
    return None


def _structured(status: status_pb2.Status | None) -> dict[str, Any]:
    """The keyword arguments of :class:`TickworkError` that ``status``'s details give."""
    out: dict[str, Any] = {}
    if status is None:
        return out
    info = error_details_pb2.ErrorInfo()
    bad = error_details_pb2.BadRequest()
    resource = error_details_pb2.ResourceInfo()
    retry = error_details_pb2.RetryInfo()
    for detail in status.details:
        if detail.Is(info.DESCRIPTOR):
            detail.Unpack(info)
            if info.domain == DOMAIN:
                out["reason"] = info.reason
                out["field"] = info.metadata.get("field", "")
        elif detail.Is(bad.DESCRIPTOR):
            detail.Unpack(bad)
            out["field_violations"] = [
                FieldViolation(v.field, v.description) for v in bad.field_violations
            ]
        elif detail.Is(resource.DESCRIPTOR):
            detail.Unpack(resource)
            out["resource"] = ResourceRef(
                resource.resource_type, resource.resource_name, resource.description
            )
        elif detail.Is(retry.DESCRIPTOR):
            detail.Unpack(retry)
            out["retry_delay"] = retry.retry_delay.ToTimedelta()
    return out


def from_rpc_error(err: grpc.RpcError) -> TickworkError:
    """Translate a failed gRPC call into the matching typed error.

    Works for the sync stack's ``grpc.RpcError`` (which is also a ``grpc.Call``) and for
    ``grpc.aio.AioRpcError``. Codes without a dedicated class give a plain
    :class:`TickworkError` carrying that code. The ``google.rpc.Status`` details of the
    call's trailer fill ``reason``, ``field_violations``, ``resource`` and ``retry_delay``.

    Args:
        err (grpc.RpcError): the error raised by a stub call.

    Returns:
        TickworkError: the typed error, to be raised ``from None`` or ``from err``.
    """
    code_fn = getattr(err, "code", None)
    details_fn = getattr(err, "details", None)
    code = code_fn() if callable(code_fn) else None
    details = details_fn() if callable(details_fn) else None
    if not isinstance(code, grpc.StatusCode):
        code = grpc.StatusCode.UNKNOWN
    text = details if isinstance(details, str) and details else str(code.name)
    cls = _BY_CODE.get(code, TickworkError)
    structured = _structured(_rich_status(err))
    if cls is Unavailable and structured.get("reason") == "DATABASE_UNAVAILABLE":
        cls = DatabaseUnavailable
    return cls(text, code, **structured)
