"""Settings of the web console, and the rule on where it may listen.

The console listens on ``TICKWORK_CONSOLE_LISTEN`` (``tickwork serve``) or ``--listen``
(``tickwork console``). Like the API, it refuses an address other than loopback unless the
pages are served over HTTPS or the API requires tokens, or ``TICKWORK_INSECURE`` says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from tickwork._channel import TlsConfig
from tickwork._requests import is_loopback

__all__ = ["DEFAULT_LISTEN", "ConsoleSettings", "ConsoleSettingsError", "check_exposure"]

DEFAULT_LISTEN = "127.0.0.1:8484"
LISTEN_VARIABLE = "TICKWORK_CONSOLE_LISTEN"


class ConsoleSettingsError(ValueError):
    """A console setting that cannot be used; the message names it."""


@dataclass(frozen=True)
class ConsoleSettings:
    """Where the console listens and how it reaches the API.

    Attributes:
        server (str): the gRPC API, ``HOST:PORT`` or ``unix:PATH``.
        listen (str): ``HOST:PORT`` of the pages (port 0: any free port).
        api_tls (TlsConfig | None): TLS to the API; None for plaintext.
        cert_file (str): PEM certificate of the pages' HTTPS; empty: plain HTTP.
        key_file (str): PEM key of ``cert_file``.
        session_idle_s (float): a session unused this long (seconds) is signed out.
        call_timeout_s (float): deadline of each API call, seconds.
    """

    server: str
    listen: str = DEFAULT_LISTEN
    api_tls: TlsConfig | None = None
    cert_file: str = ""
    key_file: str = ""
    session_idle_s: float = 8 * 3600.0
    call_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        check_address(self.listen, LISTEN_VARIABLE)
        if bool(self.cert_file) != bool(self.key_file):
            raise ConsoleSettingsError("console HTTPS: give both a certificate and its key")
        if self.session_idle_s <= 0 or self.call_timeout_s <= 0:
            raise ConsoleSettingsError("console: session and call timeouts must be > 0")

    @property
    def https(self) -> bool:
        """True when the pages are served over HTTPS (cookies are then ``Secure``)."""
        return bool(self.cert_file)

    @property
    def host(self) -> str:
        """The listen host, without IPv6 brackets."""
        return self.listen.rsplit(":", 1)[0].strip("[]")

    @property
    def port(self) -> int:
        """The listen port as configured (0: any free port)."""
        return int(self.listen.rsplit(":", 1)[1])


def check_address(address: str, variable: str) -> None:
    """``address`` is ``HOST:PORT`` with PORT 0..65535. Raises ConsoleSettingsError naming
    ``variable`` otherwise."""
    host, sep, port = address.rpartition(":")
    if not sep or not host:
        raise ConsoleSettingsError(f"{variable}: expected HOST:PORT, got {address!r}")
    if not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise ConsoleSettingsError(
            f"{variable}: port must be a number from 1 to 65535 (0: any free port), got {address!r}"
        )


def check_exposure(
    listen: str, *, https: bool, access_control: bool, insecure: bool, variable: str
) -> bool:
    """Whether the console may listen on ``listen``.

    Returns False when it may, True when it may only because ``insecure`` says so (the
    caller warns). Raises ConsoleSettingsError, naming ``variable`` and what to set, for a
    non-loopback address without HTTPS or the API's access control.
    """
    if is_loopback(listen) or https or access_control:
        return False
    if insecure:
        return True
    raise ConsoleSettingsError(
        f"{variable}: refusing to serve the console on {listen} (not a loopback address) "
        "while the API has no access control and the console no TLS: anyone who reaches it "
        "could create and run shell tasks. Configure TICKWORK_TOKENS (or TICKWORK_TOKENS_FILE) "
        "or TLS, listen on 127.0.0.1, or set TICKWORK_INSECURE=true (--insecure) to serve anyway"
    )
