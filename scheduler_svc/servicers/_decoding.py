"""A request that does not decode is INVALID_ARGUMENT, not UNKNOWN.

grpcio decodes each request message before our handler runs, and a message it cannot
decode (bytes that are not the message, or a ``google.protobuf.Struct`` nested past
protobuf's depth limit of 100 message levels) would end the call with UNKNOWN
"Unexpected DecodeError". :func:`add_servicer` registers a servicer's methods with a
deserializer that hands such a message to the handler as :class:`Undecodable`, and a
handler that answers it with INVALID_ARGUMENT naming the request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from scheduler_svc.servicers._errors import Failure, abort
from tickwork.reasons import Reason

__all__ = ["Undecodable", "add_servicer"]

Ctx = grpc.aio.ServicerContext[Any, Any]


class Undecodable:
    """A request message that did not decode; ``error`` says why."""

    __slots__ = ("error",)

    def __init__(self, error: str) -> None:
        self.error = error


def _deserializer(decode: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if decode is None:
        return None

    def safe(data: bytes) -> Any:
        try:
            return decode(data)
        except DecodeError as err:
            return Undecodable(str(err))

    return safe


async def _refuse(request: Undecodable, context: Ctx, method: str) -> None:
    description = f"not a valid {method} request message: {request.error}"
    await abort(
        context,
        Failure(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"request: {description}",
            Reason.REQUEST_UNDECODABLE,
            field="request",
            description=description,
        ),
    )


def _wrap(handler: grpc.RpcMethodHandler[Any, Any], method: str) -> Any:
    """``handler`` with the safe deserializer and a check of every request message."""
    options = {
        "request_deserializer": _deserializer(handler.request_deserializer),
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None:
        unary: Any = handler.unary_unary  # grpcio's stubs type the sync signatures

        async def unary_unary(request: Any, context: Ctx) -> Any:
            if isinstance(request, Undecodable):
                await _refuse(request, context, method)
            return await unary(request, context)

        return grpc.unary_unary_rpc_method_handler(unary_unary, **options)

    def checked(requests: AsyncIterator[Any], context: Ctx) -> AsyncIterator[Any]:
        async def each() -> AsyncIterator[Any]:
            async for request in requests:
                if isinstance(request, Undecodable):
                    await _refuse(request, context, method)
                yield request

        return each()

    if handler.unary_stream is not None:
        stream_out: Any = handler.unary_stream

        async def unary_stream(request: Any, context: Ctx) -> AsyncIterator[Any]:
            if isinstance(request, Undecodable):
                await _refuse(request, context, method)
            async for response in stream_out(request, context):
                yield response

        return grpc.unary_stream_rpc_method_handler(unary_stream, **options)
    if handler.stream_unary is not None:
        stream_in: Any = handler.stream_unary

        async def stream_unary(requests: AsyncIterator[Any], context: Ctx) -> Any:
            return await stream_in(checked(requests, context), context)

        return grpc.stream_unary_rpc_method_handler(stream_unary, **options)
    both: Any = handler.stream_stream
    assert both is not None

    async def stream_stream(requests: AsyncIterator[Any], context: Ctx) -> AsyncIterator[Any]:
        async for response in both(checked(requests, context), context):
            yield response

    return grpc.stream_stream_rpc_method_handler(stream_stream, **options)


class _Registrar:
    """Stands in for the server while a generated ``add_*Servicer_to_server`` registers."""

    def __init__(self, server: grpc.aio.Server) -> None:
        self._server = server

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        """Ignored: the same methods arrive through add_registered_method_handlers."""

    def add_registered_method_handlers(
        self, service: str, handlers: dict[str, grpc.RpcMethodHandler[Any, Any]]
    ) -> None:
        wrapped = {name: _wrap(h, f"{service}/{name}") for name, h in handlers.items()}
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service, wrapped),)
        )
        self._server.add_registered_method_handlers(service, wrapped)  # type: ignore[attr-defined]


def add_servicer(add: Callable[[Any, Any], None], servicer: Any, server: grpc.aio.Server) -> None:
    """Register ``servicer`` on ``server`` through the generated function ``add`` (e.g.
    ``task_pb2_grpc.add_TaskServiceServicer_to_server``), every method decoding safely.

    Args:
        add (Callable[[Any, Any], None]): the generated registration function.
        servicer (Any): the servicer object.
        server (grpc.aio.Server): the server.
    """
    add(servicer, _Registrar(server))
