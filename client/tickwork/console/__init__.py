"""The tickwork web console: server-rendered pages over the public gRPC API.

One more client of the API, like the CLI: no database access, every call made with the
signed-in user's token, so the API's roles decide. ``tickwork serve`` runs it on
``TICKWORK_CONSOLE_LISTEN``; ``tickwork console`` runs it alone (:mod:`.command`).

- :func:`create_app`: the ASGI app (Starlette, Jinja2 templates).
- :class:`ConsoleServer`: the app on uvicorn in the caller's event loop.
- :class:`ConsoleSettings`, :func:`check_exposure`: where it listens and may listen.

The web stack (Starlette, uvicorn) is imported on first use of ``create_app`` or
``ConsoleServer``, so that the command line does not pay for it on every command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tickwork.console.settings import (
    DEFAULT_LISTEN,
    ConsoleSettings,
    ConsoleSettingsError,
    check_exposure,
)

if TYPE_CHECKING:
    from tickwork.console.app import create_app
    from tickwork.console.server import ConsoleServer

__all__ = [
    "DEFAULT_LISTEN",
    "ConsoleServer",
    "ConsoleSettings",
    "ConsoleSettingsError",
    "check_exposure",
    "create_app",
]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from tickwork.console.app import create_app

        return create_app
    if name == "ConsoleServer":
        from tickwork.console.server import ConsoleServer

        return ConsoleServer
    raise AttributeError(f"module 'tickwork.console' has no attribute {name!r}")
