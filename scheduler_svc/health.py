"""The gRPC health service (grpc.health.v1.Health) of the scheduler service.

Check, Watch and List as the health-checking protocol defines them, for the overall server
(the empty name) and each tickwork service. On shutdown, :meth:`HealthService.stopping`
sets every service NOT_SERVING at once and for good: each open Watch stream gets that
status and then ends, so that no watcher holds the stopping server open (a load balancer or
Kubernetes probe that watches learns of the stop, then reconnects elsewhere).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

Status = int  # a grpc.health.v1 HealthCheckResponse.ServingStatus value
Ctx = grpc.aio.ServicerContext[Any, Any]
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICE_UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN


class HealthService(health_pb2_grpc.HealthServicer):  # type: ignore[misc]
    """grpc.health.v1.Health over a map {service name: status}; "" is the whole server."""

    def __init__(self, services: Iterable[str]) -> None:
        """Every name in ``services`` (and "") starts NOT_SERVING until :meth:`serving`."""
        self._status: dict[str, Status] = {name: NOT_SERVING for name in ("", *services)}
        self._changed = asyncio.Condition()
        self._stopping = False

    async def serving(self) -> None:
        """Set every service SERVING (once the server has started); no-op once stopping."""
        if not self._stopping:
            await self._set_all(SERVING)

    async def storage_failing(self, failing: bool) -> None:
        """While the database fails (``failing``), every service NOT_SERVING; SERVING again
        once it recovers. No-op once stopping."""
        if not self._stopping:
            await self._set_all(NOT_SERVING if failing else SERVING)

    async def stopping(self) -> None:
        """Set every service NOT_SERVING for good and end the open Watch streams."""
        self._stopping = True
        await self._set_all(NOT_SERVING)

    async def _set_all(self, status: Status) -> None:
        async with self._changed:
            for name in self._status:
                self._status[name] = status
            self._changed.notify_all()

    async def Check(
        self, request: health_pb2.HealthCheckRequest, context: Ctx
    ) -> health_pb2.HealthCheckResponse:
        """The service's status now; NOT_FOUND for a service this server does not have."""
        status = self._status.get(request.service)
        if status is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"unknown service {request.service!r}")
        return health_pb2.HealthCheckResponse(status=status)

    async def List(
        self, request: health_pb2.HealthListRequest, context: Ctx
    ) -> health_pb2.HealthListResponse:
        """Every service's status now ("" is the whole server)."""
        return health_pb2.HealthListResponse(
            statuses={
                name: health_pb2.HealthCheckResponse(status=status)
                for name, status in self._status.items()
            }
        )

    async def Watch(
        self, request: health_pb2.HealthCheckRequest, context: Ctx
    ) -> AsyncIterator[health_pb2.HealthCheckResponse]:
        """The status at once, then each change; SERVICE_UNKNOWN for a service this server
        does not have (the stream stays open, as the protocol says). Ends (OK) after
        sending NOT_SERVING once the server is stopping."""
        last: Status | None = None
        name = request.service
        while True:
            async with self._changed:
                while self._status.get(name, SERVICE_UNKNOWN) == last and not self._stopping:
                    await self._changed.wait()
                status = self._status.get(name, SERVICE_UNKNOWN)
                stopping = self._stopping
            if status != last:  # written outside the lock: a slow reader holds up no one
                yield health_pb2.HealthCheckResponse(status=status)
                last = status
            if stopping:
                return
