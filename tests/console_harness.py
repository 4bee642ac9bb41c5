"""Real console processes for tests, and a cookie-keeping HTTP client without a browser.

:func:`console_server` starts ``tickwork serve`` with access control (one token per role)
and the console on a free port; :class:`Visitor` signs in as a browser would (the sign-in
form's CSRF cookie and field, then the session cookie) and reads pages and posts forms,
never following redirects, so tests see each status as the server sent it.
"""

from __future__ import annotations

import html
import http.client
import re
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.harness import REPO, Server, free_port, wait_for
from tests.security import role_tokens, tokens_file

#: Where the console tests write their screenshots (ignored by git).
ARTIFACTS = REPO / "test-artifacts" / "console"

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')
_URL = re.compile(r"tickwork console on (\S+)")


@dataclass
class Console:
    """A running ``tickwork serve`` with its console: ``url`` ends with "/"."""

    server: Server
    url: str
    tokens: dict[str, str]

    @property
    def port(self) -> int:
        return int(urllib.parse.urlsplit(self.url).port or 0)


@contextmanager
def console_server(tmp: Path, env: Mapping[str, str] | None = None) -> Iterator[Console]:
    """``tickwork serve`` with a token per role and the console on a free port of 127.0.0.1,
    until the block ends."""
    tokens = role_tokens()
    path = tokens_file(tmp / "tokens", tokens)
    server = Server(
        tmp,
        env={
            "TICKWORK_TOKENS_FILE": str(path),
            "TICKWORK_CONSOLE_LISTEN": f"127.0.0.1:{free_port()}",
            "WORKER_POLL_INTERVAL_SECONDS": "1",
            **(env or {}),
        },
        name="console-server",
    )
    try:
        server.wait_healthy()
        match = wait_for(
            lambda: _URL.search(server.output()), timeout_s=30, what="the console's URL"
        )
        yield Console(server, match.group(1), tokens)
    finally:
        server.stop()


@dataclass
class Reply:
    """One HTTP response: status, headers (lower-case names), body text."""

    status: int
    headers: dict[str, str]
    set_cookies: list[str]
    body: str

    @property
    def location(self) -> str:
        return self.headers.get("location", "")

    def csrf(self) -> str:
        """The CSRF token of the page's first form."""
        match = _CSRF.search(self.body)
        assert match, f"no CSRF field in:\n{self.body[:2000]}"
        return html.unescape(match.group(1))


@dataclass
class Visitor:
    """An HTTP client of one console that keeps its cookies, as a browser does."""

    port: int
    cookies: dict[str, str] = field(default_factory=dict)

    def request(
        self,
        method: str,
        path: str,
        form: Mapping[str, str | list[str]] | None = None,
        *,
        read_body: bool = True,
    ) -> Reply:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        headers = {}
        if self.cookies:
            headers["cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        body = None
        if form is not None:
            body = urllib.parse.urlencode(form, doseq=True)
            headers["content-type"] = "application/x-www-form-urlencoded"
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            set_cookies = response.headers.get_all("set-cookie") or []
            for line in set_cookies:
                name, _, rest = line.partition("=")
                value = rest.split(";", 1)[0]
                if "max-age=0" in line.lower() or value in ('""', ""):
                    self.cookies.pop(name, None)
                else:
                    self.cookies[name] = value
            text = response.read().decode() if read_body else ""
            return Reply(
                response.status,
                {k.lower(): v for k, v in response.getheaders()},
                set_cookies,
                text,
            )
        finally:
            conn.close()

    def get(self, path: str) -> Reply:
        return self.request("GET", path)

    def post(self, path: str, form: Mapping[str, str | list[str]]) -> Reply:
        return self.request("POST", path, form)

    def sign_in(self, token: str) -> Reply:
        """Sign in with ``token``; returns the POST's reply (303 on success)."""
        page = self.get("/signin")
        return self.post("/signin", {"csrf": page.csrf(), "token": token, "next": "/"})

    def csrf(self) -> str:
        """This session's CSRF token (read from the overview's sign-out form)."""
        return self.get("/tasks").csrf()
