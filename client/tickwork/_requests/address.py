"""Where the SDK dials: the ``HOST:PORT`` of the tickwork API, from the argument or the
environment, with tickwork's port added to a bare host; and whether a listening address
is loopback (for the service's and the console's exposure rules)."""

from __future__ import annotations

import ipaddress
import os

from tickwork.errors import InvalidArgument

DEFAULT_SERVER = "127.0.0.1:50051"
"""Address used when neither an argument nor ``TICKWORK_SERVER`` gives one."""

SERVER_ENV = "TICKWORK_SERVER"
"""Environment variable holding the default ``HOST:PORT`` of the tickwork API."""


DEFAULT_PORT = 50051
"""The port the service listens on unless told otherwise (``TICKWORK_LISTEN``)."""


def resolve_server(server: str | None) -> str:
    """Return the ``HOST:PORT`` to dial: ``server``, else ``$TICKWORK_SERVER``, else the
    default ``127.0.0.1:50051``; a host given without a port gets tickwork's port 50051
    (see :func:`with_default_port`).

    Raises:
        InvalidArgument: ``server`` is given but empty, or its port is not 1 to 65535.
    """
    if server is not None and not server.strip():
        raise InvalidArgument("server: empty; give HOST:PORT, or omit it for the default")
    return with_default_port(server or os.environ.get(SERVER_ENV) or DEFAULT_SERVER)


def with_default_port(target: str) -> str:
    """``target`` with ``:50051`` added when it is a bare host name or address
    (``localhost``, ``10.0.0.5``, ``[::1]``); gRPC would otherwise dial port 443. A target
    with a port, or a gRPC name-resolver URI (``unix:``, ``dns:``, ``ipv4:``, ``ipv6:``,
    ``scheme://...``), is returned as it is.

    Args:
        target (str): the address as the user gave it.

    Returns:
        str: the address to dial.

    Raises:
        InvalidArgument: a ``HOST:PORT`` whose port is not a number from 1 to 65535.
    """
    target = target.strip()
    if not target or "://" in target or target.startswith(("unix:", "dns:", "ipv4:", "ipv6:")):
        return target
    if target.startswith("["):  # [IPv6] or [IPv6]:PORT
        if "]:" not in target:
            return f"{target}:{DEFAULT_PORT}"
        return _checked_port(target, target.rsplit("]:", 1)[1])
    if target.count(":") == 1:  # HOST:PORT (a bare IPv6 address has several colons)
        return _checked_port(target, target.rsplit(":", 1)[1])
    if ":" in target:
        return target
    return f"{target}:{DEFAULT_PORT}"


def _checked_port(target: str, port: str) -> str:
    if not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        raise InvalidArgument(f"server: port must be a number from 1 to 65535, got {target!r}")
    return target


def is_loopback(listen: str) -> bool:
    """True when ``listen`` (HOST:PORT) only accepts connections from this machine
    (``localhost`` or a loopback address, IPv4 or IPv6 in brackets)."""
    host = listen.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
