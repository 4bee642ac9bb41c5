"""Operations on ``requests``: the answers of calls made with a request_id (AIP-155).

A call with a request_id runs its effect and :func:`remember` in one transaction, so the
answer is stored exactly when the effect is. :func:`find` reads the answer of an earlier
call with the same (method, request_id) made within :data:`TTL`; older rows are as good as
gone (replaced on the next call with that id, purged by :func:`purge`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from scheduler_svc.schema import requests

#: How long an answer is kept for repeats.
TTL = dt.timedelta(hours=24)


@dataclasses.dataclass(frozen=True)
class Remember:
    """What to store with a call's effect: its key, the request's fingerprint, and how to
    turn the operation's result into the serialized answer."""

    method: str
    """The RPC, e.g. ``"TaskService/RunTasks"``."""
    request_id: str
    fingerprint: str
    """A digest of the request without its request_id (hex, at most 64 characters)."""
    answer: Callable[[Any], bytes]
    """The serialized response for the operation's result."""
    now: dt.datetime


@dataclasses.dataclass(frozen=True)
class Answer:
    """An earlier call's stored answer."""

    fingerprint: str
    response: bytes


class RequestRaced(Exception):
    """Another call with the same request_id stored its answer first; this call's
    transaction is rolled back (nothing of it is written) and the caller reads that answer."""


def find(conn: Connection, method: str, request_id: str, now: dt.datetime) -> Answer | None:
    """See :meth:`scheduler_svc.store.Store.find_request`."""
    row = conn.execute(
        sa.select(requests.c.fingerprint, requests.c.response).where(
            requests.c.method == method,
            requests.c.request_id == request_id,
            requests.c.created_at > now - TTL,
        )
    ).first()
    return None if row is None else Answer(row.fingerprint, bytes(row.response))


def remember(conn: Connection, r: Remember, result: Any) -> None:
    """Store the answer to ``result`` under ``r``'s key, replacing an expired one.

    Raises:
        RequestRaced: a live answer under that key exists (a concurrent first call).
    """
    key = (requests.c.method == r.method) & (requests.c.request_id == r.request_id)
    conn.execute(requests.delete().where(key, requests.c.created_at <= r.now - TTL))
    row = {
        "method": r.method,
        "request_id": r.request_id,
        "fingerprint": r.fingerprint,
        "response": r.answer(result),
        "created_at": r.now,
    }
    try:
        conn.execute(requests.insert().values(row))
    except IntegrityError:
        raise RequestRaced(r.method, r.request_id) from None


def purge(conn: Connection, now: dt.datetime) -> int:
    """Delete the answers older than :data:`TTL`; return how many."""
    return conn.execute(requests.delete().where(requests.c.created_at <= now - TTL)).rowcount
