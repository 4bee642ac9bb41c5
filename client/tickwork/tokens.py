"""Access tokens: how one is made, and the ``ROLE:SHA256HEX[:LABEL]`` entry under which a
server is configured to accept it (TICKWORK_TOKENS, TICKWORK_TOKENS_FILE).

The one place the token format is decided: ``tickwork token new`` prints what
:func:`new_token` and :func:`token_entry` make, and the service hashes the bearer tokens
it receives with :func:`hash_token` to look them up.
"""

from __future__ import annotations

import hashlib
import secrets

__all__ = ["ROLES", "hash_token", "new_token", "token_entry"]

#: Roles a configured token may have.
ROLES = ("admin", "operator", "viewer", "worker")

_PREFIX = "tw_"


def new_token() -> str:
    """A fresh random token: ``tw_`` and 256 random bits, URL-safe base64 (43 characters)."""
    return _PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The SHA-256 hex digest (64 lower-case hex digits) under which ``token`` is configured."""
    return hashlib.sha256(token.encode()).hexdigest()


def token_entry(role: str, token: str, label: str = "") -> str:
    """The server's entry for ``token``: ``ROLE:SHA256HEX``, then ``:LABEL`` when given."""
    return f"{role}:{hash_token(token)}" + (f":{label}" if label else "")
