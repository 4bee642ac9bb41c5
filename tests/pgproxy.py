"""A TCP proxy in front of PostgreSQL that can drop, cut and hold connections: a server
that fails in the ways a network does, for tests of what the service makes of it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit


def at_port(database_url: str, port: int) -> str:
    """``database_url`` with its host and port replaced by 127.0.0.1:``port``."""
    parts = urlsplit(database_url)
    netloc = parts.netloc.rsplit("@", 1)[0] + f"@127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


class PgProxy:
    """A TCP proxy to PostgreSQL. With ``drop`` set, a connection made then is closed at its
    first simple-protocol query, right after the handshake: a server that accepts
    connections and loses them at once. ``cut()`` closes every connection open now;
    ``hold()`` stops passing on what their clients send, silently (a network partition
    without a FIN); connections made afterwards are served."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.drop = False
        self.port = 0
        self.queries: list[bytes] = []
        """The simple-protocol queries sent through the proxy (BEGIN, the ping, ...)."""
        self._links: list[asyncio.StreamWriter] = []
        self._held: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def _pipe(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        cut_at_query: bool,
        *,
        record: bool = True,
    ) -> None:
        try:
            while data := await reader.read(65536):
                if record and data[:1] == b"Q":
                    if cut_at_query:
                        return
                    self.queries.append(data[5:].split(b"\0", 1)[0])
                if writer in self._held:
                    continue
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.transport.abort()

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection(*self.target)
        self._links += [client_w, server_w]
        for task in (
            asyncio.create_task(self._pipe(client_r, server_w, self.drop)),
            asyncio.create_task(self._pipe(server_r, client_w, False, record=False)),
        ):
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def hold(self) -> None:
        for writer in self._links:
            self._held.add(writer)

    def cut(self) -> None:
        for writer in self._links:
            writer.transport.abort()
        self._links.clear()

    @classmethod
    def to(cls, database_url: str) -> PgProxy:
        """A proxy to the PostgreSQL server of ``database_url``."""
        pg = urlsplit(database_url)
        return cls((pg.hostname or "127.0.0.1", pg.port or 5432))

    def url(self, database_url: str) -> str:
        """``database_url`` through this proxy (once running)."""
        return at_port(database_url, self.port)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[PgProxy]:
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            server.close()
            self.cut()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
