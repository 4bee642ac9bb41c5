"""The asyncio client, :class:`AsyncClient`: the one hand-written client of the SDK.

:class:`AsyncClient` is composed of one mixin per part of the API, each in a module of its
own over :class:`~tickwork._async_base.ClientBase` (the attributes and the plumbing of a
call): :mod:`tickwork._async_jobs` (running tasks, jobs), :mod:`tickwork._async_tasks`,
:mod:`tickwork._async_schedules`, :mod:`tickwork._async_fires` (a schedule's fires, cron
previews) and :mod:`tickwork._async_admin` (notifiers, configuration). This module keeps
the constructor, the channel's opening and closing, and the context manager.

:mod:`tickwork._sync` (:class:`~tickwork.Client`, blocking) and its twin modules
(``_sync_base``, ``_sync_jobs``, ...) are generated from these files by
``scripts/unasync.py``: edit them, then run ``python scripts/unasync.py``; CI runs it with
``--check``. The generator rewrites tokens (``async def`` to ``def``, ``await`` away,
``AsyncClient`` to ``Client``, ``_async_jobs`` to ``_sync_jobs``, ``asyncio.sleep`` to
``time.sleep``, ...), so code here must read right once they are gone; what the two
clients do differently lives behind the transport seam (:mod:`tickwork._async_transport`
and :mod:`tickwork._sync_transport`). Request building and answer reading are shared
through :mod:`tickwork._requests`.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self

from tickwork import _async_transport as transport
from tickwork import _channel as ch
from tickwork import _requests as rq
from tickwork._async_admin import AdminMixin
from tickwork._async_fires import FiresMixin
from tickwork._async_jobs import JobsMixin
from tickwork._async_schedules import SchedulesMixin
from tickwork._async_tasks import TasksMixin
from tickwork._channel import TlsConfig

__all__ = ["AsyncClient"]


class AsyncClient(JobsMixin, TasksMixin, SchedulesMixin, FiresMixin, AdminMixin):
    """The asyncio client of the tickwork API.

    Use it as an async context manager, or close it with :meth:`close`::

        async with AsyncClient("127.0.0.1:50051") as tw:
            [run] = await tw.run("health-check")
            job = await tw.wait(run.job_id, timeout=60)

    Its channel opens on first use, inside the running event loop: construct it anywhere.

    Tasks and schedules are referred to by id (``int``) or name (``str``). Times are aware
    ``datetime`` objects or protobuf Timestamps in UTC; durations are seconds. Every method
    raises a :class:`~tickwork.errors.TickworkError` subclass on failure (``Unavailable``
    when the server cannot be reached, ``DeadlineExceeded`` past ``timeout``), never a raw
    ``grpc.RpcError``.

    Args:
        server (str | None): ``HOST:PORT``; default ``$TICKWORK_SERVER``, else
            ``127.0.0.1:50051``. A host without a port gets port 50051.
        timeout (float | None): deadline of each unary call, seconds; ``None`` for none.
            Streams (:meth:`watch`, :meth:`wait`) are not bounded by it.
        token (str | None): bearer token sent with every call; default ``$TICKWORK_TOKEN``
            (none when unset). A server with access control answers ``Unauthenticated``
            without one and ``PermissionDenied`` when its role may not make the call.
        tls (TlsConfig | bool | None): ``None`` (default): as the environment says
            (``TICKWORK_TLS``, ``TICKWORK_TLS_CA_FILE``, ...; plaintext when unset);
            ``False``: plaintext; ``True``: TLS with the system's roots; a
            :class:`~tickwork.TlsConfig`: TLS with that CA and client certificate.

    Raises:
        InvalidArgument: ``TICKWORK_TLS`` is not a boolean, a client certificate has no
            key, or (when the channel opens) a TLS file cannot be read.
    """

    def __init__(
        self,
        server: str | None = None,
        *,
        timeout: float | None = 30.0,
        token: str | None = None,
        tls: TlsConfig | bool | None = None,
    ) -> None:
        self.server: str = rq.resolve_server(server)
        self.timeout = timeout
        self._metadata = ch.auth_metadata(ch.resolve_token(token))
        self._connection = transport.Connection(self.server, ch.resolve_tls(tls))

    async def __aenter__(self) -> Self:
        self._stubs()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the channel; calls in flight are cancelled. Idempotent."""
        await self._connection.close()

    def __repr__(self) -> str:
        return f"AsyncClient({self.server!r})"

    @property
    def _channel(self) -> transport.Channel:
        """The open channel, for stubs beyond this client's (the CLI's health check)."""
        return self._stubs().channel
