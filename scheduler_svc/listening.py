"""Where the service listens, and whether it may: the TLS credentials, the rule that a
non-loopback address needs access control or TLS, the check that a port is free, and the
gRPC server's connection options (keepalive pings).
"""

from __future__ import annotations

import errno
import logging
import socket
from pathlib import Path

import grpc

from scheduler_svc.errors import SettingsError
from scheduler_svc.settings import Settings
from tickwork._requests import is_loopback

log = logging.getLogger(__name__)

__all__ = [
    "LISTEN_VARIABLE",
    "METRICS_VARIABLE",
    "PING_EVERY_S",
    "PING_TIMEOUT_S",
    "SERVER_OPTIONS",
    "check_can_listen",
    "check_exposure",
    "is_loopback",
    "server_credentials",
]


def _read(path: str, variable: str) -> bytes:
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as err:
        raise SettingsError(f"{variable}: cannot read {path}: {err.strerror}") from None


def server_credentials(settings: Settings) -> grpc.ServerCredentials:
    """TLS credentials from the certificate files; mutual TLS when a client CA is set."""
    client_ca = settings.tls_client_ca_file
    return grpc.ssl_server_credentials(
        [
            (
                _read(settings.tls_key_file, "TICKWORK_TLS_KEY_FILE"),
                _read(settings.tls_cert_file, "TICKWORK_TLS_CERT_FILE"),
            )
        ],
        root_certificates=_read(client_ca, "TICKWORK_TLS_CLIENT_CA_FILE") if client_ca else None,
        require_client_auth=bool(client_ca),
    )


def check_exposure(settings: Settings) -> None:
    """Refuse a non-loopback address with neither tokens nor TLS, unless ``insecure``.

    Raises SettingsError saying why and what to set.
    """
    if is_loopback(settings.listen) or settings.tokens or settings.tls_enabled:
        return
    if settings.insecure:
        log.warning(
            "INSECURE: serving on %s with no access control and no TLS: anyone who reaches "
            "this port can create and run shell tasks as this user",
            settings.listen,
        )
        return
    raise SettingsError(
        f"refusing to serve on {settings.listen} (not a loopback address) without access "
        "control or TLS: anyone who reaches it could create and run shell tasks. Configure "
        "TICKWORK_TOKENS or TICKWORK_TOKENS_FILE, and/or TICKWORK_TLS_CERT_FILE and "
        "TICKWORK_TLS_KEY_FILE; or pass --insecure (TICKWORK_INSECURE=true) to serve anyway"
    )


PING_EVERY_S = 5.0
"""Seconds between the service's HTTP/2 pings on each connection."""
PING_TIMEOUT_S = 5.0
"""Seconds the service waits for a ping's answer before it closes the connection: a worker
that stopped answering loses the worker lease within PING_EVERY_S + PING_TIMEOUT_S, and a
network stall shorter than PING_TIMEOUT_S costs nothing."""


SERVER_OPTIONS = [
    ("grpc.so_reuseport", 0),
    ("grpc.keepalive_permit_without_calls", 1),
    # Workers ping every second (worker_svc.worker.KEEPALIVE) to notice a black hole before
    # their lease is given away; the default policy would answer that with GOAWAY
    # "too_many_pings" (at most one ping in 5 minutes without data).
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 500),
    ("grpc.http2.max_ping_strikes", 0),
    # The service pings every connection every PING_EVERY_S and closes one whose peer has
    # not answered within PING_TIMEOUT_S: a worker process that is stopped (SIGSTOP) or cut
    # off by the network loses its stream, so its session ends and gives the worker lease
    # up, and a standby takes over. Pings are answered by gRPC's own threads, not by the
    # worker's event loop: a job that blocks the loop does not cost its worker the lease (a
    # standby would then run a job beside it).
    ("grpc.keepalive_time_ms", int(PING_EVERY_S * 1000)),
    ("grpc.keepalive_timeout_ms", int(PING_TIMEOUT_S * 1000)),
    ("grpc.http2.ping_timeout_ms", int(PING_TIMEOUT_S * 1000)),
    ("grpc.http2.max_pings_without_data", 0),
]
"""gRPC server arguments of the scheduler service."""


LISTEN_VARIABLE = "TICKWORK_LISTEN (--listen)"
METRICS_VARIABLE = "TICKWORK_METRICS_LISTEN"


def check_can_listen(address: str, variable: str) -> None:
    """Refuse ``address`` (HOST:PORT) when its port is taken, by binding it for a moment.

    Port 0 (any free port) is not checked; nor is a host that does not resolve, which the
    bind itself reports. Raises RuntimeError ``VARIABLE: cannot listen on ADDRESS: why``.
    """
    host, _, port_text = address.rpartition(":")
    port = int(port_text)
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(
            host.strip("[]") or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except OSError:
        return
    for family, kind, proto, _, sockaddr in infos:
        with socket.socket(family, kind, proto) as probe:
            # As the gRPC server and http.server bind: a port in TIME_WAIT is not "taken".
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(sockaddr)
            except OSError as err:
                if err.errno in (errno.EADDRINUSE, errno.EACCES):
                    raise RuntimeError(
                        f"{variable}: cannot listen on {address}: {err.strerror}"
                    ) from None
