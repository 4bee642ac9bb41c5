"""Domain errors to gRPC status codes, in one place."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
from sqlalchemy.exc import DBAPIError

from scheduler_svc.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ServiceError,
    StorageError,
)

log = logging.getLogger(__name__)

_CODES: list[tuple[type[ServiceError], grpc.StatusCode]] = [
    (InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (FailedPrecondition, grpc.StatusCode.FAILED_PRECONDITION),
    (StorageError, grpc.StatusCode.UNAVAILABLE),
]

R = TypeVar("R")


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


def translate(err: Exception, method: str) -> tuple[grpc.StatusCode, str]:
    """The status and message a failed call answers with.

    Domain errors carry their own status (a StorageError's cause is logged). Database
    driver errors become UNAVAILABLE and anything else INTERNAL, with a short message: the
    SQL, its parameters and the traceback go to the log only, never to the client.
    """
    if isinstance(err, StorageError):
        log.error("database unavailable in %s", method, exc_info=err)
    if isinstance(err, ServiceError):
        return status_of(err), _details(err.message)
    if isinstance(err, DBAPIError):
        log.error("database error in %s", method, exc_info=err)
        return grpc.StatusCode.UNAVAILABLE, "database error; the server log has the details"
    log.error("unexpected error in %s", method, exc_info=err)
    return grpc.StatusCode.INTERNAL, "internal error; the server log has the details"


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
