"""Request ids (AIP-155): a call repeated with the same ``request_id`` within 24 hours gets
the first call's answer, marked ``repeated_request``, and does nothing.

:func:`once` wraps a servicer's effect. Without a request_id it just runs it. With one, it
reads the stored answer of (method, request_id): the same request gets it back; a different
request (another fingerprint: a digest of the request without its request_id) is
INVALID_ARGUMENT naming ``request_id`` (REQUEST_ID_REUSED). Otherwise the effect runs and
the store writes its answer in the effect's own transaction; if a concurrent call with the
same id stored one first, this call's transaction is rolled back and that answer returned.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from google.protobuf import message

from scheduler_svc import validation
from scheduler_svc.app import App
from scheduler_svc.errors import InvalidArgument, Reason
from scheduler_svc.store import Remember, RequestRaced

M = TypeVar("M", bound=message.Message)


def fingerprint(method: str, request: message.Message) -> str:
    """A digest (hex) of ``method`` and ``request`` without its request_id."""
    copy = type(request)()
    copy.CopyFrom(request)
    copy.ClearField("request_id")
    h = hashlib.sha256(method.encode())
    h.update(b"\0")
    h.update(copy.SerializeToString(deterministic=True))
    return h.hexdigest()


async def once(
    app: App,
    method: str,
    request: message.Message,
    response_type: type[M],
    run: Callable[[Remember | None], Awaitable[M]],
    answer: Callable[[Any], M],
) -> M:
    """The answer to ``request``, running ``run`` at most once per request_id.

    Args:
        app (App): the service (its store and clock).
        method (str): the RPC, e.g. ``"TaskService/RunTasks"``.
        request (message.Message): the request; its ``request_id`` field ("" = none).
        response_type (type[M]): the response message class.
        run (Callable[[Remember | None], Awaitable[M]]): the effect; passes the Remember
            to the store operation and returns the response (side effects after the
            write, e.g. waking workers, happen only here).
        answer (Callable[[Any], M]): the response for the store operation's result (called
            inside its transaction to store the answer).

    Raises:
        InvalidArgument: ``request_id`` too long or with control characters, or used
            before for a different request (REQUEST_ID_REUSED).
    """
    request_id: str = request.request_id  # type: ignore[attr-defined]
    if not request_id:
        return await run(None)
    validation.request_id(request_id)
    digest = fingerprint(method, request)
    for _ in range(2):
        now = app.clock()
        prior = await app.store.find_request(method, request_id, now)
        if prior is not None:
            if prior.fingerprint != digest:
                raise InvalidArgument(
                    "was used within 24 hours for a different request; give each "
                    "distinct request its own id",
                    field="request_id",
                    reason=Reason.REQUEST_ID_REUSED,
                )
            repeat = response_type.FromString(prior.response)
            repeat.repeated_request = True  # type: ignore[attr-defined]
            return repeat
        remember = Remember(
            method, request_id, digest, lambda result: answer(result).SerializeToString(), now
        )
        try:
            return await run(remember)
        except RequestRaced:
            continue  # the concurrent first call's answer is stored now: read it
    raise AssertionError("unreachable: a raced request id has a stored answer")
