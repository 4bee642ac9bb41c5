"""The tickwork web console: server-rendered pages over the public gRPC API.

One more client of the API, like the CLI: no database access, every call made with the
signed-in user's token, so the API's roles decide. ``tickwork serve`` runs it on
``TICKWORK_CONSOLE_LISTEN``; ``tickwork console`` runs it alone (:mod:`.command`).

- :func:`create_app`: the ASGI app (Starlette, Jinja2 templates).
- :class:`ConsoleServer`: the app on uvicorn in the caller's event loop.
- :class:`ConsoleSettings`, :func:`check_exposure`: where it listens and may listen.
"""

from tickwork.console.app import create_app
from tickwork.console.server import ConsoleServer
from tickwork.console.settings import (
    DEFAULT_LISTEN,
    ConsoleSettings,
    ConsoleSettingsError,
    check_exposure,
)

__all__ = [
    "DEFAULT_LISTEN",
    "ConsoleServer",
    "ConsoleSettings",
    "ConsoleSettingsError",
    "check_exposure",
    "create_app",
]
