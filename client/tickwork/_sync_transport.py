"""The blocking half of the clients' transport seam: the ``grpc`` channel with the public
API's stubs on it, and cancelling a stream call.

Hand-written twin of :mod:`tickwork._async_transport`, with the same names; the generated
modules of the blocking client (:mod:`tickwork._sync`, ``_sync_base``, ...) import this
module where their sources (:mod:`tickwork._async`, ``_async_base``, ...) import that one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc

from tickwork._channel import TlsConfig, sync_channel
from tickwork.v1.config_pb2_grpc import ConfigServiceStub
from tickwork.v1.job_pb2_grpc import JobServiceStub
from tickwork.v1.notifier_pb2_grpc import NotifierServiceStub
from tickwork.v1.schedule_pb2_grpc import ScheduleServiceStub
from tickwork.v1.task_pb2_grpc import TaskServiceStub

Channel = grpc.Channel
"""The channel type of this side."""


@dataclass(frozen=True)
class Stubs:
    """An open channel and the stubs of the public API on it."""

    channel: Channel
    tasks: TaskServiceStub
    jobs: JobServiceStub
    schedules: ScheduleServiceStub
    notifiers: NotifierServiceStub
    config: ConfigServiceStub


class Connection:
    """A client's channel, opened at construction: one channel for the client's life, which
    threads may share (a gRPC channel is thread-safe). After :meth:`close` calls fail.

    Args:
        target (str): ``HOST:PORT`` or a gRPC target URI.
        tls (TlsConfig | None): TLS settings; ``None`` for plaintext.

    Raises:
        InvalidArgument: a TLS file cannot be read.
    """

    def __init__(self, target: str, tls: TlsConfig | None) -> None:
        channel = sync_channel(target, tls)
        self._stubs = Stubs(
            channel=channel,
            tasks=TaskServiceStub(channel),
            jobs=JobServiceStub(channel),
            schedules=ScheduleServiceStub(channel),
            notifiers=NotifierServiceStub(channel),
            config=ConfigServiceStub(channel),
        )

    def stubs(self) -> Stubs:
        """The open channel and its stubs."""
        return self._stubs

    def close(self) -> None:
        """Close the channel; calls in flight are cancelled. Idempotent."""
        self._stubs.channel.close()


def cancel(call: grpc.CallIterator[Any]) -> None:
    """Cancel a stream call; a no-op once it has ended."""
    call.cancel()  # type: ignore[no-untyped-call]  # grpc-stubs leaves RpcContext.cancel untyped
