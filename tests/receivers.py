"""Real receivers of notifications for tests: an HTTP server on 127.0.0.1 that keeps every
POST it gets (and answers the status the test sets), and an SMTP server (aiosmtpd)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller

from tests.harness import free_port


@dataclass(frozen=True)
class Received:
    """One POST: its path, headers (lower-case names), raw body, and the body as JSON."""

    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class HttpReceiver:
    """Keeps every POST; answers ``status`` (200 unless the test changes it)."""

    def __init__(self) -> None:
        self.status = 200
        #: Seconds the receiver takes to answer a status other than 2xx (a struggling one).
        self.failing_delay_s = 0.0
        self._received: list[Received] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                headers = {k.lower(): v for k, v in self.headers.items()}
                with receiver._lock:
                    receiver._received.append(Received(self.path, headers, body))
                    status = receiver.status
                    delay = receiver.failing_delay_s if status >= 300 else 0.0
                if delay:
                    threading.Event().wait(delay)  # the receiver's own slowness
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.port = free_port()
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def received(self) -> list[Received]:
        with self._lock:
            return list(self._received)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def http_receiver() -> Iterator[HttpReceiver]:
    """A started :class:`HttpReceiver`, stopped on exit."""
    receiver = HttpReceiver()
    receiver.start()
    try:
        yield receiver
    finally:
        receiver.stop()


class Mailbox:
    """An aiosmtpd handler keeping every message it receives."""

    def __init__(self) -> None:
        self._received: list[tuple[list[str], Message]] = []
        self._lock = threading.Lock()

    async def handle_DATA(self, server: object, session: object, envelope: object) -> str:
        content = envelope.content  # type: ignore[attr-defined]
        rcpt = list(envelope.rcpt_tos)  # type: ignore[attr-defined]
        with self._lock:
            self._received.append((rcpt, message_from_bytes(content)))
        return "250 Message accepted for delivery"

    def messages(self) -> list[tuple[list[str], Message]]:
        with self._lock:
            return list(self._received)


@contextmanager
def smtp_server() -> Iterator[tuple[Mailbox, int]]:
    """A real SMTP server on 127.0.0.1 (a free port): its mailbox and port."""
    box = Mailbox()
    port = free_port()
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield box, port
    finally:
        controller.stop()
