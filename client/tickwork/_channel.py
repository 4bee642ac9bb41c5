"""How a client reaches the service: plaintext or TLS channel, and the bearer token.

The SDK, the CLI and the worker build their channels here, so they take the same options
and environment variables:

- ``TICKWORK_TOKEN``: the bearer token sent as ``authorization: Bearer <token>`` metadata.
- ``TICKWORK_TLS`` (true/false): TLS with the system's trusted roots.
- ``TICKWORK_TLS_CA_FILE``: PEM file of the CA that signed the server's certificate (implies
  TLS).
- ``TICKWORK_TLS_CLIENT_CERT_FILE`` and ``TICKWORK_TLS_CLIENT_KEY_FILE``: PEM client
  certificate and key, for a server that requires mutual TLS (implies TLS).
- ``TICKWORK_TLS_SERVER_NAME``: the name to verify in the server's certificate.

(The server's own certificate variables are ``TICKWORK_TLS_CERT_FILE`` and friends, read by
``tickwork serve`` only.)

A ``unix:`` target is always plaintext (the service's own loopback socket).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from grpc import aio

from tickwork.errors import InvalidArgument, InvalidSetting

__all__ = ["TlsConfig"]

TOKEN_ENV = "TICKWORK_TOKEN"
TLS_ENV = "TICKWORK_TLS"
TLS_CA_ENV = "TICKWORK_TLS_CA_FILE"
TLS_CERT_ENV = "TICKWORK_TLS_CLIENT_CERT_FILE"
TLS_KEY_ENV = "TICKWORK_TLS_CLIENT_KEY_FILE"
TLS_SERVER_NAME_ENV = "TICKWORK_TLS_SERVER_NAME"

Metadata = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class TlsConfig:
    """Client TLS: verify the server, and optionally present a client certificate.

    Attributes:
        ca_file (str): PEM file of the CA that signed the server's certificate; empty means
            the system's trusted roots.
        cert_file (str): PEM client certificate (mutual TLS); empty for none.
        key_file (str): PEM private key of ``cert_file``.
        server_name (str): the name to verify in the server's certificate instead of the
            target's host (e.g. the certificate's DNS name when connecting by IP address).

    Raises:
        InvalidSetting: on construction, when only one of cert_file and key_file is given.
    """

    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    server_name: str = ""

    def __post_init__(self) -> None:
        if bool(self.cert_file) != bool(self.key_file):
            raise InvalidSetting("tls: give both a client certificate and its key, or neither")

    def credentials(self) -> grpc.ChannelCredentials:
        """The channel credentials; raises InvalidArgument naming an unreadable file."""
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca_file) if self.ca_file else None,
            private_key=_read(self.key_file) if self.key_file else None,
            certificate_chain=_read(self.cert_file) if self.cert_file else None,
        )

    def check_files(self) -> None:
        """Read every file now, so that a process (the worker) can refuse an unreadable one
        at start instead of failing when it first dials.

        Raises:
            InvalidSetting: ``VARIABLE (--flag): cannot read PATH: why``.
        """
        for path, variable, flag in (
            (self.ca_file, TLS_CA_ENV, "--tls-ca"),
            (self.cert_file, TLS_CERT_ENV, "--tls-cert"),
            (self.key_file, TLS_KEY_ENV, "--tls-key"),
        ):
            if path:
                try:
                    Path(path).expanduser().read_bytes()
                except OSError as err:
                    raise InvalidSetting(
                        f"{variable} ({flag}): cannot read {path}: {err.strerror}"
                    ) from None

    def options(self) -> list[tuple[str, str]]:
        """Channel options (the server name override, when set)."""
        return [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> TlsConfig | None:
        """TLS as the environment asks, or None for plaintext.

        Raises:
            InvalidSetting: TICKWORK_TLS is not a boolean, or a certificate has no key.
        """
        e = os.environ if env is None else env
        raw = e.get(TLS_ENV, "").strip().lower()
        if raw not in ("", "0", "1", "true", "false", "yes", "no", "on", "off"):
            raise InvalidSetting(f"{TLS_ENV}: expected true or false, got {raw!r}")
        ca, cert, key, name = (
            e.get(n, "").strip()
            for n in (TLS_CA_ENV, TLS_CERT_ENV, TLS_KEY_ENV, TLS_SERVER_NAME_ENV)
        )
        if raw in ("1", "true", "yes", "on") or ca or cert or key:
            return cls(ca_file=ca, cert_file=cert, key_file=key, server_name=name)
        return None


def _read(path: str) -> bytes:
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as err:
        raise InvalidArgument(f"tls: cannot read {path}: {err.strerror}") from None


def resolve_token(token: str | None, env: Mapping[str, str] | None = None) -> str:
    """The token given, else ``$TICKWORK_TOKEN``, else "" (no token)."""
    if token is not None:
        return token.strip()
    return (os.environ if env is None else env).get(TOKEN_ENV, "").strip()


def resolve_tls(tls: TlsConfig | bool | None) -> TlsConfig | None:
    """``None``: from the environment; ``False``: plaintext; ``True``: system roots."""
    if tls is None:
        return TlsConfig.from_env()
    if tls is True:
        return TlsConfig()
    if tls is False:
        return None
    return tls


def auth_metadata(token: str) -> Metadata:
    """The call metadata carrying ``token`` (empty without one)."""
    return (("authorization", f"Bearer {token}"),) if token else ()


def _secure(target: str, tls: TlsConfig | None) -> bool:
    return tls is not None and not target.startswith("unix:")


def sync_channel(target: str, tls: TlsConfig | None) -> grpc.Channel:
    """A blocking channel to ``target``: TLS when ``tls`` is given, plaintext otherwise."""
    if tls is not None and _secure(target, tls):
        return grpc.secure_channel(target, tls.credentials(), options=tls.options())
    return grpc.insecure_channel(target)


def aio_channel(
    target: str, tls: TlsConfig | None, options: Sequence[tuple[str, Any]] = ()
) -> aio.Channel:
    """An asyncio channel to ``target``: TLS when ``tls`` is given, plaintext otherwise;
    ``options`` are gRPC channel arguments (e.g. keepalive) added to TLS's own."""
    if tls is not None and _secure(target, tls):
        return aio.secure_channel(target, tls.credentials(), options=[*tls.options(), *options])
    return aio.insecure_channel(target, options=list(options))
