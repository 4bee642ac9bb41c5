"""Domain errors to gRPC status codes and ``google.rpc.Status`` details, in one place.

Every error a servicer sends carries, beside its text, a ``google.rpc.Status`` in the
``grpc-status-details-bin`` trailer (AIP-193) with:

- ``ErrorInfo`` (always): a stable ``reason`` from :class:`tickwork.reasons.Reason`,
  ``domain`` :data:`tickwork.reasons.DOMAIN`, and ``metadata`` with the ``field`` when there
  is one;
- ``BadRequest`` with one ``FieldViolation`` (the field path, e.g. ``task_names[0]``) on
  INVALID_ARGUMENT;
- ``ResourceInfo`` on NOT_FOUND and ALREADY_EXISTS (type ``tickwork.v1.Task``, the id or
  name asked for);
- ``RetryInfo`` on UNAVAILABLE (how long to wait before retrying).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import error_details_pb2, status_pb2
from sqlalchemy.exc import DBAPIError

from scheduler_svc.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Reason,
    Resource,
    ServiceError,
    StorageError,
)
from scheduler_svc.storage_health import DATABASE_FAILS, is_data_error, reason_of
from tickwork.reasons import DOMAIN

log = logging.getLogger(__name__)

_CODES: list[tuple[type[ServiceError], grpc.StatusCode]] = [
    (InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (FailedPrecondition, grpc.StatusCode.FAILED_PRECONDITION),
    (PermissionDenied, grpc.StatusCode.PERMISSION_DENIED),
    (StorageError, grpc.StatusCode.UNAVAILABLE),
]

R = TypeVar("R")

#: The trailer that carries the serialized ``google.rpc.Status``.
DETAILS_KEY = "grpc-status-details-bin"

#: How long an UNAVAILABLE answer asks the client to wait before retrying, seconds.
RETRY_DELAY_S = 1.0

#: Trailing metadata of a failed call: the details trailer.
Trailers = tuple[tuple[str, bytes], ...]


def status_of(err: ServiceError) -> grpc.StatusCode:
    """The gRPC status code of a domain error."""
    for cls, code in _CODES:
        if isinstance(err, cls):
            return code
    return grpc.StatusCode.UNKNOWN


#: Longest message sent back; an echoed oversized input must not break the reply.
MAX_DETAILS = 1000


def _details(text: str) -> str:
    return text if len(text) <= MAX_DETAILS else text[: MAX_DETAILS - 1] + "…"


@dataclasses.dataclass(frozen=True)
class Failure:
    """What a failed call answers: status, text and the structured details."""

    code: grpc.StatusCode
    message: str
    reason: Reason
    field: str = ""
    """The request field at fault; sent as a BadRequest violation on INVALID_ARGUMENT."""
    description: str = ""
    """The violation's description (the message without the field prefix)."""
    resource: Resource | None = None
    retry_delay_s: float | None = None
    """Sent as RetryInfo; UNAVAILABLE gets :data:`RETRY_DELAY_S` when None."""

    def trailers(self) -> Trailers:
        """The ``grpc-status-details-bin`` trailer for this failure."""
        status = status_pb2.Status(code=self.code.value[0], message=self.message)
        info = error_details_pb2.ErrorInfo(reason=str(self.reason), domain=DOMAIN)
        if self.field:
            info.metadata["field"] = self.field
        details: list[Any] = [info]
        if self.code == grpc.StatusCode.INVALID_ARGUMENT and self.field:
            violation = error_details_pb2.BadRequest.FieldViolation(
                field=self.field, description=_details(self.description or self.message)
            )
            details.append(error_details_pb2.BadRequest(field_violations=[violation]))
        if self.resource is not None:
            details.append(
                error_details_pb2.ResourceInfo(
                    resource_type=self.resource.type,
                    resource_name=_details(self.resource.name),
                    description=f"by {self.resource.by}",
                )
            )
        if self.code == grpc.StatusCode.UNAVAILABLE:
            delay = duration_pb2.Duration()
            delay.FromNanoseconds(int((self.retry_delay_s or RETRY_DELAY_S) * 1e9))
            details.append(error_details_pb2.RetryInfo(retry_delay=delay))
        for detail in details:
            packed = any_pb2.Any()
            packed.Pack(detail)
            status.details.append(packed)
        return ((DETAILS_KEY, status.SerializeToString()),)


async def abort(context: grpc.aio.ServicerContext[Any, Any], failure: Failure) -> NoReturn:
    """End the call with ``failure``: its status, text and details trailer."""
    await context.abort(failure.code, failure.message, failure.trailers())
    raise AssertionError("unreachable: abort raises")  # pragma: no cover


def failure_of(err: Exception, method: str) -> Failure:
    """The :class:`Failure` a call that raised ``err`` answers with.

    Domain errors carry their own status, reason, field and resource. A failure of the
    database (StorageError, a driver error) is UNAVAILABLE, reason DATABASE_UNAVAILABLE,
    message ``"the database fails: <cause>"`` (the driver's one-line cause, never the SQL
    or its parameters); the database's state changes are logged by :mod:`storage_health`,
    not each call. Anything else is INTERNAL with a short message, its traceback logged.
    """
    if isinstance(err, StorageError):
        log.debug("database unavailable in %s: %s", method, reason_of(err))
        return Failure(
            grpc.StatusCode.UNAVAILABLE,
            _details(DATABASE_FAILS + reason_of(err)),
            err.reason,
        )
    if isinstance(err, ServiceError):
        return Failure(
            status_of(err),
            _details(err.message),
            err.reason,
            field=err.field,
            description=err.text,
            resource=err.resource,
        )
    if is_data_error(err):
        # A value the database cannot hold (PostgreSQL's class 22: a NUL, a number out of
        # range) that a check should have refused: the caller's input, not an outage.
        log.warning("a value the database refused in %s: %s", method, reason_of(err))
        return Failure(
            grpc.StatusCode.INVALID_ARGUMENT,
            _details(f"a value in the request cannot be stored: {reason_of(err)}"),
            Reason.FIELD_INVALID,
        )
    if isinstance(err, DBAPIError):
        # Logged once per change of the database's state (storage_health), not per call.
        log.debug("database error in %s: %s", method, reason_of(err))
        return Failure(
            grpc.StatusCode.UNAVAILABLE,
            _details(DATABASE_FAILS + reason_of(err)),
            Reason.DATABASE_UNAVAILABLE,
        )
    log.error("unexpected error in %s", method, exc_info=err)
    return Failure(
        grpc.StatusCode.INTERNAL, "internal error; the server log has the details", Reason.INTERNAL
    )


def translate(err: Exception, method: str) -> tuple[grpc.StatusCode, str, Trailers]:
    """The arguments of ``context.abort`` for a call that raised ``err``: status code,
    message and the details trailer (see :func:`failure_of`)."""
    failure = failure_of(err, method)
    return failure.code, failure.message, failure.trailers()


def rpc_errors(
    fn: Callable[..., Awaitable[R]],
) -> Callable[..., Awaitable[R]]:
    """Decorate a unary servicer method: errors abort the call with their status."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> R:
        try:
            return await fn(self, request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as err:
            await context.abort(*translate(err, fn.__qualname__))
            raise  # unreachable: abort raises

    return wrapper


def stream_errors(
    fn: Callable[..., AsyncIterator[R]],
) -> Callable[..., AsyncIterator[R]]:
    """Decorate a server-streaming servicer method the same way."""

    @functools.wraps(fn)
    async def wrapper(
        self: Any, request: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[R]:
        try:
            async for item in fn(self, request, context):
                yield item
        except grpc.aio.AbortError:
            raise
        except Exception as err:
            await context.abort(*translate(err, fn.__qualname__))

    return wrapper
