"""The asyncio half of the clients' transport seam: the ``grpc.aio`` channel with the
public API's stubs on it, and cancelling a stream call.

:mod:`tickwork._sync_transport` has the same names for the blocking channel.
``scripts/unasync.py`` rewrites ``_async_transport`` to ``_sync_transport`` when it
generates the blocking client's modules (:mod:`tickwork._sync`, ``_sync_base``,
``_sync_jobs``, ...) from the asyncio client's (:mod:`tickwork._async`, ``_async_base``,
``_async_jobs``, ...): what the two clients do differently lives in these two modules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from grpc import aio

from tickwork._channel import TlsConfig, aio_channel
from tickwork.v1.config_pb2_grpc import ConfigServiceStub
from tickwork.v1.job_pb2_grpc import JobServiceStub
from tickwork.v1.notifier_pb2_grpc import NotifierServiceStub
from tickwork.v1.schedule_pb2_grpc import ScheduleServiceStub
from tickwork.v1.task_pb2_grpc import TaskServiceStub

if TYPE_CHECKING:
    from tickwork.v1.config_pb2_grpc import ConfigServiceAsyncStub
    from tickwork.v1.job_pb2_grpc import JobServiceAsyncStub
    from tickwork.v1.notifier_pb2_grpc import NotifierServiceAsyncStub
    from tickwork.v1.schedule_pb2_grpc import ScheduleServiceAsyncStub
    from tickwork.v1.task_pb2_grpc import TaskServiceAsyncStub

Channel = aio.Channel
"""The channel type of this side."""


@dataclass(frozen=True)
class Stubs:
    """An open channel and the stubs of the public API on it."""

    channel: Channel
    tasks: TaskServiceAsyncStub
    jobs: JobServiceAsyncStub
    schedules: ScheduleServiceAsyncStub
    notifiers: NotifierServiceAsyncStub
    config: ConfigServiceAsyncStub


class Connection:
    """A client's channel, opened on first use: a ``grpc.aio`` channel belongs to the event
    loop it was opened in, so it is opened inside the running loop, and a client can be
    constructed outside one. After :meth:`close` the next use opens a new channel.

    Args:
        target (str): ``HOST:PORT`` or a gRPC target URI.
        tls (TlsConfig | None): TLS settings; ``None`` for plaintext.
    """

    def __init__(self, target: str, tls: TlsConfig | None) -> None:
        self._target = target
        self._tls = tls
        self._open: Stubs | None = None

    def stubs(self) -> Stubs:
        """The open channel and its stubs, opening them first if need be.

        Raises:
            InvalidArgument: a TLS file cannot be read.
        """
        if self._open is None:
            channel = aio_channel(self._target, self._tls)
            self._open = Stubs(
                channel=channel,
                tasks=TaskServiceStub(channel),
                jobs=JobServiceStub(channel),
                schedules=ScheduleServiceStub(channel),
                notifiers=NotifierServiceStub(channel),
                config=ConfigServiceStub(channel),
            )
        return self._open

    async def close(self) -> None:
        """Close the channel if it is open; calls in flight are cancelled."""
        stubs, self._open = self._open, None
        if stubs is not None:
            await stubs.channel.close(None)


def cancel(call: aio.UnaryStreamCall[Any, Any]) -> None:
    """Cancel a stream call; a no-op once it has ended."""
    call.cancel()
