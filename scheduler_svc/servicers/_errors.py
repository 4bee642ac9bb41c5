"""Domain errors to gRPC status codes, in one place."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

from scheduler_svc.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    StorageError,
    TickworkError,
)

log = logging.getLogger(__name__)

_CODES: list[tuple[type[TickworkError], grpc.StatusCode]] = [
    (InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (FailedPrecondition, grpc.StatusCode.FAILED_PRECONDITION),
    (StorageError, grpc.StatusCode.UNAVAILABLE),
]

R = TypeVar("R")


def status_of(err: TickworkError) -> grpc.StatusCode:
    """The gRPC status code of a domain error."""
    for cls, code in _CODES:
        if isinstance(err, cls):
            return code
    return grpc.StatusCode.UNKNOWN


def rpc_errors(
    fn: Callable[..., Awaitable[R]],
) -> Callable[..., Awaitable[R]]:
    """Decorate a unary servicer method: domain errors abort the call with their status."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> R:
        try:
            return await fn(self, request, context)
        except TickworkError as err:
            await context.abort(status_of(err), err.message)
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
        except TickworkError as err:
            await context.abort(status_of(err), err.message)

    return wrapper
