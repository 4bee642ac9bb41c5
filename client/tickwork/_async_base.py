"""What the service mixins of :class:`~tickwork.AsyncClient` share, :class:`ClientBase`:
the attributes its constructor sets and the plumbing of a call (the stubs, the client's
deadline and token, error translation, following pages, task and schedule names to ids).

Hand-written; ``scripts/unasync.py`` generates :mod:`tickwork._sync_base` from it
(:mod:`tickwork._async` says what code here must look like).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import grpc

from tickwork import _async_transport as transport
from tickwork import _requests as rq
from tickwork._channel import Metadata
from tickwork.errors import from_rpc_error

if TYPE_CHECKING:
    from tickwork.v1.schedule_pb2 import Schedule
    from tickwork.v1.task_pb2 import Task

__all__ = ["ClientBase"]

_T = TypeVar("_T")


class ClientBase:
    """The base of the client's service mixins: its attributes (set by the client's
    constructor) and the helpers the services' methods share."""

    server: str
    timeout: float | None
    _metadata: Metadata
    _connection: transport.Connection

    if TYPE_CHECKING:
        # The tasks and schedules mixins define these; the id helpers below call them.
        async def get_task(self, task: int | str) -> Task: ...

        async def get_schedule(self, schedule: int | str) -> Schedule: ...

    def _stubs(self) -> transport.Stubs:
        """The open channel and the API's stubs on it."""
        return self._connection.stubs()

    async def _call(self, method: Callable[..., Awaitable[_T]], request: Any) -> _T:
        """Invoke a unary stub method with the client's deadline, translating errors."""
        try:
            return await method(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    @staticmethod
    async def _collect(
        fetch: Callable[[int, str], Awaitable[tuple[Sequence[_T], str]]], limit: int | None
    ) -> list[_T]:
        """Follow page tokens until ``limit`` items (or all, for ``None``) are collected."""
        items: list[_T] = []
        token = ""
        while True:
            page, token = await fetch(rq.page_size(limit, len(items)), token)
            items.extend(page)
            if not token or (limit is not None and len(items) >= limit):
                return items if limit is None else items[:limit]

    async def _task_id(self, ref: rq.Ref) -> int:
        """Resolve a task reference to its id (GetTask for a name). Raises NotFound."""
        ref = rq.check_ref(ref, "task")
        if isinstance(ref, int):
            return ref
        task = await self.get_task(ref)
        return task.id

    async def _schedule_id(self, ref: rq.Ref) -> int:
        """Resolve a schedule reference to its id (GetSchedule for a name). Raises NotFound."""
        ref = rq.check_ref(ref, "schedule")
        if isinstance(ref, int):
            return ref
        schedule = await self.get_schedule(ref)
        return schedule.id
