"""Signed-in sessions: the token stays on the server, the browser holds a random id.

Signing in exchanges the API token for a session id in an ``HttpOnly``, ``SameSite=Strict``
cookie (``Secure`` under HTTPS). The token is kept in this process's memory only, never in
a cookie, a URL or a log line. Each session has its own CSRF token, which every form posts
back; the sign-in form, before any session exists, is guarded by a double-submit cookie.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tickwork._async import AsyncClient

__all__ = ["SESSION_COOKIE", "SIGNIN_COOKIE", "Session", "Sessions", "same_token"]

SESSION_COOKIE = "tickwork_session"
SIGNIN_COOKIE = "tickwork_signin"


@dataclass(eq=False)
class Session:
    """One signed-in browser.

    Attributes:
        id (str): the cookie's value (256 random bits).
        csrf (str): the token every form of this session posts as ``csrf``.
        client (AsyncClient): the API client carrying the user's token.
        label (str): what the header shows: "signed in" or "no access control".
        last_used (float): ``time.monotonic()`` of the last request.
    """

    id: str
    csrf: str
    client: AsyncClient = field(repr=False)
    token: str = field(repr=False)
    label: str
    last_used: float
    flashes: list[tuple[str, str]] = field(default_factory=list)

    def flash(self, kind: str, text: str) -> None:
        """Keep a message ("ok" or "error") for the next page this session sees."""
        self.flashes.append((kind, text))

    def take_flashes(self) -> list[tuple[str, str]]:
        """The kept messages, oldest first; they are forgotten."""
        out, self.flashes = self.flashes, []
        return out


class Sessions:
    """The console's sessions, in memory: a restart signs everyone out.

    Args:
        make_client: builds the API client for a token ("" for none).
        idle_s: a session unused this many seconds is ended on its next use.
    """

    def __init__(self, make_client: Callable[[str], AsyncClient], idle_s: float) -> None:
        self._make_client = make_client
        self._idle_s = idle_s
        self._sessions: dict[str, Session] = {}

    #: Most sessions kept; signing in beyond it ends the least recently used one.
    MAX_SESSIONS = 1000

    async def create(self, token: str, label: str) -> Session:
        """A new session for ``token`` (already checked against the API)."""
        if len(self._sessions) >= self.MAX_SESSIONS:
            oldest = min(self._sessions.values(), key=lambda s: s.last_used)
            await self.end(oldest.id)
        session = Session(
            id=secrets.token_urlsafe(32),
            csrf=secrets.token_urlsafe(32),
            client=self._make_client(token),
            token=token,
            label=label,
            last_used=time.monotonic(),
        )
        self._sessions[session.id] = session
        return session

    async def get(self, session_id: str | None) -> Session | None:
        """The live session with that id, marked used; None when there is none or it idled
        out (then it is ended)."""
        session = self._sessions.get(session_id or "")
        if session is None:
            return None
        now = time.monotonic()
        if now - session.last_used > self._idle_s:
            await self.end(session.id)
            return None
        session.last_used = now
        return session

    async def end(self, session_id: str) -> None:
        """End a session and close its API client; an unknown id is a no-op."""
        session = self._sessions.pop(session_id, None)
        if session is not None:
            await session.client.close()

    async def close(self) -> None:
        """End every session."""
        for session_id in list(self._sessions):
            await self.end(session_id)


def same_token(given: str | None, expected: str) -> bool:
    """Constant-time comparison of a posted CSRF token with the expected one."""
    return bool(given) and hmac.compare_digest(str(given).encode(), expected.encode())
