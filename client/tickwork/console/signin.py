"""Signing in and out: a token is checked against the API and exchanged for a session."""

from __future__ import annotations

import logging
import secrets
import time

import grpc
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from tickwork.console.sessions import SESSION_COOKIE, SIGNIN_COOKIE, Session, same_token
from tickwork.console.web import action, console_of, current_session, field, local_path, render
from tickwork.errors import TickworkError

log = logging.getLogger(__name__)


#: How long the answer "does the API need a token?" is reused, seconds (asking is a refused
#: call, hence a warning, in the log of a server with access control).
OPEN_SERVER_TTL_S = 60.0


async def _open_server(request: Request) -> bool:
    """True when the API answers without a token (its access control is off)."""
    console = console_of(request)
    now = time.monotonic()
    seen = console.open_server
    if seen is not None and now - seen[0] < OPEN_SERVER_TTL_S:
        return seen[1]
    try:
        await console.api.status("")
        is_open = True
    except TickworkError:
        is_open = False
    console.open_server = (now, is_open)
    return is_open


async def signin_form(request: Request, status_code: int = 200, error: str = "") -> Response:
    """GET /signin: the token form, guarded by a fresh double-submit CSRF cookie."""
    nonce = secrets.token_urlsafe(32)
    response = render(
        request,
        "signin.html",
        None,
        status_code=status_code,
        signin_csrf=nonce,
        next=local_path(request.query_params.get("next"), "/"),
        open_server=await _open_server(request),
        error=error,
    )
    https = console_of(request).settings.https
    response.set_cookie(
        SIGNIN_COOKIE, nonce, httponly=True, samesite="strict", secure=https, path="/signin"
    )
    return response


async def signin(request: Request) -> Response:
    """POST /signin: check the token with SystemService.GetStatus, then start a session.

    403 without the sign-in CSRF cookie and field; 401 for a token the API refuses.
    """
    console = console_of(request)
    form = await request.form()
    if not same_token(field(form, "csrf"), request.cookies.get(SIGNIN_COOKIE, "")):
        return render(
            request,
            "refused.html",
            None,
            status_code=403,
            why="the sign-in form's CSRF token is missing or wrong; reload the page",
        )
    token = field(form, "token")
    try:
        await console.api.status(token)
    except TickworkError as err:
        log.info("console sign-in refused: %s", err.status_name)
        if err.code == grpc.StatusCode.UNAUTHENTICATED:
            why = "the API does not know this token" if token else "this server needs a token"
        elif err.code == grpc.StatusCode.PERMISSION_DENIED:
            why = "this token's role may not read (use a viewer, operator or admin token)"
        else:
            why = f"the API could not be asked: {err.details}"
        status = 503 if err.code == grpc.StatusCode.UNAVAILABLE else 401
        return await signin_form(request, status, why)
    old = await current_session(request)
    if old is not None:
        await console.sessions.end(old.id)
    session = await console.sessions.create(token, "signed in" if token else "no access control")
    response = RedirectResponse(local_path(form.get("next"), "/"), status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        session.id,
        httponly=True,
        samesite="strict",
        secure=console.settings.https,
        path="/",
    )
    response.delete_cookie(SIGNIN_COOKIE, path="/signin")
    return response


@action
async def signout(request: Request, session: Session, form: FormData) -> Response:
    """POST /signout: end the session and forget its cookie."""
    console = console_of(request)
    await console.sessions.end(session.id)
    response = RedirectResponse("/signin", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
