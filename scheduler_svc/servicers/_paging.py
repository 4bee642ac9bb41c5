"""Page tokens (AIP-158): opaque, and bound to the request they continue.

A ``next_page_token`` is URL-safe base64 of ``<position>.<filter>.<check>``:

- ``position``: where the next page starts, as the listing defines it (the last name, job id
  or fire time in microseconds), base64 itself so that any name fits;
- ``filter``: a digest of the request's method and every field but ``page_token`` and
  ``page_size`` (which may change between pages), so a token is refused by a request with
  another filter (another task, schedule or statuses) or by another listing;
- ``check``: a keyed digest of the two, so a made-up or edited token is refused.

A token that fails any of this is INVALID_ARGUMENT naming ``page_token``
(PAGE_TOKEN_INVALID). Tokens hold no secret and grant nothing: the check catches forged
and mistyped tokens, it is no access control. They stay valid across restarts and
replicas (nothing in them is per process).
"""

from __future__ import annotations

import base64
import binascii
import hashlib

from google.protobuf import message

from scheduler_svc.errors import InvalidArgument, Reason

#: Key of the check digest: a token's version, changed when the format changes.
_KEY = b"tickwork.v1 page token 1"

_NOT_OURS = "malformed; pass the next_page_token of the previous page of this same request"


def _filter(request: message.Message) -> str:
    """A digest of ``request`` without its page_token and page_size."""
    copy = type(request)()
    copy.CopyFrom(request)
    copy.ClearField("page_token")
    copy.ClearField("page_size")
    h = hashlib.blake2b(digest_size=12)
    h.update(request.DESCRIPTOR.full_name.encode())
    h.update(b"\0")
    h.update(copy.SerializeToString(deterministic=True))
    return _b64(h.digest())


def _check(position: str, filter_digest: str) -> str:
    digest = hashlib.blake2b(f"{position}.{filter_digest}".encode(), key=_KEY, digest_size=12)
    return _b64(digest.digest())


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)


def encode(request: message.Message, position: str) -> str:
    """The next_page_token of ``request``'s listing whose next page starts after
    ``position`` (the listing's own notation, any text)."""
    pos = _b64(position.encode())
    digest = _filter(request)
    return _b64(f"{pos}.{digest}.{_check(pos, digest)}".encode())


def decode(request: message.Message) -> str | None:
    """The position ``request.page_token`` stands for; None for the first page (no token).

    Raises:
        InvalidArgument: (``page_token``, PAGE_TOKEN_INVALID) a token this service did not
            make, or made for a request with other filters or for another listing.
    """
    token: str = request.page_token  # type: ignore[attr-defined]
    if not token:
        return None
    try:
        pos, digest, check = _unb64(token).decode("ascii").split(".")
        position = _unb64(pos).decode()
    except (binascii.Error, ValueError):
        raise _refused() from None
    if check != _check(pos, digest):
        raise _refused()
    if digest != _filter(request):
        raise InvalidArgument(
            "was made for another request; a page token continues the listing with the "
            "same filters it came from (only page_size may change)",
            field="page_token",
            reason=Reason.PAGE_TOKEN_INVALID,
        )
    return position


def _refused() -> InvalidArgument:
    return InvalidArgument(_NOT_OURS, field="page_token", reason=Reason.PAGE_TOKEN_INVALID)


def int_position(position: str) -> int:
    """A position that :func:`encode` was given as a decimal integer (ids, microseconds).

    Raises InvalidArgument(page_token) when it is not one (a token of another listing kind
    that passed the checks cannot, but the parse stays strict)."""
    if not (position.isascii() and position.isdigit()) or int(position) >= 2**63:
        raise _refused()
    return int(position)
