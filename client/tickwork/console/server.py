"""Serving the console with uvicorn on the caller's event loop.

``tickwork serve`` runs it beside the gRPC server on the service's own loop;
``tickwork console`` runs it alone. The socket is bound before anything starts, so a port in
use is refused at once and port 0 yields the bound port (``url``). Signals stay the caller's:
uvicorn does not install handlers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator

import uvicorn

from tickwork.console.app import create_app
from tickwork.console.settings import ConsoleSettings, ConsoleSettingsError

log = logging.getLogger(__name__)

#: Longest a stop waits for open pages (live streams) before closing them, seconds.
STOP_GRACE_S = 2


class _Uvicorn(uvicorn.Server):
    """uvicorn without its signal handlers: the process's owner stops it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def bind(settings: ConsoleSettings, variable: str) -> socket.socket:
    """A listening TCP socket on ``settings.listen``.

    Raises ConsoleSettingsError ``VARIABLE: cannot listen on ADDRESS: why``.
    """
    try:
        infos = socket.getaddrinfo(
            settings.host or None, settings.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
            sock.listen(128)
        except OSError:
            sock.close()
            raise
    except OSError as err:
        raise ConsoleSettingsError(
            f"{variable}: cannot listen on {settings.listen}: {err.strerror or err}"
        ) from None
    sock.setblocking(False)
    return sock


class ConsoleServer:
    """The console on a bound socket. ``start()`` inside the loop, ``stop()`` to end."""

    def __init__(self, settings: ConsoleSettings, variable: str = "--listen") -> None:
        self.settings = settings
        self._socket = bind(settings, variable)
        host = settings.host
        shown = "127.0.0.1" if host in ("", "0.0.0.0") else ("[::1]" if host == "::" else host)
        if ":" in shown and not shown.startswith("["):
            shown = f"[{shown}]"
        port = self._socket.getsockname()[1]
        self.port: int = port
        self.url = f"{'https' if settings.https else 'http'}://{shown}:{port}/"
        config = uvicorn.Config(
            create_app(settings),
            log_config=None,
            access_log=False,
            server_header=False,
            timeout_graceful_shutdown=STOP_GRACE_S,
            ssl_certfile=settings.cert_file or None,
            ssl_keyfile=settings.key_file or None,
        )
        self._server = _Uvicorn(config)
        # Its start and stop lines say nothing the console's own line does not.
        logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start serving; returns once the socket accepts requests."""
        self._task = asyncio.create_task(self._server.serve(sockets=[self._socket]), name="console")
        while not self._server.started:
            if self._task.done():
                await self._task  # raises what stopped it
                raise RuntimeError("the console stopped while starting")
            await asyncio.sleep(0.01)

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The serving task (done when the console stopped)."""
        return self._task

    async def stop(self) -> None:
        """Stop: open pages get :data:`STOP_GRACE_S`, then the socket closes."""
        self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._socket.close()
