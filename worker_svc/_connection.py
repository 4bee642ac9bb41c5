"""One open ``WorkerService.Connect`` stream: serialized writes, one reader, an inbox."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Callable

import grpc
import grpc.aio

from tickwork.v1 import worker_pb2

from ._flag import Flag, wait_any

__all__ = ["Connection", "StreamBroken"]

logger = logging.getLogger(__name__)

ConnectCall = grpc.aio.StreamStreamCall[worker_pb2.ConnectRequest, worker_pb2.ConnectResponse]
"""The client side of the worker stream."""

_CLOSE_WAIT_S = 2.0
"""On a graceful close, how long to wait for the server to end its side of the stream."""


class _DoneWriting:
    """Marks the half-close in the writer's queue."""


_DONE_WRITING = _DoneWriting()
_Outgoing = worker_pb2.ConnectRequest | _DoneWriting


class StreamBroken(Exception):
    """The stream ended or failed (server unreachable, restarted, or it closed the stream).

    The worker reconnects after a backoff. The message says what happened, with the gRPC
    status code when there is one.
    """


def _describe(exc: grpc.RpcError) -> str:
    """Return ``"CODE: details"`` for a gRPC error.

    Args:
        exc (grpc.RpcError): the error, normally a ``grpc.aio.AioRpcError``.

    Returns:
        str: its status code name and details, or its text if it has no status.
    """
    if isinstance(exc, grpc.aio.AioRpcError):
        return f"{exc.code().name}: {exc.details()}"
    return f"{type(exc).__name__}: {exc}"


class Connection:
    """The worker's side of one Connect stream.

    A writer task writes the messages given to ``send`` one at a time, in order (gRPC allows
    a single pending write, and a write whose task is cancelled cancels the whole RPC: so
    no caller ever writes itself, and cancelling a ``send`` never cancels its write). A
    reader task reads the server's messages: ``AbortJob`` goes straight to ``on_abort`` (so
    an abort is acted on at once, whatever the worker is waiting for); every other message
    is queued for ``receive`` in arrival order. When the stream ends or fails, ``broken``
    is set and ``send`` / ``receive`` raise ``StreamBroken``.
    """

    def __init__(self, call: ConnectCall, on_abort: Callable[[int, str], None]) -> None:
        """Start reading the stream.

        Must be called from a running event loop.

        Args:
            call (ConnectCall): the open stream, from ``WorkerServiceStub.Connect()``.
            on_abort (Callable[[int, str], None]): called with (job_id, reason) for every
                AbortJob, from the event loop; it must not block.
        """
        self._call = call
        self._on_abort = on_abort
        self._inbox: collections.deque[worker_pb2.ConnectResponse] = collections.deque()
        self._arrived = Flag()
        self.broken = Flag()
        """Set once the stream has ended or failed."""
        self._error: BaseException | None = None
        self._outbox: asyncio.Queue[tuple[_Outgoing, asyncio.Future[bool]]] = asyncio.Queue()
        self._reader = asyncio.create_task(self._read_loop(), name="tickwork-worker-reader")
        self._writer = asyncio.create_task(self._write_loop(), name="tickwork-worker-writer")

    def _fail(self, error: BaseException) -> BaseException:
        """Record the first failure, wake every waiter and return the recorded failure.

        Args:
            error (BaseException): a ``StreamBroken``, or an unexpected error (a bug) that
                will propagate out of the worker.

        Returns:
            BaseException: the failure that was recorded first.
        """
        if self._error is None:
            self._error = error
            self.broken.set()
            self._arrived.set()
        return self._error

    async def _read_loop(self) -> None:
        """Read the server's messages until the stream ends; see the class docstring."""
        try:
            while True:
                message = await self._call.read()
                if not isinstance(message, worker_pb2.ConnectResponse):  # grpc.aio.EOF
                    self._fail(StreamBroken("the server closed the stream"))
                    return
                if message.WhichOneof("message") == "abort_job":
                    self._on_abort(message.abort_job.job_id, message.abort_job.reason)
                    continue
                self._inbox.append(message)
                self._arrived.set()
        except grpc.RpcError as exc:
            self._fail(StreamBroken(_describe(exc)))
        except asyncio.CancelledError:
            self._fail(StreamBroken("the stream was closed by the worker"))
            raise
        except Exception as exc:
            logger.exception("the worker stream reader crashed")
            self._fail(exc)

    async def _write_loop(self) -> None:
        """Write queued messages in order; after a failure, only mark them unsent."""
        while True:
            outgoing, sent = await self._outbox.get()
            if self._error is None:
                try:
                    if isinstance(outgoing, _DoneWriting):
                        await self._call.done_writing()
                    else:
                        await self._call.write(outgoing)
                except grpc.RpcError as exc:
                    self._fail(StreamBroken(_describe(exc)))
                except asyncio.InvalidStateError as exc:
                    self._fail(StreamBroken(f"the stream is closed: {exc}"))
                except Exception as exc:
                    logger.exception("the worker stream writer crashed")
                    self._fail(exc)
            if not sent.done():
                sent.set_result(self._error is None)

    async def _enqueue(self, outgoing: _Outgoing) -> None:
        """Have the writer task write ``outgoing`` and wait until it did.

        Args:
            outgoing (_Outgoing): a message, or ``_DONE_WRITING`` to half-close the stream.

        Raises:
            StreamBroken: the stream has ended or failed, before or while writing.
            asyncio.CancelledError: the caller was cancelled; the write still happens.
        """
        if self._error is not None:
            raise self._error
        sent: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._outbox.put_nowait((outgoing, sent))
        # Cancelling the caller cancels ``sent`` only: the writer task writes regardless.
        if not await sent:
            assert self._error is not None
            raise self._error

    async def send(self, request: worker_pb2.ConnectRequest) -> None:
        """Write one message to the server, after those sent before it.

        Cancelling the caller does not cancel the write (which would cancel the stream).

        Args:
            request (worker_pb2.ConnectRequest): the message.

        Raises:
            StreamBroken: the stream has ended or failed.
        """
        await self._enqueue(request)

    async def receive(
        self, timeout_s: float | None = None, interrupt: Flag | None = None
    ) -> worker_pb2.ConnectResponse | None:
        """Return the next message from the server other than AbortJob.

        Args:
            timeout_s (float | None): longest wait in seconds; None waits without limit.
            interrupt (Flag | None): stop waiting as soon as this flag is set.

        Returns:
            worker_pb2.ConnectResponse | None: the message, or None when the wait timed out or
            was interrupted (messages that already arrived are returned first).

        Raises:
            StreamBroken: the stream ended or failed and no message is left.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        while True:
            if self._inbox:
                return self._inbox.popleft()
            if self._error is not None:
                raise self._error
            if interrupt is not None and interrupt.is_set():
                return None
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return None
            self._arrived.clear()
            flags = [self._arrived] if interrupt is None else [self._arrived, interrupt]
            await wait_any(flags, timeout_s=remaining)

    async def close(self, graceful: bool) -> None:
        """End the stream and stop the reader and writer. Never raises ``StreamBroken``.

        Args:
            graceful (bool): True: after the messages already sent, tell the server the
                worker is done (half-close) and wait up to 2 s for it to end the stream;
                False: cancel the stream at once.
        """
        if graceful and self._error is None:
            with contextlib.suppress(StreamBroken):
                await self._enqueue(_DONE_WRITING)
            await wait_any([self.broken], timeout_s=_CLOSE_WAIT_S)
        self._fail(StreamBroken("the stream was closed by the worker"))
        self._call.cancel()
        self._reader.cancel()
        self._writer.cancel()
        await asyncio.wait([self._reader, self._writer])
        while not self._outbox.empty():
            _, sent = self._outbox.get_nowait()
            if not sent.done():
                sent.set_result(False)
