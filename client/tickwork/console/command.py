"""``tickwork console --server HOST:PORT --listen HOST:PORT``: the console as its own process,
for split deployments (the API elsewhere, reached over gRPC like any client)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

from tickwork import _requests as rq
from tickwork._channel import TlsConfig
from tickwork.console.settings import (
    DEFAULT_LISTEN,
    ConsoleSettings,
    ConsoleSettingsError,
    check_exposure,
)
from tickwork.errors import TickworkError

if TYPE_CHECKING:
    from tickwork.console.server import ConsoleServer

log = logging.getLogger(__name__)

_TRUE = ("1", "true", "yes", "on")


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Add ``console`` to the CLI's subcommands; ``parents`` give --server, --token (unused:
    users sign in) and the TLS options to the API."""
    p = subparsers.add_parser(
        "console",
        parents=parents,
        help="serve the web console for the API at --server",
        description="Serve the web console until SIGINT or SIGTERM. Users sign in with their "
        "own API tokens; the console has no database access.",
    )
    p.add_argument(
        "--listen",
        metavar="HOST:PORT",
        default=None,
        help=f"address of the pages (default $TICKWORK_CONSOLE_LISTEN or {DEFAULT_LISTEN})",
    )
    p.add_argument("--cert", metavar="FILE", default="", help="PEM certificate: serve HTTPS")
    p.add_argument("--key", metavar="FILE", default="", help="PEM key of --cert")
    p.add_argument(
        "--insecure",
        action="store_true",
        help="serve a non-loopback address although the API has no access control and the "
        "console no TLS (TICKWORK_INSECURE=true)",
    )
    p.set_defaults(func=run)


async def _access_control(server: ConsoleServer) -> bool:
    """True when the API refuses a call without a token (its access control is on).

    Raises TickworkError (UNAVAILABLE) when the API cannot be reached."""
    from tickwork.console.api import Api

    api = Api(server.settings)
    try:
        await api.status("")
    except TickworkError as err:
        if err.status_name in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
            return True
        raise
    finally:
        await api.close()
    return False


async def serve(settings: ConsoleSettings, insecure: bool) -> None:
    """Run the console until SIGINT or SIGTERM; print its URL once it listens.

    Raises ConsoleSettingsError when it may not listen there; TickworkError when the API
    cannot be reached to learn whether it has access control.
    """
    from tickwork.console.server import ConsoleServer

    server = ConsoleServer(settings, "--listen (TICKWORK_CONSOLE_LISTEN)")
    try:
        access_control = await _access_control(server)
        warn = check_exposure(
            settings.listen,
            https=settings.https,
            access_control=access_control,
            insecure=insecure,
            variable="--listen (TICKWORK_CONSOLE_LISTEN)",
        )
        await server.start()
    except BaseException:
        await server.stop()
        raise
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"tickwork console on {server.url} (API {settings.server})", flush=True)
    if warn:
        print(
            f"WARNING: --insecure: the console on {settings.listen} has no TLS and the API no "
            "access control; anyone who reaches it can run commands as the service's user",
            flush=True,
        )
    try:
        assert server.task is not None
        waiter = asyncio.create_task(stop.wait())
        await asyncio.wait({waiter, server.task}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await server.stop()


def _api_tls(args: argparse.Namespace) -> TlsConfig | None:
    """TLS to the API: the environment's (TICKWORK_TLS...), overridden by the options."""
    given = {
        name: value
        for name, value in (
            ("ca_file", getattr(args, "tls_ca", None)),
            ("cert_file", getattr(args, "tls_cert", None)),
            ("key_file", getattr(args, "tls_key", None)),
            ("server_name", getattr(args, "tls_server_name", None)),
        )
        if value
    }
    from_env = TlsConfig.from_env()
    if not given and not getattr(args, "tls", False):
        return from_env
    return dataclasses.replace(from_env or TlsConfig(), **given)


def run(args: argparse.Namespace, out: Any = None) -> int:
    """The ``console`` command: 0 after a stop, 2 for a setting it cannot use, 1 when the
    API cannot be reached."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    listen = args.listen or os.environ.get("TICKWORK_CONSOLE_LISTEN", "").strip() or DEFAULT_LISTEN
    insecure = args.insecure or os.environ.get("TICKWORK_INSECURE", "").strip().lower() in _TRUE
    server = rq.resolve_server(args.server)
    try:
        tls = _api_tls(args)
        settings = ConsoleSettings(
            server=server,
            listen=listen,
            api_tls=tls,
            cert_file=args.cert,
            key_file=args.key,
        )
        asyncio.run(serve(settings, insecure))
    except ConsoleSettingsError as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return 2
    except TickworkError as err:
        print(f"error: the API at {server}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    return 0
