"""Plumbing every page shares: the console's state, rendering, the session and CSRF guards,
API errors turned into pages, and the security headers.

A page handler is ``async def (request, session) -> Response`` decorated with :func:`page`
(GET: no session redirects to the sign-in page); an action handler is
``async def (request, session, form) -> Response`` decorated with :func:`action` (POST: no
session or a missing or wrong CSRF token is 403, and nothing is called).
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import grpc
import jinja2
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tickwork.console import format as fmt
from tickwork.console.api import Api
from tickwork.console.sessions import SESSION_COOKIE, Session, Sessions, same_token
from tickwork.console.settings import ConsoleSettings
from tickwork.errors import InvalidArgument, TickworkError

log = logging.getLogger(__name__)

PageHandler = Callable[[Request, Session], Awaitable[Response]]
ActionHandler = Callable[[Request, Session, FormData], Awaitable[Response]]
Endpoint = Callable[[Request], Awaitable[Response]]

#: Where the pages' own script and style may come from, and nothing inline.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = (
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
)

#: API status codes as HTTP statuses of the page that shows them.
_HTTP_STATUS = {
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}


@dataclass
class Console:
    """What every request of one console process shares."""

    settings: ConsoleSettings
    api: Api
    sessions: Sessions
    templates: jinja2.Environment
    #: (``time.monotonic()`` when asked, whether the API answered without a token).
    open_server: tuple[float, bool] | None = None


def make_templates() -> jinja2.Environment:
    """The Jinja environment: the package's templates, autoescaped, with the format filters."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("tickwork.console", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(fmt.FILTERS)
    return env


def console_of(request: Request) -> Console:
    """The console state of the app serving ``request``."""
    console: Console = request.app.state.console
    return console


def render(
    request: Request,
    template: str,
    session: Session | None,
    status_code: int = 200,
    **context: Any,
) -> HTMLResponse:
    """Render ``template`` with ``context``, the session's CSRF token and flashes, and now."""
    console = console_of(request)
    html = console.templates.get_template(template).render(
        request_path=request.url.path,
        session=session,
        csrf=session.csrf if session is not None else "",
        flashes=session.take_flashes() if session is not None else [],
        now=dt.datetime.now(dt.UTC),
        **context,
    )
    return HTMLResponse(html, status_code=status_code)


def error_page(request: Request, session: Session | None, err: TickworkError) -> HTMLResponse:
    """The page of a refused or failed API call, with the matching HTTP status."""
    status = _HTTP_STATUS.get(err.code, 502)
    return render(request, "error.html", session, status_code=status, code=err.status_name, err=err)


def signin_redirect(request: Request) -> RedirectResponse:
    """303 to the sign-in page, coming back to this page afterwards."""
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/signin?next={quote(target, safe='')}", status_code=303)


def local_path(value: object, default: str) -> str:
    """``value`` when it is a path of this site (``/...``, not ``//host``), else ``default``."""
    text = str(value or "")
    if text.startswith("/") and not text.startswith("//") and "\\" not in text:
        return text
    return default


async def current_session(request: Request) -> Session | None:
    """The session of the request's cookie, or None."""
    return await console_of(request).sessions.get(request.cookies.get(SESSION_COOKIE))


def page(fn: PageHandler) -> Endpoint:
    """A GET page that needs a session; API errors become error pages."""

    @functools.wraps(fn)
    async def endpoint(request: Request) -> Response:
        session = await current_session(request)
        if session is None:
            return signin_redirect(request)
        try:
            return await fn(request, session)
        except TickworkError as err:
            if err.code == grpc.StatusCode.UNAUTHENTICATED:
                await console_of(request).sessions.end(session.id)
                return signin_redirect(request)
            return error_page(request, session, err)
        except ValueError as err:  # e.g. an id in the path beyond int64
            return error_page(request, session, InvalidArgument(str(err)))

    return endpoint


def forbidden(request: Request, why: str) -> HTMLResponse:
    """403 for a POST that is not allowed to reach the API (no session, bad CSRF token)."""
    return render(request, "refused.html", None, status_code=403, why=why)


def action(fn: ActionHandler) -> Endpoint:
    """A POST that needs a session and its CSRF token; API errors become error pages."""

    @functools.wraps(fn)
    async def endpoint(request: Request) -> Response:
        session = await current_session(request)
        if session is None:
            return forbidden(request, "you are not signed in (or your session ended)")
        form = await request.form()
        if not same_token(_field(form, "csrf"), session.csrf):
            log.warning("console POST refused: missing or wrong CSRF token")
            return forbidden(request, "the form's CSRF token is missing or wrong; reload the page")
        try:
            return await fn(request, session, form)
        except TickworkError as err:
            return error_page(request, session, err)
        except ValueError as err:
            return error_page(request, session, InvalidArgument(str(err)))

    return endpoint


def _field(form: FormData, name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""


def field(form: FormData, name: str) -> str:
    """A text field of a posted form, stripped; "" when absent (or a file)."""
    return _field(form, name).strip()


def done(session: Session, form: FormData, text: str, default: str) -> RedirectResponse:
    """Flash ``text`` and go back (303) to the form's ``next`` page or ``default``."""
    session.flash("ok", text)
    return RedirectResponse(local_path(form.get("next"), default), status_code=303)


def int_param(params: Mapping[str, str], name: str) -> int:
    """A non-negative integer query parameter; 0 when absent or not a number."""
    raw = params.get(name, "")
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 19 else 0


class SecurityHeaders:
    """ASGI middleware adding :data:`HEADERS` (CSP, X-Frame-Options, ...) to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)
