"""The console's way to the gRPC API: the SDK's AsyncClient per session, plus the calls the
SDK does not wrap (SystemService.GetStatus, one page of ListJobs) on one shared channel.

Every call carries the signed-in user's token, so the API's roles decide what each user may
do; errors come back as :class:`~tickwork.errors.TickworkError` subclasses.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
from grpc import aio

from tickwork import _channel as ch
from tickwork._async import AsyncClient
from tickwork.errors import from_rpc_error
from tickwork.v1.job_pb2 import Job, JobStatus, ListJobsRequest
from tickwork.v1.job_pb2_grpc import JobServiceStub
from tickwork.v1.system_pb2 import GetStatusRequest, GetStatusResponse
from tickwork.v1.system_pb2_grpc import SystemServiceStub

if TYPE_CHECKING:
    from tickwork.console.settings import ConsoleSettings
    from tickwork.v1.job_pb2_grpc import JobServiceAsyncStub
    from tickwork.v1.system_pb2_grpc import SystemServiceAsyncStub

__all__ = ["Api", "JobsPage"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class JobsPage:
    """One page of jobs, newest first, and the token of the next ("" on the last)."""

    jobs: Sequence[Job]
    next_page_token: str


class Api:
    """Clients of the API at ``settings.server``. Open it inside the running loop."""

    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        self._channel: aio.Channel | None = None
        self._system: SystemServiceAsyncStub | None = None
        self._jobs: JobServiceAsyncStub | None = None

    def client(self, token: str) -> AsyncClient:
        """A new SDK client carrying ``token`` ("" for none)."""
        return AsyncClient(
            self.settings.server,
            token=token,
            tls=self.settings.api_tls or False,
            timeout=self.settings.call_timeout_s,
        )

    def _open(self) -> tuple[SystemServiceAsyncStub, JobServiceAsyncStub]:
        if self._system is None or self._jobs is None:
            self._channel = ch.aio_channel(self.settings.server, self.settings.api_tls)
            self._system = SystemServiceStub(self._channel)
            self._jobs = JobServiceStub(self._channel)
        assert self._system is not None and self._jobs is not None
        return self._system, self._jobs

    async def _call(self, method: Callable[..., Awaitable[_T]], request: Any, token: str) -> _T:
        try:
            return await method(
                request,
                timeout=self.settings.call_timeout_s,
                metadata=ch.auth_metadata(token),
            )
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    async def status(self, token: str) -> GetStatusResponse:
        """SystemService.GetStatus with ``token``. Raises TickworkError."""
        system, _ = self._open()
        return await self._call(system.GetStatus, GetStatusRequest(), token)

    async def jobs_page(
        self,
        token: str,
        *,
        task_id: int = 0,
        statuses: Sequence[JobStatus] = (),
        schedule_id: int = 0,
        page_size: int = 50,
        page_token: str = "",
    ) -> JobsPage:
        """One page of JobService.ListJobs, newest first. Raises TickworkError
        (InvalidArgument for a bad page token)."""
        _, jobs = self._open()
        request = ListJobsRequest(
            task_id=task_id,
            statuses=list(statuses),
            schedule_id=schedule_id,
            page_size=page_size,
            page_token=page_token,
        )
        response = await self._call(jobs.ListJobs, request, token)
        return JobsPage(list(response.jobs), response.next_page_token)

    async def close(self) -> None:
        """Close the shared channel."""
        channel, self._channel = self._channel, None
        self._system = self._jobs = None
        if channel is not None:
            await channel.close(None)
